"""Helpers shared by the reminder tests: settings with a fast scheduler, agent scripts, waiting."""

from __future__ import annotations

import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FAST = {"tick_s": 0.1, "retry_backoff_s": 0.05, "max_backoff_s": 0.2, "ack_timeout_s": 5, "defer_s": 0.2}

# Seed 001, section 3, character for character: the agent must work unchanged.
SEED_AGENT = '''#!/usr/bin/env python3
import sys, json, uuid, sys

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        continue  # ignore garbage

    if msg.get("method") == "reminder.fire":
        params = msg["params"]
        print(f"🔥  {params['title']} (due {params['due_date']})", file=sys.stderr)
        # ACK back
        send({"jsonrpc": "2.0", "result": "ok", "id": msg.get("id")})
        # Schedule follow‑up in one hour
        send({
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": "reminders.create",
            "params": {
                "title": f"Follow‑up for {params['title']}",
                "when": params["due_date"].replace("Z", ""),
                "rrule": None
            }
        })
'''


def settings_for(jarvis_env: Any, timezone: str = "Europe/Paris", **scheduler: Any):
    jarvis_env.write_config(scheduler={**FAST, **scheduler}, timezone=timezone)
    return jarvis_env.settings


def write_agent(path: Path, body: str, shebang: str | None = None) -> Path:
    """An executable agent script; `body` is Python (a shebang for this interpreter is added unless given)."""
    text = body if body.startswith("#!") else f"#!{shebang or sys.executable}\n{body}"
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05) -> Any:
    """`predicate()`'s first true value; the bound is generous (a loaded machine), it is not a wait."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {getattr(predicate, '__name__', predicate)}")
        time.sleep(interval)


def fire_once(jarvis_env: Any, agent: Path, title: str, timeout: float = 60.0) -> Any:
    """A reminder due now for `agent`, fired by a fast scheduler: the reminder once it is no longer pending."""
    from orchestrator.reminders import ReminderRequest
    from orchestrator.reminders.models import utcnow
    from orchestrator.reminders.scheduler import Scheduler

    sched = Scheduler(settings_for(jarvis_env))
    sched.start()
    try:
        r = sched.store.create(ReminderRequest(title=title, when=utcnow().isoformat(), process_name=str(agent)))
        wait_for(lambda: sched.store.get(r.id).status != "pending", timeout=timeout)
        return sched.store.get(r.id)
    finally:
        sched.stop()


# A recording agent: logs every line it reads to $RECORD (one JSON per line, with its pid), ACKs each fire,
# then sends the requests listed in the fire's description (a JSON list), so tests steer it through reminders.
RECORDING_AGENT = r'''
import json, os, sys
record = open(os.environ.get("AGENT_RECORD") or sys.argv[0] + ".log", "a", encoding="utf-8")
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    record.write(json.dumps({"pid": os.getpid(), "msg": msg}) + "\n"); record.flush()
    if msg.get("method") == "reminder.fire":
        send({"jsonrpc": "2.0", "result": "ok", "id": None})
        for req in json.loads(msg["params"].get("description") or "[]"):
            send(req)
'''


def read_record(path: Path) -> list[dict[str, Any]]:
    import json

    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
