"""The rest of the calls through the Python package: fence epochs, atomics from several ranks
at once, requests, layouts, datatypes, and the admin side."""

import threading
import time

import numpy as np
import pytest

import onesided
from onesided import (
    FLOAT_INT,
    ErrorClass,
    Hindexed,
    Hvector,
    Indexed,
    LockType,
    MpiError,
    Op,
    Resized,
    Struct,
    Subarray,
    Vector,
    WindowSpec,
)

from conftest import Fixture, ranks, unique


def test_a_fence_epoch_exchanges_values_and_refreshes_the_private_copies(pair):
    def program(rank, w):
        other = 1 - rank
        w.store(1, [100 + rank])
        w.fence()  # publishes the store
        w.put(other, 0, [10 * (rank + 1)])
        theirs = w.get(other, 1, 1)
        w.fence()  # completes the epoch, refreshes the private copy
        return list(w.load(0, 2)), theirs.value()[0]

    seen = ranks(pair.windows(), program)
    assert seen[0] == ([20, 100], 101), "rank 1's put, rank 0's own store, rank 1's store"
    assert seen[1] == ([10, 101], 100)


def test_fetch_and_op_from_every_rank_counts_exactly(server, admin):
    rounds = 25
    fixture = Fixture(server, admin, 3)

    def program(rank, w):
        w.lock_all()
        olds = [w.fetch_and_op(0, 0, 1, Op.SUM).value() for _ in range(rounds)]
        w.unlock_all()
        return olds

    windows = fixture.windows()
    seen = ranks(windows, program)
    olds = sorted(int(old) for fetched in seen for old in fetched)
    assert olds == list(range(3 * rounds)), "every increment saw a distinct old value"
    windows[0].lock(LockType.SHARED, 0)
    total = windows[0].get_accumulate(0, 0, None, Op.NO_OP, count=1)
    windows[0].unlock(0)
    assert total.value()[0] == 3 * rounds


def test_compare_and_swap_swaps_only_when_equal(pair):
    w0, _ = pair.windows()
    w0.lock(LockType.EXCLUSIVE, 1)
    first = w0.compare_and_swap(1, 0, 0, 5)
    second = w0.compare_and_swap(1, 0, 0, 9)
    w0.unlock(1)
    assert (first.value(), second.value()) == (0, 5)
    w0.lock(LockType.SHARED, 1)
    now = w0.get(1, 0)
    w0.unlock(1)
    assert now.value()[0] == 5


def test_get_accumulate_returns_the_old_contents(pair):
    w0, _ = pair.windows()
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [3, 4])
    old = w0.get_accumulate(1, 0, [10, 20], Op.SUM)
    read = w0.get_accumulate(1, 0, None, Op.NO_OP, count=2)
    w0.unlock(1)
    assert list(old.value()) == [3, 4]
    assert list(read.value()) == [13, 24]


def test_requests_complete_in_a_lock_epoch(pair):
    w0, _ = pair.windows()
    w0.lock(LockType.EXCLUSIVE, 1)
    assert w0.rput(1, 0, [7, 8]).wait() is None
    w0.flush(1)
    fetched = w0.rget(1, 0, 2)
    added = w0.raccumulate(1, 1, [1], Op.SUM)
    before = w0.rget_accumulate(1, 0, [1], Op.REPLACE)
    w0.unlock(1)
    assert list(fetched.wait()) == [7, 8]
    assert added.wait() is None
    assert list(before.wait()) == [7]
    assert list(w0_public(w0)) == [1, 9]


def w0_public(w0, count=2):
    """The first ``count`` elements of rank 1's public copy, read by ``w0`` under a shared lock."""
    w0.lock(LockType.SHARED, 1)
    values = w0.get(1, 0, count)
    w0.unlock(1)
    return values.value()


def test_vector_and_indexed_layouts(pair):
    spec = WindowSpec.of(unique("layout"), 2, 8, "i32")
    w0, _ = pair.windows(spec)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [1, 2, 3, 4], layout=Vector(2, 2, 4))  # elements 0, 1, 4, 5
    w0.put(1, 0, [9, 8], layout=Indexed([(7, 1), (2, 1)]))  # element 7, then 2
    every = w0.get(1, 0, 8)
    odd = w0.get(1, 1, layout=Vector(4, 1, 2))
    w0.unlock(1)
    assert list(every.value()) == [1, 2, 8, 0, 3, 4, 0, 9]
    assert every.value().dtype == np.int32, "the window's element type"
    assert list(odd.value()) == [2, 0, 4, 9]


