"""A full disk under Jarvis's data folder (a real, small tmpfs filled to the last byte): a turn stops with one
sentence saying what happened and what to do, the thread keeps everything it had, and once there is space
again the conversation goes on. Needs permission to mount a tmpfs (root here and in CI); skipped otherwise."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time

import pytest

from orchestrator.core.disk_full import is_disk_full
from tests.conftest import answer


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root with CAP_SYS_ADMIN")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder) -> None:
    """Write until not one more byte fits."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 1 << 16, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_turn_on_a_full_disk_says_so_and_the_thread_goes_on_after(jarvis_env, small_disk):
    jarvis_env.write_config(storage={"data_dir": str(small_disk / "data")})
    jarvis_env.server.push(answer("First answer."))
    first = jarvis_env.cli("chat", "--thread", "d1", "first question")
    assert first.returncode == 0 and "First answer." in first.stdout, first.stderr

    _fill(small_disk)
    full = jarvis_env.cli("chat", "--thread", "d1", "second question")
    assert full.returncode == 1 and len(jarvis_env.server.requests) == 1  # stopped before asking the model
    assert "The disk holding Jarvis's data is full" in full.stderr and "Free some space" in full.stderr
    assert "Traceback" not in full.stderr

    (small_disk / "filler").unlink()
    jarvis_env.server.push(answer("Third answer."))
    again = jarvis_env.cli("chat", "--thread", "d1", "third question")
    assert again.returncode == 0 and "Third answer." in again.stdout, again.stderr
    shown = jarvis_env.cli("threads", "show", "d1", check=True).stdout
    assert "first question" in shown and "First answer." in shown and "third question" in shown


def test_full_disk_errors_are_recognized_through_their_wrappers():
    import sqlite3

    from sqlalchemy.exc import OperationalError

    sqlite_full = sqlite3.OperationalError("database or disk is full")
    wrapped = OperationalError("INSERT ...", {}, sqlite_full)
    assert is_disk_full(wrapped)
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("could not write the checkpoint") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))
    assert not is_disk_full(ValueError("bad"))


def test_the_disk_fills_while_the_ui_runs_a_message_is_refused_with_the_reason_then_goes_through(jarvis_env, small_disk):
    from tests.ui_server import start_ui

    jarvis_env.write_config(storage={"data_dir": str(small_disk / "data")})
    with start_ui(jarvis_env) as ui:
        jarvis_env.server.push(answer("First answer."))
        assert any(e["event"] == "done" for e in ui.stream("/api/threads/web-d/messages", {"text": "first question"}))
        _fill(small_disk)
        with ui.client() as c:
            refused = c.post("/api/threads/web-d/messages", json={"text": "second question"})
            assert refused.status_code == 507  # Insufficient Storage, before the turn starts: nothing half-done
            assert "The disk holding Jarvis's data is full" in refused.json()["detail"]
            assert c.get("/api/threads/web-d").status_code == 200  # reading still works
        assert len(jarvis_env.server.requests) == 1  # the model was not asked

        (small_disk / "filler").unlink()
        jarvis_env.server.push(answer("Second answer."))
        assert any(e["event"] == "done" for e in ui.stream("/api/threads/web-d/messages", {"text": "second question"}))
        with ui.client() as c:
            texts = [m["content"] for m in c.get("/api/threads/web-d").json()["messages"]]
        assert texts == ["first question", "First answer.", "second question", "Second answer."], texts


def test_the_disk_fills_during_a_turn_it_stops_with_the_reason_and_retry_finishes_it(jarvis_env, small_disk):
    from tests.ui_server import parse_sse, start_ui

    jarvis_env.write_config(storage={"data_dir": str(small_disk / "data")})
    with start_ui(jarvis_env) as ui:
        jarvis_env.server.push(answer("First answer."))
        assert any(e["event"] == "done" for e in ui.stream("/api/threads/web-m/messages", {"text": "first question"}))
        # The model takes its time; the disk fills while it answers (a download elsewhere, say): filled as the
        # first words arrive, so the question is saved and the answer is not.
        jarvis_env.server.push({"content": "A slow and careful second answer.", "token_delay_s": 0.1})
        text = ""
        with ui.client() as c, c.stream("POST", "/api/threads/web-m/messages", json={"text": "second question"}) as resp:
            assert resp.status_code == 200
            chunks = resp.iter_text()
            for chunk in chunks:
                text += chunk
                if any(e["event"] == "token" for e in parse_sse([text])):
                    _fill(small_disk)
                    break
            text += "".join(chunks)
        events = parse_sse([text])
        error = next(e for e in events if e["event"] == "error")
        assert error["kind"] == "disk_full" and "The disk holding Jarvis's data is full" in error["message"], events

        (small_disk / "filler").unlink()
        with ui.client() as c:
            thread = c.get("/api/threads/web-m").json()
        assert thread["stalled"], thread  # the question was saved; the answer was not
        jarvis_env.server.push(answer("Second answer."))
        assert any(e["event"] == "done" for e in ui.stream("/api/threads/web-m/retry"))
        with ui.client() as c:
            texts = [m["content"] for m in c.get("/api/threads/web-m").json()["messages"]]
        assert texts == ["first question", "First answer.", "second question", "Second answer."], texts


