"""Dynamic windows (``MPI_Win_create_dynamic``, ``MPI_Win_attach``, ``MPI_Win_detach``)
through the Python package against a real server: a region one rank attaches takes another
rank's operations by address, its owner loads and stores by address, a detached region is
``RMA_RANGE``, misuse has its MPI error class and changes nothing, and a new session of the
rank knows the regions an earlier one attached."""

import numpy as np
import pytest

import onesided
from onesided import ErrorClass, LockType, MpiError, StatusCode, WindowSpec

from conftest import ranks, unique


def refused(error_class, call, *args, **kwargs):
    with pytest.raises(MpiError) as caught:
        call(*args, **kwargs)
    assert caught.value.error_class == error_class, caught.value
    return caught.value


def public(w, target, address, count):
    """``count`` i64 of ``target``'s region at ``address``, read under a shared lock."""
    w.lock(LockType.SHARED, target)
    values = w.get(target, address, count, dtype="i64")
    w.unlock(target)
    return list(values.value())


def test_a_region_takes_a_put_from_another_rank_and_its_owner_sees_it(pair):
    w0, w1 = pair.windows(WindowSpec.dynamic(unique("d"), 2))
    assert w1.desc.flavor == "dynamic"
    assert w1.desc.sizes == [0, 0]
    assert w1.regions() == []
    a = w1.attach(32)
    assert a != 0
    assert w1.regions() == [(a, 32)]
    # the owner's stores by address are published at its unlock
    w1.lock(LockType.EXCLUSIVE, 1)
    w1.store_at(a, np.array([1, 2], dtype=np.int64))
    w1.unlock(1)
    # rank 0 puts into the region under a lock, by address, and reads it back
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, a + 16, [7], dtype="i64")
    back = w0.get(1, a, 4, dtype="i64")
    w0.unlock(1)
    assert list(back.value()) == [1, 2, 7, 0]
    # the owner's lock of itself brings the put into its private copy
    w1.lock(LockType.SHARED, 1)
    assert list(w1.load_at(a, 4, dtype="i64")) == [1, 2, 7, 0]
    w1.unlock(1)
    assert list(w1.load_at(a + 16, dtype=np.int64)) == [7]
    # a second region lies elsewhere; attach_at takes the address asked for
    b = w1.attach(8)
    assert b >= a + 32
    c = w1.attach_at(b + 64, 8)
    assert c == b + 64
    assert w1.regions() == [(a, 32), (b, 8), (c, 8)]


def test_the_ranks_create_a_dynamic_window_together(pair):
    name = unique("d")

    def program(rank, session):
        w = session.create_window(name, 0, flavor="dynamic")
        address = w.attach(16)
        session.barrier()
        return w, address

    (w0, _), (w1, address) = ranks(pair.sessions, program)
    assert [w0.desc.flavor, w1.desc.flavor] == ["dynamic", "dynamic"]
    # together: one window, not one each, so rank 0 reaches the region rank 1 attached
    assert w0.desc.id == w1.desc.id
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, address, [5], dtype="i64")
    w0.unlock(1)
    assert public(w0, 1, address, 1) == [5]


def test_a_detached_region_is_rma_range_and_a_second_detach_rma_attach(pair):
    w0, w1 = pair.windows(WindowSpec.dynamic(unique("d"), 2))
    a = w1.attach(16)
    kept = w1.attach(16)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, kept, [5, 6], dtype="i64")
    w0.unlock(1)
    w1.detach(a)
    assert w1.regions() == [(kept, 16)]
    # remote accesses to it fail at the target (its epoch's unlock says so too)
    w0.lock(LockType.SHARED, 1)
    gone = w0.get(1, a, 1, dtype="i64")
    error = refused(ErrorClass.RMA_RANGE, gone.value)
    assert error.code == StatusCode.OUT_OF_RANGE
    refused(ErrorClass.RMA_RANGE, w0.unlock, 1)
    # and local ones at once
    refused(ErrorClass.RMA_RANGE, w1.load_at, a, 1, dtype="i64")
    refused(ErrorClass.RMA_RANGE, w1.store_at, a, [1], dtype="i64")
    # detaching it again, or an address inside a region, is RMA_ATTACH
    refused(ErrorClass.RMA_ATTACH, w1.detach, a)
    refused(ErrorClass.RMA_ATTACH, w1.detach, kept + 8)
    refused(ErrorClass.RMA_ATTACH, w0.detach, kept)
    # nothing changed: the other region is there, with its bytes
    assert w1.regions() == [(kept, 16)]
    assert public(w0, 1, kept, 2) == [5, 6]