def test_hvector_hindexed_and_subarray_layouts(pair):
    spec = WindowSpec.of(unique("layouts"), 2, 12, "i32")
    w0, _ = pair.windows(spec)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [1, 2, 3, 4], layout=Hvector(2, 2, 12))  # elements 0, 1 and 3, 4
    w0.put(1, 0, [5, 6], layout=Hindexed([(44, 1), (24, 1)]))  # element 11, then 6
    w0.flush(1)
    # the 2x2 block at row 1, column 1 of a 3x4 C array: elements 5, 6, 9, 10
    w0.accumulate(1, 0, [10, 20, 30, 40], Op.SUM, layout=Subarray([3, 4], [2, 2], [1, 1]))
    w0.flush(1)
    every = w0.get(1, 0, 12)
    column = w0.get(1, 0, layout=Subarray([4, 3], [1, 3], [3, 0], order="fortran"))
    w0.unlock(1)
    assert list(every.value()) == [1, 2, 0, 3, 4, 10, 26, 0, 0, 30, 40, 5]
    # in Fortran order a 4x3 array over the same storage: its last row is elements 3, 7, 11
    assert list(column.value()) == [3, 0, 5]


def test_a_resized_layout_moves_a_matrix_column(pair):
    # a 3x4 matrix of i64 at rank 1: a row is 32 bytes
    spec = WindowSpec.of(unique("resized"), 2, 12, "i64")
    w0, _ = pair.windows(spec)
    column = Resized(1, 32, 3)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 2, [1, 2, 3], layout=column)  # column 2: elements 2, 6, 10
    # column 1 from column 3 of a local matrix; the lower bound moves nothing
    local = np.arange(100, 112, dtype=np.int64)
    w0.put(
        1, 1, local, layout=Resized(1, 32, 3, lb=-8),
        origin_layout=Resized(Indexed([(3, 1)]), 32, 3),
    )
    w0.flush(1)
    back = w0.get(1, 2, layout=column)
    every = w0.get(1, 0, 12)
    w0.unlock(1)
    assert list(back.value()) == [1, 2, 3]
    assert list(every.value()) == [0, 103, 1, 0, 0, 107, 2, 0, 0, 111, 3, 0]
    assert list(onesided.pack(local, Resized(Vector(2, 1, 2), 48, 2))) == [100, 102, 106, 108]
    w0.lock(LockType.EXCLUSIVE, 1)
    with pytest.raises(MpiError) as past:
        w0.put(1, 3, [0, 0, 0, 0], layout=Resized(1, 32, 4))  # a fourth row is past
    w0.unlock(1)
    assert past.value.error_class == ErrorClass.RMA_RANGE


def test_a_struct_layout_moves_its_blocks_bytes_and_accumulates_of_one_type(pair):
    spec = WindowSpec.of(unique("struct"), 2, 32, "u8")
    w0, _ = pair.windows(spec)
    record = Struct([(0, "i32", 1), (6, "u16", 1), (8, np.float64, 2)])
    packed = np.frombuffer(
        np.array([-7], "<i4").tobytes() + np.array([513], "<u2").tobytes()
        + np.array([1.5, -2.25], "<f8").tobytes(),
        dtype=np.uint8,
    )
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, np.full(32, 0xAA, dtype=np.uint8))
    w0.flush(1)
    w0.put(1, 0, packed, layout=record)
    w0.flush(1)
    back = w0.get(1, 0, layout=record)
    every = w0.get(1, 0, 32)
    w0.unlock(1)
    assert bytes(back.value()) == packed.tobytes()
    assert bytes(every.value()) == (
        packed[:4].tobytes() + b"\xaa\xaa" + packed[4:].tobytes() + b"\xaa" * 8
    )
    # pack and unpack place a struct's bytes at an origin
    spread = Struct([(20, "i32", 1), (0, "u16", 1), (2, "f64", 2)])
    buffer = np.zeros(24, dtype=np.uint8)
    onesided.unpack(packed, buffer, spread)
    assert bytes(buffer[20:]) == np.array([-7], "<i4").tobytes()
    assert bytes(onesided.pack(buffer, spread)) == packed.tobytes()

    spec = WindowSpec.of(unique("struct_acc"), 2, 4, "i64")
    w0, _ = pair.windows(spec)
    same = Struct([(24, "i64", 1), (0, "i64", 2)])  # element 3, then 0 and 1
    mixed = Struct([(0, "i64", 1), (8, "f64", 1)])
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [1, 2, 3, 4])
    w0.flush(1)
    w0.accumulate(1, 0, [10, 20, 30], Op.SUM, layout=same)
    with pytest.raises(MpiError) as refused:
        w0.accumulate(1, 0, [5, 5], Op.SUM, layout=mixed)
    w0.flush(1)
    every = w0.get(1, 0, 4)
    w0.unlock(1)
    assert refused.value.error_class == ErrorClass.TYPE
    assert list(every.value()) == [21, 32, 3, 14], "the refused accumulate changed nothing"


