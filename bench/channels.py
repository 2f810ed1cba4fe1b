"""Latency of the user's Telegram and Matrix conversations: from an inbound message to the first character of the
answer leaving Jarvis (the Bot API's sendMessage reaching the local Telegram server; for Matrix, from the
principal's message stored by a real Synapse to the bot's first room_send), against the same turn through the
web API (the first token event of POST /api/threads/{id}/messages), on the same scripted model with a thinking
time before its first token. Both through one `jarvis run` app, interleaved so that load hits both alike.
Floor (issue 29): <= 1.2 x the web API; goal <= 1.05 x. For Matrix both the whole path and Jarvis's part (from
Synapse's sync handing the message over) are printed; the ratio is judged on Jarvis's part, as Telegram's fake Bot
API hands a message over at once. Measured here (load 3, AgentDojo running beside): web API 360 ms, Telegram 412 ms
(1.14x), Matrix 385 ms from the sync (1.07x) and 485 ms from the message sent to Synapse (1.35x); 11.9 messages/s
with 100 chats.

Then throughput: messages handled per second by the one process with `--chats` principal chats (100) writing at
once, `--rounds` times, the scripted model answering at once: from the first message of a round until every chat
shows its whole answer.

    .venv/bin/python bench/channels.py [--reps 9] [--think-ms 300] [--chats 100] [--rounds 3] [--no-matrix]

Matrix needs the pinned Synapse (scripts/fetch_pypi_servers.py, as `make test` installs it).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.llm_server import FakeLLMServer  # noqa: E402
from tests.fakes.telegram_server import TelegramServer  # noqa: E402

ANSWER = "The first words should leave Jarvis as soon as the model writes them, whichever surface asked."


def answer_begins(text: str) -> bool:
    """What the surfaces are timed to: a message that begins the answer (its first words as streamed so far), not a
    notice, a typing signal or another turn's last words."""
    shown = text.strip()
    return bool(shown) and ANSWER.startswith(shown)
PRINCIPAL = 4242
CLIENT = httpx.Client(timeout=30)


def api_first_token(url: str, token: str, server: FakeLLMServer, think_s: float, rep: int) -> float:
    server.push({"content": ANSWER, "delay_s": think_s})
    start = time.perf_counter()
    first = None
    with CLIENT.stream("POST", f"{url}/api/threads/bench-{rep}/messages", json={"text": "hi"},
                       headers={"Authorization": f"Bearer {token}"}) as resp:
        for line in resp.iter_lines():  # read to the end: the turn ends before the next one starts
            if first is None and line.startswith("event: token"):
                first = time.perf_counter() - start
    assert first is not None, "no token arrived"
    return first


def telegram_first_character(telegram: TelegramServer, server: FakeLLMServer, think_s: float, jarvis) -> float:
    state = telegram.state
    hub = jarvis.turn_hub()
    jarvis.telegram_chat._new_thread(str(PRINCIPAL))  # a new conversation each time, as the API's (what /new does)
    server.push({"content": ANSWER, "delay_s": think_s})
    with state.lock:
        before = len(state.sent)
    state.say("hi", user_id=PRINCIPAL)
    start = time.perf_counter()
    with state.lock:
        if not state.lock.wait_for(lambda: any(answer_begins(m["text"]) for m in state.sent[before:]), timeout=30):
            raise AssertionError("no answer reached Telegram")
    first = time.perf_counter() - start
    deadline = time.monotonic() + 30
    while hub.running_ids() and time.monotonic() < deadline:  # the turn ends before the next one starts
        time.sleep(0.005)
    return first


def matrix_first_character(alice, room: str, server: FakeLLMServer, think_s: float, jarvis) -> tuple[float, float]:
    """(from the principal's message sent to Synapse, from Synapse's sync handing it to Jarvis) to the first words
    leaving Jarvis: the second is Jarvis's own part, as Telegram's is (its Bot API fake answers the poll at once)."""
    chat = jarvis.matrix_chat
    hub = jarvis.turn_hub()
    chat._new_thread(room)
    sent: list[float] = []
    taken: list[float] = []
    send, take = chat.api.send, chat.take

    def timed(room: str, content: dict, *a, **k):
        if answer_begins(str(content.get("body", ""))) and not sent:
            sent.append(time.perf_counter())
        return send(room, content, *a, **k)

    def received(room: str, event: dict) -> bool:
        if not taken and (event.get("content") or {}).get("body") == "hi":
            taken.append(time.perf_counter())
        return take(room, event)

    chat.api.send, chat.take = timed, received
    server.push({"content": ANSWER, "delay_s": think_s})
    try:
        start = time.perf_counter()
        alice.say(room, "hi")
        deadline = time.monotonic() + 30
        while not sent and time.monotonic() < deadline:
            time.sleep(0.002)
        if not sent:
            raise AssertionError("no answer left for Matrix")
        while hub.running_ids() and time.monotonic() < deadline:
            time.sleep(0.005)
        return sent[0] - start, sent[0] - (taken[0] if taken else start)
    finally:
        chat.api.send, chat.take = send, take


def matrix_config(tmp: str) -> tuple:
    """A started Synapse, the bot's and the principal's accounts, the channels config for them."""
    from tests.synapse_server import Person, Synapse

    synapse = Synapse().start()
    bot = synapse.register("jarvis")
    alice = Person(synapse, synapse.register("alice"))
    os.environ["JARVIS_SECRET_MATRIX_TOKEN"] = bot.access_token
    return synapse, alice, bot, {"enabled": True, "homeserver": synapse.url, "user_id": bot.user_id,
                                 "access_token": {"secret": "matrix_token"}, "chat_per_minute": 1000,
                                 "sync_timeout_s": 5}


