"""[26] Confirmations answered from the phone: a jorb's confirmation sent to the principal over Telegram (the local
Bot API server, with callback queries) and email (the local Gmail server), answered once, by the principal only,
bound to the call asked about, across a restart; the UI and the phone answering together: one wins."""

from __future__ import annotations

import base64
import re
import threading
import time
from email import message_from_bytes
from typing import Any

import pytest

from tests.fakes.telegram_server import TelegramServer
from tests.test_jorbs import step
from tests.test_ui_browser import browser, open_ui, shot  # noqa: F401 - fixtures

PRINCIPAL = 42
STRANGER = 66


def _config(jarvis_env, telegram: TelegramServer | None = None, google=None, **notify: Any) -> None:
    channels: dict[str, Any] = {}
    if telegram is not None:
        channels["telegram"] = {"enabled": True, "token": {"secret": "telegram_token"}, "api_base": telegram.base_url,
                                "allowlist": ["@alice"], "poll_timeout_s": 0}
    extra: dict[str, Any] = {}
    if google is not None:
        channels["email"] = {"enabled": True}
        extra["google"] = {"gmail_base_url": google.url, "calendar_base_url": google.url,
                           "token_uri": google.token_uri, "backoff_s": 0.01}
    jarvis_env.write_config(channels=channels, confirmations={"notify": {"after_s": 0, "check_s": 0.05, **notify}},
                            **extra)


@pytest.fixture
def telegram(jarvis_env, monkeypatch):
    with TelegramServer(token="123:TEST") as fake:
        monkeypatch.setenv("JARVIS_SECRET_TELEGRAM_TOKEN", "123:TEST")
        fake.state.known_chats.add(PRINCIPAL)  # the principal wrote to the bot once (a bot cannot write first)
        _config(jarvis_env, fake, to=["telegram"], telegram_user_id=PRINCIPAL)
        yield fake


def _paused_jorb(jarvis_env, app) -> Any:
    """A jorb whose script asks to write a file (fs_write: confirm) and stops there."""
    target = jarvis_env.root / "report.txt"
    jarvis_env.server.push(step(reasoning="write", script=f"jarvis.fs.write_text({str(target)!r}, 'the report')\n'ok'"),
                           step(reasoning="done", done=True, result="written"))
    view = app.jorbs.create("Report", "Write the report")
    assert view.row.status == "paused", view.row
    return view


def _poller(jarvis_env, app):
    from orchestrator.channels.telegram import TelegramPoller

    return TelegramPoller(jarvis_env.settings, lambda *a: None, on_callback=app.remote_answers.on_callback)


def _sent_with_buttons(telegram) -> tuple[dict[str, Any], str, str]:
    (message,) = telegram.state.sent
    buttons = telegram.state.buttons(message)
    assert [b["text"] for b in buttons] == ["Approve", "Deny"]
    approve, deny = (b["callback_data"] for b in buttons)
    return message, approve, deny


def _press(telegram, poller, message, data, user_id=PRINCIPAL) -> str:
    qid = telegram.state.press(message, data, user_id=user_id)
    assert poller.poll_once(timeout=0) == 1
    return qid


def _answer_to(telegram, qid: str) -> dict[str, Any] | None:
    return next((a for a in telegram.state.answered if a["callback_query_id"] == qid), None)


