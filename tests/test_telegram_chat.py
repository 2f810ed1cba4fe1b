"""[29] The user's own conversation with Jarvis over Telegram (the local Bot API server, the scripted model): the
same graph, tools and approvals as the web UI, the answer streamed by editing one message, confirmations answered
with buttons in the same chat, each message taken once; a stranger starts nothing and reaches no model."""

from __future__ import annotations

import html
import time
from typing import Any

import pytest

from tests.conftest import answer, tool_call
from tests.fakes.telegram_server import TelegramServer
from tests.test_approvals_remote import PRINCIPAL, STRANGER, _wait
from tests.ui_server import start_ui

THREAD = f"telegram-{PRINCIPAL}-1"


@pytest.fixture
def telegram(jarvis_env, monkeypatch):
    with TelegramServer(token="123:TEST") as fake:
        monkeypatch.setenv("JARVIS_SECRET_TELEGRAM_TOKEN", "123:TEST")
        _config(jarvis_env, fake)
        yield fake


def _config(jarvis_env, fake: TelegramServer, **telegram: Any) -> None:
    jarvis_env.write_config(channels={
        "telegram": {"enabled": True, "token": {"secret": "telegram_token"}, "api_base": fake.base_url,
                     "poll_timeout_s": 0, **telegram},
        "user_identities": [f"telegram:{PRINCIPAL}"]})


def _poller(app):
    """The poller `jarvis run` starts (server/services.py), driven one poll at a time."""
    from orchestrator.channels.telegram import TelegramPoller

    delivered: list[tuple] = []
    poller = TelegramPoller(app.settings, lambda *a: delivered.append(a) or app.jorbs.inbound(a[0]),
                            on_callback=app.remote_answers.on_callback, converse=app.telegram_chat.take)
    poller.delivered = delivered
    return poller


def _shown(telegram, chat: int = PRINCIPAL) -> list[str]:
    return telegram.state.shown(chat)


def _settled(app, thread: str = THREAD) -> None:
    """The turn ended and its relay wrote the last of the answer into the chat (the relay ends the message's
    record after its last edit: the turn alone can end a moment before that edit is sent)."""
    _wait(lambda: app.turn_hub().running(thread) is None and not app.telegram_chat.handled.unfinished(),
          "the turn to end and its answer to be written")


def test_the_principal_lists_a_folder_then_approves_a_write_from_the_chat_and_it_is_written_once(jarvis_env, telegram):
    """Done when: through `jarvis run`'s services, the principal asks for the files of a folder and gets them; asks
    for a write, gets a confirmation with buttons in the same chat, approves it there, and the file is written once
    (the effects ledger); the thread is the web UI's too."""
    from orchestrator.tools.ledger import EffectsLedger

    (jarvis_env.root / "notes.txt").write_text("n")
    (jarvis_env.root / "plans.md").write_text("p")
    with start_ui(jarvis_env, services=["orchestrator.server.services:telegram_inbound_service"]) as ui:
        jarvis_env.server.push(tool_call("fs_list_dir", path=str(jarvis_env.root)),
                               answer("You have notes.txt and plans.md."))
        telegram.state.say("what files are in my folder?", user_id=PRINCIPAL)
        _wait(lambda: "You have notes.txt and plans.md." in _shown(telegram), "the answer in the chat")
        listed = [m for m in jarvis_env.server.requests[1]["messages"] if m.get("role") == "tool"]
        assert "notes.txt" in str(listed) and "plans.md" in str(listed)  # the real tool ran, its result went back
        assert {"chat_id": str(PRINCIPAL), "action": "typing"} in telegram.state.actions

        target = jarvis_env.root / "out.txt"
        jarvis_env.server.push(tool_call("fs_write_text", path=str(target), content="hello"))
        telegram.state.say("write hello to out.txt", user_id=PRINCIPAL)
        asked = _wait(lambda: [m for m in telegram.state.sent if telegram.state.buttons(m)], "the confirmation")
        (message,) = asked
        assert message["chat"]["id"] == PRINCIPAL and "fs_write" in message["text"] and "out.txt" in message["text"]
        assert not target.exists()
        requests = len(jarvis_env.server.requests)
        jarvis_env.server.push(answer("Written."))
        approve = telegram.state.buttons(message)[0]["callback_data"]
        telegram.state.press(message, approve, user_id=PRINCIPAL)
        _wait(lambda: "Written." in _shown(telegram), "the resumed turn's answer in the chat")
        assert target.read_text() == "hello"
        assert EffectsLedger(jarvis_env.settings).count_for_thread(THREAD) == 1
        assert len(jarvis_env.server.requests) == requests + 1  # resumed once
        _wait(lambda: telegram.state.buttons(message) == [], "the buttons to go")
        with ui.client() as c:  # the same thread in the web UI
            thread = c.get(f"/api/threads/{THREAD}").json()
        said = [m["content"] for m in thread["messages"]]
        assert "what files are in my folder?" in said and "Written." in said
        assert [(a["via"], a["answer"]) for a in thread["answered"]] == [("telegram", "approve")]


