"""[26] A chat thread's confirmations answered from the phone: sent to the principal over Telegram (the local Bot
API server) and email (the local Gmail server) when no UI watches them, answered once, by the principal only, the
way the UI's dialog answers them (chat/answering.py: the thread's graph resumed with the decision for that call);
and the UI's answers bound to the question they were given to (`ref`)."""

from __future__ import annotations

import base64
import re
import threading
from email import message_from_bytes
from typing import Any

import pytest

from tests.conftest import answer, tool_call
from tests.test_approvals_remote import (FORGED, PRINCIPAL, STRANGER, VERIFIED, _answer_to, _config, _poller, _press,
                                         _sent_with_buttons, _wait)
from tests.test_approvals_remote import mail  # noqa: F401 - a fixture: the principal's Gmail, set up once
from tests.test_approvals_remote import telegram  # noqa: F401 - a fixture: the local Telegram, the principal known
from tests.test_jorbs import step
from tests.test_ui_browser import browser, open_ui, send, shot  # noqa: F401 - fixtures
from tests.ui_server import start_ui

THREAD = "web-phone"


def _ask_to_write(ui, thread: str = THREAD, *names: str) -> list[dict[str, Any]]:
    """A chat turn that asks to write files (fs_write: confirm), one call per name, and stops there."""
    env = ui.env
    calls = [{"name": "fs_write_text", "arguments": {"path": str(env.root / n), "content": n}}
             for n in names or ("out.txt",)]
    env.server.push({"tool_calls": calls})
    events = ui.stream(f"/api/threads/{thread}/messages", {"text": "write the files"})
    asked = [e for e in events if e["event"] == "confirmation"]
    assert len(asked) == len(calls), events
    return asked


def _thread(ui, thread: str = THREAD) -> dict[str, Any]:
    with ui.client() as c:
        return c.get(f"/api/threads/{thread}").json()


def _settled(ui, thread: str = THREAD) -> dict[str, Any]:
    return _wait(lambda: (lambda t: None if t["running"] else t)(_thread(ui, thread)), "the turn to end")


def test_a_chat_confirmation_reaches_telegram_and_the_principals_press_resumes_the_turn_once(jarvis_env, telegram):
    """End to end through `jarvis run`'s services: the notifier sends, the Telegram poller takes the press, the
    thread's turn runs once and the answer shows in the thread."""
    services = ["orchestrator.server.services:telegram_inbound_service",
                "orchestrator.server.services:approvals_notify_service"]
    with start_ui(jarvis_env, services=services) as ui:
        (asked,) = _ask_to_write(ui)
        _wait(lambda: telegram.state.sent, "the confirmation to reach Telegram")
        message, approve, _ = _sent_with_buttons(telegram)
        assert f"conversation {THREAD}" in message["text"] and "fs_write" in message["text"]
        assert "out.txt" in message["text"] and "Why it asks" in message["text"]
        assert _thread(ui)["pending"][0]["sent"][0]["channel"] == "telegram"  # the UI shows where it was sent
        requests = len(jarvis_env.server.requests)
        jarvis_env.server.push(answer("Written."))
        qid = telegram.state.press(message, approve, user_id=PRINCIPAL)
        _wait(lambda: _answer_to(telegram, qid), "the press to be answered")
        assert _answer_to(telegram, qid)["text"].startswith("Approved")
        _wait(lambda: (lambda t: t if t["messages"][-1]["content"] == "Written." else None)(_thread(ui)),
              "the turn to answer")
        thread = _settled(ui)  # the last message is kept a moment before the turn lets the thread go
        assert (jarvis_env.root / "out.txt").read_text() == "out.txt"
        assert thread["pending"] == []
        assert [(a["via"], a["answer"]) for a in thread["answered"]] == [("telegram", "approve")]
        assert len(jarvis_env.server.requests) == requests + 1  # resumed once: one more model call
        # the buttons go after the press is answered, on the poller's thread, which the turn may finish before
        _wait(lambda: telegram.state.buttons(message) == [], "the buttons to go")
        assert len(telegram.state.sent) == 1