def test_the_confirmation_reaches_telegram_with_buttons_and_the_principals_press_resumes_the_jorb_once(
        jarvis_env, telegram):
    """End to end through `jarvis run`'s services: the notifier sends, the Telegram poller takes the press."""
    from tests.ui_server import start_ui

    with start_ui(jarvis_env, services=["orchestrator.server.services:telegram_inbound_service",
                                        "orchestrator.server.services:approvals_notify_service"]) as ui:
        # the model's answers first: the jorb asks for its first step as soon as it is created (pushed after the
        # POST, a loaded machine let the jorb ask first, get no answer, and never reach its confirmation)
        target = jarvis_env.root / "report.txt"
        jarvis_env.server.push(step(reasoning="write", script=f"jarvis.fs.write_text({str(target)!r}, 'x')\n'ok'"),
                               step(reasoning="done", done=True, result="written"))
        with ui.client() as c:
            assert c.post("/api/jorbs", json={"name": "Report", "plan": "Write the report"}).status_code == 201
        _wait(lambda: telegram.state.sent, "the confirmation to reach Telegram")
        message, approve, _ = _sent_with_buttons(telegram)
        assert "fs_write" in message["text"] and "Why it asks" in message["text"] and "report.txt" in message["text"]
        jorb = _jorbs(ui)[0]
        assert jorb["pending"][0]["sent"][0]["channel"] == "telegram"  # the UI shows where it was sent
        qid = telegram.state.press(message, approve, user_id=PRINCIPAL)
        _wait(lambda: _answer_to(telegram, qid), "the press to be answered")
        assert _answer_to(telegram, qid)["text"].startswith("Approved")
        done = _wait(lambda: [j for j in _jorbs(ui) if j["status"] == "done"], "the jorb to finish")[0]
        assert target.read_text() == "x"
        assert telegram.state.buttons(telegram.state.sent[0]) == []  # the buttons are gone
        assert [(a["via"], a["answer"]) for a in done["answered"]] == [("telegram", "approve")]
        assert len(telegram.state.sent) == 1 and len(jarvis_env.server.requests) == 2  # sent once, resumed once


def _jorbs(ui) -> list[dict[str, Any]]:
    with ui.client() as c:
        return [c.get(f"/api/jorbs/{j['id']}").json() for j in c.get("/api/jorbs?all=true").json()]


