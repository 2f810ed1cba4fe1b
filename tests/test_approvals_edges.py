"""[26] The edges of answering from the phone, as an attacker (or an unlucky principal) would try them: a press or a
reply for an item that stopped waiting (a jorb cancelled, a chat thread deleted after the message went out), an
email answer through the service `jarvis run` starts, a token's data pressed under another message or in another
chat, a code quoted in the reply to another email or next to a second code, a used token after a restart, odd
callback data, and From: headers dressed up as the principal."""

from __future__ import annotations

import base64
import re
import time
from email import message_from_bytes
from typing import Any

import pytest

from tests.test_approvals_remote import (FORGED, PRINCIPAL, VERIFIED, _answer_to, _paused_jorb, _poller,
                                         _press, _sent_with_buttons, _wait)
from tests.test_approvals_remote import mail  # noqa: F401 - a fixture: the principal's Gmail
from tests.test_approvals_remote import telegram  # noqa: F401 - a fixture: the local Telegram, the principal known
from tests.test_jorbs import step
from tests.ui_server import start_ui

GONE = "no longer waiting"


def _ledger(jarvis_env, thread_id: str) -> int:
    from orchestrator.tools.ledger import EffectsLedger

    return EffectsLedger(jarvis_env.settings).count_for_thread(thread_id)


def _emailed(mail, about: str = "") -> tuple[str, str]:
    """(the code, the Gmail thread) of the confirmation sent by email whose text has `about`."""
    for index, sent in enumerate(mail.sent):
        text = _said(mail, index)
        found = re.search(r"keeping this code in the reply: ([A-Z2-7]{24})", text)
        if found and about in text:
            return found.group(1), sent["threadId"]
    raise AssertionError(f"no confirmation about {about!r} was emailed")


def _said(mail, index: int = -1) -> str:
    return message_from_bytes(base64.urlsafe_b64decode(mail.sent[index]["raw"] + "==")).get_payload(decode=True).decode()


def _email_poller(jarvis_env, app):
    from orchestrator.channels.email import EmailPoller

    return EmailPoller(jarvis_env.settings, app.remote_answers.on_email, app.remote_answers.email_threads)


def _reply(mail, thread: str, body: str, sender: str = "Boss <boss@home.example>", stamp: Any = VERIFIED) -> None:
    mail.add_message(sender=sender, subject="Re: Jarvis asks", thread_id=thread, body=body,
                     authentication_results=stamp)


def _waiting(jarvis_env, app, name: str) -> Any:
    """A jorb asking to write `name` (fs_write: confirm); its next step ("done") is pushed before it is answered."""
    target = jarvis_env.root / name
    jarvis_env.server.push(step(reasoning="write", script=f"jarvis.fs.write_text({str(target)!r}, 'x')\n'ok'"))
    view = app.jorbs.create(f"Write {name}", f"Write {name}")
    assert view.row.status == "paused", view.row
    return view


def _then_done(jarvis_env) -> None:
    jarvis_env.server.push(step(reasoning="done", done=True, result="written"))


# -- answers expire with the item -------------------------------------------------------------------------------

def test_a_press_for_a_jorb_cancelled_after_the_message_went_out_does_nothing_and_says_it_no_longer_waits(
        jarvis_env, telegram):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    assert app.notifier().sweep() == 1
    message, approve, _ = _sent_with_buttons(telegram)
    app.jorbs.cancel(view.row.id)
    calls = len(jarvis_env.server.requests)
    qid = _press(telegram, _poller(jarvis_env, app), message, approve)
    app.jorbs.wait_background()
    told = _answer_to(telegram, qid)
    assert GONE in told["text"] and "nothing was done" in told["text"] and told["show_alert"], told
    assert telegram.state.buttons(message) == []  # the buttons are taken off, as when it was answered elsewhere
    assert app.jorbs.view(view.row.id).row.status == "cancelled"
    assert not (jarvis_env.root / "report.txt").exists() and _ledger(jarvis_env, view.row.thread_id) == 0
    assert len(jarvis_env.server.requests) == calls
    assert app.jorbs.answers.answered(app.jorbs.answers.ref(
        {**view.pending[0], "thread_id": view.row.thread_id})) is None  # no answer recorded for it


