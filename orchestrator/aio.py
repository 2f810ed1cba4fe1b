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


async def run_on_background(coro: Coroutine[Any, Any, T]) -> T:
    """Await a coroutine that must run on the background loop (e.g. it uses an MCP session) from any loop."""
    loop = background_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