def _wait(probe, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_press_from_another_user_id_does_nothing(jarvis_env, telegram):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    assert app.notifier().sweep() == 1
    message, approve, _ = _sent_with_buttons(telegram)
    poller = _poller(jarvis_env, app)
    qid = _press(telegram, poller, message, approve, user_id=STRANGER)
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused"
    assert _answer_to(telegram, qid) is None  # the stranger gets nothing, not even "not allowed"
    assert telegram.state.buttons(message)  # and the principal's buttons still work
    _press(telegram, poller, message, approve)
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "done"


def test_a_replayed_callback_does_nothing(jarvis_env, telegram):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, deny = _sent_with_buttons(telegram)
    poller = _poller(jarvis_env, app)
    _press(telegram, poller, message, approve)
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "done"
    calls = len(jarvis_env.server.requests)
    for data in (approve, deny):  # the same press again, and the other button of the used message
        qid = _press(telegram, poller, message, data)
        app.jorbs.wait_background()
        assert "already answered (approve, from telegram" in _answer_to(telegram, qid)["text"]
    assert len(jarvis_env.server.requests) == calls  # the jorb did not move
    from orchestrator.tools.ledger import EffectsLedger

    assert EffectsLedger(jarvis_env.settings).count_for_thread(view.row.thread_id) == 1


def test_a_forged_or_foreign_token_does_nothing(jarvis_env, telegram, monkeypatch):
    """Callback data is the client's to write: a made-up token, or an email code pressed as a button."""
    from orchestrator.approvals import store

    made = store.new_token
    monkeypatch.setattr(store, "new_token", lambda: made()[:-1] + "X")  # the case that made this test fail 1 in 32
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    poller = _poller(jarvis_env, app)
    token = approve.partition(":")[2]
    # one character off, in lower case (codes are read in any case). It used to end in "x" whatever the token's
    # last character was: a token ending in X (1 in 32, base32) was then pressed for real, and approved.
    off = token[:-1] + ("B" if token[-1] == "A" else "A")
    for data in ("a:" + "A" * 24, "a:" + off.lower(), "x:" + token, "a:"):
        qid = _press(telegram, poller, message, data)
        assert "nothing was done" in _answer_to(telegram, qid)["text"]
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused"


def test_a_restart_between_send_and_press_still_works(jarvis_env, telegram):
    from orchestrator.storage.engines import dispose_all

    first = jarvis_env.app()
    view = _paused_jorb(jarvis_env, first)
    first.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    first.close()
    listed = jarvis_env.cli("pending", check=True).stdout  # another process says where it was sent
    assert "sent to telegram (42)" in listed, listed
    dispose_all()  # a new process: nothing kept in memory, the token is only in the database
    second = jarvis_env.app()
    _press(telegram, _poller(jarvis_env, second), message, approve)
    second.jorbs.wait_background()
    assert second.jorbs.view(view.row.id).row.status == "done"
    assert (jarvis_env.root / "report.txt").read_text() == "the report"


def test_a_token_is_bound_to_the_call_it_was_sent_for(jarvis_env, telegram):
    """The first question was answered in the UI and the jorb asks the next one: the first message's button, never
    pressed, does not answer the second."""
    app = jarvis_env.app()
    target, other = jarvis_env.root / "a.txt", jarvis_env.root / "b.txt"
    jarvis_env.server.push(step(reasoning="write two", script=f"jarvis.fs.write_text({str(target)!r}, '1')\n"
                                                              f"jarvis.fs.write_text({str(other)!r}, '2')\n'ok'"),
                           step(reasoning="done", done=True, result="written"))
    view = app.jorbs.create("Two files", "Write two files")
    app.notifier().sweep()
    first_message, first_approve, _ = _sent_with_buttons(telegram)
    poller = _poller(jarvis_env, app)
    (first,) = app.jorbs.view(view.row.id).pending
    app.jorbs.approve(view.row.id, interrupt_id=first["interrupt_id"], via="the web UI")
    (second,) = app.jorbs.view(view.row.id).pending
    assert "b.txt" in str(second["args"])
    qid = _press(telegram, poller, first_message, first_approve)  # the first message's button, still unused
    assert "already answered" in _answer_to(telegram, qid)["text"]
    app.jorbs.wait_background()
    assert not other.exists() and app.jorbs.view(view.row.id).row.status == "paused"
    assert app.notifier().sweep() == 1  # the second question gets its own message
    assert "b.txt" in telegram.state.sent[-1]["text"]


def test_the_ui_and_the_phone_answering_together_one_wins_the_other_is_told(jarvis_env, telegram):
    from tests.ui_server import start_ui

    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app  # the UI server's own App: one process, the phone's poller in it
        view = _paused_jorb(jarvis_env, app)
        app.notifier().sweep()
        message, approve, _ = _sent_with_buttons(telegram)
        (item,) = app.jorbs.view(view.row.id).pending
        poller = _poller(jarvis_env, app)
        start = threading.Barrier(2)
        results: dict[str, Any] = {}

        def from_ui() -> None:
            start.wait()
            with ui.client() as c:
                results["ui"] = c.post(f"/api/jorbs/{view.row.id}/decide",
                                       json={"interrupt_id": item["interrupt_id"], "action": "approve"})

        def from_phone() -> None:
            start.wait()
            results["phone"] = _press(telegram, poller, message, approve)

        threads = [threading.Thread(target=from_ui), threading.Thread(target=from_phone)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        app.jorbs.wait_background()
        _wait(lambda: not _busy(ui, view.row.id), "the jorb to settle")
        ui_won = results["ui"].status_code == 200
        phone_text = _answer_to(telegram, results["phone"])["text"]
        phone_won = phone_text.startswith("Approved")
        assert ui_won != phone_won, (results["ui"].text, phone_text)
        if ui_won:
            assert "already answered (approve, from the web UI" in phone_text
        else:
            assert results["ui"].status_code == 409 and "already answered (approve, from telegram" in results["ui"].text
        assert (jarvis_env.root / "report.txt").read_text() == "the report"
        from orchestrator.tools.ledger import EffectsLedger

        assert EffectsLedger(jarvis_env.settings).count_for_thread(view.row.thread_id) == 1


def _busy(ui, jorb_id: str) -> bool:
    with ui.client() as c:
        j = c.get(f"/api/jorbs/{jorb_id}").json()
    return j["working"] or j["status"] in ("planning", "running")


def test_the_ui_first_then_the_phone_and_the_phone_first_then_the_ui(jarvis_env, telegram):
    """Each order once: the second is told who answered and when, and the jorb moves once."""
    from tests.ui_server import start_ui

    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        poller = _poller(jarvis_env, app)
        # The UI first: the phone's press is told.
        view = _paused_jorb(jarvis_env, app)
        assert app.jorbs.answers.ui_seen_at(view.row.thread_id) is None
        _jorbs_detail(ui, view.row.id)  # the UI showing the jorb is recorded: the notifier leaves watched items alone
        assert app.jorbs.answers.ui_seen_at(view.row.thread_id) is not None
        app.notifier().sweep()
        message, approve, _ = _sent_with_buttons(telegram)
        (item,) = app.jorbs.view(view.row.id).pending
        with ui.client() as c:
            assert c.post(f"/api/jorbs/{view.row.id}/decide",
                          json={"interrupt_id": item["interrupt_id"], "action": "approve"}).status_code == 200
        qid = _press(telegram, poller, message, approve)
        assert "already answered (approve, from the web UI at" in _answer_to(telegram, qid)["text"]
        app.jorbs.wait_background()
        # The phone first: the UI's click is refused, saying so.
        telegram.state.sent.clear()
        (jarvis_env.root / "report.txt").unlink()
        second = _paused_jorb(jarvis_env, app)
        app.notifier().sweep()
        message, _, deny = _sent_with_buttons(telegram)
        (item,) = app.jorbs.view(second.row.id).pending
        qid = _press(telegram, poller, message, deny)
        assert _answer_to(telegram, qid)["text"].startswith("Denied")
        with ui.client() as c:
            late = c.post(f"/api/jorbs/{second.row.id}/decide",
                          json={"interrupt_id": item["interrupt_id"], "action": "approve"})
        assert late.status_code == 409 and "already answered (deny, from telegram at" in late.json()["detail"]
        app.jorbs.wait_background()
        assert not (jarvis_env.root / "report.txt").exists()  # denied: the UI's late approval did not run it
        assert [a["via"] for a in _jorbs_detail(ui, second.row.id)["answered"]] == ["telegram"]


def _jorbs_detail(ui, jorb_id: str) -> dict[str, Any]:
    with ui.client() as c:
        return c.get(f"/api/jorbs/{jorb_id}").json()


VERIFIED = ("mx.google.com; dkim=pass header.i=@home.example header.s=s1; spf=pass smtp.mailfrom=boss@home.example; "
            "dmarc=pass (p=REJECT) header.from=home.example")
FORGED = ("mx.google.com; dkim=fail header.i=@home.example; spf=softfail smtp.mailfrom=mallory@evil.example; "
          "dmarc=fail header.from=home.example")


@pytest.fixture
def mail(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.tools import google_auth

    _config(jarvis_env, google=google_server, to=["email"], email="boss@home.example")
    google_auth.save_credentials(jarvis_env.settings,
                                 Credentials.from_authorized_user_info(google_server.authorized_user_info()))
    return google_server


def test_an_email_reply_from_a_forged_sender_does_nothing_and_the_verified_one_answers(jarvis_env, mail):
    from orchestrator.channels.email import EmailPoller

    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    assert app.notifier().sweep() == 1
    (sent,) = mail.sent
    assert sent["to"] == ["boss@home.example"]
    mime = message_from_bytes(base64.urlsafe_b64decode(sent["raw"] + "=="))
    text = mime.get_payload(decode=True).decode()
    assert "fs_write" in text and "report.txt" in text
    code = re.search(r"keeping this code in the reply: ([A-Z2-7]{24})", text).group(1)
    thread = sent["threadId"]
    remote = app.remote_answers
    poller = EmailPoller(jarvis_env.settings, remote.on_email, remote.email_threads)
    quoted = f"approve\n\nOn Monday Jarvis wrote:\n> keeping this code in the reply: {code}"
    mail.add_message(sender="Boss <boss@home.example>", subject="Re: Jarvis asks", thread_id=thread, body=quoted,
                     authentication_results=FORGED)  # the principal's address, not vouched for by Gmail
    mail.add_message(sender="Boss <boss@home.example>", subject="Re: Jarvis asks", thread_id=thread, body=quoted,
                     authentication_results=[FORGED, "mx.google.com; dmarc=pass header.from=home.example"])
    mail.add_message(sender="Mallory <mallory@evil.example>", subject="Re: Jarvis asks", thread_id=thread, body=quoted,
                     authentication_results="mx.google.com; dkim=pass header.i=@evil.example; dmarc=pass "
                                            "header.from=evil.example")  # verified, but not the principal
    assert poller.poll_once() == 3
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused" and len(mail.sent) == 1  # nothing done, nothing said
    mail.add_message(sender="Boss <boss@home.example>", subject="Re: Jarvis asks", thread_id=thread, body=quoted,
                     authentication_results=VERIFIED)
    assert poller.poll_once() == 1
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "done"
    assert (jarvis_env.root / "report.txt").read_text() == "the report"
    assert mail.sent[-1]["threadId"] == thread  # "Approved: ..." in the same thread
    assert remote.email_threads() == []  # answered: its thread is not polled any more


def test_a_question_asked_again_under_the_same_interrupt_is_not_answered_by_the_old_message(jarvis_env, telegram):
    """An edit the UI sent was refused and the call is asked again (with the error): the old message's button was
    for the question as first shown; it does not answer the new one."""
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    (first,) = app.jorbs.view(view.row.id).pending
    app.jorbs.resume(view.row.id, {first["interrupt_id"]: {"decision": "edit", "args": {"path": 5}}}, wait=True)
    (again,) = app.jorbs.view(view.row.id).pending
    assert again["error"]
    qid = _press(telegram, _poller(jarvis_env, app), message, approve)
    app.jorbs.wait_background()
    assert "nothing was done" in _answer_to(telegram, qid)["text"] or "already answered" in _answer_to(telegram, qid)["text"]
    assert app.jorbs.view(view.row.id).pending[0]["error"] and not (jarvis_env.root / "report.txt").exists()


@pytest.mark.parametrize("notify, expected", [
    ({"to": ["telegram"]}, "to: telegram needs telegram_user_id"),
    ({"to": ["email"], "email": "not an address"}, "to: email needs email: your address"),
    ({"to": ["sms"]}, "confirmations.notify.to"),
])
def test_a_notify_config_that_cannot_work_says_what_is_missing(tmp_path, notify, expected):
    import yaml

    from orchestrator.core.config import ConfigError, load_settings

    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"confirmations": {"notify": notify}}))
    with pytest.raises(ConfigError, match=expected):
        load_settings(path)


