"""The five examples of MPI Forum ticket #37 (SEMANTICS.md §6), with their fixed variants, as
server/tests/it/forum.rs runs them in Rust: every guaranteed outcome must hold in each
repetition; every outcome the examples warn about is forced with barriers and shown to occur.
Rank A and rank B run in two threads of this process."""

import os

from onesided import LockType

from conftest import ranks

# as many as the Rust suite runs
REPETITIONS = int(os.environ.get("ONESIDED_TEST_REPETITIONS", "50"))
A, B = 0, 1
X, Y = 0, 1
OLD, NEW = 0, 42


def public(w, target, disp):
    """Reads ``target``'s public copy at ``disp`` under an exclusive lock."""
    w.lock(LockType.EXCLUSIVE, target)
    value = w.get(target, disp, 1)
    w.unlock(target)
    return value.value()[0]


def put_new_at_b_then_barrier(w):
    """A's side of examples 2 and 5: puts NEW at B's X under an exclusive lock, then meets B.
    Returns None (A reports nothing)."""
    w.lock(LockType.EXCLUSIVE, B)
    w.put(B, X, [NEW])
    w.unlock(B)
    w.session.barrier()


def test_example_1_unlock_publishes_the_owners_store(pair):
    for _ in range(REPETITIONS):

        def program(rank, w):
            if rank == B:
                w.lock(LockType.EXCLUSIVE, B)
                w.store(X, [NEW])
                w.unlock(B)
                w.session.barrier()
                return None
            w.session.barrier()
            return public(w, B, X)

        seen = ranks(pair.windows(), program)
        assert seen[A] == NEW, "rule 5: unlock publishes the store"


def test_example_1_without_lock_the_store_stays_private(pair):
    def program(rank, w):
        if rank == B:
            w.store(X, [NEW])
            w.session.barrier()
            w.session.barrier()
            return None
        w.session.barrier()
        value = public(w, B, X)
        w.session.barrier()
        return value

    seen = ranks(pair.windows(), program)
    assert seen[A] == OLD, "a barrier moves no data"


def test_example_2_lock_brings_the_remote_put_into_the_private_copy(pair):
    for _ in range(REPETITIONS):

        def program(rank, w):
            if rank == A:
                return put_new_at_b_then_barrier(w)
            w.session.barrier()
            stale = w.load(X)[0]
            w.lock(LockType.EXCLUSIVE, B)
            loaded = w.load(X)[0]
            w.unlock(B)
            return stale, loaded

        stale, loaded = ranks(pair.windows(), program)[B]
        assert loaded == NEW, "rule 6: lock pulls the public copy"
        assert stale == OLD, "without lock the private copy is obsolete"


def example_3(pair, fixed):
    """B stores X, then holds a shared lock on itself (fixed: and calls ``sync`` in it) while
    A gets X under a shared lock. Returns what A read then and (not fixed) what A reads of X
    after B's unlock (fixed: None)."""

    def program(rank, w):
        if rank == B:
            w.store(X, [NEW])
            w.lock(LockType.SHARED, B)
            if fixed:
                w.sync()
            w.session.barrier()
            w.session.barrier()
            w.unlock(B)
            if not fixed:
                w.session.barrier()
            return None
        w.session.barrier()
        w.lock(LockType.SHARED, B)
        x = w.get(B, X, 1)
        w.unlock(B)
        during = x.value()[0]
        w.session.barrier()
        if fixed:
            return during, None
        w.session.barrier()
        return during, public(w, B, X)

    return ranks(pair.windows(), program)[A]


def test_example_3_shared_lock_does_not_publish_an_earlier_store(pair):
    for _ in range(REPETITIONS):
        during, after = example_3(pair, fixed=False)
        assert during == OLD, "lock publishes nothing: A reads the old X"
        assert after == NEW, "B's unlock published X"


def test_example_3_fixed_with_win_sync(pair):
    for _ in range(REPETITIONS):
        during, _ = example_3(pair, fixed=True)
        assert during == NEW, "sync publishes the store"


def example_4(pair, fixed):
    """A (owner of X and Y) stores Y, posts to {A, B}, and during its own access epoch to
    itself stores X (or, fixed, puts X to itself). Returns (A's private X after wait, X and Y
    as B reads them from A's public copy afterwards)."""

    def program(rank, w):
        if rank == A:
            w.store(Y, [7])
            w.post([A, B])
            w.start([A])
            if fixed:
                w.put(A, X, [NEW])
            else:
                w.store(X, [NEW])
            w.complete()
            w.wait()
            private_x = w.load(X)[0]
            w.session.barrier()
            w.session.barrier()
            return private_x
        w.start([A])
        w.complete()
        w.session.barrier()
        w.lock(LockType.EXCLUSIVE, A)
        x = w.get(A, X, 1)
        y = w.get(A, Y, 1)
        w.unlock(A)
        w.session.barrier()
        return x.value()[0], y.value()[0]

    seen = ranks(pair.windows(), program)
    private_x = seen[A]
    x, y = seen[B]
    return private_x, x, y


def test_example_4_post_publishes_y_but_wait_does_not_publish_x(pair):
    for _ in range(REPETITIONS):
        private_x, x, y = example_4(pair, fixed=False)
        assert y == 7, "rule 5: post published Y"
        assert x == OLD, "neither complete nor wait publishes A's store of X"
        assert private_x == NEW, "A's own store is in its private copy"


def test_example_4_fixed_with_a_put_to_self(pair):
    for _ in range(REPETITIONS):
        private_x, x, y = example_4(pair, fixed=True)
        assert y == 7
        assert x == NEW, "the put to self updated the public copy"
        assert private_x == NEW, "and wait brought it into A's private copy"


def example_5(pair):
    """A puts X at B under a lock; B then loads X inside its own PSCW epoch. Returns (load
    inside the epoch, local get inside the epoch, load after wait)."""

    def program(rank, w):
        if rank == A:
            return put_new_at_b_then_barrier(w)
        w.session.barrier()
        w.post([B])
        w.start([B])
        loaded = w.load(X)[0]
        got = w.get(B, X, 1)
        w.complete()
        w.wait()
        after_wait = w.load(X)[0]
        return loaded, got.value()[0], after_wait

    return ranks(pair.windows(), program)[B]


def test_example_5_load_inside_pscw_is_obsolete_until_wait(pair):
    for _ in range(REPETITIONS):
        loaded, got, after_wait = example_5(pair)
        assert loaded == OLD, "post and start do not refresh the private copy"
        assert got == NEW, "fix 1: a local get reads the public copy"
        assert after_wait == NEW, "fix 2: rule 6, wait refreshes the private copy"
