"""One background asyncio loop per process, so synchronous code (graph.invoke, the CLI) can call
async-only tools (MCP sessions live on this loop) without nesting event loops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_loop.run_forever, name="jarvis-aio", daemon=True)
            thread.start()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a coroutine on the background loop and wait for its result from synchronous code."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError("run_sync called from the background loop itself; await the coroutine instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


def run_sync_in_context(coro: Coroutine[Any, Any, T]) -> T:
    """Like run_sync, but the coroutine runs with the caller's context variables (LangGraph's config, so that
    `interrupt()` works inside it); its exceptions, GraphInterrupt included, reach the caller."""
    import concurrent.futures
    import contextvars

    loop = background_loop()
    context = contextvars.copy_context()
    future: concurrent.futures.Future = concurrent.futures.Future()

    def start() -> None:
        task = loop.create_task(coro, context=context)

        def done(t: asyncio.Task) -> None:
            if t.cancelled():
                future.cancel()
            elif t.exception() is not None:
                future.set_exception(t.exception())
            else:
                future.set_result(t.result())

        task.add_done_callback(done)

    loop.call_soon_threadsafe(start)
    return future.result()


async def run_on_background(coro: Coroutine[Any, Any, T]) -> T:
    """Await a coroutine that must run on the background loop (e.g. it uses an MCP session) from any loop."""
    loop = background_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
