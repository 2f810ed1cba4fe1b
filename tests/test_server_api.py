"""The web UI's JSON API over real HTTP: streaming turns, tool steps, confirmations (also across a restart),
errors the user can act on, uploads, tools, runs and settings."""

from __future__ import annotations

import threading
import time

import pytest
from fpdf import FPDF

from integrations.base import make_tool
from tests.conftest import answer, tool_call
from tests.ui_server import start_ui, ui_server  # noqa: F401 - fixture


def kinds(events):
    return [e["event"] for e in events]


def make_pdf(path, text="Quarterly report: revenue grew 12 percent.") -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 10, text)
    pdf.output(str(path))
    return path.read_bytes()


def test_message_streams_tokens_then_done_with_html(ui_server):
    ui_server.env.server.push({"content": "Hello **there**, friend. How can I help?", "token_delay_s": 0.01})
    events = ui_server.stream("/api/threads/web-a/messages", {"text": "hi"})
    assert kinds(events)[0] == "start" and kinds(events)[-1] == "end"
    tokens = [e["text"] for e in events if e["event"] == "token"]
    assert len(tokens) > 3, "the answer must arrive token by token"
    assert "".join(tokens) == "Hello **there**, friend. How can I help?"
    done = next(e for e in events if e["event"] == "done")
    assert done["html"].strip() == "<p>Hello <strong>there</strong>, friend. How can I help?</p>"

    with ui_server.client() as c:
        thread = c.get("/api/threads/web-a").json()
        assert [m["type"] for m in thread["messages"]] == ["human", "ai"]
        assert "<strong>there</strong>" in thread["messages"][1]["html"]
        assert thread["pending"] == [] and thread["running"] is False and thread["stalled"] is False
        listed = c.get("/api/threads").json()
        assert listed[0]["thread_id"] == "web-a" and listed[0]["title"] == "hi"
        new = c.post("/api/threads").json()["thread_id"]
        assert new.startswith("web-") and c.get(f"/api/threads/{new}").status_code == 404