def test_a_strangers_message_starts_no_turn_and_reaches_no_model(jarvis_env, telegram):
    app = jarvis_env.app()
    poller = _poller(app)
    telegram.state.say("list my files and send them to me", username="mallory", user_id=STRANGER)
    assert poller.poll_once(timeout=0) == 1
    assert jarvis_env.server.requests == []  # the planner (any model) heard nothing
    assert app.turn_hub().running_ids() == [] and _shown(telegram, STRANGER) == []
    assert len(poller.delivered) == 1  # it went where other people's messages go (the inbox)
    inbox = app.jorbs.store.messages(direction="in")
    assert [(m.text, m.jorb_id) for m in inbox] == [("list my files and send them to me", None)]


def test_a_forged_sender_under_the_principals_handle_starts_no_turn(jarvis_env, telegram):
    """The user named by @handle: the account first seen with it is the user; another account taking the handle
    (a changed username, a look-alike) is someone else, and reaches no model."""
    jarvis_env.write_config(channels={
        "telegram": {"enabled": True, "token": {"secret": "telegram_token"}, "api_base": telegram.base_url,
                     "poll_timeout_s": 0},
        "user_identities": ["@alice"]})
    app = jarvis_env.app()
    poller = _poller(app)
    telegram.state.say("/help", username="alice", user_id=PRINCIPAL)
    poller.poll_once(timeout=0)
    assert _shown(telegram)[0].startswith("You are talking to Jarvis")  # the account first seen with @alice
    telegram.state.say("list my files and send them to me", username="alice", user_id=STRANGER)
    poller.poll_once(timeout=0)
    assert jarvis_env.server.requests == [] and app.turn_hub().running_ids() == []
    assert _shown(telegram, STRANGER) == [] and len(poller.delivered) == 1  # the inbox, as anyone's


def test_a_group_message_from_the_principal_is_not_the_conversation(jarvis_env, telegram):
    app = jarvis_env.app()
    poller = _poller(app)
    telegram.state.say("list my files", user_id=PRINCIPAL, chat_id=-100, chat_type="group")
    poller.poll_once(timeout=0)
    assert jarvis_env.server.requests == [] and app.turn_hub().running_ids() == []


def test_a_replayed_update_after_a_restart_does_nothing(jarvis_env, telegram):
    from orchestrator.channels.models import ChannelState

    app = jarvis_env.app()
    jarvis_env.server.push(answer("Hello there."))
    telegram.state.say("hi", user_id=PRINCIPAL)
    _poller(app).poll_once(timeout=0)
    _wait(lambda: "Hello there." in _shown(telegram), "the answer")
    _settled(app)
    ChannelState(jarvis_env.settings, "telegram").set("offset", "0")  # the offset lost: the update comes again
    again = jarvis_env.app()  # a restarted Jarvis
    assert _poller(again).poll_once(timeout=0) == 1
    assert again.turn_hub().running_ids() == []
    assert len(jarvis_env.server.requests) == 1 and _shown(telegram) == ["Hello there."]


def test_a_message_edited_after_it_was_answered_starts_no_second_turn(jarvis_env, telegram):
    app = jarvis_env.app()
    jarvis_env.server.push(answer("Sure."))
    message_id = telegram.state.say("delete nothing", user_id=PRINCIPAL)
    poller = _poller(app)
    poller.poll_once(timeout=0)
    _wait(lambda: "Sure." in _shown(telegram), "the answer")
    _settled(app)
    telegram.state.update({"edited_message": {
        "message_id": message_id, "from": {"id": PRINCIPAL, "is_bot": False, "first_name": "A", "username": "alice"},
        "chat": {"id": PRINCIPAL, "type": "private"}, "date": int(time.time()), "edit_date": int(time.time()),
        "text": "delete everything"}})
    poller.poll_once(timeout=0)
    assert len(jarvis_env.server.requests) == 1 and app.turn_hub().running_ids() == []


def test_a_flood_is_refused_past_the_rate_said_once(jarvis_env, telegram):
    _config(jarvis_env, telegram, chat_per_minute=3)
    app = jarvis_env.app()
    for _ in range(6):
        telegram.state.say("/help", user_id=PRINCIPAL)
    _poller(app).poll_once(timeout=0)
    shown = _shown(telegram)
    assert len(shown) == 4 and all(s.startswith("You are talking to Jarvis") for s in shown[:3])
    assert shown[3].startswith("Too many messages at once")
    assert jarvis_env.server.requests == []


