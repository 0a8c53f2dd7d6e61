"""``onesided.aio``: the package for programs that live in an asyncio event loop.

Every call that waits — for the server (connecting, attaching, opening a window, admin and
audit calls) or for other ranks (fence, lock, unlock, flush, wait, complete, barrier, free) —
is a coroutine here: it runs in a thread of its own while the event loop goes on, so two ranks
in one loop can meet in a fence. Calls that do not wait (put, get, accumulate … which only
queue an operation; post and start; local stores and loads) are the blocking package's own
methods; their answers are awaited (``await pending`` for ``pending.value()``, ``await
request`` for ``request.wait()``).

Why a thread per waiting call rather than ``asyncio.to_thread``: ``to_thread`` uses the loop's
default executor, a pool of ``min(32, CPUs + 4)`` threads; ranks waiting in a collective each
hold one, and with more ranks than threads the last ones never get a thread to reach the
collective: a deadlock. A thread per call has no such limit, and starting one costs far less
than a round trip to the server. The native calls release the GIL while they wait, so the
threads do not hold up the loop.

Cancelling a coroutine (``asyncio.wait_for`` running out, a task cancelled) stops the wait
here, not the call: the call goes on in its thread to its end, as a blocking call would, and
its outcome is dropped. A fence or lock given up this way still happened (or still happens)
for the other ranks; use the ``timeout=`` options of ``Session.attach`` for calls that only
need the server.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    ClassVar,
    Generic,
    Iterable,
    List,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from . import _onesided
from ._threads import off_loop
from ._types import LockType
from ._window import Info, Pending, Request, _Calls, _SessionFacts
from ._window import Session as _Session
from ._window import Window as _Window

__all__ = ["Admin", "Audit", "Pending", "Request", "Session", "Window"]


class Window(_Calls):
    """``onesided.Window`` with the calls that wait as coroutines; the calls that do not wait
    (loads, stores, put, get …) are the same methods as there. The ``Pending`` and ``Request``
    of get-like and request-based calls are awaited: ``await pending``, ``await request``.
    ``blocking`` is the ``onesided.Window`` underneath."""

    def __init__(self, window: _Window, session: Session) -> None:
        super().__init__(window._native)
        self.blocking = window
        self.session = session

    def __repr__(self) -> str:
        return "aio.Window({!r}, rank={})".format(self.desc.name, self.rank)

    # ---- dynamic windows: ask the server ----

    async def attach(self, size: int) -> int:
        return await off_loop(self.blocking.attach, size)

    async def attach_at(self, address: int, size: int) -> int:
        return await off_loop(self.blocking.attach_at, address, size)

    async def detach(self, address: int) -> None:
        await off_loop(self.blocking.detach, address)

    # ---- synchronization ----

    async def fence(self, assertion: int = 0) -> None:
        await off_loop(self.blocking.fence, assertion)

    async def complete(self) -> None:
        await off_loop(self.blocking.complete)

    async def wait(self) -> None:
        await off_loop(self.blocking.wait)

    async def test(self) -> bool:
        return await off_loop(self.blocking.test)

    async def lock(
        self, lock_type: Union[LockType, str], target: int, assertion: int = 0
    ) -> None:
        await off_loop(self.blocking.lock, lock_type, target, assertion)

    async def unlock(self, target: int) -> None:
        await off_loop(self.blocking.unlock, target)

    async def lock_all(self, assertion: int = 0) -> None:
        await off_loop(self.blocking.lock_all, assertion)

    async def unlock_all(self) -> None:
        await off_loop(self.blocking.unlock_all)

    async def flush(self, target: int) -> None:
        await off_loop(self.blocking.flush, target)

    async def flush_all(self) -> None:
        await off_loop(self.blocking.flush_all)

    async def flush_local(self, target: int) -> None:
        await off_loop(self.blocking.flush_local, target)

    async def flush_local_all(self) -> None:
        await off_loop(self.blocking.flush_local_all)

    async def sync(self) -> None:
        await off_loop(self.blocking.sync)

    async def free(self) -> None:
        await off_loop(self.blocking.free)

    async def set_info(self, info: Info) -> None:
        await off_loop(self.blocking.set_info, info)


class Session(_SessionFacts):
    """``onesided.Session`` for asyncio: ``session = await Session.attach(url, token)``; an
    async context manager that closes it (``async with session:``)."""

    def __init__(self, session: _Session) -> None:
        self.blocking = session
        self._native = session._native

    @classmethod
    async def attach(
        cls,
        url: str,
        token: str,
        *,
        audit_database_url: Optional[str] = None,
        ship_audit_events: bool = False,
        world: Optional[str] = None,
        rank: Optional[int] = None,
        ca_file: Optional[str] = None,
        connect_timeout: Optional[float] = None,
        timeout: Optional[float] = None,
        reattach_within: Optional[float] = None,
    ) -> Session:
        """As ``onesided.Session.attach``, without blocking the loop."""
        session = await off_loop(
            _Session.attach,
            url,
            token,
            audit_database_url=audit_database_url,
            ship_audit_events=ship_audit_events,
            world=world,
            rank=rank,
            ca_file=ca_file,
            connect_timeout=connect_timeout,
            timeout=timeout,
            reattach_within=reattach_within,
        )
        return cls(session)

    async def window(self, name: str) -> Window:
        return Window(await off_loop(self.blocking.window, name), self)

    async def create_window(
        self,
        name: str,
        size: int,
        disp_unit: int = 1,
        flavor: str = "allocate",
        info: Optional[Info] = None,
        model: str = "separate",
        group: Optional[Iterable[int]] = None,
    ) -> Window:
        window = await off_loop(
            self.blocking.create_window, name, size, disp_unit, flavor, info, model, group
        )
        return Window(window, self)

    async def barrier(self) -> None:
        await off_loop(self.blocking.barrier)

    async def close(self) -> None:
        await off_loop(self.blocking.close)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, kind: Optional[Type[BaseException]], value: object, traceback: object
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "aio.Session(world={!r}, rank={})".format(self.world, self.rank)


C = TypeVar("C", bound="_Connection[Any]")
N = TypeVar("N")


class _Connection(Generic[N]):
    """What ``Admin`` and ``Audit`` share: a connection made without blocking the loop."""

    _connects: ClassVar[Callable[..., Any]]

    def __init__(self, native: N) -> None:
        self.blocking = native

    @classmethod
    async def connect(
        cls: Type[C],
        url: str,
        token: str,
        *,
        ca_file: Optional[str] = None,
        connect_timeout: Optional[float] = None,
        timeout: Optional[float] = None,
    ) -> C:
        """Connects to the server at ``url`` with the admin token, as the blocking class."""
        options = dict(ca_file=ca_file, connect_timeout=connect_timeout, timeout=timeout)
        return cls(await off_loop(cls._connects, url, token, **options))


class Admin(_Connection[_onesided.Admin]):
    """``onesided.Admin`` for asyncio: ``admin = await Admin.connect(url, token)``."""

    _connects = _onesided.Admin

    async def create_world(self, name: str, ranks: int) -> _onesided.WorldTokens:
        return await off_loop(self.blocking.create_world, name, ranks)

    async def list_worlds(self) -> List[_onesided.WorldSummary]:
        return await off_loop(self.blocking.list_worlds)

    async def delete_world(self, name: str) -> None:
        await off_loop(self.blocking.delete_world, name)

    async def create_window(
        self, world: str, spec: _onesided.WindowSpec
    ) -> _onesided.WindowDescription:
        return await off_loop(self.blocking.create_window, world, spec)

    async def list_windows(self, world: str) -> List[_onesided.WindowDescription]:
        return await off_loop(self.blocking.list_windows, world)

    async def describe_window(self, world: str, name: str) -> _onesided.WindowDescription:
        return await off_loop(self.blocking.describe_window, world, name)

    async def free_window(self, world: str, name: str) -> None:
        await off_loop(self.blocking.free_window, world, name)

    async def end_session(self, world: str, rank: int) -> int:
        return await off_loop(self.blocking.end_session, world, rank)

    async def revoke_locks(self, world: str, name: str, rank: int) -> Tuple[int, List[int]]:
        return await off_loop(self.blocking.revoke_locks, world, name, rank)


class Audit(_Connection[_onesided.Audit]):
    """``onesided.Audit`` for asyncio: ``audit = await Audit.connect(url, token)``."""

    _connects = _onesided.Audit

    async def windows(self) -> List[_onesided.RecordedWindow]:
        return await off_loop(self.blocking.windows)

    async def events(self, window: int, start: int = 1) -> List[_onesided.AuditEntry]:
        return await off_loop(self.blocking.events, window, start)

    async def check(self, window: int) -> List[_onesided.Finding]:
        return await off_loop(self.blocking.check, window)

    async def replay(self, window: int, at: Optional[int] = None) -> Tuple[int, List[bytes]]:
        return await off_loop(self.blocking.replay, window, at)

    async def verify(self, window: int) -> Tuple[int, Optional[int]]:
        return await off_loop(self.blocking.verify, window)
