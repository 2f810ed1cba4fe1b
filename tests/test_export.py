"""`jarvis export` ([34]): threads, memory, reminders and jorbs as JSON another tool can read (memory.json as
`jarvis memory import` takes it) and as Markdown a person can read, with no message's text read as the page's."""

from __future__ import annotations

import json

from tests.backup_helpers import other_machine


def test_export_writes_every_part_as_json_and_markdown_and_memory_imports_elsewhere(jarvis_env, tmp_path):
    from orchestrator.memory import Provenance, SourceKind
    from orchestrator.reminders import ReminderRequest, ReminderStore

    srv = jarvis_env.server
    srv.push({"content": "Noted. <script>alert(1)</script>\n# not a heading"},
             {"content": json.dumps({"reasoning": "ask", "script": "jarvis.messages.send('local', 'bob', 'free?')",
                                     "await_reply": True})})
    app = jarvis_env.app()
    from orchestrator.chat.turns import thread_config

    app.graph.invoke({"messages": [("user", "my dentist is Dr Lee")]}, thread_config("dentist"))
    app.memory.remember("Dr Lee is my dentist", Provenance(SourceKind.USER, True, "thread dentist"), about="Dr Lee",
                        kind="person")
    ReminderStore(jarvis_env.settings).create(ReminderRequest(title="call Dr Lee", when="2030-01-01T10:00",
                                                              thread_id="dentist"))
    jorb = app.jorbs.create("Ask Bob", "Ask Bob", autonomy={"message_send": "auto"})
    out = jarvis_env.cli("export", "--to", str(tmp_path / "export"), check=True)
    assert "exported" in out.stdout and "1 memory facts" in out.stdout, out.stdout
    folder = tmp_path / "export"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{n}.{e}" for n in ("threads", "memory", "reminders", "jorbs") for e in ("json", "md"))

    threads = json.loads((folder / "threads.json").read_text())["threads"]
    (dentist,) = [t for t in threads if t["thread_id"] == "dentist"]
    assert [m["type"] for m in dentist["messages"]] == ["human", "ai"]
    assert dentist["messages"][1]["content"].startswith("Noted. <script>")
    markdown = (folder / "threads.md").read_text()
    assert "> Noted. &lt;script>alert(1)&lt;/script>" in markdown and "> # not a heading" in markdown
    assert "<script>" not in markdown
    (reminder,) = json.loads((folder / "reminders.json").read_text())["reminders"]
    assert reminder["title"] == "call Dr Lee" and "## call Dr Lee" in (folder / "reminders.md").read_text()
    (exported_jorb,) = json.loads((folder / "jorbs.json").read_text())["jorbs"]
    assert exported_jorb["id"] == jorb.row.id and exported_jorb["history"][0]["text"] == "free?"
    assert "> free?" in (folder / "jorbs.md").read_text()
    assert "- Dr Lee (person): Dr Lee is my dentist" in (folder / "memory.md").read_text()

    new = other_machine(jarvis_env, tmp_path / "new")
    imported = new.cli("memory", "import", str(folder / "memory.json"), check=True)
    assert imported.returncode == 0
    facts = new.cli_json("memory", "list", "--facts", "--json")
    assert [f["text"] for f in facts] == ["Dr Lee is my dentist"] and facts[0]["trusted"] is False


def test_exported_reminders_import_elsewhere_as_untrusted_and_only_into_a_chat(jarvis_env, tmp_path):
    """A file can say anything: an imported reminder is marked as written outside the conversation (it taints the
    thread it is posted in), and one that would run an agent program or POST to a webhook is not imported."""
    from orchestrator.reminders import ReminderRequest, ReminderStore
    from orchestrator.reminders.models import written_outside_the_conversation

    store = ReminderStore(jarvis_env.settings)
    store.create(ReminderRequest(title="call Dr Lee", when="2030-01-01T10:00", thread_id="dentist",
                                 rrule="FREQ=YEARLY"))
    store.create(ReminderRequest(title="ping", when="2030-01-01T10:00", webhook_url="http://127.0.0.1:9/hook"))
    jarvis_env.cli("export", "--to", str(tmp_path / "export"), check=True)

    new = other_machine(jarvis_env, tmp_path / "new")
    out = new.cli("reminders", "import", str(tmp_path / "export" / "reminders.json"), check=True)
    assert "imported 1 reminder(s)" in out.stdout and "not imported: 'ping'" in out.stdout, out.stdout
    (imported,) = ReminderStore(new.settings).list()
    assert imported.title == "call Dr Lee" and imported.thread_id == "dentist" and imported.rrule == "FREQ=YEARLY"
    assert imported.due_date.isoformat().startswith("2030-01-01")
    assert written_outside_the_conversation(imported.created_by)
    bad = new.cli("reminders", "import", str(tmp_path / "export" / "threads.json"))
    assert bad.returncode == 1 and "not a reminders file" in bad.stderr