def test_the_notifier_service_refuses_telegram_without_the_telegram_channel(jarvis_env):
    from orchestrator.server.services import approvals_notify_service

    _config(jarvis_env, to=["telegram"], telegram_user_id=PRINCIPAL)
    with pytest.raises(ValueError, match="channels.telegram is not enabled"):
        approvals_notify_service(jarvis_env.settings)


@pytest.mark.browser
def test_the_jorb_view_shows_where_it_was_sent_and_where_it_was_answered(jarvis_env, telegram, open_ui):
    page, server = open_ui()
    app = server.app.state.jarvis.app
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    page.goto(f"{server.url}/#jorbs/{view.row.id}")
    assert "Also sent to telegram (42)" in page.locator(".sent-to").inner_text()
    _press(telegram, _poller(jarvis_env, app), message, approve)
    app.jorbs.wait_background()
    page.reload()
    page.locator(".answered summary").click()
    assert "approve fs_write_text: from telegram" in page.locator(".answered").inner_text()
    shot(page, "jorb-answered-from-telegram")


def test_the_edit_link_opens_the_jorb_in_the_ui(jarvis_env, telegram):
    _config(jarvis_env, telegram, to=["telegram"], telegram_user_id=PRINCIPAL, ui_url="http://127.0.0.1:8000/")
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    assert f"http://127.0.0.1:8000/#jorbs/{view.row.id}" in telegram.state.sent[0]["text"]