def test_tool_steps_stream_as_they_happen(ui_server):
    (ui_server.env.root / "notes.txt").write_text("hello")
    ui_server.env.server.push(tool_call("fs_list_dir", path=str(ui_server.env.root)), answer("You have notes.txt."))
    events = ui_server.stream("/api/threads/web-b/messages", {"text": "what is in my folder?"})
    order = [k for k in kinds(events) if k in ("tool_call", "tool_start", "tool_end", "done")]
    assert order == ["tool_call", "tool_start", "tool_end", "done"]
    end = next(e for e in events if e["event"] == "tool_end")
    assert end["ok"] is True and "notes.txt" in end["preview"] and end["duration_ms"] >= 0
    call = next(e for e in events if e["event"] == "tool_call")
    assert end["key"].split("|")[2] == call["id"]  # the UI pairs start/end with the call through the key
    with ui_server.client() as c:
        messages = c.get("/api/threads/web-b").json()["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[1]["tool_calls"][0]["name"] == "fs_list_dir" and messages[2]["status"] == "success"


def test_failed_tool_is_reported_in_the_step(ui_server):
    ui_server.env.server.push(tool_call("fs_list_dir", path=str(ui_server.env.root / "missing")), answer("That folder does not exist."))
    events = ui_server.stream("/api/threads/web-c/messages", {"text": "list missing"})
    end = next(e for e in events if e["event"] == "tool_end")
    assert end["ok"] is False and "missing" in end["preview"]


def _ask_to_write(server, thread, content="hello"):
    target = server.env.root / "out.txt"
    server.env.server.push(tool_call("fs_write_text", path=str(target), content=content))
    events = server.stream(f"/api/threads/{thread}/messages", {"text": "write hello to out.txt"})
    confirmations = [e for e in events if e["event"] == "confirmation"]
    assert len(confirmations) == 1 and "done" not in kinds(events)
    return target, confirmations[0]


def test_confirmation_approve(ui_server):
    target, asked = _ask_to_write(ui_server, "web-d")
    assert asked["tool"] == "fs_write_text" and asked["side_effects"] == ["fs_write"]
    assert asked["summary"] == f"Write 5 characters to {target} (replacing it if it exists)."
    assert asked["kind"] == "confirm" and asked["choices"] == ["approve", "edit", "deny"]
    with ui_server.client() as c:
        thread = c.get("/api/threads/web-d").json()
        assert [p["interrupt_id"] for p in thread["pending"]] == [asked["interrupt_id"]]
        assert c.get("/api/pending").json()[0]["interrupt_id"] == asked["interrupt_id"]
        # no new message while a confirmation waits
        blocked = c.post("/api/threads/web-d/messages", json={"text": "never mind"})
        assert blocked.status_code == 409 and "confirmation" in blocked.json()["detail"]
        # every pending confirmation is answered together, and only pending ones
        assert c.post("/api/threads/web-d/resume", json={"decisions": {}}).status_code == 400
        assert c.post("/api/threads/web-d/resume", json={"decisions": {"nope": {"decision": "approve"}}}).status_code == 409
    assert not target.exists()
    ui_server.env.server.push(answer("Written."))
    events = ui_server.stream("/api/threads/web-d/resume", {"decisions": {asked["interrupt_id"]: {"decision": "approve"}}})
    assert target.read_text() == "hello"
    assert next(e for e in events if e["event"] == "done")["content"] == "Written."
    with ui_server.client() as c:
        assert c.get("/api/threads/web-d").json()["pending"] == []
        again = c.post("/api/threads/web-d/resume", json={"decisions": {asked["interrupt_id"]: {"decision": "approve"}}})
        assert again.status_code == 409


def test_confirmation_deny_and_edit(ui_server):
    target, asked = _ask_to_write(ui_server, "web-e")
    ui_server.env.server.push(answer("OK, I did not write it."))
    ui_server.stream("/api/threads/web-e/resume",
                     {"decisions": {asked["interrupt_id"]: {"decision": "deny", "reason": "not now"}}})
    assert not target.exists()
    told = [m for m in ui_server.env.server.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "denied" in told and "not now" in told

    target, asked = _ask_to_write(ui_server, "web-f")
    with ui_server.client() as c:
        bad = c.post("/api/threads/web-f/resume", json={"decisions": {asked["interrupt_id"]: {"decision": "edit"}}})
        assert bad.status_code == 400 and "args" in bad.json()["detail"]
    ui_server.env.server.push(answer("Written with your text."))
    ui_server.stream("/api/threads/web-f/resume", {"decisions": {asked["interrupt_id"]: {
        "decision": "edit", "args": {"path": str(target), "content": "edited"}}}})
    assert target.read_text() == "edited"


def test_confirmation_survives_a_server_restart(jarvis_env):
    with start_ui(jarvis_env) as first:
        target, asked = _ask_to_write(first, "web-g")
    with start_ui(jarvis_env) as second:  # a new process would do the same: it all comes from the checkpoint
        with second.client() as c:
            pending = c.get("/api/threads/web-g").json()["pending"]
        assert [p["interrupt_id"] for p in pending] == [asked["interrupt_id"]]
        assert pending[0]["summary"] == asked["summary"]
        jarvis_env.server.push(answer("Done."))
        second.stream("/api/threads/web-g/resume", {"decisions": {asked["interrupt_id"]: {"decision": "approve"}}})
    assert target.read_text() == "hello"


def test_in_doubt_needs_its_key(ui_server):
    """A call cut off by a crash is asked as "may have happened"; approving it must name its key."""
    from orchestrator.tools.ledger import EffectsLedger

    target, asked = _ask_to_write(ui_server, "web-h")
    # Simulate a crash mid-call: the ledger holds the call as started by a process that is gone.
    ledger = EffectsLedger(ui_server.env.settings)
    assert ledger.begin(asked["key"], "web-h", "fs_write_text", {"path": str(target), "content": "hello"}, ["fs_write"])
    with ledger_owned_by_dead_process(ledger, asked["key"]):
        events = ui_server.stream("/api/threads/web-h/resume", {"decisions": {asked["interrupt_id"]: {"decision": "approve"}}})
    doubt = [e for e in events if e["event"] == "confirmation"]
    assert doubt and doubt[0]["kind"] == "in_doubt" and doubt[0]["choices"] == ["approve", "deny"]
    with ui_server.client() as c:
        keyless = c.post("/api/threads/web-h/resume", json={"decisions": {doubt[0]["interrupt_id"]: {"decision": "approve"}}})
        assert keyless.status_code == 400 and "key" in keyless.json()["detail"]
    ui_server.env.server.push(answer("Written again."))
    ui_server.stream("/api/threads/web-h/resume", {"decisions": {doubt[0]["interrupt_id"]: {
        "decision": "approve", "key": doubt[0]["key"]}}})
    assert target.read_text() == "hello"


class ledger_owned_by_dead_process:
    """Mark a started ledger entry as owned by a pid that no longer runs."""

    def __init__(self, ledger, key):
        self.ledger, self.key = ledger, key

    def __enter__(self):
        import subprocess

        from sqlalchemy.orm import Session

        from orchestrator.tools.ledger import LedgerRow

        dead = subprocess.Popen(["true"])
        dead.wait()
        with Session(self.ledger.engine) as s, s.begin():
            row = s.get(LedgerRow, self.key)
            row.pid = dead.pid
        return self

    def __exit__(self, *exc):
        return False


def test_model_endpoint_error_then_retry(ui_server):
    ui_server.env.server.push({"error": {"status": 503, "message": "model is loading"}}, answer("Back online."))
    events = ui_server.stream("/api/threads/web-i/messages", {"text": "hello?"})
    err = next(e for e in events if e["event"] == "error")
    assert err["kind"] == "model_endpoint" and "503" in err["message"]
    with ui_server.client() as c:
        thread = c.get("/api/threads/web-i").json()
        assert thread["stalled"] is True and thread["messages"][0]["content"] == "hello?"
    events = ui_server.stream("/api/threads/web-i/retry")
    assert next(e for e in events if e["event"] == "done")["content"] == "Back online."
    with ui_server.client() as c:
        assert c.post("/api/threads/web-i/retry").status_code == 409  # nothing left to retry


def test_unreachable_model_says_what_to_do(jarvis_env):
    jarvis_env.write_config(models={"primary": {"base_url": "http://127.0.0.1:9/v1"}})
    with start_ui(jarvis_env) as server:
        events = server.stream("/api/threads/web-j/messages", {"text": "hello?"})
        err = next(e for e in events if e["event"] == "error")
        assert err["kind"] == "model_endpoint"
        assert "Cannot reach the model endpoint at http://127.0.0.1:9/v1" in err["message"]
        assert "models.primary.base_url" in err["message"]
        with server.client() as c:
            body = c.get("/api/settings/health").json()
        assert [s["title"] for s in body["sections"]] == ["Backups", "MCP servers"]  # server/api/health.py, mcp_health.py
        health = body["models"][0]
        assert health["ok"] is False and "choose another model below" in health["fix"]  # Settings switches live


def test_one_turn_per_thread_and_reattach(ui_server):
    ui_server.env.server.push({"content": "slow answer arrives", "delay_s": 1.0, "token_delay_s": 0.05})
    result: dict = {}

    def first():
        result["events"] = ui_server.stream("/api/threads/web-k/messages", {"text": "take your time"})

    worker = threading.Thread(target=first)
    worker.start()
    with ui_server.client() as c:
        deadline = time.monotonic() + 10
        while not c.get("/api/threads").json() or not c.get("/api/threads").json()[0]["running"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        busy = c.post("/api/threads/web-k/messages", json={"text": "again"})
        assert busy.status_code == 409 and "still working" in busy.json()["detail"]
        assert c.get("/api/threads/web-k").json()["running"] is True
    # a reloaded page attaches and gets the whole turn
    attached = ui_server.stream("/api/threads/web-k/events", method="GET")
    worker.join(20)
    assert "".join(e["text"] for e in attached if e["event"] == "token") == "slow answer arrives"
    assert [e for e in attached if e["event"] == "done"] == [e for e in result["events"] if e["event"] == "done"]
    # once finished there is nothing to attach to
    assert kinds(ui_server.stream("/api/threads/web-k/events", method="GET")) == ["start", "end"]


def test_dropped_pdf_becomes_an_attachment(ui_server, tmp_path):
    data = make_pdf(tmp_path / "report.pdf")
    with ui_server.client() as c:
        stored = c.post("/api/uploads", params={"filename": "../../report.pdf"}, content=data).json()
    assert stored["kind"] == "pdf" and stored["name"] == "report.pdf" and stored["size"] == len(data)
    path = ui_server.env.data / "uploads" / stored["upload_id"] / "report.pdf"
    assert path.read_bytes() == data
    ui_server.env.server.push(answer("It is a quarterly report."))
    ui_server.stream("/api/threads/web-l/messages", {"text": "what is this?", "attachments": [
        {"upload_id": stored["upload_id"]}, {"ref": "https://youtu.be/dQw4w9WgXcQ"}]})
    system = ui_server.env.server.requests[-1]["messages"][-1]["content"]  # after the message (chat/turn_context.py)
    assert f"- pdf: {path} (report.pdf)" in system
    assert "- youtube: https://youtu.be/dQw4w9WgXcQ" in system
    # a later attachment keeps the earlier ones
    with ui_server.client() as c:
        note = c.post("/api/uploads", params={"filename": "notes.md"}, content=b"# notes\nbuy milk").json()
        assert note["kind"] == "text"
    ui_server.env.server.push(answer("Noted."))
    ui_server.stream("/api/threads/web-l/messages", {"text": "", "attachments": [{"upload_id": note["upload_id"]}]})
    system = ui_server.env.server.requests[-1]["messages"][-1]["content"]
    assert "report.pdf" in system and "notes.md" in system and "youtu.be" in system


def test_an_upload_named_like_the_record_of_uploads_stays_itself(ui_server):
    """A file dropped as `upload.json` (an allowed suffix) was overwritten by the upload's own record of that
    name: the attachment then pointed at Jarvis's record, not at the user's file."""
    data = b'{"name": "upload.json", "kind": "text", "size": 1, "mine": true}'
    with ui_server.client() as c:
        for name in ("upload.json", ".upload.json"):
            stored = c.post("/api/uploads", params={"filename": name}, content=data).json()
            assert stored["name"] == "upload.json" and stored["size"] == len(data), stored
            path = ui_server.env.data / "uploads" / stored["upload_id"] / "upload.json"
            assert path.read_bytes() == data
            ui_server.env.server.push(answer("Read it."))
            ui_server.stream(f"/api/threads/web-u{len(name)}/messages",
                             {"text": "read this", "attachments": [{"upload_id": stored["upload_id"]}]})
            assert f"- text: {path} (upload.json)" in ui_server.env.server.requests[-1]["messages"][-1]["content"]
            assert path.read_bytes() == data


def test_uploads_are_checked(jarvis_env):
    jarvis_env.write_config(server={"max_upload_mb": 1})
    with start_ui(jarvis_env) as server, server.client() as c:
        big = c.post("/api/uploads", params={"filename": "big.txt"}, content=b"x" * (1024 * 1024 + 1))
        assert big.status_code == 413 and "server.max_upload_mb" in big.json()["detail"]

        def chunks():  # no Content-Length: the limit holds while streaming
            for _ in range(3):
                yield b"y" * (512 * 1024)

        streamed = c.post("/api/uploads", params={"filename": "big.txt"}, content=chunks())
        assert streamed.status_code == 413
        exe = c.post("/api/uploads", params={"filename": "tool.exe"}, content=b"MZ")
        assert exe.status_code == 415 and "only PDF and text" in exe.json()["detail"]
        fake = c.post("/api/uploads", params={"filename": "fake.pdf"}, content=b"not a pdf")
        assert fake.status_code == 415 and "not a PDF" in fake.json()["detail"]
        empty = c.post("/api/uploads", params={"filename": "empty.txt"}, content=b"")
        assert empty.status_code == 400
        unknown = c.post("/api/threads/web-m/messages", json={"text": "x", "attachments": [{"upload_id": "abcdefghijkl"}]})
        assert unknown.status_code == 404 and "drop the file again" in unknown.json()["detail"]
        path_ref = c.post("/api/threads/web-m/messages", json={"text": "x", "attachments": [{"ref": "/etc/passwd"}]})
        assert path_ref.status_code == 422
    leftovers = [p for p in (jarvis_env.data / "uploads").iterdir()]
    assert leftovers == [], "refused uploads leave nothing behind"


def test_tools_lists_metadata_of_every_source(jarvis_env):
    from pydantic import BaseModel

    class Args(BaseModel):
        city: str

    def weather(city: str) -> str:
        """Today's weather for a city."""
        return "sunny"

    generated = make_tool(weather, args_schema=Args, side_effects=["network"], source="generated",
                          shown={"version": 3, "trust": "trusted", "test_report": "4 passed in 0.2s"})
    with start_ui(jarvis_env, tools=[generated]) as server, server.client() as c:
        body = c.get("/api/tools").json()
    tools = {t["name"]: t for t in body["tools"]}
    assert tools["weather"]["source"] == "generated"
    assert tools["weather"]["metadata"] == {"version": 3, "trust": "trusted", "test_report": "4 passed in 0.2s"}
    assert tools["weather"]["side_effects"] == [{"name": "network", "description": "talks to hosts on the network", "mode": "confirm"}]
    assert tools["weather"]["args_schema"]["required"] == ["city"]
    assert tools["fs_write_text"]["side_effects"][0]["mode"] == "confirm"
    assert tools["fs_read_text"]["untrusted_output"] is True and tools["fs_list_dir"]["side_effects"] == []
    assert body["provider_errors"] == {}
    # [19] point 7: Gmail and Calendar said "Enabled" while Google was not connected
    google = [t for n, t in tools.items() if n.startswith(("gmail_", "gcal_"))]
    assert google and all(t["unavailable"] == "Google is not connected: run `jarvis auth google`" for t in google)
    assert tools["fs_read_text"]["unavailable"] is None


def test_runs_and_settings(ui_server):
    ui_server.env.server.push(answer("Hi."))
    ui_server.stream("/api/threads/web-n/messages", {"text": "hi"})
    with ui_server.client() as c:
        runs = c.get("/api/runs").json()
        assert runs[0]["thread_id"] == "web-n" and runs[0]["status"] == "ok" and runs[0]["model_calls"] == 1
        assert runs[0]["thread_title"] == "hi"  # [19] point 6: runs name their thread by its title
        run = c.get(f"/api/runs/{runs[0]['id']}").json()
        names = [e["name"] for e in run["events"] if e["kind"] == "node"]
        assert names[0] == "planner" and "respond" in names
        assert c.get("/api/runs/nope").status_code == 404

        settings = c.get("/api/settings").json()
        assert settings["config_file"] == str(ui_server.env.config_path)
        assert "api_key: ********\n" in settings["config_text"]  # the test config is written unquoted
        assert "test" not in settings["config_text"].split("api_key")[1].splitlines()[0]
        assert settings["effective"]["models"]["primary"]["api_key"] == "********"
        assert settings["server"]["port"] == int(ui_server.url.rsplit(":", 1)[1])
        body = c.get("/api/settings/health").json()
        assert [s["title"] for s in body["sections"]] == ["Backups", "MCP servers"]  # server/api/health.py, mcp_health.py
        health = body["models"]
        assert health == [{"role": "primary", "base_url": ui_server.env.server.base_url, "model": "scripted-model",
                           "label": "scripted-model", "provider": "openai", "builtin": False, "ok": True,
                           "message": f"{ui_server.env.server.base_url} answers (scripted-model)", "notice": None, "tools": None,
                           "fix": None}]
        views = [v["name"] for v in c.get("/api/views").json()]
        assert views == ["chat", "jorbs", "inbox", "tools", "runs", "reminders", "memory", "settings"]


def test_health_sections_plug_in(ui_server):
    from orchestrator.server.api import settings as settings_api

    def mcp_servers(ctx):
        return {"title": "MCP servers", "items": [{"name": "browser-use", "ok": False, "message": "exited with 1",
                                                    "fix": "see mcp/browser-use.toml"}]}

    def broken(ctx):
        raise RuntimeError("boom")

    saved = list(settings_api.HEALTH_CHECKS)
    settings_api.HEALTH_CHECKS[:] = [mcp_servers, broken]
    try:
        with ui_server.client() as c:
            sections = c.get("/api/settings/health").json()["sections"]
    finally:
        settings_api.HEALTH_CHECKS[:] = saved
    assert sections[0]["title"] == "MCP servers" and sections[0]["items"][0]["ok"] is False
    assert sections[1]["title"] == "broken" and "RuntimeError: boom" in sections[1]["items"][0]["message"]


def test_bad_requests_get_clear_errors(ui_server):
    with ui_server.client() as c:
        assert c.post("/api/threads/web-o/messages", json={"text": "  "}).status_code == 400
        assert c.get("/api/threads/bad%20id!").status_code == 422
        assert c.post("/api/threads/web-o/messages", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
        assert c.post("/api/threads/web-o/retry").status_code in (409,)


@pytest.mark.parametrize("text", ["<script>alert(1)</script>", "[x](javascript:alert(1))", "![i](http://evil.example/p.png)"])
def test_answers_are_sanitized(text):
    from orchestrator.server.markdown import render_markdown

    html = render_markdown(text)
    assert "<script" not in html and "href=\"javascript" not in html and "<img" not in html


def test_secret_masking():
    from orchestrator.core.redaction import redact_config_text

    text = 'primary: {base_url: "http://x/v1", api_key: "sk-abc123"}\n  api_key: plain\n  api_key: {secret: openai}\n'
    masked = redact_config_text(text)
    assert "sk-abc123" not in masked and "plain" not in masked and "{secret: openai}" in masked


def test_a_stray_closing_fence_is_not_an_empty_code_box():
    """[19] point 7: an answer ending with a lone ``` rendered an empty code box under it."""
    from orchestrator.server.markdown import render_markdown

    assert render_markdown("Done.\n```") == "<p>Done.</p>\n"
    assert "<pre>" in render_markdown("Here:\n```py\nprint(1)\n```")  # a real block stays
    assert "print(1)" in render_markdown("Here:\n```py\nprint(1)")  # an unclosed block with content stays


def test_threads_can_be_renamed_searched_and_deleted(ui_server):
    """[19] point 6: threads could not be renamed, deleted or searched."""
    env = ui_server.env
    for thread, text in (("web-a", "the quarterly budget"), ("web-b", "a holiday in Lisbon")):
        env.server.push(answer(f"Noted: {text}."))
        ui_server.stream(f"/api/threads/{thread}/messages", {"text": text})  # the whole turn
    with ui_server.client() as c:
        renamed = c.patch("/api/threads/web-a", json={"title": "Budget 2027"})
        assert renamed.status_code == 200 and renamed.json()["title"] == "Budget 2027"
        assert c.patch("/api/threads/nope", json={"title": "x"}).status_code == 404
        assert c.patch("/api/threads/web-a", json={"title": ""}).status_code == 422
        assert [t["thread_id"] for t in c.get("/api/threads", params={"q": "budget"}).json()] == ["web-a"]  # title
        assert [t["thread_id"] for t in c.get("/api/threads", params={"q": "LISBON"}).json()] == ["web-b"]  # said
        assert c.get("/api/threads", params={"q": "zebra"}).json() == []
        gone = c.delete("/api/threads/web-b")
        assert gone.status_code == 200
        assert c.get("/api/threads/web-b").status_code == 404  # checkpoints and row both gone
        assert [t["thread_id"] for t in c.get("/api/threads").json()] == ["web-a"]
        assert c.delete("/api/threads/web-b").status_code == 404


def test_a_call_refused_before_it_ran_is_streamed_as_a_step(ui_server):
    """[19] point 4: failed calls were invisible while the turn ran, yet showed as failure cards after a reload."""
    ui_server.env.server.push(tool_call("no_such_tool", x=1), answer("That tool does not exist."))
    events = ui_server.stream("/api/threads/web-x/messages", {"text": "use the magic tool"})
    ends = [e for e in events if e["event"] == "tool_end"]
    assert [(e["tool"], e["ok"]) for e in ends] == [("no_such_tool", False)]
    assert "there is no tool named 'no_such_tool'" in ends[0]["preview"]
    assert [e["tool"] for e in events if e["event"] == "tool_start"] == ["no_such_tool"]


def test_a_tainted_thread_is_said_so_and_can_be_trusted_from_the_ui(ui_server):
    """The web UI's way to clear a thread's taint (`jarvis threads trust` had no UI counterpart)."""
    doc = ui_server.env.root / "doc.txt"
    doc.write_text("hello")
    ui_server.env.server.push(tool_call("fs_read_text", path=str(doc)), answer("It says hello."))
    ui_server.stream("/api/threads/web-t/messages", {"text": "read doc.txt"})
    with ui_server.client() as c:
        assert c.get("/api/threads/web-t").json()["tainted"] is True
        assert c.post("/api/threads/web-t/trust").json() == {"thread_id": "web-t", "tainted": False}
        assert c.get("/api/threads/web-t").json()["tainted"] is False
        assert c.post("/api/threads/nope/trust").status_code == 404


def test_the_chat_api_refuses_a_jorbs_own_thread(ui_server):
    """A jorb runs in the LangGraph thread `jorb:<id>`; the chat routes read, deleted and wrote it (a delete erased
    the jorb's checkpoints, a message wrote a chat turn over them). They refuse it and point to the jorb."""
    from tests.test_jorbs import step
    from tests.test_server_jorbs import create, settled

    ui_server.env.server.push(step(reasoning="ask", pause=True, pause_reason="Book the room?"))
    jid = create(ui_server, name="Hotel", plan="Ask before booking")["id"]
    paused = settled(ui_server, jid, status="paused")
    thread = f"jorb:{jid}"
    with ui_server.client() as c:
        calls = [c.get(f"/api/threads/{thread}"), c.delete(f"/api/threads/{thread}"),
                 c.post(f"/api/threads/{thread}/messages", json={"text": "approve it"}),
                 c.get(f"/api/threads/{thread}/pending"), c.get(f"/api/threads/{thread}/events"),
                 c.post(f"/api/threads/{thread}/resume", json={"answers": {}}),
                 c.post(f"/api/threads/{thread}/retry"), c.post(f"/api/threads/{thread}/stop"),
                 c.post(f"/api/threads/{thread}/trust"), c.patch(f"/api/threads/{thread}", json={"title": "x"})]
        for resp in calls:
            assert resp.status_code == 400, (resp.request.method, resp.request.url.path, resp.text)
            assert f"jorb {jid}" in resp.json()["detail"] and "Jorbs view" in resp.json()["detail"]
        assert c.get("/api/threads/web-ordinary").status_code == 404  # a chat id still reaches the route
        # the jorb is untouched: still paused on its question, no model call made for the refused message
        again = c.get(f"/api/jorbs/{jid}").json()
        assert again["status"] == "paused" and again["pending"] == paused["pending"]
        assert len(ui_server.env.server.requests) == 1
    # the Runs view links a run on a jorb's thread to the jorb (runs.js), since the chat view cannot open it
    from datetime import datetime, timezone

    from sqlalchemy.orm import Session

    from orchestrator.storage.engines import jarvis_engine
    from orchestrator.storage.telemetry import RunRow

    with Session(jarvis_engine(ui_server.env.settings)) as s, s.begin():
        s.add(RunRow(id="run-on-a-jorb", thread_id=thread, started_at=datetime.now(timezone.utc), status="ok"))
    with ui_server.client() as c:
        runs = {r["id"]: r for r in c.get("/api/runs").json()}
    assert runs["run-on-a-jorb"]["jorb_id"] == jid


def test_a_model_url_is_shown_without_its_password_or_key(jarvis_env):
    """A base_url can carry a password and a key; the Settings view, the start-up banner and /api/health showed
    them back, in the URL and in the messages that quote it. Every URL those answers hold is masked."""
    url = "http://jarvis:S3CRETPASS@127.0.0.1:9/v1?api_key=QSECRET&subscription-key=KSECRET&v=2"
    jarvis_env.write_config(models={"primary": {"base_url": url}})
    with start_ui(jarvis_env) as server, server.client() as c:
        answers = {path: c.get(path) for path in ("/api/settings/health?sections=false", "/api/settings/health",
                                                  "/api/settings/models", "/api/health", "/api/settings")}
        health = answers["/api/settings/health?sections=false"].json()["models"][0]
        current = answers["/api/settings/models"].json()["current"]
    for path, resp in answers.items():
        assert resp.status_code == 200, path
        for secret in ("S3CRETPASS", "QSECRET", "KSECRET"):
            assert secret not in resp.text, (path, secret)
    shown = "http://jarvis:********@127.0.0.1:9/v1?api_key=********&subscription-key=********&v=2"
    assert health["base_url"] == shown and current["base_url"] == shown
    assert f"Cannot reach the model endpoint at {shown}." in health["message"]  # the sentence's end kept