# -- jorbs ------------------------------------------------------------------------------------------------
_BROKEN = {"times": 0}


def _decider_that_breaks(what):
    """A heuristic decider that breaks the first time in the given way, then finishes the jorb."""
    from langchain_core.messages import AIMessage

    async def decide(ctx, observations, options=None, **kwargs):
        _BROKEN["times"] += 1
        if _BROKEN["times"] == 1:
            what()
        return [AIMessage(content='{"reasoning": "fine now", "done": true, "result": "finished after the retry"}')]

    return decide


def _raise():
    raise RuntimeError("the decider broke (a bug, say)")


def test_a_failed_jorb_runs_its_step_again_on_retry(jarvis_env):
    from orchestrator.jorbs.policies import HEURISTICS
    from tests.app_helpers import jorb_service
    from orchestrator.jorbs.service import JorbError

    _BROKEN["times"] = 0
    HEURISTICS["breaks_once"] = _decider_that_breaks(_raise)
    svc = jorb_service(jarvis_env.settings)
    with pytest.raises(RuntimeError):
        svc.create("Flaky", "Do the thing", policy="heuristic:breaks_once")
    row = svc.list(statuses=None)[0]
    assert row.status == "failed" and "the decider broke" in row.error
    view = svc.retry(row.id)
    assert view.row.status == "done" and view.row.result == "finished after the retry" and view.row.error is None
    with pytest.raises(JorbError, match="only a failed or stalled jorb is retried"):
        svc.retry(row.id)


def test_a_jorb_stopped_by_a_full_disk_is_retried_once_there_is_space(jarvis_env, small_disk):
    """The disk fills during the jorb's step: not even the failure can be written, so the jorb is left mid-step
    (stalled). Once there is space, Retry (here through the API, as the UI does) runs the step again."""
    from orchestrator.jorbs.policies import HEURISTICS
    from tests.app_helpers import jorb_service
    from tests.ui_server import start_ui

    jarvis_env.write_config(storage={"data_dir": str(small_disk / "data")})
    _BROKEN["times"] = 0
    HEURISTICS["fills_the_disk_once"] = _decider_that_breaks(lambda: _fill(small_disk))
    with start_ui(jarvis_env) as ui:
        svc = jorb_service(jarvis_env.settings)
        with pytest.raises(Exception) as stopped:
            svc.create("Disk", "Do the thing", policy="heuristic:fills_the_disk_once")
        assert is_disk_full(stopped.value)
        (small_disk / "filler").unlink()
        row = svc.list(statuses=None)[0]
        assert row.status in ("planning", "running") and svc.stalled(row)
        with ui.client() as c:
            detail = c.get(f"/api/jorbs/{row.id}").json()
            assert detail["can"]["retry"] is True
            assert c.post(f"/api/jorbs/{row.id}/retry").status_code == 200
            for _ in range(100):
                detail = c.get(f"/api/jorbs/{row.id}").json()
                if detail["status"] == "done":
                    break
                time.sleep(0.1)
        assert detail["status"] == "done" and detail["result"] == "finished after the retry", detail


def test_jarvis_jorbs_retry_from_the_cli(jarvis_env, tmp_path, monkeypatch):
    monkeypatch.setenv("JARVIS_TEST_FLAKY", str(tmp_path))
    created = jarvis_env.cli("jorbs", "create", "--name", "Flaky", "--plan", "Do the thing",
                             "--policy", "heuristic:tests.helpers.flaky_decider:breaks_once")
    assert created.returncode == 1 and "Traceback" not in created.stderr
    assert "the jorb step failed: RuntimeError: the decider broke" in created.stderr
    assert "jarvis jorbs retry ID" in created.stderr
    jorb = jarvis_env.cli_json("jorbs", "list", "--all", "--json")[0]
    assert jorb["status"] == "failed"
    retried = jarvis_env.cli("jorbs", "retry", jorb["id"], "--json")
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["result"] == "finished after the retry"