def test_an_item_the_ui_is_watching_is_not_sent_until_it_has_gone_unwatched_for_after_s(jarvis_env, telegram):
    """Time is moved by rewriting the stored times (first seen, last viewed), not by waiting."""
    from datetime import timedelta

    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from orchestrator.approvals.store import ItemSeenRow, UiViewRow
    from orchestrator.storage.engines import utcnow

    _config(jarvis_env, telegram, to=["telegram"], telegram_user_id=PRINCIPAL, after_s=60)
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    notifier = app.notifier()
    assert notifier.sweep() == 0  # just asked
    store = notifier.store

    def ago(table, seconds: float, **where: str) -> None:
        column = table.first_seen if table is ItemSeenRow else table.seen_at
        with Session(store.engine) as s, s.begin():
            s.execute(update(table).filter_by(**where).values({column.key: utcnow() - timedelta(seconds=seconds)}))

    ago(ItemSeenRow, 120)
    store.ui_viewed(view.row.thread_id)  # the jorb's page is open (GET /api/jorbs/ID records it)
    ago(UiViewRow, 10, thread_id=view.row.thread_id)
    assert notifier.sweep() == 0 and telegram.state.sent == []
    ago(UiViewRow, 100, thread_id=view.row.thread_id)  # the page was left
    assert notifier.sweep() == 1 and len(telegram.state.sent) == 1
    assert notifier.sweep() == 0  # once