def test_another_users_press_and_a_replay_do_nothing(jarvis_env, telegram):
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        _ask_to_write(ui)
        assert app.notifier().sweep() == 1
        message, approve, deny = _sent_with_buttons(telegram)
        poller = _poller(jarvis_env, app)
        qid = _press(telegram, poller, message, approve, user_id=STRANGER)
        assert _answer_to(telegram, qid) is None  # the stranger gets nothing
        assert _thread(ui)["pending"] and not (jarvis_env.root / "out.txt").exists()
        jarvis_env.server.push(answer("Written."))
        _press(telegram, poller, message, approve)
        _settled(ui)
        calls = len(jarvis_env.server.requests)
        for data in (approve, deny):  # the same press again, and the other button of the used message
            qid = _press(telegram, poller, message, data)
            assert "already answered (approve, from telegram" in _answer_to(telegram, qid)["text"]
        assert len(jarvis_env.server.requests) == calls and _thread(ui)["running"] is False
        from orchestrator.tools.ledger import EffectsLedger

        assert EffectsLedger(jarvis_env.settings).count_for_thread(THREAD) == 1


def test_a_restart_between_send_and_press_still_works(jarvis_env, telegram):
    from orchestrator.storage.engines import dispose_all

    with start_ui(jarvis_env) as first:
        _ask_to_write(first)
        assert first.app.state.jarvis.app.notifier().sweep() == 1
    message, approve, _ = _sent_with_buttons(telegram)
    listed = jarvis_env.cli("pending", check=True).stdout  # another process says where it was sent
    assert "sent to telegram (42)" in listed and THREAD in listed, listed
    dispose_all()  # a new process: the token is only in the database
    with start_ui(jarvis_env) as second:
        jarvis_env.server.push(answer("Written after the restart."))
        _press(telegram, _poller(jarvis_env, second.app.state.jarvis.app), message, approve)
        thread = _settled(second)
        assert thread["messages"][-1]["content"] == "Written after the restart."
    assert (jarvis_env.root / "out.txt").read_text() == "out.txt"


def test_the_phone_is_shown_a_file_name_as_it_is(jarvis_env, telegram):
    """A right-to-left override in a file name makes `invoice<RLO>txt.sh` read `invoicehs.txt` on a phone, and a
    tag character hides text: both are written out in what is sent (core/visible.py), and the call is unchanged."""
    name = "invoice\u202etxt.sh" + "".join(chr(0xE0000 + ord(c)) for c in "hidden")
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        (asked,) = _ask_to_write(ui, THREAD, name)
        assert app.notifier().sweep() == 1
    (message,) = telegram.state.sent
    text = message["text"]
    assert "\u202e" not in text and "\U000e0068" not in text, text
    assert text.count("invoice\\u202etxt.sh") == 3, text  # the summary, the path and the content (the name)
    assert asked["args"]["path"] == str(jarvis_env.root / name)


def test_one_of_several_calls_answered_from_the_phone_the_others_stay_pending(jarvis_env, telegram):
    """Two calls of one turn, two messages: each button answers its own call; the turn goes on after the last."""
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        first, second = _ask_to_write(ui, THREAD, "a.txt", "b.txt")
        assert app.notifier().sweep() == 2
        by_file = {("a.txt" if "a.txt" in m["text"] else "b.txt"): m for m in telegram.state.sent}
        poller = _poller(jarvis_env, app)
        deny_b = telegram.state.buttons(by_file["b.txt"])[1]["callback_data"]
        qid = _press(telegram, poller, by_file["b.txt"], deny_b)
        assert _answer_to(telegram, qid)["text"].startswith("Denied")
        thread = _settled(ui)
        assert [p["interrupt_id"] for p in thread["pending"]] == [first["interrupt_id"]]  # a.txt still asks
        assert thread["pending"][0]["ref"] == first["ref"]
        assert not (jarvis_env.root / "b.txt").exists()
        jarvis_env.server.push(answer("Wrote a, not b."))
        approve_a = telegram.state.buttons(by_file["a.txt"])[0]["callback_data"]
        qid = _press(telegram, poller, by_file["a.txt"], approve_a)  # its message still works
        assert _answer_to(telegram, qid)["text"].startswith("Approved")
        thread = _settled(ui)
        assert thread["pending"] == [] and thread["messages"][-1]["content"] == "Wrote a, not b."
        assert (jarvis_env.root / "a.txt").read_text() == "a.txt" and not (jarvis_env.root / "b.txt").exists()
        told = [m["content"] for m in jarvis_env.server.requests[-1]["messages"] if m["role"] == "tool"]
        assert len(told) == 2 and any("denied" in t for t in told)
        assert sorted((a["via"], a["answer"]) for a in thread["answered"]) == [("telegram", "approve"),
                                                                              ("telegram", "deny")]