def test_an_email_reply_for_a_jorb_cancelled_after_the_message_went_out_does_nothing_and_says_so(jarvis_env, mail):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    assert app.notifier().sweep() == 1
    code, thread = _emailed(mail)
    app.jorbs.cancel(view.row.id)
    _reply(mail, thread, f"approve\n\n> keeping this code in the reply: {code}")
    assert _email_poller(jarvis_env, app).poll_once() == 1
    app.jorbs.wait_background()
    assert len(mail.sent) == 2 and mail.sent[-1]["threadId"] == thread and GONE in _said(mail)
    assert app.jorbs.view(view.row.id).row.status == "cancelled" and not (jarvis_env.root / "report.txt").exists()
    assert app.remote_answers.email_threads() == []  # closed: the thread is not read again


def test_a_press_for_a_chat_thread_deleted_after_the_message_went_out_does_nothing_and_says_so(jarvis_env, telegram):
    from tests.test_approvals_chat import THREAD, _ask_to_write

    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        _ask_to_write(ui)
        assert app.notifier().sweep() == 1
        message, approve, _ = _sent_with_buttons(telegram)
        with ui.client() as c:
            assert c.delete(f"/api/threads/{THREAD}").status_code == 200
        calls = len(jarvis_env.server.requests)
        qid = _press(telegram, _poller(jarvis_env, app), message, approve)
        assert GONE in _answer_to(telegram, qid)["text"]
        assert telegram.state.buttons(message) == []
        assert not (jarvis_env.root / "out.txt").exists() and _ledger(jarvis_env, THREAD) == 0
        assert len(jarvis_env.server.requests) == calls
        with ui.client() as c:  # the press did not bring the thread back
            assert c.get(f"/api/threads/{THREAD}").status_code == 404


# -- email through the service `jarvis run` starts ----------------------------------------------------------------

def test_an_email_answer_through_the_notify_service_resumes_the_jorb_once(jarvis_env, mail):
    """The approvals-notify service sends the confirmation and polls the replies: a forged reply first (nothing),
    then the principal's verified one (the jorb runs its step once, one acknowledgement), then the same reply
    again (nothing: the thread is closed)."""
    with start_ui(jarvis_env, services=["orchestrator.server.services:approvals_notify_service"]) as ui:
        app = ui.app.state.jarvis.app
        view = _paused_jorb(jarvis_env, app)
        _wait(lambda: mail.sent, "the confirmation to be emailed")
        code, thread = _emailed(mail)
        quoted = f"Approve.\n\nOn Monday Jarvis wrote:\n> keeping this code in the reply: {code}"
        _reply(mail, thread, quoted, stamp=FORGED)
        polled = len([r for r in mail.requests if f"/threads/{thread}" in r[1]])
        _wait(lambda: len([r for r in mail.requests if f"/threads/{thread}" in r[1]]) > polled + 1,
              "the service to read the thread twice")
        assert app.jorbs.view(view.row.id).row.status == "paused" and len(mail.sent) == 1  # nothing done or said
        _reply(mail, thread, quoted)
        _wait(lambda: app.jorbs.view(view.row.id).row.status == "done", "the jorb to finish")
        assert (jarvis_env.root / "report.txt").read_text() == "the report"
        _wait(lambda: len(mail.sent) == 2, "the acknowledgement")
        assert _said(mail).startswith("Approved") and mail.sent[-1]["threadId"] == thread
        assert app.remote_answers.email_threads() == []
        _reply(mail, thread, quoted)  # the same answer again: the thread is no longer read
        time.sleep(20 * jarvis_env.settings.confirmations.notify.check_s)  # the service's rounds go on
        assert len(mail.sent) == 2 and _ledger(jarvis_env, view.row.thread_id) == 1
        assert [(a["via"], a["answer"]) for a in app.jorbs.answers.answers_for_thread(view.row.thread_id)] == [
            ("email", "approve")]


# -- a token answers only from the message it was sent in ---------------------------------------------------------

def test_a_valid_token_pressed_under_another_message_or_in_another_chat_does_nothing(jarvis_env, telegram):
    """Callback data is written by the client (a modified client sends any bytes): the principal's press of item
    A's data under another message of the bot, or in another chat, does not answer A, and A's own button still does."""
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    poller = _poller(jarvis_env, app)
    elsewhere = [{**message, "chat": {"id": -100777}},  # a group the bot is in
                 {**message, "message_id": message["message_id"] + 1},  # another message of the same chat
                 {**message, "chat": {"id": PRINCIPAL + 1}}]
    for other in elsewhere:
        qid = _press(telegram, poller, other, approve)
        assert "nothing was done" in _answer_to(telegram, qid)["text"]
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused" and not (jarvis_env.root / "report.txt").exists()
    assert telegram.state.buttons(message)  # not closed: the token is not spent
    qid = _press(telegram, poller, message, approve)
    assert _answer_to(telegram, qid)["text"].startswith("Approved")
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "done"