def test_only_the_configured_effects_are_sent(jarvis_env, telegram):
    _config(jarvis_env, telegram, to=["telegram"], telegram_user_id=PRINCIPAL, effects=["email_send"])
    app = jarvis_env.app()
    _paused_jorb(jarvis_env, app)  # fs_write
    assert app.notifier().sweep() == 0 and telegram.state.sent == []


def test_the_cli_answering_first_is_told_to_the_phone(jarvis_env, telegram):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    done = jarvis_env.cli("approve", view.row.thread_id, "--all")
    assert done.returncode == 0, done.stderr
    assert app.jorbs.view(view.row.id).row.status == "done"
    qid = _press(telegram, _poller(jarvis_env, app), message, approve)
    assert "already answered (approve, from the CLI at" in _answer_to(telegram, qid)["text"]


def test_answered_elsewhere_the_buttons_go_and_the_email_thread_is_no_longer_read(jarvis_env, telegram, mail):
    _config(jarvis_env, telegram, google=mail, to=["telegram", "email"], telegram_user_id=PRINCIPAL,
            email="boss@home.example")
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    assert app.notifier().sweep() == 2
    message, approve, _ = _sent_with_buttons(telegram)
    assert len(app.remote_answers.email_threads()) == 1
    assert {s["channel"] for s in app.pending(view.row.thread_id)[0]["sent"]} == {"telegram", "email"}
    app.jorbs.approve(view.row.id, via="the web UI")
    assert app.notifier().sweep() == 0
    assert telegram.state.buttons(message) == [] and app.remote_answers.email_threads() == []
    qid = _press(telegram, _poller(jarvis_env, app), message, approve)
    assert "already answered (approve, from the web UI" in _answer_to(telegram, qid)["text"]


def _sent_a_jorb_sending(jarvis_env, key: str):
    """An App whose jorb paused to send Bob a message holding `key`, a known secret, and whose notifier sent the
    question."""
    from orchestrator.core.secrets import remember

    remember(key)
    jarvis_env.server.push(step(reasoning="send", script=f"jarvis.messages.send('local', '@bob', 'the key is {key}')"),
                           step(reasoning="done", done=True, result="sent"))
    app = jarvis_env.app()
    assert app.jorbs.create("Share", "Send Bob the key").row.status == "paused"
    assert app.notifier().sweep() == 1
    return app