def test_the_ui_and_the_phone_answering_together_one_wins_the_other_is_told(jarvis_env, telegram):
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        (asked,) = _ask_to_write(ui)
        app.notifier().sweep()
        message, approve, _ = _sent_with_buttons(telegram)
        poller = _poller(jarvis_env, app)
        jarvis_env.server.push(answer("Written."))
        start = threading.Barrier(2)
        results: dict[str, Any] = {}

        def from_ui() -> None:
            start.wait()
            with ui.client() as c, c.stream("POST", f"/api/threads/{THREAD}/resume", json={
                    "answers": {asked["interrupt_id"]: {"answer": "approve", "ref": asked["ref"]}}}) as resp:
                results["ui"] = (resp.status_code, resp.read().decode())

        def from_phone() -> None:
            start.wait()
            results["phone"] = _press(telegram, poller, message, approve)

        threads = [threading.Thread(target=from_ui), threading.Thread(target=from_phone)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        thread = _settled(ui)
        ui_won = results["ui"][0] == 200
        phone_text = _answer_to(telegram, results["phone"])["text"]
        assert ui_won != phone_text.startswith("Approved"), (results["ui"], phone_text)
        if ui_won:
            assert "already answered (approve, from the web UI" in phone_text
        else:
            assert results["ui"][0] == 409 and "already answered (approve, from telegram" in results["ui"][1]
        assert thread["messages"][-1]["content"] == "Written."
        from orchestrator.tools.ledger import EffectsLedger

        assert EffectsLedger(jarvis_env.settings).count_for_thread(THREAD) == 1
        assert len(thread["answered"]) == 1


def test_the_phone_first_then_the_ui_and_the_ui_first_then_the_phone(jarvis_env, telegram):
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        poller = _poller(jarvis_env, app)
        # The phone first (deny): the UI's late approval is refused, saying so, and nothing is written.
        (asked,) = _ask_to_write(ui)
        app.notifier().sweep()
        message, _, deny = _sent_with_buttons(telegram)
        jarvis_env.server.push(answer("Not written."))
        assert _answer_to(telegram, _press(telegram, poller, message, deny))["text"].startswith("Denied")
        with ui.client() as c:
            late = c.post(f"/api/threads/{THREAD}/resume",
                          json={"answers": {asked["interrupt_id"]: {"answer": "approve", "ref": asked["ref"]}}})
        assert late.status_code == 409 and "already answered (deny, from telegram at" in late.json()["detail"]
        _settled(ui)
        assert not (jarvis_env.root / "out.txt").exists()
        # The UI first: the phone's press is told.
        telegram.state.sent.clear()
        (asked,) = _ask_to_write(ui, "web-second")
        app.notifier().sweep()
        message, approve, _ = _sent_with_buttons(telegram)
        jarvis_env.server.push(answer("Written."))
        ui.stream("/api/threads/web-second/resume",
                  {"answers": {asked["interrupt_id"]: {"answer": "approve", "ref": asked["ref"]}}})
        qid = _press(telegram, poller, message, approve)
        assert "already answered (approve, from the web UI at" in _answer_to(telegram, qid)["text"]
        assert [(a["via"], a["answer"]) for a in _thread(ui, "web-second")["answered"]] == [("the web UI", "approve")]


def test_a_ui_watching_the_thread_holds_it_back_and_a_held_thread_is_not_sent(jarvis_env, telegram):
    """The UI showing the thread's confirmation is recorded (GET /api/threads/ID), and a thread a process holds
    (a `jarvis chat` prompt waiting in its terminal) is watched too."""
    _config(jarvis_env, telegram, to=["telegram"], telegram_user_id=PRINCIPAL, after_s=3600)
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        _ask_to_write(ui)
        store = app.thread_answers.store
        assert store.ui_seen_at(THREAD) is None
        _thread(ui)
        assert store.ui_seen_at(THREAD) is not None
    _config(jarvis_env, telegram, to=["telegram"], telegram_user_id=PRINCIPAL, after_s=0)
    from orchestrator.storage.claims import Claims

    app = jarvis_env.app()
    with Claims(jarvis_env.settings).held(THREAD):
        assert app.notifier().sweep() == 0
    assert app.notifier().sweep() == 1


def test_an_email_reply_from_a_forged_sender_does_nothing_and_the_verified_one_answers(jarvis_env, mail):
    from orchestrator.channels.email import EmailPoller

    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        _ask_to_write(ui)
        assert app.notifier().sweep() == 1
        (sent,) = mail.sent
        text = message_from_bytes(base64.urlsafe_b64decode(sent["raw"] + "==")).get_payload(decode=True).decode()
        assert f"conversation {THREAD}" in text and "out.txt" in text
        code = re.search(r"keeping this code in the reply: ([A-Z2-7]{24})", text).group(1)
        remote = app.remote_answers
        poller = EmailPoller(jarvis_env.settings, remote.on_email, remote.email_threads)
        quoted = f"approve\n\n> keeping this code in the reply: {code}"
        mail.add_message(sender="Boss <boss@home.example>", subject="Re: Jarvis asks", thread_id=sent["threadId"],
                         body=quoted, authentication_results=FORGED)  # the principal's address, not vouched for
        assert poller.poll_once() == 1
        assert _thread(ui)["pending"] and len(mail.sent) == 1  # nothing done, nothing said
        jarvis_env.server.push(answer("Written."))
        mail.add_message(sender="Boss <boss@home.example>", subject="Re: Jarvis asks", thread_id=sent["threadId"],
                         body=quoted, authentication_results=VERIFIED)
        assert poller.poll_once() == 1
        thread = _settled(ui)
        assert thread["messages"][-1]["content"] == "Written." and thread["answered"][0]["via"] == "email"
        assert (jarvis_env.root / "out.txt").read_text() == "out.txt"
        assert mail.sent[-1]["threadId"] == sent["threadId"] and remote.email_threads() == []


def test_a_press_while_another_process_holds_the_thread_is_not_spent(jarvis_env, telegram):
    """`jarvis chat` in a terminal holds the thread: the press is told to try again, and is not recorded as the
    answer (the same button works once the thread is free)."""
    from orchestrator.storage.claims import Claims

    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        _ask_to_write(ui)
        app.notifier().sweep()
        message, approve, _ = _sent_with_buttons(telegram)
        poller = _poller(jarvis_env, app)
        with Claims(jarvis_env.settings, worker="a terminal").held(THREAD):
            qid = _press(telegram, poller, message, approve)
        assert "try again" in _answer_to(telegram, qid)["text"]
        assert _thread(ui)["answered"] == [] and not (jarvis_env.root / "out.txt").exists()
        jarvis_env.server.push(answer("Written."))
        qid = _press(telegram, poller, message, approve)
        assert _answer_to(telegram, qid)["text"].startswith("Approved")
        _settled(ui)
        assert (jarvis_env.root / "out.txt").read_text() == "out.txt"


def test_an_old_click_does_not_answer_a_new_question_parked_under_the_same_interrupt_id(jarvis_env):
    """A jorb's step ran again from its checkpoint (JorbService.run with no input, as a retry does) and its script
    now makes another call: LangGraph parks it under the same interrupt id. The UI's click on the question it
    showed (its `ref`) does not answer the new one, neither by Approve (decide) nor by the dialog (resume)."""
    src, out = jarvis_env.root / "src.txt", jarvis_env.root / "out.txt"
    src.write_text("first")
    jarvis_env.server.push(step(reasoning="copy", script=f"jarvis.fs.write_text({str(out)!r}, "
                                                         f"jarvis.fs.read_text({str(src)!r}))\n'ok'"))
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        view = app.jorbs.create("Copy", "Copy the file")
        with ui.client() as c:
            (shown,) = c.get(f"/api/jorbs/{view.row.id}").json()["pending"]
        assert shown["args"]["content"] == "first"
        src.write_text("second")
        app.jorbs.run(view.row.id, None)
        with ui.client() as c:
            (now,) = c.get(f"/api/jorbs/{view.row.id}").json()["pending"]
            assert now["interrupt_id"] == shown["interrupt_id"] and now["args"]["content"] == "second"
            assert now["ref"] != shown["ref"]
            old = c.post(f"/api/jorbs/{view.row.id}/decide",
                         json={"interrupt_id": shown["interrupt_id"], "ref": shown["ref"], "action": "approve"})
            assert old.status_code == 409 and "changed since it was shown" in old.json()["detail"], old.text
            old = c.post(f"/api/jorbs/{view.row.id}/resume",
                         json={"answers": {shown["interrupt_id"]: {"answer": "approve", "ref": shown["ref"]}}})
            assert old.status_code == 409 and "changed since it was shown" in old.json()["detail"], old.text
        app.jorbs.wait_background()
        (still,) = app.jorbs.view(view.row.id).pending
        assert still["interrupt_id"] == now["interrupt_id"] and not still.get("error")  # not answered, not re-asked
        assert app.jorbs.answers.answers_for_thread(view.row.thread_id) == [] and not out.exists()


@pytest.mark.browser
def test_the_chat_view_shows_where_it_was_sent_and_follows_the_phone_s_answer(jarvis_env, telegram, open_ui):
    """The dialog says where the confirmation was also sent; the phone answers while it is open: the dialog goes
    by itself and the turn the answer resumed is shown, without a reload (an open view used to show it only after
    one), and the thread lists where the answer came from."""
    page, server = open_ui()
    app = server.app.state.jarvis.app
    target = jarvis_env.root / "note.txt"
    jarvis_env.server.push(tool_call("fs_write_text", path=str(target), content="from the phone"))
    send(page, "write a note")
    page.get_by_role("dialog").wait_for()
    assert app.notifier().sweep() == 1
    page.reload()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    assert "Also sent to telegram (42)" in dialog.locator(".sent-to").inner_text()
    message, approve, _ = _sent_with_buttons(telegram)
    jarvis_env.server.push(answer("Written from your phone."))
    _press(telegram, _poller(jarvis_env, app), message, approve)
    page.locator(".msg.assistant", has_text="Written from your phone.").wait_for()
    dialog.wait_for(state="detached")
    page.locator(".answered summary").click()
    assert "approve fs_write_text: from telegram" in page.locator(".answered").inner_text()
    shot(page, "chat-answered-from-telegram")
    assert target.read_text() == "from the phone"
    assert not page.js_errors, page.js_errors


@pytest.mark.browser
def test_a_click_after_the_phone_answered_is_told(jarvis_env, telegram, open_ui):
    """The click that comes before the view has seen the phone's answer is told "already answered" (the dialog
    sends the question's ref)."""
    page, server = open_ui()
    app = server.app.state.jarvis.app
    jarvis_env.server.push(tool_call("fs_write_text", path=str(jarvis_env.root / "late.txt"), content="x"))
    send(page, "write a note")
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    # The view learns of the phone's answer from its look at the thread list (every few seconds): held unanswered
    # until the click is told, so the click comes first however slow the machine. (Hiding the view instead only
    # paused the looks: the next one, due within seconds of showing it again, could close the dialog before a
    # slow click reached it.)
    held: list = []
    page.route("**/api/threads", lambda route: held.append(route))
    assert app.notifier().sweep() == 1
    message, approve, _ = _sent_with_buttons(telegram)
    jarvis_env.server.push(answer("Written."))
    _press(telegram, _poller(jarvis_env, app), message, approve)
    _settled(server, page.evaluate("location.hash").split("/", 1)[1])
    dialog.get_by_role("button", name="Approve").click()
    page.locator(".problem", has_text="already answered (approve, from telegram").wait_for()
    for route in held:
        route.continue_()
    page.unroute("**/api/threads")  # continues any look held since


def test_the_cli_answering_a_chat_confirmation_first_is_told_to_the_phone(jarvis_env, telegram):
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        (asked,) = _ask_to_write(ui)
        app.notifier().sweep()
        message, approve, _ = _sent_with_buttons(telegram)
        jarvis_env.server.push(answer("Written."))
        done = jarvis_env.cli("approve", THREAD, "--call", asked["interrupt_id"])
        assert done.returncode == 0, done.stderr
        qid = _press(telegram, _poller(jarvis_env, app), message, approve)
        assert "already answered (approve, from the CLI at" in _answer_to(telegram, qid)["text"]
        assert [a["via"] for a in _thread(ui)["answered"]] == ["the CLI"]


def test_an_answer_left_by_a_process_that_died_before_resuming_does_not_block_the_question(jarvis_env, telegram):
    """A process recorded the phone's answer and died before the thread was resumed: the question still waits.
    While that answer is recent (its turn could still be starting) the UI is told "already answered"; once a
    claim's lease has passed with no turn on the thread, the question can be answered again."""
    from datetime import timedelta

    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from orchestrator.approvals.store import AnsweredRow
    from orchestrator.storage.engines import utcnow

    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        (asked,) = _ask_to_write(ui)
        (item,) = app.pending(THREAD)
        store = app.thread_answers.store
        store.claim_answer(item, "approve", "telegram")  # what the dead process left
        body = {"answers": {asked["interrupt_id"]: {"answer": "deny", "ref": asked["ref"]}}}
        with ui.client() as c:
            recent = c.post(f"/api/threads/{THREAD}/resume", json=body)
        assert recent.status_code == 409 and "already answered (approve, from telegram" in recent.json()["detail"]
        lease = jarvis_env.settings.storage.claim_lease_s
        with Session(store.engine) as s, s.begin():
            s.execute(update(AnsweredRow).values(answered_at=utcnow() - timedelta(seconds=lease + 5)))
        jarvis_env.server.push(answer("Not written."))
        events = ui.stream(f"/api/threads/{THREAD}/resume", body)
        assert any(e["event"] == "done" for e in events) and not (jarvis_env.root / "out.txt").exists()
        assert [(a["via"], a["answer"]) for a in _thread(ui)["answered"]] == [("the web UI", "deny")]


def test_a_known_secret_in_the_call_is_masked_in_the_message_that_leaves_the_machine(jarvis_env, telegram):
    """The arguments of a chat call can hold what the user pasted: the bot token (a secret Jarvis knows) is not
    sent to Telegram in the confirmation's text; the call itself is unchanged."""
    with start_ui(jarvis_env) as ui:
        app = ui.app.state.jarvis.app
        jarvis_env.server.push(tool_call("fs_write_text", path=str(jarvis_env.root / "token.txt"), content="123:TEST"))
        ui.stream(f"/api/threads/{THREAD}/messages", {"text": "save my bot token"})
        assert app.notifier().sweep() == 1
        (message,) = telegram.state.sent
        assert "123:TEST" not in message["text"] and "***" in message["text"]
        assert app.pending(THREAD)[0]["args"]["content"] == "123:TEST"
