"""Every input bounded before it is parsed ([17]): JSON nested too deep (from the model, from the API), page
ranges far past the document, a model answer that never ends. Each case ends in a clear sentence, never a
traceback, a 500, or a process eating memory."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from orchestrator.core.errors import ModelEndpointError
from orchestrator.channels.inbound import InboundMessage

from tests.conftest import answer
from tests.ui_server import ui_server  # noqa: F401 - fixture


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def test_tool_arguments_nested_too_deep_go_back_to_the_planner(jarvis_env):
    # 100,000 levels made json.loads raise RecursionError (not a ValueError): the turn died with a traceback.
    # 200 levels parse, but nothing needs them and later steps (schema checks, checkpoints) recurse over them.
    jarvis_env.server.push(
        {"tool_calls": [{"name": "fs_list_dir", "arguments": '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}"},
                        {"name": "fs_list_dir", "arguments": '{"path": ' + "[" * 200 + "]" * 200 + "}"}]},
        answer("Sorry, I will send a plain path."),
    )
    out = jarvis_env.graph().invoke({"messages": [("user", "list things")]}, _cfg("deep-args"))
    ai = out["messages"][1]
    assert isinstance(ai, AIMessage) and len(ai.invalid_tool_calls) == 2 and not ai.tool_calls
    errors = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(errors) == 2 and all("nested more than 64 levels deep" in e for e in errors), errors
    assert out["messages"][-1].content == "Sorry, I will send a plain path."


def test_an_answer_of_deeply_nested_brackets_stays_text(jarvis_env):
    # The repairs look for a call written as JSON in the content: json.loads raised RecursionError on this.
    text = "[" * 100_000
    jarvis_env.server.push(answer(text))
    out = jarvis_env.graph().invoke({"messages": [("user", "brackets please")]}, _cfg("deep-text"))
    assert out["messages"][-1].content == text


def test_an_api_body_nested_too_deep_is_refused_saying_so(ui_server):
    ui_server.env.server.push(answer("ok"))
    with ui_server.client() as c:
        deep = b'{"text": "hi", "attachments": [' + b"[" * 500_000 + b"]" * 500_000 + b"]}"
        resp = c.post("/api/threads/web-deep/messages", content=deep, headers={"Content-Type": "application/json"})
        assert resp.status_code == 400 and "nested more than 64 levels" in resp.json()["detail"], resp.text
        # without a content type FastAPI parses JSON too
        resp = c.post("/api/threads/web-deep/messages", content=deep)
        assert resp.status_code == 400 and "nested more than 64 levels" in resp.json()["detail"], resp.text
        # brackets inside a string are text, however many
        assert ui_server.env.server.requests == []  # no turn started
        resp = c.post("/api/threads/web-deep/messages", json={"text": "[" * 5000})
        assert resp.status_code == 200, resp.text


def test_a_page_range_far_past_the_document_is_refused_before_it_is_expanded(sample_pdfs):
    # '1-999999999' was expanded into a set of a billion page numbers in the reader's thread (gigabytes; the
    # thread outlives the time budget) before the range was checked.
    from integrations.base import ToolError
    from integrations.pdf_tools import build_pdf_tools

    tools = {t.name: t for t in build_pdf_tools([sample_pdfs.folder])}
    extract = tools["pdf_extract_text"].func
    for pages, expected in [("1-999999999", "Page 999999999 is out of range"), ("-999999999", "out of range"),
                            ("48-", None), ("3--5", "Page -5 is out of range"), ("5-3", "runs backwards")]:
        if expected is None:
            assert "--- page 50 ---" in extract(path=str(sample_pdfs.fifty), pages=pages)
            continue
        try:
            extract(path=str(sample_pdfs.fifty), pages=pages)
        except ToolError as exc:
            assert expected in str(exc), str(exc)
        else:
            raise AssertionError(f"pages={pages!r} was accepted")


def test_a_model_answer_that_never_ends_is_stopped_at_its_size(jarvis_env):
    # timeout_s bounds each read, not the answer: a server ignoring max_tokens streamed forever into memory.
    jarvis_env.write_config(models={"primary": {"max_answer_kb": 256}})
    jarvis_env.server.push({"content": "la ", "endless": True})
    proc = jarvis_env.cli("chat", "--thread", "endless", "sing")
    assert proc.returncode == 1, proc.stdout[-500:] + proc.stderr
    assert "sent more than 256 KB without finishing" in proc.stderr and "models.primary.max_answer_kb" in proc.stderr
    assert "Traceback" not in proc.stderr
    # one enormous chunk is cut as it arrives, not once whole
    jarvis_env.server.push({"content": "x" * 3_000_000})
    with pytest.raises(ModelEndpointError, match="max_answer_kb"):
        jarvis_env.graph().invoke({"messages": [("user", "one big word")]}, _cfg("huge"))
    # the thread goes on once the model behaves
    jarvis_env.server.push(answer("Done."))
    out = jarvis_env.graph().invoke({"messages": [("user", "again")]}, _cfg("huge"))
    assert out["messages"][-1].content == "Done."


def test_a_model_answer_still_streaming_past_its_time_is_stopped(jarvis_env):
    jarvis_env.write_config(models={"primary": {"answer_timeout_s": 0.5}})
    jarvis_env.server.push({"content": "la ", "endless": True, "token_delay_s": 0.02})
    with pytest.raises(ModelEndpointError, match=r"still answering after 0.5 s \(models.primary.answer_timeout_s\)"):
        jarvis_env.graph().invoke({"messages": [("user", "sing slowly")]}, _cfg("slow"))


# -- MCP servers over stdio ------------------------------------------------------------------------

FLOOD = "tests.fakes.mcp_flood_server"


def _mcp_executor(jarvis_env, **mcp):
    from orchestrator.app import App
    from orchestrator.tools.executor import ToolExecutor

    jarvis_env.write_config(mcp={"dir": str(jarvis_env.path / "mcp"), "restart_backoff_s": 0.2, **mcp})
    settings = jarvis_env.settings
    catalog = App(settings).catalog
    manager = next(p for p in catalog.providers if p.name == "mcp").manager
    return ToolExecutor(settings, catalog), manager


def _mcp_call(executor, name, args=None):
    import json

    from orchestrator.tools.executor import CallContext

    ctx = CallContext(thread_id="t-bounds", key=f"k-{name}-{json.dumps(args, sort_keys=True)}")
    return executor.execute(name, args or {}, ctx, confirm=lambda request: "approve")


@pytest.fixture
def _stop_mcp():
    yield
    from tests.mcp_helpers import shutdown_mcp

    shutdown_mcp()


def test_an_mcp_line_that_never_ends_is_not_kept(jarvis_env, _stop_mcp):
    # The SDK's reader joined stdout chunks until a newline: a line without end grew Jarvis's memory (and cost
    # quadratic time) until the call's timeout, and the server went on writing.
    from tests.mcp_helpers import wait_for, write_server

    write_server(jarvis_env.path / "mcp", "flood", FLOOD, timeout_s=20)
    executor, manager = _mcp_executor(jarvis_env, max_message_mb=1)
    out = _mcp_call(executor, "endless_line")
    assert not out.ok and "a line longer than 1 MB without an end (mcp.max_message_mb)" in out.content, out.content
    wait_for(lambda: manager.state_of("flood").value == "ready")  # restarted, and usable again
    assert _mcp_call(executor, "echo", {"text": "calm"}).content == "calm"


def test_an_mcp_servers_stderr_is_kept_up_to_its_limit(jarvis_env, _stop_mcp):
    # Stderr went straight to the log file: a server printing in a loop filled the disk.
    from tests.mcp_helpers import write_server

    write_server(jarvis_env.path / "mcp", "flood", FLOOD, timeout_s=20)
    executor, manager = _mcp_executor(jarvis_env, max_log_mb=1)
    assert _mcp_call(executor, "stderr_flood", {"mb": 3}).content == "flooded"
    log = jarvis_env.data / "mcp" / "flood.log"
    from tests.mcp_helpers import wait_for

    wait_for(lambda: "(mcp.max_log_mb)" in log.read_text(encoding="utf-8"))
    assert log.stat().st_size < 1024 * 1024 + 4096
    assert _mcp_call(executor, "echo", {"text": "still here"}).content == "still here"  # never blocked on stderr


def test_an_mcp_servers_whole_tool_list_is_bounded(jarvis_env, _stop_mcp):
    """Each message of a server was bounded, its tool list was not: page after page of tools under the message limit
    kept about 256 MB of Jarvis's memory each. Past MAX_TOOLS (or MAX_TOOL_LIST_CHARS) the server is not loaded,
    and its status says why."""
    from orchestrator.mcp.server_state import MAX_TOOLS
    from tests.mcp_helpers import wait_for, write_server

    write_server(jarvis_env.path / "mcp", "many", FLOOD, "--tools", str(MAX_TOOLS + 10), timeout_s=20)
    _executor, manager = _mcp_executor(jarvis_env)
    manager.ensure_started()
    wait_for(lambda: "tool list is over" in (next(s for s in manager.status() if s.name == "many").last_error or ""),
             timeout=60)
    assert manager.state_of("many").value != "ready"


def test_an_inbound_message_is_kept_up_to_its_limit(jarvis_env):
    # POST /api/inbound refused a text over 100,000 characters, but the pollers (an email's body: Gmail allows tens
    # of MB) handed theirs to JorbService.inbound whole: all of it went into the database and the jorb's prompt.
    from tests.app_helpers import jorb_service

    svc = jorb_service(jarvis_env.settings)
    svc.inbound(InboundMessage("email", "stranger@example.com", "spam " * 1_000_000))  # 5 MB
    (row,) = svc.store.messages()
    assert len(row.text) < 100_200 and row.text.endswith("more characters, not kept]"), len(row.text)
    assert "4900000 more characters" in row.text


def test_a_folder_of_many_files_is_listed_up_to_a_limit(tmp_path):
    # fs_list_dir read, stat'ed and sent every entry of a folder, however many.
    from integrations.fs_tools import build_fs_tools

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(1500):
        (folder / f"f{i:05d}.txt").write_text("x")
    tools = {t.name: t for t in build_fs_tools([tmp_path])}  # the default limit: 1000
    listing = tools["fs_list_dir"].invoke({"path": str(folder)})
    assert [e["name"] for e in listing[:1000]] == [f"f{i:05d}.txt" for i in range(1000)]  # the first by name
    assert listing[1000] == {"note": "500 more entries not listed (the first 1000 by name are above); use "
                                     "fs_search with a name_pattern to find one."}
    assert len(listing) == 1001


def test_a_search_stops_when_its_budget_is_spent(tmp_path):
    # fs_search walked the whole tree until it had enough hits: a name that is nowhere walked everything.
    from integrations.fs_tools import build_fs_tools

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "notes.txt").write_text("hello")
    spent = {t.name: t for t in build_fs_tools([tmp_path], search_budget_s=0)}
    (note,) = spent["fs_search"].invoke({"folder": str(tmp_path), "name_pattern": "*.pdf"})
    assert note["note"].startswith("The search stopped after 0 s") and "smaller folder" in note["note"]
    tools = {t.name: t for t in build_fs_tools([tmp_path])}
    assert tools["fs_search"].invoke({"folder": str(tmp_path), "name_pattern": "*.txt"}) == [
        {"path": str(tmp_path / "a" / "notes.txt")}]


# -- files given to the CLI, and MCP servers' settings -------------------------------------------------

def test_files_nested_too_deep_or_too_large_are_refused_in_a_sentence(jarvis_env, tmp_path):
    # Each was a RecursionError traceback (json and tomllib recurse per level); the servers' JSON was read whole.
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = jarvis_env.cli("mcp", "import", str(deep_json))
    assert proc.returncode == 1 and "not a list of MCP servers: it is nested more than 64 levels deep" in proc.stderr
    assert "Traceback" not in proc.stderr
    huge = tmp_path / "huge.json"
    huge.write_text('{"mcpServers": {}, "pad": "' + "x" * 2_000_000 + '"}')
    proc = jarvis_env.cli("mcp", "import", str(huge))
    assert proc.returncode == 1 and "larger than 1 MB, so not a list of MCP servers" in proc.stderr, proc.stderr

    proc = jarvis_env.cli("memory", "import", str(deep_json))
    assert proc.returncode == 1 and "is not a memory export (it is nested more than 64 levels deep)" in proc.stderr, \
        proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr

    from orchestrator.mcp.config import load_server_file

    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text('command = "x"\nargs = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match="nests arrays or tables too deep"):
        load_server_file(deep_toml)


# -- JSON from models and programs, parsed by the jorbs, missions, switchboard, memory, agents -------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_model_replies_nested_too_deep_are_refused_not_tracebacks():
    # Each parser caught json.JSONDecodeError only; 100,000 levels raised RecursionError through it.
    from jarb_core.spec import SpecError, parse_spec
    from orchestrator.jorbs.mission import parse_reply
    from orchestrator.jorbs.schema import parse_step
    from orchestrator.memory.extraction import parse_candidates
    from orchestrator.tools.index import found_names

    with pytest.raises(ValueError, match="nested more than 64 levels deep"):
        parse_step('{"reasoning": ' + DEEP + "}")
    with pytest.raises(ValueError, match=r"not valid JSON \(it is nested more than 64 levels deep\)"):
        parse_reply('{"jobs": ' + DEEP + "}")
    assert parse_candidates(DEEP) == []
    assert found_names(DEEP) == []
    with pytest.raises(SpecError, match="nested too deep"):
        parse_spec(DEEP)


def test_the_switchboard_reads_a_reply_nested_too_deep_as_unreadable(llm_server):
    from langchain_openai import ChatOpenAI

    from orchestrator.channels.switchboard import judge

    llm_server.push({"content": '{"jorb_id": ' + DEEP + "}"})
    llm = ChatOpenAI(base_url=llm_server.base_url, api_key="test", model="scripted-model", max_retries=0, timeout=20)
    decision = judge(llm, "email", "a@example.com", "hello", [])
    assert decision.jorb_id is None and "could not be read (TooDeep)" in decision.reasoning


DEEP_AGENT = r'''
import sys
out = sys.stdout.buffer
for line in sys.stdin:
    out.write(b"[" * 100000 + b"]" * 100000 + b"\n")
    out.write(b'{"jsonrpc": "2.0", "result": "ok", "id": null}\n')
    out.flush()
'''


def test_an_agent_line_nested_too_deep_is_skipped(jarvis_env, tmp_path):
    # The agent's reader thread died on the RecursionError: the ACK after it was never read, the reminder failed.
    from orchestrator.reminders import SENT
    from tests.reminder_helpers import fire_once, write_agent

    fired = fire_once(jarvis_env, write_agent(tmp_path / "deep.py", DEEP_AGENT), "deep")
    assert fired.status == SENT, fired


def test_a_reminder_reaches_its_agent_when_the_process_holds_descriptors_past_1024(jarvis_env, tmp_path,
                                                                                    descriptors_past_1024):
    # select() refused the agent's stdin numbered 1,024 or more ("filedescriptor out of range"): found in CI,
    # where a worker held that many files, every reminder to an agent failed after 5 attempts.
    from orchestrator.reminders import SENT
    from tests.reminder_helpers import SEED_AGENT, fire_once, write_agent

    fired = fire_once(jarvis_env, write_agent(tmp_path / "seed.py", SEED_AGENT), "late")
    assert fired.status == SENT, fired


def test_a_text_file_too_large_for_the_index_is_not_read_to_hash_it(jarvis_env, tmp_path):
    # `jarvis docs add` hashed a text file by reading all of it into memory before checking its size.
    import tracemalloc

    from orchestrator.docs_index import DocsIndex
    from orchestrator.docs_index.files import index_file

    big = tmp_path / "huge.txt"
    with big.open("wb") as fh:  # sparse: 200 MB on paper, nothing on disk
        fh.truncate(200_000_000)
    index = DocsIndex(jarvis_env.settings)
    tracemalloc.start()
    try:
        with pytest.raises(Exception, match="too large for the index"):
            index_file(index, big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, peak


def test_a_youtube_answer_larger_than_its_limit_is_not_read(llm_server):
    # requests read each answer whole, however large; only the transcript's text was cut afterwards.
    import responses

    from integrations.base import ToolError
    from integrations.yt_tools import build_yt_tools
    from tests.test_yt_tools import PLAYER, TIMEDTEXT, VIDEO, WATCH, asset

    entry = '<text start="1" dur="1">la la la la la la la la la la la la la la la la la la la la</text>\n'
    huge = ('<?xml version="1.0" encoding="utf-8" ?>\n<transcript>\n' + entry * 200_000 + "</transcript>\n").encode()
    tools = {t.name: t for t in build_yt_tools()}  # the default limit: 16 MB
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post(PLAYER, body=asset("youtube.innertube.json.static"), content_type="application/json")
        mock.get(WATCH, body=asset("youtube.html.static"))  # 1 MB: under the limit
        mock.get(TIMEDTEXT, body=huge)  # 17 MB
        with pytest.raises(ToolError, match=f"YouTube's answer for video {VIDEO} was larger than 16 MB"):
            tools["yt_get_transcript"].func(VIDEO)


def test_a_google_answer_larger_than_its_limit_is_not_read(google_server):
    # AuthorizedSession (requests) read each answer whole: a message of tens of MB was held, then cut in the prompt.
    from integrations.base import ToolError
    from integrations.gmail_tools import build_gmail_tools
    from tests.test_google_tools import Keeper, api

    keeper = Keeper(google_server.authorized_user_info())
    gmail = {t.name: t for t in build_gmail_tools(api(google_server, keeper, max_response_bytes=1_000_000))}
    small = google_server.add_message(sender="a@example.com", subject="short", body="hello")
    big = google_server.add_message(sender="b@example.com", subject="long", body="words " * 400_000)  # 2.4 MB
    assert "hello" in gmail["gmail_get_thread"].invoke({"thread_id": small["threadId"]})["messages"][0]["body"]
    with pytest.raises(ToolError, match=r"Gmail's answer to GET /gmail/v1/users/me/threads/\S+ was larger than 1 MB"):
        gmail["gmail_get_thread"].func(big["threadId"])


def test_a_huge_answer_is_rendered_as_markdown_only_up_to_a_limit():
    # Every opening of a thread rendered every answer as Markdown: a table of 100,000 rows (3 MB) took 9 s each time.
    from orchestrator.server.markdown import MAX_MARKDOWN_CHARS, render_markdown

    row = "|x|<b>y</b>|\n"
    html = render_markdown("|a|b|\n|-|-|\n" + row * 100_000)
    rows = html.count("<tr>")
    assert 0 < rows <= MAX_MARKDOWN_CHARS // len(row) + 2, rows  # the first part is a table
    assert html.endswith("</pre>") and "|x|&lt;b&gt;y&lt;/b&gt;|" in html  # the rest is text, escaped
    assert "<b>" not in html
    assert render_markdown("**short**") == "<p><strong>short</strong></p>\n"


STDERR_FLOOD_AGENT = r'''
import sys
sys.stderr.buffer.write(b"x" * 60_000_000 + b"\n")
sys.stderr.flush()
for line in sys.stdin:
    sys.stdout.write('{"jsonrpc": "2.0", "result": "ok", "id": null}\n')
    sys.stdout.flush()
'''


def test_an_agents_stderr_line_is_read_in_bounded_pieces(jarvis_env, tmp_path):
    # stdout was read by lines of at most 1 MB; stderr by whole lines, however long (60 MB held at once here).
    import tracemalloc

    from orchestrator.reminders import SENT
    from tests.reminder_helpers import fire_once, write_agent

    agent = write_agent(tmp_path / "noisy.py", STDERR_FLOOD_AGENT)
    tracemalloc.start()
    try:
        fired = fire_once(jarvis_env, agent, "noisy")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fired.status == SENT, fired
    assert peak < 30_000_000, peak


def test_a_model_list_too_large_is_refused_not_read_whole(jarvis_env):
    # `jarvis model check` and the local-server probes each read GET /models whole, with their own HTTP code;
    # now one bounded read (llm/model_list.get_small_json) serves them and the window probe.
    from orchestrator.llm.client import check_endpoint
    from orchestrator.llm.discovery import probe

    jarvis_env.server.brain.model_fields = {"pad": "x" * (2 << 20)}
    ok, message = check_endpoint(jarvis_env.settings)
    assert not ok and "more than 1024 KB" in message and "not a model list" in message, message
    assert probe("big", jarvis_env.server.base_url) is None
    jarvis_env.server.brain.model_fields = {}
    ok, message = check_endpoint(jarvis_env.settings)
    assert ok, message
    assert probe("small", jarvis_env.server.base_url).models == ["scripted-model"]


def test_a_tools_huge_error_is_cut_like_its_results(tmp_path):
    """A result is cut at MAX_RESULT_CHARS; an error was not: an MCP server's 3 MB isError message went whole into
    the thread's checkpoint and prompt, and that turn was too long for the model."""
    from pydantic import BaseModel

    from integrations.base import ToolError, make_tool
    from orchestrator.core.config import settings_from_dict
    from orchestrator.tools.catalog import StaticProvider, ToolCatalog
    from orchestrator.tools.executor import MAX_RESULT_CHARS, CallContext, ToolExecutor

    class Args(BaseModel):
        x: str

    def shout(x: str) -> str:
        """Fail loudly."""
        raise ToolError("no! " * 750_000)

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)
    executor = ToolExecutor(settings, ToolCatalog([StaticProvider("t", [make_tool(shout, args_schema=Args)])]))
    outcome = executor.execute("shout", {"x": "a"}, CallContext(thread_id="t", key="k"), lambda r: "approve")
    assert not outcome.ok and len(outcome.content) < MAX_RESULT_CHARS + 100 and "more characters cut" in outcome.content


