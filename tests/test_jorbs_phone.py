"""Seed 000's thermostat example as a jorb: its scripts drive the (fake) Android phone through
jarvis.android.task_do / task_get, poll, verify, and finish with the result ([6] with [5])."""

from __future__ import annotations

import json
import re

from tests.test_android_tasks import PHONE_MARK, _phone_setup, _stop_servers  # noqa: F401 - fixture
from tests.test_jorbs import step

GOAL = "Open Google Home and set the Nest thermostat to heat 65-69°F"


def jorb_policy(request: dict) -> dict:
    """Answers as seed 000's jorb LLM: start the phone task, poll it, verify, finish."""
    event = request["messages"][-1]["content"]
    if '"created"' in event:
        return step(reasoning="Start the phone automation", script=f"jarvis.android.task_do({GOAL!r})")
    task = re.search(r'"task_id": "([^"]+)"', event)
    if '"status": "running"' in event and task:
        poll = (f"import time\nfor _ in range(120):\n    r = jarvis.android.task_get({task.group(1)!r})\n"
                f"    if r['status'] != 'running':\n        break\n    time.sleep(0.5)\nr")
        return step(reasoning="Checking phone task status", script=poll)
    if '"status": "done"' in event:
        result = re.search(r'"result": "([^"]+)"', event).group(1)
        return step(reasoning="Verified", done=True, result={"thermostat": "65-69°F", "phone": result})
    return step(reasoning="Something went wrong", pause=True, pause_reason=f"unexpected: {event[:200]}")


def test_thermostat_jorb_against_the_fake_phone(jarvis_env, tmp_path):
    settings = _phone_setup(jarvis_env, tmp_path)
    jarvis_env.server.add_rule(lambda req: PHONE_MARK not in json.dumps(req["messages"][:1]), jorb_policy)
    from tests.app_helpers import jorb_service

    view = jorb_service(settings).create("Set thermostat 65-69", "Use the Android phone to set the Nest thermostat to "
                                        "heat range 65-69°F. Verify the change took effect.",
                                        autonomy={"phone_automation": "auto"})
    assert view.row.status == "done", (view.row.pause_reason, view.state.script_results if view.state else None)
    assert view.row.result["phone"] == "Thermostat set to heat 65°F, cool 69°F (it was 66-72°F)."
    started, polled = view.state.script_results[:2]
    assert started.result["status"] == "running" and started.result["task_id"].startswith("task-")
    assert polled.result["status"] == "done"
    phone = json.loads((tmp_path / "phone.json").read_text())
    assert (phone["heat"], phone["cool"]) == (65, 69)