def test_attach_misuse_has_its_class_and_changes_nothing(pair):
    w0, w1 = pair.windows(WindowSpec.dynamic(unique("d"), 2))
    a = w1.attach(16)
    refused(ErrorClass.RMA_ATTACH, w1.attach_at, a + 8, 16)
    refused(ErrorClass.RMA_ATTACH, w1.attach_at, 0, 16)
    refused(ErrorClass.RMA_ATTACH, w1.attach, 1 << 40)
    refused(ErrorClass.RMA_RANGE, w1.store_at, a + 8, [1, 2], dtype="i64")
    refused(ErrorClass.RMA_RANGE, w1.load_at, a + 8, 2, dtype="i64")
    assert w1.regions() == [(a, 16)]
    assert public(w0, 1, a, 2) == [0, 0]


def test_a_region_of_no_bytes_attaches_and_detaches_as_mpi_allows(pair):
    w0, w1 = pair.windows(WindowSpec.dynamic(unique("d"), 2))
    empty = w1.attach(0)
    a = w1.attach(16)
    assert a != empty
    assert w1.regions() == [(a, 16)]
    w1.detach(empty)
    refused(ErrorClass.RMA_ATTACH, w1.detach, empty)
    assert w1.regions() == [(a, 16)]


def test_attach_on_a_window_of_another_flavor_is_rma_flavor(pair):
    w0, _ = pair.windows()
    refused(ErrorClass.RMA_FLAVOR, w0.attach, 8)
    refused(ErrorClass.RMA_FLAVOR, w0.attach_at, 1 << 32, 8)
    refused(ErrorClass.RMA_FLAVOR, w0.detach, 1 << 32)
    assert w0.regions() == []
    refused(ErrorClass.RMA_RANGE, w0.load_at, 1 << 32, 1)
    refused(ErrorClass.ARG, WindowSpec.bytes("w", 2, 0).flavor, "dynamik")


def test_a_new_session_of_the_rank_knows_the_regions_it_attached(server, admin, pair):
    name = unique("d")
    w0, w1 = pair.windows(WindowSpec.dynamic(name, 2))
    a = w1.attach(16)
    b = w1.attach(8)
    w1.detach(b)
    w1.lock(LockType.EXCLUSIVE, 1)
    w1.store_at(a, [3], dtype="i64")
    w1.unlock(1)
    w0.lock(LockType.EXCLUSIVE, 1)
    w0.put(1, a + 8, [4], dtype="i64")
    w0.unlock(1)
    # rank 1's session ends; a new one opens the window
    del w1
    pair.sessions[1].close()
    with onesided.Session.attach(server.url, pair.world.tokens[1]) as session:
        again = session.window(name)
        assert again.regions() == [(a, 16)]
        assert list(again.load_at(a, 2, dtype="i64")) == [3, 4]
        refused(ErrorClass.RMA_RANGE, again.load_at, b, 1, dtype="i64")
        again.lock(LockType.EXCLUSIVE, 1)
        again.store_at(a + 8, [9], dtype="i64")
        again.unlock(1)
        assert public(w0, 1, a, 2) == [3, 9]
        again.detach(a)
        assert again.regions() == []
        refused(ErrorClass.RMA_ATTACH, again.detach, a)