def test_a_press_without_a_message_does_nothing(jarvis_env, telegram):
    """An inline message's press carries no message (Jarvis never sends inline ones): it answers nothing."""
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    _, approve, _ = _sent_with_buttons(telegram)
    with telegram.state.lock:
        telegram.state.next_query += 1
        qid = str(telegram.state.next_query)
        query = {"id": qid, "from": {"id": PRINCIPAL, "is_bot": False, "first_name": "Alice"},
                 "chat_instance": "ci", "inline_message_id": "AAAA", "data": approve}
        telegram.state.queries[qid] = query
        telegram.state.updates.append({"update_id": telegram.state.next_update, "callback_query": query})
        telegram.state.next_update += 1
    assert _poller(jarvis_env, app).poll_once(timeout=0) == 1
    assert "nothing was done" in _answer_to(telegram, qid)["text"]
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused"


def test_an_approve_reply_quoting_the_code_of_another_item_answers_neither(jarvis_env, mail):
    """Two jorbs wait, each emailed in its own thread: a reply in A's thread with B's code does not answer B (nor
    A); B's code in B's thread does."""
    app = jarvis_env.app()
    first, second = _waiting(jarvis_env, app, "a.txt"), _waiting(jarvis_env, app, "b.txt")
    assert app.notifier().sweep() == 2
    (code_a, thread_a), (code_b, thread_b) = _emailed(mail, "a.txt"), _emailed(mail, "b.txt")
    assert thread_a != thread_b and code_a != code_b
    poller = _email_poller(jarvis_env, app)
    _reply(mail, thread_a, f"approve\n\n> keeping this code in the reply: {code_b}")
    assert poller.poll_once() == 1
    app.jorbs.wait_background()
    assert "nothing was done" in _said(mail) and mail.sent[-1]["threadId"] == thread_a
    assert [app.jorbs.view(j.row.id).row.status for j in (first, second)] == ["paused", "paused"]
    assert len(app.remote_answers.email_threads()) == 2  # neither spent
    _then_done(jarvis_env)
    _reply(mail, thread_b, f"deny\n\n> keeping this code in the reply: {code_b}")
    assert poller.poll_once() == 1
    app.jorbs.wait_background()
    assert _said(mail).startswith("Denied") and mail.sent[-1]["threadId"] == thread_b
    assert app.jorbs.view(first.row.id).row.status == "paused" and len(app.remote_answers.email_threads()) == 1
    assert not (jarvis_env.root / "a.txt").exists() and not (jarvis_env.root / "b.txt").exists()


def test_a_reply_quoting_two_codes_answers_neither(jarvis_env, mail):
    """A reply that quotes two known codes (its own and another message's, say a forwarded digest): which one the
    first word is for cannot be told, so neither is answered, whatever their order."""
    app = jarvis_env.app()
    first, second = _waiting(jarvis_env, app, "a.txt"), _waiting(jarvis_env, app, "b.txt")
    assert app.notifier().sweep() == 2
    (code_a, thread_a), (code_b, _) = _emailed(mail, "a.txt"), _emailed(mail, "b.txt")
    poller = _email_poller(jarvis_env, app)
    for body in (f"approve\n> {code_a}\n> {code_b}", f"approve\n> {code_b}\n> {code_a}"):
        _reply(mail, thread_a, body)
        assert poller.poll_once() == 1
        app.jorbs.wait_background()
        assert "more than one code" in _said(mail)
        assert [app.jorbs.view(j.row.id).row.status for j in (first, second)] == ["paused", "paused"]
    _then_done(jarvis_env)
    _reply(mail, thread_a, f"approve\n> {code_a}\n> {code_a}\n> NOTACODEBUTTWENTYFOURCHR")  # its own code twice, and a word shaped like a code
    assert poller.poll_once() == 1
    app.jorbs.wait_background()
    assert _said(mail).startswith("Approved") and app.jorbs.view(first.row.id).row.status == "done"
    assert app.jorbs.view(second.row.id).row.status == "paused"


# -- used once, across a restart --------------------------------------------------------------------------------

