"""A jorb whose model is down waits and takes its step again by itself (jorbs/retry.py): a jorb that waits days
for a reply must not be left for the user because the model server was restarting when the reply came."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai

from orchestrator.core.config import JorbsConfig
from orchestrator.jorbs.retry import next_try
from orchestrator.llm.client import describe_endpoint_error
from tests.app_helpers import jorb_service


def step(**fields) -> dict:
    return {"content": json.dumps(fields)}


def down(status: int = 503, message: str = "Loading model") -> dict:
    """The scripted server answers this HTTP error (llama.cpp says 503 while it loads a model)."""
    return {"error": {"status": status, "message": message}}


def _events(server) -> list[str]:
    return [r["messages"][-1]["content"] for r in server.requests]


def test_a_jorb_whose_model_is_down_tries_again_by_itself_later_and_each_time_later(jarvis_env):
    jarvis_env.write_config(jorbs={"model_retry_first_s": 60})
    srv = jarvis_env.server
    srv.push(down(), down(), step(reasoning="done", done=True, result={"answer": 42}))
    svc = jorb_service(jarvis_env.settings)
    view = svc.create("Chores", "answer 42")
    jid = view.row.id
    (paused,) = view.pending
    assert view.row.status == "paused" and paused["kind"] == "model_down", view
    assert 50 < paused["retry_at"] - time.time() <= 60
    assert "HTTP 503" in view.row.pause_reason and "tries again by itself at" in view.row.pause_reason

    assert svc.retry_due() == [] and len(srv.requests) == 1  # not due yet: nothing asked
    # a reply that comes in while the model is down waits for the step taken again
    svc.reply(jid, "Use the blue folder.", party="@bob")
    assert svc.view(jid).row.status == "paused" and len(srv.requests) == 1

    assert svc.retry_due(now=paused["retry_at"]) == [jid]
    (paused,) = svc.view(jid).pending
    assert paused["kind"] == "model_down" and 110 < paused["retry_at"] - time.time() <= 120  # the wait doubled
    assert "2 tries failed" in paused["reason"]

    assert svc.retry_due(now=paused["retry_at"]) == [jid]
    view = svc.view(jid)
    assert view.row.status == "done" and view.row.result == {"answer": 42}, view
    assert view.state.model_failures == 0 and view.state.retry_at is None
    # every try was the step the jorb could not take: its first event, with the reply that came in meanwhile
    first, second, third = _events(srv)
    assert '"type": "created"' in first and "blue folder" not in first
    assert second == third and '"type": "created"' in second and "Use the blue folder." in second


def test_a_jorb_cancelled_while_its_retry_waits_on_the_model_stays_cancelled(jarvis_env):
    """The sweep's try waits on a model still down; a cancel meanwhile was kept only for a follow-up the sweep
    never made, and the pause written when the try failed again put the jorb back to paused, trying for a day."""
    jarvis_env.write_config(jorbs={"model_retry_first_s": 60})
    srv = jarvis_env.server
    srv.push(down(), {**down(), "delay_s": 1.5}, step(reasoning="done", done=True, result="too late"))
    svc = jorb_service(jarvis_env.settings)
    view = svc.create("Chores", "say done")
    (paused,) = view.pending
    sweep = threading.Thread(target=svc.retry_due, kwargs={"now": paused["retry_at"]})
    sweep.start()
    deadline = time.monotonic() + 10
    while len(srv.requests) < 2:  # the try is waiting on the model
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert svc.cancel(view.row.id).row.status == "cancelled"
    sweep.join(10)
    svc.wait_background()
    view = svc.view(view.row.id)
    assert view.row.status == "cancelled" and not view.pending, view
    assert svc.retry_due(now=time.time() + 10 * 86400) == [] and len(srv.requests) == 2


def test_a_model_that_refuses_the_request_waits_for_the_user_and_approve_takes_the_same_step(jarvis_env):
    """A refused key or an unknown model fails the same way every time: no retry, the user decides."""
    srv = jarvis_env.server
    srv.push(down(404, "model 'scripted-model' not found"), step(reasoning="done", done=True, result="ok"))
    svc = jorb_service(jarvis_env.settings)
    view = svc.create("Chores", "say ok")
    (paused,) = view.pending
    assert paused["kind"] == "error" and "retry_at" not in paused, paused
    assert "does not know the model" in view.row.pause_reason and "by itself" not in view.row.pause_reason
    assert svc.retry_due(now=time.time() + 10 * 86400) == [] and len(srv.requests) == 1
    view = svc.approve(view.row.id)
    assert view.row.status == "done" and view.row.result == "ok"
    first, second = _events(srv)
    assert first == second  # the same step, not an "approved" event for a pause the model never asked for


def test_a_mission_whose_model_is_down_plans_the_same_round_again_by_itself(jarvis_env):
    """A mission used to ask the user "Answer anything to try again", and took the answer for one to a question
    the model had asked."""
    jarvis_env.write_config(jorbs={"model_retry_first_s": 60})
    srv = jarvis_env.server
    srv.push(down(), {"content": json.dumps({"ok": True, "action": "mission_complete", "summary": "Nothing to do"})})
    svc = jorb_service(jarvis_env.settings)
    view = svc.create("Tidy", "Nothing to do", mode="mission")
    (paused,) = view.pending
    assert view.row.status == "paused" and paused["kind"] == "model_down" and "by itself" in paused["reason"]
    assert svc.retry_due(now=paused["retry_at"] - 1) == []
    assert svc.retry_due(now=paused["retry_at"]) == [view.row.id]
    view = svc.view(view.row.id)
    assert view.row.status == "done", view
    first, second = (json.loads(text) for text in _events(srv))
    assert first == second and "answer_to_your_question" not in second  # the same round, no answer made up


def test_jarvis_runs_sweep_takes_the_step_once_the_model_is_back(jarvis_env):
    """Nobody answers anything: the service `jarvis run` starts tries again (server/services.py)."""
    from orchestrator.server.services import ServiceContext, jorbs_recover_service

    jarvis_env.write_config(jorbs={"model_retry_first_s": 0.3, "sweep_interval_s": 0.1})
    srv = jarvis_env.server
    srv.push(down(502, "Bad Gateway"), step(reasoning="done", done=True, result="back"))
    app = jarvis_env.app()
    view = app.jorbs.create("Chores", "say back")
    assert view.row.status == "paused"
    service = jorbs_recover_service(jarvis_env.settings)
    stop = threading.Event()
    sweeper = threading.Thread(target=service.target, args=(ServiceContext(app=app, turns=None), stop), daemon=True)
    sweeper.start()
    try:
        deadline = time.monotonic() + 20
        while app.jorbs.store.get(view.row.id).status != "done":
            assert time.monotonic() < deadline, app.jorbs.view(view.row.id)
            time.sleep(0.05)
    finally:
        stop.set()
        sweeper.join(5)
    assert app.jorbs.store.get(view.row.id).result == "back" and len(srv.requests) == 2


def test_the_pause_says_why_the_jorb_stopped_trying():
    from orchestrator.core.errors import ModelEndpointError
    from orchestrator.jorbs.retry import model_down

    cfg = JorbsConfig(model_retry_for_h=1)
    kind, reason, _ = model_down(cfg, "j", time.time() - 7200, 9, ModelEndpointError("down.", transient=True))
    assert kind == "error" and "stopped trying by itself (jorbs.model_retry_for_h)" in reason
    kind, reason, _ = model_down(cfg, "j", time.time() - 60, 2, ModelEndpointError("no such model."))
    assert kind == "error" and reason == "The model is not available: no such model. Approve to try again."


def test_the_wait_doubles_up_to_its_cap_and_stops_after_model_retry_for_h():
    cfg = JorbsConfig(model_retry_first_s=60, model_retry_max_s=600, model_retry_for_h=1)
    waits = [next_try(cfg, 0.0, failures, 0.0) for failures in range(1, 7)]
    assert waits == [60, 120, 240, 480, 600, 600]
    assert next_try(cfg, 0.0, 500, 100.0) == 700  # no overflow however many tries
    assert next_try(cfg, 0.0, 9, 3599.0) == 3599.0 + 600
    assert next_try(cfg, 0.0, 10, 3600.0) is None  # down an hour: the user decides
    assert next_try(JorbsConfig(model_retry_for_h=0), 0.0, 1, 0.0) is None  # retries off


def test_what_counts_as_transient():
    """Down, busy, slow or cut off: try again later. Refused, unknown, too large: it would fail the same way."""
    request = httpx.Request("POST", "http://127.0.0.1:1337/v1/chat/completions")

    def status(code: int, body: dict | None = None) -> openai.APIStatusError:
        response = httpx.Response(code, request=request, json=body or {"error": {"message": "x"}})
        return openai.APIStatusError("x", response=response, body=body or {"error": {"message": "x"}})

    def transient(exc: BaseException) -> bool:
        described = describe_endpoint_error(exc, "http://127.0.0.1:1337/v1")
        assert described is not None
        return described.transient

    assert transient(openai.APIConnectionError(request=request))
    assert transient(openai.APITimeoutError(request=request))
    assert transient(status(503)) and transient(status(500)) and transient(status(429))
    overflow = {"error": {"message": "This model's maximum context length is 8192 tokens", "code": 400}}
    assert not transient(status(400, overflow)) and not transient(status(500, overflow))
    assert not transient(status(400)) and not transient(status(422))
    unauthorized = httpx.Response(401, request=request, json={"error": {"message": "bad key"}})
    assert not transient(openai.AuthenticationError("bad key", response=unauthorized, body=None))