def test_a_huge_message_is_refused_with_why_and_reaches_no_model(jarvis_env, telegram):
    app = jarvis_env.app()
    telegram.state.say("x" * 50_000, user_id=PRINCIPAL)
    _poller(app).poll_once(timeout=0)
    assert _shown(telegram) == [
        "That message is longer than Telegram allows (4096 characters); it was not read. Send a shorter one, or put "
        "the text in a file in the web UI."]
    assert jarvis_env.server.requests == []


def test_a_photo_or_a_sticker_is_refused_said_so(jarvis_env, telegram):
    app = jarvis_env.app()
    telegram.state.say(None, user_id=PRINCIPAL, photo=[{"file_id": "p1", "width": 90, "height": 90}])
    telegram.state.say(None, user_id=PRINCIPAL, sticker={"file_id": "s1"})
    assert _poller(app).poll_once(timeout=0) == 2
    assert [s.startswith("Only documents (a PDF or a text file) and voice messages") for s in _shown(telegram)] == [
        True, True]
    assert jarvis_env.server.requests == [] and telegram.state.downloads == []


def test_a_long_answer_with_markup_characters_is_escaped_and_split_at_4096(jarvis_env, telegram):
    app = jarvis_env.app()
    text = "<b>not bold</b> & <script>x</script>\n" + "\n".join(f"line {i} a<b & c>d" for i in range(600))
    jarvis_env.server.push(answer(text))
    telegram.state.say("a long one", user_id=PRINCIPAL)
    _poller(app).poll_once(timeout=0)
    _settled(app)
    _wait(lambda: "".join(_shown(telegram)).endswith("line 599 a<b & c>d"), "the whole answer")
    sent = [m["text"] for m in telegram.state.sent]
    assert len(sent) >= 3 and all(len(html.unescape(t)) <= 4096 for t in sent)
    assert "\n".join(_shown(telegram)) == text  # shown as written, split at line breaks


def test_the_answer_is_streamed_by_edits_at_most_once_a_second(jarvis_env, telegram):
    app = jarvis_env.app()
    words = " ".join(f"word{i}" for i in range(40))
    jarvis_env.server.push({"content": words, "token_delay_s": 0.1})
    telegram.state.say("talk slowly", user_id=PRINCIPAL)
    started = time.monotonic()
    _poller(app).poll_once(timeout=0)
    _settled(app)
    _wait(lambda: _shown(telegram) == [words], "the whole answer")
    (message,) = telegram.state.sent
    edits = [at for at, e in telegram.state.edits if e["message_id"] == message["message_id"]]
    assert len(edits) >= 2, "shown as it is written: the message grew before the answer ended"
    gaps = [b - a for a, b in zip(edits, edits[1:-1])]  # the last one is the whole answer, sent at once
    assert all(g >= 0.9 for g in gaps), gaps
    assert len(edits) <= (time.monotonic() - started) + 2


def test_commands_new_stop_threads_pending_help(jarvis_env, telegram):
    app = jarvis_env.app()
    poller = _poller(app)
    jarvis_env.server.push({"content": "la ", "endless": True})
    telegram.state.say("go on and on", user_id=PRINCIPAL)
    poller.poll_once(timeout=0)
    _wait(lambda: app.turn_hub().running(THREAD), "the turn to run")
    _wait(lambda: telegram.state.sent, "the answer to start")
    telegram.state.say("/stop", user_id=PRINCIPAL)
    poller.poll_once(timeout=0)
    _settled(app)
    _wait(lambda: any("you stopped this turn" in s for s in _shown(telegram)), "the stopped answer")
    telegram.state.say("/new", user_id=PRINCIPAL)
    telegram.state.say("/threads", user_id=PRINCIPAL)
    telegram.state.say("/pending", user_id=PRINCIPAL)
    poller.poll_once(timeout=0)
    shown = _shown(telegram)
    assert f"New conversation (telegram-{PRINCIPAL}-2)" in shown[-3]
    assert THREAD in shown[-2] and "Nothing waits for you." == shown[-1]
    assert app.telegram_chat.thread_of(str(PRINCIPAL)) == f"telegram-{PRINCIPAL}-2"


def test_the_split_never_cuts_an_entity():
    from orchestrator.channels.telegram_replies import split_escaped

    pieces = split_escaped("a" * 4094 + "&&&", limit=4096)
    assert all("&" not in p or p.count("&") == p.count("&amp;") for p in pieces)
    assert html.unescape("".join(pieces)) == "a" * 4094 + "&&&"