def test_an_hvector_stride_need_not_be_a_multiple_of_the_element(pair):
    spec = WindowSpec.of(unique("hvector"), 2, 4, "u16")
    w0, _ = pair.windows(spec)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [0x0102, 0x0304], layout=Hvector(2, 1, 3))  # bytes 0-1 and 3-4
    w0.flush(1)
    back = w0.get(1, 0, layout=Hvector(2, 1, 3))
    every = w0.get(1, 0, 4)
    w0.unlock(1)
    assert list(back.value()) == [0x0102, 0x0304]
    assert list(every.value()) == [0x0102, 0x0400, 0x0003, 0]


def test_origin_layouts_send_only_what_they_select(pair):
    spec = WindowSpec.of(unique("origin"), 2, 6, "i64")
    w0, _ = pair.windows(spec)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 0, [1, 2, 3, 4, 5, 6], layout=Vector(3, 1, 1), origin_layout=Vector(3, 1, 2))
    w0.accumulate(
        1, 3, [10, 20, 30], Op.SUM, layout=Indexed([(0, 1), (2, 1)]),
        origin_layout=Indexed([(2, 1), (0, 1)]),
    )  # 30 to element 3, 10 to element 5
    w0.flush(1)
    old = w0.get_accumulate(
        1, 0, [7, 8, 9], Op.PROD, layout=Vector(2, 1, 2), origin_layout=Hvector(2, 1, 16)
    )  # 7 and 9 multiply elements 0 and 2
    w0.flush(1)
    fetched = w0.get(1, 1, 2)
    w0.unlock(1)
    assert list(old.value()) == [1, 5]
    buffer = np.full(4, -1, dtype=np.int64)
    onesided.unpack(fetched.value(), buffer, Vector(2, 1, 3))
    assert list(buffer) == [3, -1, -1, 45], "the get's values at 0 and 3, the rest untouched"
    assert list(w0_public(w0, 6)) == [7, 3, 45, 30, 0, 10]


def test_request_based_calls_take_layouts_too(pair):
    spec = WindowSpec.of(unique("rlayouts"), 2, 6, "i32")
    w0, _ = pair.windows(spec)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.rput(1, 0, [1, 2, 3], layout=Hindexed([(20, 1), (0, 1)]), origin_layout=Vector(2, 1, 2))
    w0.flush(1)  # 1 at element 5, 3 at element 0
    w0.raccumulate(1, 1, [4, 5], Op.SUM, layout=Subarray([5], [2], [2]))  # elements 3, 4
    w0.flush(1)
    fetched = w0.rget(1, 0, layout=Hvector(3, 1, 8))  # elements 0, 2, 4
    w0.flush(1)
    old = w0.rget_accumulate(
        1, 0, [9, 0, 8], Op.MAX, layout=Indexed([(5, 1), (1, 1)]),
        origin_layout=Indexed([(2, 1), (0, 1)]),
    )  # max(element 5, 8), max(element 1, 9)
    w0.unlock(1)
    assert list(fetched.wait()) == [3, 0, 5]
    assert list(old.wait()) == [1, 0]
    assert list(w0_public(w0, 6)) == [3, 9, 0, 4, 5, 8]


