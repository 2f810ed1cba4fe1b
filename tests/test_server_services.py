"""Background services started with the web UI: the hook, the reminder scheduler, Telegram inbound routing."""

from __future__ import annotations

import asyncio
import threading
import time

from orchestrator.server.services import ServiceContext, ServiceManager, ThreadService
from tests.test_channels import telegram  # noqa: F401 - fixture
from tests.ui_server import start_ui


def _failing_factory(settings):
    raise RuntimeError("cannot build")


def _disabled_factory(settings):
    return None


def _crashing_factory(settings):
    def run(ctx, stop):
        raise ValueError("bad state")

    return ThreadService("crasher", run)


def _looping_factory(settings):
    def run(ctx, stop):
        while not stop.wait(0.01):
            ctx.extras["ticks"] = ctx.extras.get("ticks", 0) + 1

    return ThreadService("looper", run)


def test_services_start_report_and_stop(jarvis_env):
    factories = [f"tests.test_server_services:{n}" for n in
                 ("_failing_factory", "_disabled_factory", "_crashing_factory", "_looping_factory")]
    manager = ServiceManager(factories)
    ctx = ServiceContext(app=jarvis_env.app(), turns=None)

    async def scenario():
        await manager.start_all(ctx)
        await asyncio.sleep(0.2)
        report = {r["name"]: r for r in manager.report()}
        await manager.stop_all()
        return report

    report = asyncio.run(scenario())
    assert report["tests.test_server_services:_failing_factory"]["state"] == "failed"
    assert "cannot build" in report["tests.test_server_services:_failing_factory"]["detail"]
    assert report["tests.test_server_services:_disabled_factory"]["state"] == "disabled"
    assert report["crasher"] == {"name": "crasher", "state": "failed", "detail": "ValueError: bad state"}
    assert report["looper"]["state"] == "running" and ctx.extras["ticks"] > 3
    assert {r["name"]: r["state"] for r in manager.report()}["looper"] == "stopped"
    assert not any(t.name == "service-looper" for t in threading.enumerate())


def test_jarvis_run_routes_telegram_messages_and_runs_the_scheduler(jarvis_env, telegram):
    services = ["orchestrator.server.services:reminder_scheduler_service", "orchestrator.server.services:telegram_inbound_service"]
    with start_ui(jarvis_env, services=services) as server:
        with server.client() as c:
            states = {s["name"]: s["state"] for s in c.get("/api/settings").json()["services"]}
        assert states == {"reminder-scheduler": "running", "telegram-inbound": "running"}
        telegram.state.say("hello Jarvis", username="Alice")
        inbox = server.app.state.jarvis.app.jorbs.store
        deadline = time.monotonic() + 15
        while not inbox.messages(direction="in"):
            assert time.monotonic() < deadline, "the Telegram message never reached the inbox"
            time.sleep(0.05)
        assert [(m.party, m.text) for m in inbox.messages(direction="in")] == [("@alice", "hello Jarvis")]
        manager = server.app.state.jarvis.services
    assert {s["name"]: s["state"] for s in manager.report()} == {"reminder-scheduler": "stopped", "telegram-inbound": "stopped"}


def test_services_follow_the_config(jarvis_env):
    from orchestrator.server.services import reminder_scheduler_service, telegram_inbound_service

    assert telegram_inbound_service(jarvis_env.settings) is None  # channels.telegram.enabled is false
    jarvis_env.write_config(scheduler={"enabled": False})
    assert reminder_scheduler_service(jarvis_env.settings) is None
