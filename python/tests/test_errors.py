"""A bad call raises ``MpiError`` with the right MPI error class (and gRPC code), and changes
nothing: the window's bytes are as before and the rank can go on."""

import json

import pytest

import onesided
from onesided import Assert, ErrorClass, LockType, MpiError, Op, StatusCode, StatusError

from conftest import ranks, unique


def refused(error_class, call, *args, **kwargs):
    with pytest.raises(MpiError) as caught:
        call(*args, **kwargs)
    assert caught.value.error_class == error_class, caught.value
    return caught.value


def public(w, target, count=2):
    w.lock(LockType.SHARED, target)
    values = w.get(target, 0, count)
    w.unlock(target)
    return list(values.value())


def test_a_put_outside_an_epoch_is_rma_sync_and_sends_nothing(pair):
    w0, w1 = pair.windows()
    error = refused(ErrorClass.RMA_SYNC, w0.put, 1, 0, [5])
    assert error.code == StatusCode.FAILED_PRECONDITION
    assert "MPI_ERR_RMA_SYNC" in str(error)
    assert public(w0, 1) == [0, 0]
    # and the rank goes on: the same put in an epoch lands
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [5])
    w0.unlock(1)
    assert public(w0, 1) == [5, 0]


def test_an_access_past_the_window_is_rma_range_and_changes_nothing(pair):
    w0, _ = pair.windows()
    w0.lock(LockType.EXCLUSIVE, 1)
    error = refused(ErrorClass.RMA_RANGE, w0.put, 1, 1, [5, 6])
    assert error.code == StatusCode.OUT_OF_RANGE
    refused(ErrorClass.RMA_RANGE, w0.get, 1, 2, 1)
    w0.put(1, 1, [6])
    w0.unlock(1)
    assert public(w0, 1) == [0, 6]


def test_a_target_outside_the_group_is_rank(pair):
    w0, _ = pair.windows()
    w0.lock_all()
    refused(ErrorClass.RANK, w0.put, 2, 0, [1])
    refused(ErrorClass.RANK, w0.fetch_and_op, 7, 0, 1, Op.SUM)
    w0.unlock_all()


def test_ops_and_types_the_call_does_not_take(pair):
    w0, _ = pair.windows()
    w0.lock(LockType.EXCLUSIVE, 1)
    refused(ErrorClass.OP, w0.accumulate, 1, 0, [1], Op.NO_OP)
    refused(ErrorClass.OP, w0.accumulate, 1, 0, [1], "median")
    refused(ErrorClass.TYPE, w0.compare_and_swap, 1, 0, 1.0, 2.0, dtype="f64")
    refused(ErrorClass.TYPE, w0.put, 1, 0, [1], dtype="complex128")
    w0.unlock(1)
    assert public(w0, 1) == [0, 0]


def test_synchronization_misuse(pair):
    w0, _ = pair.windows()
    refused(ErrorClass.RMA_SYNC, w0.unlock, 1)
    refused(ErrorClass.RMA_SYNC, w0.flush, 1)
    refused(ErrorClass.RMA_SYNC, w0.complete)
    refused(ErrorClass.ASSERT, w0.lock, LockType.SHARED, 1, Assert.NOPRECEDE)
    refused(ErrorClass.LOCKTYPE, w0.lock, "medium", 1)
    w0.lock(LockType.SHARED, 1)
    refused(ErrorClass.RMA_SYNC, w0.lock, LockType.SHARED, 1)
    w0.unlock(1)


def test_a_request_outside_a_passive_epoch_is_rma_sync(pair):
    def program(rank, w):
        w.fence()
        if rank == 0:
            refused(ErrorClass.RMA_SYNC, w.rput, 1, 0, [3])
            refused(ErrorClass.RMA_SYNC, w.rget, 1, 0, 1)
            w.put(1, 0, [4])
        w.fence()
        return w.load(0, 2)

    seen = ranks(pair.windows(), program)
    assert list(seen[1]) == [4, 0], "only the fence epoch's put landed"


def test_a_store_outside_the_private_copy_is_rma_range_and_writes_nothing(pair):
    w0, _ = pair.windows()
    w0.store(0, [1, 2])
    refused(ErrorClass.RMA_RANGE, w0.store, 1, [7, 8])
    refused(ErrorClass.RMA_RANGE, w0.load, 0, 3)
    assert list(w0.load(0, 2)) == [1, 2]


def test_an_unknown_window_is_win(pair):
    error = refused(ErrorClass.WIN, pair.sessions[0].window, "no-such-window")
    assert error.code == StatusCode.NOT_FOUND


def test_admin_refusals(server, admin):
    name = unique("errors")
    admin.create_world(name, 2)
    taken = refused(ErrorClass.ARG, admin.create_world, name, 2)
    assert taken.code == StatusCode.ALREADY_EXISTS
    bad_type = onesided.WindowSpec.bytes("w", 2, 16, 8).info("onesided_element_type", "i65")
    refused(ErrorClass.INFO, admin.create_window, name, bad_type)
    assert [w.name for w in admin.list_windows(name)] == []
    with pytest.raises(StatusError) as caught:
        onesided.Admin(server.url, "x" * 48).list_worlds()
    assert caught.value.code == StatusCode.UNAUTHENTICATED
    assert caught.value.error_class is None, "an identity failure has no MPI class"


def test_every_failure_is_an_onesided_error(pair):
    w0, _ = pair.windows()
    with pytest.raises(onesided.MpiError) as refused:
        w0.unlock(1)
    # refused here, for what the call is: not a refusal "that changed nothing, try again"
    assert refused.value.unchanged is False
    with pytest.raises(onesided.ConnectError):
        onesided.Admin("http://127.0.0.1:1", "t" * 48, connect_timeout=2)


def test_an_address_without_a_scheme_is_a_value_error():
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        onesided.Admin("127.0.0.1:1", "t" * 48).list_worlds()


def test_an_operator_revokes_a_held_lock_and_ends_a_session(server, pair):
    """Admin ``revoke_locks`` and ``end_session``: the holder learns at its next call in the
    revoked epoch (RMA_SYNC) and may lock again; a rank with nothing held cannot be revoked;
    an ended rank fails the others' fence (PROC_FAILED); both actions are in the audit log."""
    w0, w1 = pair.windows()
    world, name = pair.world.name, w0.desc.name
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [7])
    w0.flush(1)
    incarnation, targets = pair.admin.revoke_locks(world, name, 0)
    assert targets == [1]
    error = refused(ErrorClass.RMA_SYNC, w0.unlock, 1)
    assert error.code == StatusCode.FAILED_PRECONDITION
    assert "revoked by an operator" in str(error)
    assert public(w0, 1) == [7, 0], "what the holder applied before the revocation stays"
    nothing = refused(ErrorClass.RMA_SYNC, pair.admin.revoke_locks, world, name, 0)
    assert nothing.code == StatusCode.FAILED_PRECONDITION
    ended = pair.admin.end_session(world, 1)
    assert ended > 0
    gone = refused(ErrorClass.PROC_FAILED, w0.fence)
    assert "ended by an operator" in str(gone)
    audit = onesided.Audit(server.url, server.token)
    actions = [e for e in audit.events(w0.desc.id) if e.kind == "admin"]
    assert [json.loads(e.body)["action"] for e in actions] == ["revoke_locks", "end_session"]
    assert incarnation > 0