def throughput(telegram: TelegramServer, server: FakeLLMServer, chats: list[int], rounds: int) -> tuple[int, float]:
    """(messages answered, seconds): each round every chat writes once, and the round ends when all are answered."""
    state = telegram.state

    def answered(chat: int) -> int:
        return sum(1 for m in state.sent if m["chat"]["id"] == chat and m["text"] == ANSWER)

    elapsed = 0.0
    for rnd in range(rounds):
        server.push(*[{"content": ANSWER} for _ in chats])
        start = time.perf_counter()
        for chat in chats:
            state.say(f"hi {rnd}", user_id=chat)
        deadline = time.monotonic() + 300
        while True:
            with state.lock:
                done = all(answered(c) > rnd for c in chats)
            if done:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"round {rnd}: not every chat was answered in 300 s")
            time.sleep(0.005)
        elapsed += time.perf_counter() - start
    return len(chats) * rounds, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--think-ms", type=float, default=300.0)
    parser.add_argument("--no-matrix", action="store_true", help="leave Matrix out (no Synapse installed)")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    think = args.think_ms / 1000
    logging.basicConfig(level=logging.WARNING)
    from orchestrator.app import App
    from orchestrator.core.config import load_settings
    from orchestrator.server.app import create_app, serve_in_thread

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server, TelegramServer("1:BENCH") as telegram:
        os.environ["JARVIS_SECRET_TELEGRAM_TOKEN"] = "1:BENCH"
        crowd = [PRINCIPAL + 1 + i for i in range(args.chats)]  # the user's other accounts: one chat each
        telegram.state.known_chats.update([PRINCIPAL, *crowd])
        synapse = alice = None
        channels: dict = {}
        if not args.no_matrix:
            synapse, alice, bot, channels["matrix"] = matrix_config(tmp)
        cfg = Path(tmp) / "config.yml"
        cfg.write_text(yaml.safe_dump({
            "models": {"primary": {"base_url": server.base_url, "model": "scripted-model", "api_key": "bench",
                                   "max_retries": 0}},
            "storage": {"data_dir": str(Path(tmp) / "data")}, "tools_dir": str(Path(tmp) / "tools"),
            "mcp": {"dir": str(Path(tmp) / "mcp")}, "fs": {"roots": [tmp]}, "sandbox": {"required": False},
            "channels": {"telegram": {"enabled": True, "token": {"secret": "telegram_token"},
                                      "api_base": telegram.base_url, "poll_timeout_s": 5, "chat_per_minute": 1000},
                         "user_identities": [f"telegram:{c}" for c in (PRINCIPAL, *crowd)] + ([f"matrix:{alice.user_id}"] if alice else []),
                         **channels}}))
        jarvis = App(load_settings(cfg))
        app = create_app(jarvis, services=["orchestrator.server.services:telegram_inbound_service"] +
                         (["orchestrator.server.services:matrix_inbound_service"] if alice else []))
        try:
            with serve_in_thread(app) as url:
                room = alice.room_with(bot.user_id) if alice else ""
                deadline = time.monotonic() + 30
                while alice and bot.user_id not in alice.members(room) and time.monotonic() < deadline:
                    time.sleep(0.05)
                api, tg, mx = [], [], []
                for rep in range(args.reps + 1):
                    runs = [(lambda rep=rep: api.append(api_first_token(url, app.state.token, server, think, rep))),
                            (lambda: tg.append(telegram_first_character(telegram, server, think, jarvis)))]
                    if alice:
                        runs.append(lambda: mx.append(matrix_first_character(alice, room, server, think, jarvis)))
                    for run in runs if rep % 2 == 0 else runs[::-1]:
                        run()
                api, tg, mx = api[1:], tg[1:], mx[1:]  # the first of each warms up
                handled, seconds = throughput(telegram, server, crowd, args.rounds)
        finally:
            if synapse is not None:
                alice.close()
                synapse.stop()
    a, t = statistics.median(api) * 1000, statistics.median(tg) * 1000
    ratio = t / a
    print("[channels: inbound message -> first character of the answer]")
    print(f"  web API first token: {a:.1f} ms (median of {len(api)})")
    print(f"  Telegram first character: {t:.1f} ms (median of {len(tg)})")
    print(f"  ratio: {ratio:.3f} (floor <= 1.2, goal <= 1.05) -> {'OK' if ratio <= 1.2 else 'MISSED'}")
    if mx:
        m = statistics.median(whole for whole, _ in mx) * 1000
        own = statistics.median(jarvis_part for _, jarvis_part in mx) * 1000
        print(f"  Matrix first character, from the message sent to Synapse (its storing and sync included): {m:.1f} ms "
              f"(median of {len(mx)}), ratio {m / a:.3f}")
        print(f"  Matrix first character, from Synapse's sync handing it to Jarvis: {own:.1f} ms")
        print(f"  ratio: {own / a:.3f} (floor <= 1.2, goal <= 1.05) -> {'OK' if own / a <= 1.2 else 'MISSED'}")
    print(f"[channels: one process, {len(crowd)} chats writing at once, {args.rounds} rounds]")
    print(f"  {handled} messages answered in {seconds:.2f} s: {handled / seconds:.1f} messages/s")


if __name__ == "__main__":
    main()