def test_layouts_past_the_window_or_the_origin_are_refused(pair):
    spec = WindowSpec.of(unique("refused"), 2, 4, "i32")
    w0, _ = pair.windows(spec)
    w0.lock(LockType.EXCLUSIVE, 1)
    refusals = [
        (ErrorClass.RMA_RANGE, lambda: w0.put(1, 0, [1, 2], layout=Hvector(2, 1, 16))),
        (ErrorClass.RMA_RANGE, lambda: w0.put(1, 0, [1], layout=Hindexed([(13, 1)]))),
        (ErrorClass.RMA_RANGE, lambda: w0.get(1, 1, layout=Subarray([4], [4], [0]))),
        (ErrorClass.ARG, lambda: w0.get(1, 0, layout=Subarray([2, 2], [3, 1], [0, 0]))),
        (ErrorClass.ARG, lambda: w0.get(1, 0, layout=Subarray([4], [1], [0], order="z"))),
        (
            ErrorClass.RMA_RANGE,
            lambda: w0.put(1, 0, [1, 2], layout=Vector(2, 1, 1), origin_layout=Vector(2, 1, 2)),
        ),
    ]
    for error_class, call in refusals:
        with pytest.raises(MpiError) as caught:
            call()
        assert caught.value.error_class == error_class, caught.value
    every = w0.get(1, 0, 4)
    w0.unlock(1)
    assert list(every.value()) == [0, 0, 0, 0], "nothing was written"


def test_pack_and_unpack_follow_the_layout():
    values = np.arange(12, dtype=np.int32)
    assert list(onesided.pack(values, Vector(2, 2, 5))) == [0, 1, 5, 6]
    assert list(onesided.pack(values, Indexed([(9, 2), (1, 1)]))) == [9, 10, 1]
    assert list(onesided.pack(values, Hvector(3, 1, 8))) == [0, 2, 4]
    assert list(onesided.pack(values, Hindexed([(40, 1), (0, 2)]))) == [10, 0, 1]
    assert list(onesided.pack(values.reshape(3, 4), Subarray([3, 4], [2, 2], [1, 1]))) == [
        5, 6, 9, 10,
    ]
    assert onesided.pack([1.5, 2.5], Vector(1, 1, 1), dtype="f8").dtype == np.float64
    buffer = np.zeros((3, 4), dtype=np.int16)
    onesided.unpack([1, 2, 3, 4], buffer, Subarray([3, 4], [2, 2], [1, 1], order="c"))
    assert buffer.tolist() == [[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0]]
    with pytest.raises(MpiError) as caught:
        onesided.pack(values, Vector(2, 1, 12))
    assert caught.value.error_class == ErrorClass.RMA_RANGE
    with pytest.raises(MpiError) as caught:
        onesided.unpack([1, 2], buffer, Vector(1, 1, 1))
    assert caught.value.error_class == ErrorClass.COUNT
    assert buffer.tolist() == [[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0]], "unchanged"


def test_datatypes_follow_numpy_and_the_window(pair):
    spec = WindowSpec.bytes(unique("bytes"), 2, 16, 1)
    w0, w1 = pair.windows(spec)
    assert w0.desc.element_type is None
    w0.store(0, np.array([1.5, -2.25], dtype=np.float64))
    assert list(w0.load(0, 2, dtype="f64")) == [1.5, -2.25]
    w0.store(0, memoryview(np.array([7], dtype="<u2")))
    assert w0.load(0, 1, dtype=np.uint16)[0] == 7
    w0.store_bytes(15, b"\x05")
    assert w0.load_bytes(15, 1) == b"\x05"
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 8, np.array([-3], dtype=">i4"))  # a big-endian array is converted
    w0.unlock(1)
    w1.lock(LockType.EXCLUSIVE, 1)
    w1.unlock(1)
    assert w1.load(2, 1, dtype="i32")[0] == -3


def test_maxloc_on_pairs(pair):
    spec = WindowSpec.of(unique("pairs"), 2, 1, "f32_i32")
    w0, w1 = pair.windows(spec)

    def program(rank, w):
        w.lock(LockType.EXCLUSIVE, 0)
        w.accumulate(0, 0, np.array([(1.5 + rank, rank)], dtype=FLOAT_INT), Op.MAXLOC)
        w.unlock(0)
        w.session.barrier()
        return None

    ranks([w0, w1], program)
    w0.lock(LockType.SHARED, 0)
    best = w0.get(0, 0, 1)
    w0.unlock(0)
    assert best.value()[0].tolist() == (2.5, 1)


