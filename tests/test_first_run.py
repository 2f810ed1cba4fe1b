"""First run on a machine with no model server (issue [18] item 1): `jarvis run` finds a local server that answers,
else uses the built-in model, says so, and the built-in model really calls tools in the UI."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest

from orchestrator.llm.discovery import choose_model, find_local_servers, settle_model
from orchestrator.reminders.recurrence import user_zone
from orchestrator.reminders.store import ReminderStore
from tests.conftest import JARVIS_BIN
from tests.fakes.llm_server import FakeLLMServer
from tests.real_model_fuzz import require_default_builtin
from tests.test_ui_browser import browser  # noqa: F401 - the module's real Chromium, a fixture

CLOSED = "http://127.0.0.1:9/v1"  # the discard port: nothing answers


def test_a_local_server_that_answers_is_used_when_the_configured_one_does_not(jarvis_env):
    jarvis_env.server.brain.model_list = ["llama3.2:latest", "qwen2.5:7b"]
    found = find_local_servers([("Nothing", CLOSED), ("Ollama", jarvis_env.server.base_url)])
    assert [(f.name, f.models) for f in found] == [("Ollama", ["llama3.2:latest", "qwen2.5:7b"])]

    jarvis_env.write_config(models={"primary": {"base_url": CLOSED, "model": "local/llama3"}})
    settings = jarvis_env.settings
    said = choose_model(settings, False, servers=[("Jan", CLOSED), ("Ollama", jarvis_env.server.base_url)])
    assert said and "using Ollama at" in said and "'llama3.2:latest'" in said and CLOSED in said
    assert settings.models.primary.base_url == jarvis_env.server.base_url
    assert settings.models.primary.model == "llama3.2:latest"


def test_nothing_changes_when_the_configured_model_answers_or_fallback_is_off(jarvis_env):
    settings = jarvis_env.settings
    before = settings.models.primary.model_copy()
    assert choose_model(settings, True, servers=[("Ollama", jarvis_env.server.base_url)]) is None
    jarvis_env.write_config(models={"primary": {"base_url": CLOSED}, "fallback": False})
    off = jarvis_env.settings
    assert choose_model(off, False, servers=[("Ollama", jarvis_env.server.base_url)]) is None
    assert off.models.primary.base_url == CLOSED and settings.models.primary == before


def test_a_configured_server_that_answers_without_the_model_is_not_replaced(jarvis_env):
    """A wrong model name is the user's to fix (check_endpoint names what the server lists): `jarvis run` and the
    CLI do not move to another server or the built-in model behind their back."""
    with FakeLLMServer() as other:
        jarvis_env.server.brain.model_list = ["qwen2.5:7b", "llama3.2:latest"]
        jarvis_env.server.brain.model_fields = {"owned_by": "library"}
        settings = jarvis_env.settings
        before = settings.models.primary.model_copy()
        status = settle_model(settings, servers=[("Ollama", other.base_url)])
    assert not status.ok and status.switched is None and settings.models.primary == before
    assert "has no model named 'scripted-model'" in status.message and "qwen2.5:7b" in status.message


def test_the_built_in_model_is_used_when_nothing_answers(jarvis_env):
    default = require_default_builtin()
    jarvis_env.write_config(models={"primary": {"base_url": CLOSED}})
    settings = jarvis_env.settings
    said = choose_model(settings, False, servers=[("Jan", CLOSED)])
    assert said and default.notice in said and CLOSED in said
    primary = settings.models.primary
    assert primary.provider == "embedded" and primary.notice == default.notice and primary.temperature == 0
    assert primary.model == default.model == "qwen2.5-coder-1.5b" and primary.gguf == default.gguf
    assert settings.planner.max_bound_tools <= 4 and not settings.jarb.enabled


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)  # a hang guard; the page's waits below come first
def test_make_run_with_no_model_server_is_a_working_assistant(jarvis_env, browser):
    """The issue's "done when": `jarvis run` with nothing answering, a real browser, the default built-in model;
    "list the files in my folder" answers through a real call, "write hello to note.txt" reaches a confirmation,
    and "remind me tomorrow at 9am..." asks about that time and, approved, sets the reminder at 09:00 tomorrow."""
    default = require_default_builtin()
    (jarvis_env.root / "notes.txt").write_text("Buy bread.\n")
    jarvis_env.write_config(models={"primary": {"base_url": CLOSED, "model": "local/llama3", "timeout_s": 600}})
    proc = subprocess.Popen([str(JARVIS_BIN), "run", "--port", "0", "--no-open", "--no-services"], env=jarvis_env.env(),
                            cwd=str(jarvis_env.path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()
        match = re.search(r"Jarvis is running at (\S+)", line)
        assert match, line + (proc.stderr.read() if proc.poll() is not None else "")
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        page = context.new_page()
        page.set_default_timeout(600_000)  # a hang guard, not a timing: a turn of the built-in model on a busy machine
        page.goto(match.group(1))
        page.locator("#model-state", has_text="built-in demo model").wait_for()
        page.locator("#banner", has_text=default.notice).wait_for()
        page.get_by_role("textbox", name="Message").fill("List the files in my folder.")
        page.get_by_role("button", name="Send").click()
        page.locator('.step[data-tool="fs_list_dir"]').first.wait_for()
        page.locator(".msg.assistant:not(.streaming)").last.wait_for()
        page.screenshot(path=str(jarvis_env.path / "listed.png"), full_page=True)
        assert "notes.txt" in page.locator(".msg.assistant:not(.streaming)").last.inner_text()  # the files come back
        # A new chat, as for a new request: a 135M model copies the calls it sees earlier in its thread.
        page.get_by_role("button", name="New chat").click()
        page.get_by_role("textbox", name="Message").fill("Write hello to note.txt.")
        page.get_by_role("button", name="Send").click()
        dialog = page.get_by_role("dialog")
        dialog.wait_for()
        assert "fs_write_text" in dialog.inner_text()
        assert not (jarvis_env.root / "note.txt").exists()  # nothing written before the user says so
        dialog.get_by_role("button", name="Deny").click()
        page.locator(".msg.assistant:not(.streaming)").last.wait_for()
        page.get_by_role("button", name="New chat").click()
        page.get_by_role("textbox", name="Message").fill("Remind me tomorrow at 9am to call the dentist.")
        page.get_by_role("button", name="Send").click()
        dialog.wait_for()
        tomorrow = (datetime.now(user_zone(jarvis_env.settings)) + timedelta(days=1)).date()
        assert "reminder_create" in dialog.inner_text()
        dialog.get_by_role("button", name="Approve").click()
        # The reminder's own row, not the page: an answer already on the page does not say the approved call ran.
        reminders = ReminderStore(jarvis_env.settings)
        guard = time.monotonic() + 600  # a hang guard, as the page's waits
        while not reminders.list() and time.monotonic() < guard:
            time.sleep(0.5)
        (reminder,) = reminders.list()
        due = reminder.due_date.astimezone(user_zone(jarvis_env.settings))
        assert (due.date(), due.hour, due.minute) == (tomorrow, 9, 0), reminder
        assert "dentist" in reminder.title.lower()
        context.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    print(err, file=sys.stderr)
    assert "using the " + default.notice in err