def test_a_used_token_stays_used_across_a_restart(jarvis_env, telegram):
    """Pressed, then a new process: the same data pressed again does nothing, even when the item is still pending
    (the press's process died before it applied the answer): a token is used once, the UI answers it now."""
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from orchestrator.approvals.store import ApprovalTokenRow
    from orchestrator.storage.engines import dispose_all, utcnow

    first = jarvis_env.app()
    view = _paused_jorb(jarvis_env, first)
    first.notifier().sweep()
    message, approve, deny = _sent_with_buttons(telegram)
    store = first.notifier().store
    with Session(store.engine) as s, s.begin():  # used, and the process died before the answer was applied
        s.execute(update(ApprovalTokenRow).values(used_at=utcnow(), used_by="approve"))
    first.close()
    dispose_all()
    second = jarvis_env.app()
    poller = _poller(jarvis_env, second)
    for data in (approve, deny):
        qid = _press(telegram, poller, message, data)
        assert "nothing was done" in _answer_to(telegram, qid)["text"]
    second.jorbs.wait_background()
    assert second.jorbs.view(view.row.id).row.status == "paused" and _ledger(jarvis_env, view.row.thread_id) == 0


def test_a_token_used_before_a_restart_is_refused_after_it(jarvis_env, telegram):
    from orchestrator.storage.engines import dispose_all

    first = jarvis_env.app()
    view = _paused_jorb(jarvis_env, first)
    first.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    _press(telegram, _poller(jarvis_env, first), message, approve)
    first.jorbs.wait_background()
    assert first.jorbs.view(view.row.id).row.status == "done"
    first.close()
    dispose_all()
    second = jarvis_env.app()
    calls = len(jarvis_env.server.requests)
    qid = _press(telegram, _poller(jarvis_env, second), message, approve)
    assert "already answered (approve, from telegram" in _answer_to(telegram, qid)["text"]
    assert len(jarvis_env.server.requests) == calls and _ledger(jarvis_env, view.row.thread_id) == 1


# -- odd callback data ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    "a:" + "A" * 10_000,  # far over Telegram's 64 bytes (a modified client, or a fake server)
    "a:ÄÖÜ€" * 10,  # not ASCII
    "a:\x00\n\r",  # control characters
    "a:TOKEN:a:TOKEN",  # the token with more after it
    "TOKEN",  # the token without an action
    "d",
    ":",
    "",
])
def test_odd_callback_data_does_nothing_and_the_real_button_still_works(jarvis_env, telegram, data):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    app.notifier().sweep()
    message, approve, _ = _sent_with_buttons(telegram)
    token = approve.partition(":")[2]
    poller = _poller(jarvis_env, app)
    qid = _press(telegram, poller, message, data.replace("TOKEN", token))
    told = _answer_to(telegram, qid)
    assert "nothing was done" in told["text"] and len(told["text"]) <= 200
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused" and telegram.state.buttons(message)
    _press(telegram, poller, message, approve)
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "done"


# -- who sent the email ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sender, stamp", [
    # the principal's address as the display name, Mallory's own (verified) address
    ('"boss@home.example" <mallory@evil.example>', "dmarc=pass header.from=evil.example"),
    ("Boss (boss@home.example) <mallory@evil.example>", "dmarc=pass header.from=evil.example"),
    # an unquoted address before the real one: Python reads the first, a mail server the one in <>
    ("boss@home.example <mallory@evil.example>", "dkim=pass header.i=@evil.example; dmarc=pass header.from=evil.example"),
    ("boss@home.example)<mallory@evil.example>", "dmarc=pass header.from=evil.example"),  # CVE-2023-27043's shape
    ("boss@home.example, mallory@evil.example", "dmarc=pass header.from=evil.example"),  # two From: addresses
    ("mallory@evil.example, boss@home.example", "dmarc=pass header.from=evil.example"),
    # a look-alike domain the principal's name is under
    ("Boss <boss@home.example.evil.example>", "dmarc=pass header.from=home.example.evil.example"),
    ("Boss <boss@home-example.com>", "dkim=pass header.i=@home-example.com; dmarc=pass header.from=home-example.com"),
])
def test_a_from_dressed_up_as_the_principal_does_nothing(jarvis_env, mail, sender, stamp):
    app = jarvis_env.app()
    view = _paused_jorb(jarvis_env, app)
    assert app.notifier().sweep() == 1
    code, thread = _emailed(mail)
    _reply(mail, thread, f"approve\n> {code}", sender=sender, stamp=f"mx.google.com; {stamp}")
    assert _email_poller(jarvis_env, app).poll_once() == 1
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "paused" and len(mail.sent) == 1  # nothing done, nothing said
    assert len(app.remote_answers.email_threads()) == 1  # the principal's own reply still answers it
    _reply(mail, thread, f"approve\n> {code}")
    assert _email_poller(jarvis_env, app).poll_once() == 1
    app.jorbs.wait_background()
    assert app.jorbs.view(view.row.id).row.status == "done"