def test_pscw_test_polls_until_the_epoch_is_complete(pair):
    def program(rank, w):
        if rank == 0:
            w.post([1])
            # rank 1 starts only after the barrier: the epoch cannot be complete yet, and a
            # test says so rather than wait
            assert not w.test(), "test said the epoch was done before rank 1 started it"
            w.session.barrier()
            deadline = time.monotonic() + 30
            while not w.test():
                assert time.monotonic() < deadline, "test never said the epoch was done"
            return list(w.load(0, 2))
        w.session.barrier()
        w.start([0])
        w.put(0, 1, [6])
        w.complete()
        return None

    assert ranks(pair.windows(), program)[0] == [0, 6]


def test_session_and_window_attributes(pair):
    session = pair.sessions[1]
    assert (session.world, session.rank, session.nranks) == (pair.world.name, 1, 2)
    assert session.incarnation == 1
    assert session.audited
    w = pair.windows()[1]
    assert w.rank == 1
    assert w.desc.sizes == [16, 16] and w.desc.disp_units == [8, 8]
    assert w.desc.element_type == "i64"
    w.lock(LockType.EXCLUSIVE, 1)
    assert w.fencing_token(1) is not None
    w.unlock(1)


def test_admin_worlds_and_windows(admin):
    name = unique("admin")
    world = admin.create_world(name, 3)
    assert len(world.tokens) == 3
    assert world.tokens[0] not in repr(world), "tokens stay out of reprs"
    spec = WindowSpec(unique("w"), [8, 16, 0], [8, 8, 8]).info("no_locks", "true")
    created = admin.create_window(name, spec)
    described = admin.describe_window(name, spec.name)
    assert (described.id, described.sizes, described.no_locks) == (created.id, [8, 16, 0], True)
    assert [w.name for w in admin.list_windows(name)] == [spec.name]
    summary = [w for w in admin.list_worlds() if w.name == name]
    assert [(s.ranks, s.windows) for s in summary] == [(3, 1)]
    admin.free_window(name, spec.name)
    assert admin.list_windows(name) == []
    admin.delete_world(name)
    assert name not in [w.name for w in admin.list_worlds()]


def test_a_session_is_a_context_manager(server, admin):
    world = admin.create_world(unique("ctx"), 1)
    admin.create_window(world.name, WindowSpec.of("w", 1, 1, "u8"))
    with onesided.Session.attach(server.url, world.tokens[0]) as session:
        w = session.window("w")
        w.fence()
        w.put(0, 0, [255])
        w.fence()
        assert w.load(0)[0] == 255


def test_flushes_complete_operations_inside_a_passive_epoch(pair):
    w0, w1 = pair.windows()
    w0.lock_all()
    w0.put(1, 0, [1])
    w0.flush_local(1)
    w0.put(1, 1, [2])
    w0.flush_all()
    w0.accumulate(1, 0, [10], Op.SUM)
    w0.flush_local_all()
    w0.flush(1)
    # every operation is complete at rank 1: its own sync (in a lock epoch) sees them
    w1.lock(LockType.SHARED, 1)
    w1.sync()
    assert list(w1.load(0, 2)) == [11, 2]
    w1.unlock(1)
    w0.unlock_all()


def returns_only_with_the_other(first, second):
    """Runs ``first()`` in a thread: it has not returned half a second later, while
    ``second()`` has not been called (a collective waits for every rank), and it returns once
    ``second()`` did. A call that did not wait would return at once."""
    done = threading.Event()
    failed = []

    def run():
        try:
            first()
        except Exception as error:  # handed to the test's thread
            failed.append(error)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert not done.wait(0.5), "it returned before the other rank called it"
    finally:
        second()
        thread.join(30)
    assert done.is_set() and not failed, failed


def test_free_is_collective_and_ends_the_window(pair):
    windows = pair.windows()
    returns_only_with_the_other(windows[0].free, windows[1].free)
    with pytest.raises(onesided.MpiError) as caught:
        windows[0].fence()
    assert caught.value.error_class == onesided.ErrorClass.WIN


def test_get_info_reports_the_hints_in_use_and_the_keys_kept_as_given(pair):
    spec = (
        WindowSpec.of(unique("w"), 2, 2, "i64")
        .info("accumulate_ops", "same_op")
        .info("my_hint", "kept as given")
    )
    for w in pair.windows(spec):
        info = w.get_info()
        assert info["accumulate_ops"] == "same_op"
        assert info["my_hint"] == "kept as given"
        assert info["no_locks"] == "false"
        assert info["mpi_accumulate_granularity"] == "0"
        assert w.get_group() == [0, 1]


