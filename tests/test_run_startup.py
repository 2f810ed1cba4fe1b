"""`jarvis run` answers its port before Jarvis is built (server/starting.py): /healthz says "starting", the page is
served, other requests wait for the full app and are answered by it, the checks of the full app hold meanwhile,
and a Jarvis that cannot start says why and stops."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI

from orchestrator.server.security import GuardMiddleware
from tests.conftest import JARVIS_BIN
from tests.starting_server import served_starting_app

TOKEN = "t" * 43


@pytest.fixture
def starting(jarvis_env):
    """A StartingApp served by uvicorn on a free port, guarded as `jarvis run` guards it; nothing built yet."""
    with served_starting_app(jarvis_env.settings, TOKEN) as (shell, base, guard), \
            httpx.Client(base_url=base, timeout=60) as client:
        for _ in range(600):  # the server thread binds nothing: it only needs its loop running
            try:
                client.get("/healthz")
                break
            except httpx.TransportError:
                threading.Event().wait(0.05)
        yield shell, client, guard


def _full_app(events: list[str]) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        events.append("services started")
        yield
        events.append("services stopped")

    app = FastAPI(lifespan=lifespan)

    @app.get("/api/views")
    def views() -> list[str]:
        return ["chat"]

    return app


def test_the_port_answers_while_jarvis_is_built_and_held_requests_reach_the_full_app(starting):
    shell, client, guard = starting
    shell.stage = "loading the tools"
    up = client.get("/healthz")
    assert up.status_code == 200 and up.json() == {"service": "jarvis", "status": "starting",
                                                   "starting": "loading the tools"}
    page = client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert client.get("/static/app.js").status_code == 200 or client.get("/static/style.css").status_code == 200
    # the full app's checks hold while starting: a foreign Host, another site, no token
    assert client.get("/healthz", headers={"Host": "evil.example"}).status_code == 421
    assert client.get("/api/views", headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.get("/api/views").status_code == 401
    # a request with the token waits for the full app, which answers it once its services have started
    events: list[str] = []
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(client.get, "/api/views", headers={"Authorization": f"Bearer {TOKEN}"})
        app = GuardMiddleware(_full_app(events), guard_of=lambda: guard)
        shell.ready(app)
        answer = held.result(timeout=60)
    assert answer.status_code == 200 and answer.json() == ["chat"]
    assert events == ["services started"]


def test_a_static_path_never_leaves_the_web_folder(starting):
    _, client, _ = starting
    port = client.base_url.port
    for path in ("/static/../../core/config.py", "/static/%2e%2e/%2e%2e/app.py", "/static/../starting.py",
                 "/static/views/../../starting.py"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # sent as written: httpx drops the dots
        conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        answer = conn.getresponse()
        body = answer.read().decode(errors="replace")
        conn.close()
        assert answer.status == 404 and "import" not in body, (path, answer.status)


def test_a_jarvis_that_cannot_start_answers_its_held_requests_with_the_reason(starting):
    shell, client, _ = starting
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(client.get, "/api/views", headers={"Authorization": f"Bearer {TOKEN}"})
        shell.failed("Jarvis could not start: the data folder is a file")
        answer = held.result(timeout=60)
    assert answer.status_code == 503 and "the data folder is a file" in answer.json()["detail"]


def test_jarvis_run_that_cannot_start_says_why_and_exits(jarvis_env):
    blocker = jarvis_env.path / "not-a-folder"
    blocker.write_text("a file where the data folder should be\n")
    jarvis_env.write_config(storage={"data_dir": str(blocker / "data")})
    proc = subprocess.run([str(JARVIS_BIN), "run", "--port", "0", "--no-open", "--no-services"],
                          env=jarvis_env.env(), cwd=str(jarvis_env.path), capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert re.search(r"error: .*(could not|cannot|Not a directory)", proc.stderr), proc.stderr


def _loaded_by(jarvis_env, args: list[str], modules: tuple[str, ...]) -> tuple[str, list[str]]:
    """(what `jarvis ARGS` printed, which of `modules` it imported), run in a fresh interpreter."""
    probe = (f"import sys\nfrom orchestrator.cli import main\nsys.argv = ['jarvis', *{args!r}]\ntry:\n    main()\n"
             f"except SystemExit:\n    pass\nsys.stdout.flush()\n"
             f"import json\nprint('\\nLOADED', json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", probe], env=jarvis_env.env(), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    said, _, loaded = proc.stdout.rpartition("\nLOADED ")
    assert loaded, (proc.stdout, proc.stderr)
    return said, json.loads(loaded)


PENDING_NEEDS_NONE_OF = ("langgraph", "langchain_openai", "langchain_core", "openai", "mcp", "orchestrator.chat.graph",
                         "sqlalchemy", "httpx")


def test_jarvis_pending_with_nothing_waiting_loads_no_graph(jarvis_env):
    """`jarvis pending` answers from the tables when no thread waits: the graph, the model client, LangChain's
    messages (the thread index reads none to say a thread waits) and the tools, most of a command's start-up, are
    not loaded to say that nothing is waiting; nor SQLAlchemy (a glance through sqlite3 reads the two tables:
    storage/glance.py) nor httpx (only a one-shot chat through a running Jarvis uses it: cli/via_server.py)."""
    from orchestrator.storage.threads import IDLE, ThreadIndex
    from orchestrator.tools.ledger import EffectsLedger

    said, loaded = _loaded_by(jarvis_env, ["pending"], PENDING_NEEDS_NONE_OF)  # no database yet
    assert "nothing is waiting for confirmation" in said and loaded == []
    EffectsLedger(jarvis_env.settings)  # the tables exist, as after any turn
    ThreadIndex(jarvis_env.settings).touch("done", title="a finished turn", status=IDLE)
    said, loaded = _loaded_by(jarvis_env, ["pending"], PENDING_NEEDS_NONE_OF)
    assert "nothing is waiting for confirmation" in said and loaded == []


def test_the_glance_sees_what_the_full_path_sees(jarvis_env):
    """storage/glance.py reads the tables of storage/threads.py and tools/ledger.py by name: a waiting or running
    thread, or a call started and not completed, makes it say that something may wait (then `jarvis pending` takes
    the full path); an idle thread and a completed call do not; PostgreSQL is not its to read."""
    from orchestrator.storage.glance import anything_may_wait
    from orchestrator.storage.threads import IDLE, RUNNING, WAITING, ThreadIndex
    from orchestrator.tools.ledger import EffectsLedger

    settings = jarvis_env.settings
    assert anything_may_wait(settings) is False  # no database at all
    threads, ledger = ThreadIndex(settings), EffectsLedger(settings)
    threads.touch("t", title="t", status=IDLE)
    assert anything_may_wait(settings) is False
    for status in (WAITING, RUNNING):
        threads.touch("t", status=status)
        assert anything_may_wait(settings) is True, status
    threads.touch("t", status=IDLE)
    assert ledger.begin("call-1", "t", "fs_write_text", {"path": "a"}, ["fs_write"])
    assert anything_may_wait(settings) is True
    ledger.complete("call-1", "written")
    assert anything_may_wait(settings) is False
    jarvis_env.write_config(storage={"url": "postgresql://jarvis@127.0.0.1:9/jarvis"})
    assert anything_may_wait(jarvis_env.settings) is None


def test_a_one_shot_chat_without_mcp_servers_does_not_load_the_mcp_library(jarvis_env):
    """With no MCP folder there is no MCP tool to offer: the MCP library and its LangChain adapter (about a second
    of a one-shot chat's start-up) are not imported to find that out."""
    assert not jarvis_env.settings.mcp.dir.exists()
    jarvis_env.server.push({"content": "One answer."})
    said, loaded = _loaded_by(jarvis_env, ["chat", "hello"], ("mcp", "langchain_mcp_adapters", "langgraph"))
    assert "One answer." in said
    assert loaded == ["langgraph"]  # the chat did build its graph


def test_the_chat_s_model_clients_load_the_ca_bundle_once(jarvis_env, monkeypatch):
    """Each TLS context loads the CA bundle (a tenth of a second each on a busy machine); the chat's model clients
    (sync and async, each transport with its pool) made six at start-up. Owned clients share one
    (core/owned_transport.py)."""
    import ssl

    import langchain_openai  # noqa: F401 - its module makes its own context once, when imported: not counted here

    made = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(1) or real(*a, **k))
    assert jarvis_env.app().runtime.llm is not None  # the model clients are made with the runtime
    assert len(made) <= 1, len(made)
