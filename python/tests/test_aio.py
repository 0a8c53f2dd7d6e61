"""``onesided.aio`` against the real server: ranks that are coroutines of one event loop meet
in fences, barriers and lock epochs. Had a waiting call blocked the loop, the first rank to
wait would keep the others from ever reaching the collective: these tests would hang (each
loop runs in a thread the test gives RANK_TIMEOUT, so a hang fails instead)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any, Awaitable, Callable, List, Optional, TypeVar

import numpy as np
import pytest

import onesided
from onesided import LockType, Op, WindowSpec, aio

from conftest import RANK_TIMEOUT, Server, unique

T = TypeVar("T")


def in_a_loop(main: Callable[[], Awaitable[T]]) -> T:
    """Runs ``main()`` in a fresh event loop in its own thread; fails the test when it is not
    done within RANK_TIMEOUT (a loop blocked by a call cannot time itself out)."""
    results: List[T] = []
    failures: List[BaseException] = []

    def run() -> None:
        async def wrapped() -> T:
            return await main()

        try:
            results.append(asyncio.run(wrapped()))
        except BaseException as failure:  # handed to the test's thread
            failures.append(failure)

    loop = threading.Thread(target=run, daemon=True)
    loop.start()
    loop.join(RANK_TIMEOUT)
    if loop.is_alive():
        pytest.fail("the event loop did not finish within {} s".format(RANK_TIMEOUT))
    if failures:
        raise failures[0]
    return results[0]


async def attached(server: Server, ranks: int) -> List[aio.Window]:
    """A fresh world of ``ranks`` ranks with a window of 4 i64 each, opened by every rank
    (attached concurrently, from this loop)."""
    admin = await aio.Admin.connect(server.url, server.token)
    world = await admin.create_world(unique("aio"), ranks)
    spec = WindowSpec.of(unique("w"), ranks, 4, "i64")
    await admin.create_window(world.name, spec)
    sessions = await asyncio.gather(
        *(aio.Session.attach(server.url, token) for token in world.tokens)
    )
    return list(await asyncio.gather(*(session.window(spec.name) for session in sessions)))


def test_two_ranks_in_one_loop_meet_in_a_fence(server: Server) -> None:
    async def main() -> List[List[int]]:
        windows = await attached(server, 2)

        async def rank(w: aio.Window) -> List[int]:
            await w.fence()
            if w.rank == 0:
                w.put(1, 2, [7, 8])
                w.store(0, [5])
            await w.fence()  # rank 0's put lands at rank 1, its store is published
            seen = [int(value) for value in w.load(0, 4)]
            if w.rank == 1:
                fetched = w.get(0, 0, 1)
                await w.fence()
                seen.append(int((await fetched)[0]))
            else:
                await w.fence()
            await w.session.close()
            return seen

        return list(await asyncio.gather(*(rank(w) for w in windows)))

    seen = in_a_loop(main)
    assert seen[0] == [5, 0, 0, 0], "rank 0's own store"
    assert seen[1] == [0, 0, 7, 8, 5], "rank 0's put, then a get of rank 0's stored 5"


def test_more_ranks_in_a_barrier_than_the_default_executor_has_threads(server: Server) -> None:
    """The reason ``onesided.aio`` runs each waiting call in a thread of its own rather than in
    the loop's default executor: with ``asyncio.to_thread`` the ranks past the pool's size
    would never get a thread to reach the barrier the others wait in."""
    default_workers = min(32, (os.cpu_count() or 1) + 4)
    nranks = default_workers + 1

    async def main() -> List[int]:
        windows = await attached(server, nranks)
        loop = asyncio.get_running_loop()
        # this loop's default executor is the one to_thread would use: make it the default
        # size explicitly, so the test means the same on every machine
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(default_workers))

        async def rank(w: aio.Window) -> int:
            # a store under this rank's own lock: its unlock publishes it
            await w.lock(LockType.EXCLUSIVE, w.rank)
            w.store(0, [w.rank + 1])
            await w.unlock(w.rank)
            await w.session.barrier()
            await w.lock(LockType.SHARED, (w.rank + 1) % nranks)
            neighbour = w.get((w.rank + 1) % nranks, 0, 1)
            await w.unlock((w.rank + 1) % nranks)
            value = int((await neighbour)[0])
            await w.session.close()
            return value

        return list(await asyncio.gather(*(rank(w) for w in windows)))

    seen = in_a_loop(main)
    assert seen == [(rank + 1) % nranks + 1 for rank in range(nranks)]


def test_atomics_and_requests_from_coroutines(server: Server) -> None:
    rounds = 10

    async def main() -> List[Any]:
        windows = await attached(server, 2)

        async def rank(w: aio.Window) -> List[int]:
            await w.lock_all()
            olds = [int(await w.fetch_and_op(0, 0, 1, Op.SUM)) for _ in range(rounds)]
            await w.unlock_all()
            await w.session.barrier()
            return olds

        olds = await asyncio.gather(*(rank(w) for w in windows))
        w0 = windows[0]
        await w0.lock_all()
        swapped = w0.compare_and_swap(1, 1, 0, 9)
        request = w0.rget(0, 0, 1)
        written = w0.rput(1, 2, [3])
        await w0.unlock_all()
        old = await swapped
        total = await request
        nothing = await written
        await w0.lock(LockType.SHARED, 1)
        after = w0.get(1, 1, 2)
        await w0.unlock(1)
        result = [sorted(o for fetched in olds for o in fetched), int(old)]
        result += [None if total is None else int(total[0]), nothing]
        result.append(list(await after))
        for w in windows:
            await w.session.close()
        return result

    olds, old, total, nothing, after = in_a_loop(main)
    assert olds == list(range(2 * rounds)), "every increment saw a distinct old value"
    assert old == 0 and after == [9, 3], "the swap happened, the rput landed"
    assert total == 2 * rounds and nothing is None


def test_admin_and_audit_calls_are_awaited(server: Server) -> None:
    async def main() -> List[Any]:
        admin = await aio.Admin.connect(server.url, server.token)
        name = unique("aio-admin")
        world = await admin.create_world(name, 1)
        spec = WindowSpec.of("counts", 1, 2, "i64")
        desc = await admin.create_window(name, spec)
        listed = [w.name for w in await admin.list_windows(name)]
        session = await aio.Session.attach(server.url, world.tokens[0])
        async with session:
            w = await session.window("counts")
            await w.lock(LockType.EXCLUSIVE, 0)
            w.put(0, 1, [11])
            await w.unlock(0)
        audit = await aio.Audit.connect(server.url, server.token)
        at, public = await audit.replay(desc.id)
        events, first_bad = await audit.verify(desc.id)
        kinds = [entry.kind for entry in await audit.events(desc.id)]
        findings = await audit.check(desc.id)
        await admin.free_window(name, "counts")
        await admin.delete_world(name)
        worlds = [summary.name for summary in await admin.list_worlds()]
        public_copy = np.frombuffer(public[0], "<i8").tolist()
        return [listed, public_copy, at, first_bad, events, kinds, findings, name in worlds]

    listed, public, at, first_bad, events, kinds, findings, still_there = in_a_loop(main)
    assert listed == ["counts"]
    assert public == [0, 11] and at > 0, "the replayed public copy holds the put"
    assert first_bad is None and events > 0, "the chain is intact"
    assert "op" in kinds and "lock_grant" in kinds
    assert findings == []
    assert not still_there, "the world was deleted"


def test_a_failure_is_raised_in_the_awaiting_coroutine(server: Server) -> None:
    async def main() -> Optional[onesided.ErrorClass]:
        windows = await attached(server, 2)
        try:
            await windows[0].unlock(1)
        except onesided.MpiError as refused:
            return refused.error_class
        finally:
            for w in windows:
                await w.session.close()
        return None

    assert in_a_loop(main) == onesided.ErrorClass.RMA_SYNC


def test_a_cancelled_wait_gives_the_loop_back_and_the_call_goes_on(server: Server) -> None:
    """Rank 0 waits in a fence rank 1 has not reached; cancelling that wait returns at once
    (the loop was never blocked), and the fence itself still completes once rank 1 comes."""

    async def main() -> List[int]:
        windows = await attached(server, 2)
        w0, w1 = windows
        await asyncio.gather(w0.fence(), w1.fence())
        w0.put(1, 0, [4])
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(w0.fence(), 0.2)
        await w1.fence()  # meets rank 0's fence, still under way in its thread
        seen = [int(value) for value in w1.load(0, 1)]
        for w in windows:
            await w.session.close()
        return seen

    assert in_a_loop(main) == [4]