def test_reattach_within_is_given_in_seconds_and_a_negative_one_refused(server, admin):
    """What the binding checks of ``reattach_within``; that a session told 0 does not come back
    after its server restarts is the Rust client's, which this passes the value to
    (server/tests/it/recovery.rs, ``a_session_told_reattach_within_zero_does_not_come_back``)."""
    world = admin.create_world(unique("py"), 1)
    with pytest.raises(ValueError):
        onesided.Session.attach(server.url, world.tokens[0], reattach_within=-1.0)
    session = onesided.Session.attach(server.url, world.tokens[0], reattach_within=0)
    assert session.incarnation == 1
    session.close()


def test_set_info_is_collective_and_get_info_shows_it_on_every_rank(pair):
    windows = pair.windows()
    hints = {"accumulate_ops": "same_op", "mine": "kept"}
    returns_only_with_the_other(
        lambda: windows[0].set_info(hints), lambda: windows[1].set_info(hints)
    )
    for info in [w.get_info() for w in windows]:
        assert info["accumulate_ops"] == "same_op"
        assert info["mine"] == "kept"
    with pytest.raises(MpiError) as refused:
        windows[0].set_info({"accumulate_ops": "any"})
    assert refused.value.error_class == ErrorClass.INFO


def test_ranks_create_a_window_together_each_with_its_own_size(server, admin):
    fixture = Fixture(server, admin, 2)
    name = unique("made")

    def program(rank, _):
        session = fixture.sessions[rank]
        w = session.create_window(name, 8 * (rank + 1), 8, info={"hint": "x"})
        return list(w.desc.sizes), w.get_info()["hint"]

    seen = ranks([None, None], program)
    assert seen == [([8, 16], "x"), ([8, 16], "x")]


def test_members_create_a_window_over_their_group(server, admin):
    fixture = Fixture(server, admin, 3)
    name = unique("made")
    # world ranks 2 and 0 create it (window ranks 0 and 1); rank 1 takes no part
    members = [2, 0]

    def program(rank, _):
        if rank not in members:
            return None
        session = fixture.sessions[rank]
        w = session.create_window(name, 8 * (rank + 1), 8, group=members)
        return w.rank, list(w.desc.sizes), w.get_group()

    seen = ranks([None, None, None], program)
    assert seen == [(1, [24, 8], [2, 0]), None, (0, [24, 8], [2, 0])]
    with pytest.raises(MpiError) as refused:
        fixture.sessions[1].create_window(unique("x"), 8, 8, group=members)
    assert refused.value.error_class == ErrorClass.GROUP


def test_a_unified_window_publishes_stores_and_delivers_updates_without_a_call(server, admin):
    fixture = Fixture(server, admin, 2)
    w0, w1 = fixture.windows(WindowSpec.of(unique("u"), 2, 2, "i64").model("unified"))
    assert w0.desc.model == "unified"
    # rank 1 stores outside any epoch; after a barrier rank 0 reads it
    w1.store(0, [42])

    def after_barrier(rank, w):
        fixture.sessions[rank].barrier()
        if rank == 0:
            w.lock(LockType.SHARED, 1)
            got = w.get(1, 0, 1)
            w.unlock(1)
            return list(got.value())
        return None

    assert ranks([w0, w1], after_barrier)[0] == [42]
    # rank 0 puts into rank 1, which loads it after a barrier with no refresh call
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, 1, [7])
    w0.unlock(1)

    def load_after_barrier(rank, w):
        fixture.sessions[rank].barrier()
        return list(w.load(1, 1)) if rank == 1 else None

    assert ranks([w0, w1], load_after_barrier)[1] == [7]


def test_a_window_over_part_of_the_world_numbers_its_ranks_in_its_group(server, admin):
    fixture = Fixture(server, admin, 3)
    name = unique("g")
    created = admin.create_window(
        fixture.world.name, WindowSpec.of(name, 2, 1, "i64").group([2, 0])
    )
    assert created.group == [2, 0]
    with pytest.raises(MpiError) as refused:
        fixture.sessions[1].window(name)
    assert refused.value.error_class == ErrorClass.GROUP
    first = fixture.sessions[2].window(name)
    second = fixture.sessions[0].window(name)
    assert (first.rank, second.rank) == (0, 1)

    def program(rank, w):
        w.fence()
        w.put(1 - rank, 0, [10 + rank])
        w.fence()
        return list(w.load(0))

    assert ranks([first, second], program) == [[11], [10]]
