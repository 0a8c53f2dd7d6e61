"""``off_loop``: a blocking call as something an asyncio coroutine awaits (``onesided.aio``,
``await pending``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T")


def _settle(future: "asyncio.Future[Any]", result: Any, error: Optional[BaseException]) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def off_loop(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` in a new thread of its own; its result (or exception) here
    once done, the event loop running meanwhile. Not the loop's default executor: ranks
    waiting in a collective would each hold one of its few threads (``onesided.aio``)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        result: Any = None
        error: Optional[BaseException] = None
        try:
            result = call(*args, **kwargs)
        except BaseException as failure:  # handed to the awaiting coroutine
            error = failure
        try:
            loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for this any more

    threading.Thread(target=run, name="onesided-aio", daemon=True).start()
    return await future
