"""The real `jarvis reminders ...` and `jarvis scheduler` commands, in subprocesses."""

from __future__ import annotations

import json
from datetime import timedelta

from orchestrator.reminders import MISSED, PENDING, SENT, SKIPPED, ReminderRequest, ReminderStore
from orchestrator.reminders.models import iso_utc, utcnow
from tests.fakes.http_sink import HttpSink
from tests.reminder_helpers import SEED_AGENT, settings_for, write_agent


def test_seed_agent_end_to_end_through_the_cli(jarvis_env):
    settings_for(jarvis_env, max_creates_per_hour=2)
    (jarvis_env.path / "agents").mkdir()
    write_agent(jarvis_env.path / "agents" / "echo_agent.py", SEED_AGENT)
    title = "Ping agent ✈ naïve"
    created = jarvis_env.cli_json("reminders", "create", "--title", title, "--when", iso_utc(utcnow()),
                                  "--process-name", "agents/echo_agent.py", "--priority", "high", "--json")
    assert created["process_name"] == str(jarvis_env.path / "agents" / "echo_agent.py")

    store = ReminderStore(jarvis_env.settings)

    def settled(log: str) -> bool:  # both follow-ups fired, and the agent's third was refused
        rows = store.list()
        return "rate limit" in log and len(rows) == 3 and all(r.status == SENT for r in rows)

    run = jarvis_env.cli_until(settled, "scheduler")
    assert run.returncode == 0 and "scheduler stopped" in run.stderr
    assert "scheduler stopped" in jarvis_env.cli("scheduler", "--for", "0", check=True).stderr, "--for ends it alone"
    assert f"🔥  {title}" in run.stderr, "the agent's stderr is drained into the log"
    assert "rate limit" in run.stderr

    rows = {r["title"]: r for r in jarvis_env.cli_here_json("reminders", "list", "--json")}
    first = rows[title]
    assert first["status"] == SENT and first["attempts"] == 1 and first["priority"] == "high"
    follow = rows[f"Follow‑up for {title}"]
    assert follow["status"] == SENT and follow["process_name"] == first["process_name"]
    assert follow["due_date"] == first["due_date"]
    assert f"Follow‑up for Follow‑up for {title}" in rows
    assert len(rows) == 3, "the third follow-up was refused: 2 an hour for this agent"
    expected = {"id", "series_id", "title", "description", "due_date", "fire_at", "rrule", "rrule_tz", "rrule_start",
                "due_local", "project_id", "priority", "status", "process_name", "webhook_url", "jorb_id", "thread_id",
                "attempts", "last_error", "missed_policy", "missed_at", "created_at", "created_by", "updated_at",
                "sent_at", "target_kind", "target"}
    assert set(first) == expected


def test_missed_reminders_after_downtime_with_the_real_scheduler(jarvis_env):
    settings = settings_for(jarvis_env, missed_grace_s=1)
    store = ReminderStore(settings)
    graph = jarvis_env.graph()
    thread = {"configurable": {"thread_id": "reminders"}}
    with HttpSink() as sink:
        # Made a minute ago, due half a second later, and Jarvis was not running: all past their grace period.
        made = utcnow() - timedelta(seconds=60)
        soon = iso_utc(made + timedelta(seconds=0.5))
        hook = sink.base_url + "/hook"

        def create(**fields):
            return store.create(ReminderRequest(**fields), now=made)

        daily = create(title="daily", when=soon, rrule="FREQ=DAILY", webhook_url=hook)
        once = create(title="once", when=soon, webhook_url=hook)
        skip = create(title="skip me", when=soon, webhook_url=hook, missed_policy="skip")
        ask = create(title="ask me", when=soon, thread_id="reminders", missed_policy="ask")
        future = create(title="later", when="2099-01-01T00:00:00Z", webhook_url=hook)

        def settled(_log: str) -> bool:  # each due one is done with, and the ask one told the chat
            told = graph.get_state(thread).values.get("messages", [])
            return (all(store.get(r.id).status != PENDING for r in (daily, once, skip, ask))
                    and any(f"jarvis reminders fire {ask.id}" in m.content for m in told))

        assert jarvis_env.cli_until(settled, "scheduler").returncode == 0
        titles = sorted(p["body"]["title"] for p in sink.posts("/hook"))
    assert titles == ["daily", "once"], "catch-up fires each missed reminder once; skip does not fire"
    assert store.get(daily.id).status == SENT and store.get(daily.id).missed_at is not None
    [nxt] = [r for r in store.list(status=PENDING) if r.title == "daily"]
    assert timedelta(hours=23) < nxt.due_date - utcnow() <= timedelta(days=1)
    assert store.get(once.id).status == SENT
    assert store.get(skip.id).status == SKIPPED
    assert store.get(ask.id).status == MISSED
    assert store.get(future.id).status == PENDING
    # The ask policy told the user in the chat thread how to decide.
    messages = graph.get_state(thread).values["messages"]
    assert any(f"jarvis reminders fire {ask.id}" in m.content for m in messages)


def _cli(jarvis_env, *args: str):
    """The same Typer app in-process (fast); the subprocess tests above run the real binary."""
    from typer.testing import CliRunner

    from orchestrator.cli import app

    return CliRunner().invoke(app, ["--config", str(jarvis_env.config_path), *args])


def test_cli_create_list_cancel_and_errors(jarvis_env):
    settings_for(jarvis_env)
    made = _cli(jarvis_env, "reminders", "create", "--title", "Water the plants 🌱", "--when", "2030-03-29T09:00",
                "--rrule", "FREQ=DAILY", "--description", "the balcony ones", "--json")
    assert made.exit_code == 0, made.output
    r = json.loads(made.stdout)
    assert r["thread_id"] == "reminders" and r["target_kind"] == "chat" and r["status"] == PENDING
    assert r["due_date"] == "2030-03-29T08:00:00Z" and r["rrule_tz"] == "Europe/Paris"
    listed = _cli(jarvis_env, "reminders", "list")
    assert r["id"] in listed.stdout and "pending" in listed.stdout and "2030-03-29 09:00 CET" in listed.stdout
    out = _cli(jarvis_env, "reminders", "cancel", r["id"])
    assert out.exit_code == 0 and "cancelled" in out.stdout
    again = _cli(jarvis_env, "reminders", "cancel", r["id"])
    assert again.exit_code == 1 and "already cancelled" in again.stderr
    bad = _cli(jarvis_env, "reminders", "create", "--title", "x", "--when", "soonish")
    assert bad.exit_code == 2 and "not a time Jarvis can read" in bad.stderr and "tomorrow at 9am" in bad.stderr
    both = _cli(jarvis_env, "reminders", "create", "--title", "x", "--when", "2030-01-01T00:00Z",
                "--webhook-url", "http://127.0.0.1:9/h", "--jorb", "j1")
    assert both.exit_code == 2 and "give one target" in both.stderr
    missing = _cli(jarvis_env, "reminders", "fire", "rem_nope")
    assert missing.exit_code == 1 and "no reminder 'rem_nope'" in missing.stderr
    status = _cli(jarvis_env, "reminders", "list", "--status", "sleeping")
    assert status.exit_code == 2 and "not one of" in status.stderr
    rows = json.loads(_cli(jarvis_env, "reminders", "list", "--json").stdout)
    assert [x["status"] for x in rows] == ["cancelled"]