def test_the_confirmation_email_masks_a_known_secret_in_its_subject_and_first_line(jarvis_env, mail):
    """The email's first line quoted the call's summary unmasked (and became the Subject), though the rest of the
    message masked known secrets: a key in a message's text left the machine in the mail's headers."""
    key = "sk-LIVE-SECRET-123456"
    _sent_a_jorb_sending(jarvis_env, key)
    (sent,) = mail.sent
    mime = message_from_bytes(base64.urlsafe_b64decode(sent["raw"] + "=="))
    assert key not in str(mime["Subject"]) and key not in mime.get_payload(decode=True).decode()
    assert "the key is ***" in mime.get_payload(decode=True).decode()


def test_the_phones_acknowledgement_masks_a_known_secret(jarvis_env, telegram):
    """The question masked a known secret, but the toast that acknowledged the press ("Approved: <summary>") quoted
    the summary unmasked: the key left the machine in Telegram's answerCallbackQuery."""
    key = "sk-LIVE-ACK-7788990011"
    app = _sent_a_jorb_sending(jarvis_env, key)
    message, approve, _ = _sent_with_buttons(telegram)
    assert key not in message["text"]
    answer = _answer_to(telegram, _press(telegram, _poller(jarvis_env, app), message, approve))
    assert answer is not None and answer["text"].startswith("Approved"), answer
    assert key not in answer["text"] and "***" in answer["text"], answer


def test_a_secret_is_masked_before_the_arguments_are_quoted_and_cut():
    """The question's arguments were quoted (a quote or backslash escaped) and cut in the middle, then masked: the
    escaped form of a secret holding a quote, or the half of one across the cut, was no longer found."""
    from orchestrator.approvals.notifier import describe
    from orchestrator.core.secrets import remember

    quoted = remember('pa"ss\\word-4455667788')
    long_one = remember("sk-LIVE-" + "B" * 400)
    text = describe({"thread_id": "t", "tool": "messages_send", "summary": "Send a message",
                     "args": {"text": f"one {quoted} two", "note": "x" * 100 + long_one}}, None)
    assert "4455667788" not in text and "pa\\\"ss" not in text and "pa\"ss" not in text, text
    assert "sk-LIVE-BBB" not in text and "BBBBBBBBBB" not in text, text


@pytest.mark.parametrize("address", ["me@example.com", "Me+jarvis@Example.com"])
def test_email_approvals_to_the_account_jarvis_reads_are_refused_with_why(jarvis_env, mail, address):
    """A reply from the Gmail account Jarvis reads is that account's own mail, which the poller ignores (as it must:
    Jarvis's own sending tools can read the code in that mailbox): with confirmations.notify.email set to it, every
    email approval waited forever and nobody said why. The service stops saying so, and `jarvis doctor` says it."""
    from orchestrator.server.doctor import email_approvals_check
    from orchestrator.server.services import ServiceContext, approvals_notify_service

    mail.state.me = "me@example.com"
    _config(jarvis_env, google=mail, to=["email"], email=address, check_s=0.05)
    check = email_approvals_check(jarvis_env.settings)
    assert check.ok is False and "is the Gmail account Jarvis reads" in check.detail, check
    service = approvals_notify_service(jarvis_env.settings)
    stop = threading.Event()
    threading.Timer(20, stop.set).start()  # without the check the loop would go on: it ends, and the test fails
    with pytest.raises(ValueError, match="is the Gmail account Jarvis reads"):  # the loop stops, its error shown
        service.target(ServiceContext(app=jarvis_env.app(), turns=None), stop)
    stop.set()

    _config(jarvis_env, google=mail, to=["email"], email="boss@home.example")
    assert email_approvals_check(jarvis_env.settings).ok is True