def test_an_mcp_answer_over_http_is_bounded_like_one_over_stdio():
    """The SDK read a streamable-HTTP answer whole and an SSE event of any size: a remote server could fill Jarvis's
    memory with one answer. A run without a line break past mcp.max_message_mb now ends the read; many lines, as
    in a long SSE stream, do not."""
    import asyncio

    import httpx

    from orchestrator.mcp.http_bounds import MessageTooLong, _BoundedTransport, bounded_client_factory

    class Streamed(httpx.AsyncByteStream):  # as a server sends it: in pieces, not read yet
        def __init__(self, body: bytes):
            self.body = body

        async def __aiter__(self):
            for at in range(0, len(self.body), 65536):
                yield self.body[at:at + 65536]

    async def read(body: bytes) -> int:
        transport = _BoundedTransport(httpx.MockTransport(lambda request: httpx.Response(200, stream=Streamed(body))),
                                      1024 * 1024)
        async with httpx.AsyncClient(transport=transport) as client:
            return len((await client.get("http://mcp.test/")).content)

    assert asyncio.run(read(b"x" * 1000 + b"\n")) == 1001
    assert asyncio.run(read((b"data: " + b"y" * 1000 + b"\n\n") * 3000)) > 3_000_000  # a long stream of events
    with pytest.raises(MessageTooLong, match="longer than 1 MB"):
        asyncio.run(read(b"z" * (3 * 1024 * 1024)))
    client = bounded_client_factory(1024)(headers={"x": "1"})
    assert isinstance(client._transport, _BoundedTransport) and client.headers["x"] == "1"  # what the SDK is given
    asyncio.run(client.aclose())
