"""What `jarvis run` serves while it starts: its port answers at once, and nothing a client sends is lost.

Importing the web app (FastAPI, LangGraph, every view) and building the App behind it (catalog, MCP servers,
migrations, the model check) took 12-16 s before the port answered: a watcher (systemd, a test, the user's
browser) saw a refused connection. `StartingApp` is served from the first second instead; until the full app is
ready, each request passes the same `GuardMiddleware` as the full app's (Host, Origin and token checked exactly
as later), then:

- `/healthz` answers 200 with `"status": "starting"` and what is being built;
- `/identity` answers its challenge as the full app does (core/server_identity.py), when given the token: `jarvis
  open` and `jarvis chat` know their Jarvis from its first second, not only once it is built;
- the page and its static files are served from server/web (they hold no data), so the browser shows the UI;
- every other request (the API, the page's own calls) waits until the full app is ready and is then handed to it
  unchanged; if Jarvis cannot start, it gets 503 with the reason.

The full app is handed over with `ready(app)` from the thread that built it, after its lifespan (the background
services) has started in the server's event loop. Only the standard library is imported here (and
core/server_identity.py, stdlib too), so the shell itself costs nothing to start.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from orchestrator.core.server_identity import CHALLENGE_LENGTHS, IDENTITY_PATH, proof

WEB_DIR = Path(__file__).resolve().parent / "web"
WAIT_FOR_START_S = 600.0  # a request held while Jarvis starts (the built-in model may take minutes on a slow disk)


class StartingApp:
    """An ASGI app that holds requests until the full app is ready (see the module's docstring)."""

    def __init__(self, guard: Callable[[Any], Any], token: str | None = None) -> None:
        """`guard(app)`: `app` behind the checks every request of the full app passes (security.GuardMiddleware);
        `token`: the data folder's, for the proof `/identity` answers."""
        self.stage = "starting"
        self._token = token
        self._guarded = guard(self._while_starting)
        self._inner: Any = None
        self._failure: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_known = threading.Event()
        self._done: asyncio.Event | None = None
        self._inner_lifespan: tuple[asyncio.Queue, asyncio.Queue, asyncio.Task] | None = None

    # -- called from the thread that builds Jarvis ---------------------------------------------------------------

    def ready(self, app: Any, timeout_s: float = WAIT_FOR_START_S) -> None:
        """Start `app`'s lifespan in the server's loop, then hand every request to it. Raises what its start raised."""
        loop = self._server_loop(timeout_s)
        asyncio.run_coroutine_threadsafe(self._start_inner(app), loop).result(timeout_s)

    def failed(self, reason: str) -> None:
        """Jarvis could not start: held and later requests get 503 with `reason`."""
        self._failure = reason
        if self._loop is not None and self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)

    def _server_loop(self, timeout_s: float) -> asyncio.AbstractEventLoop:
        if not self._loop_known.wait(timeout_s) or self._loop is None:
            raise RuntimeError("the web server did not start")
        return self._loop

    # -- the ASGI side -------------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if self._inner is not None:
            await self._inner(scope, receive, send)
            return
        await self._guarded(scope, receive, send)

    async def _while_starting(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and self._failure is None:
            if path == "/healthz":
                await _respond(send, 200, {"service": "jarvis", "status": "starting", "starting": self.stage})
                return
            if path == IDENTITY_PATH and self._token is not None:  # as server/app.py's, on this socket's port
                challenge = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("challenge", [""])[0]
                port = int((scope.get("server") or ("", 0))[1] or 0)
                shortest, longest = CHALLENGE_LENGTHS
                if not shortest <= len(challenge) <= longest:
                    await _respond(send, 422, {"detail": f"challenge: {shortest} to {longest} characters"})
                else:
                    await _respond(send, 200, {"service": "jarvis", "proof": proof(self._token, challenge, port)})
                return
            if path == "/" or path.startswith("/static/"):  # the UI's own files: no data, never held
                page = _web_file(path)
                if page is None:
                    await _respond(send, 404, {"detail": "Not Found"})
                else:
                    await _send_file(send, page)
                return
        assert self._done is not None  # set by the lifespan's startup, which uvicorn runs before any request
        try:
            await asyncio.wait_for(self._done.wait(), WAIT_FOR_START_S)
        except TimeoutError:
            pass
        if self._inner is not None:
            await self._inner(scope, receive, send)
        elif scope["type"] == "http":
            reason = self._failure or f"Jarvis is still starting ({self.stage}); try again in a moment"
            await _respond(send, 503, {"detail": reason})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._loop = asyncio.get_running_loop()
                self._done = asyncio.Event()
                if self._failure is not None:
                    self._done.set()
                self._loop_known.set()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._inner is None:  # requests still held are answered, not cut off
                    self._failure = self._failure or "Jarvis stopped before it had finished starting"
                    assert self._done is not None
                    self._done.set()
                await self._stop_inner()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _start_inner(self, app: Any) -> None:
        """Run `app`'s lifespan protocol as uvicorn would, up to its startup; the shutdown comes with ours."""
        to_app: asyncio.Queue = asyncio.Queue()
        from_app: asyncio.Queue = asyncio.Queue()
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        task = asyncio.ensure_future(app(scope, to_app.get, from_app.put))
        await to_app.put({"type": "lifespan.startup"})
        answer = await _first_of(from_app, task)
        if answer is not None and answer["type"] == "lifespan.startup.failed":
            raise RuntimeError(answer.get("message") or "the web app's services failed to start")
        self._inner_lifespan = (to_app, from_app, task)
        self._inner = app
        assert self._done is not None
        self._done.set()

    async def _stop_inner(self) -> None:
        if self._inner_lifespan is None:
            return
        to_app, from_app, task = self._inner_lifespan
        await to_app.put({"type": "lifespan.shutdown"})
        await _first_of(from_app, task)


async def _first_of(answers: asyncio.Queue, task: asyncio.Task) -> dict[str, Any] | None:
    """The app's next lifespan message, or None when the app returned without one (an app with no lifespan)."""
    getter = asyncio.ensure_future(answers.get())
    finished, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
    if getter in finished:
        return getter.result()
    getter.cancel()
    task.result()  # raises what the app raised
    return None


def _web_file(path: str) -> Path | None:
    """The UI's page for `/`, or a file of server/web for `/static/...`: never a path outside that folder."""
    if path == "/":
        return WEB_DIR / "index.html"
    if not path.startswith("/static/"):
        return None
    candidate = (WEB_DIR / path[len("/static/"):]).resolve()
    if candidate.is_relative_to(WEB_DIR) and candidate.is_file():
        return candidate
    return None


async def _send_file(send: Any, path: Path) -> None:
    body = path.read_bytes()
    ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
        ctype += "; charset=utf-8"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


async def _respond(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
