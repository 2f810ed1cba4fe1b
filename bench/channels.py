"""Latency of the user's Telegram conversation: from an inbound message to the first character of the answer
leaving Jarvis (the Bot API's sendMessage reaching the local Telegram server), against the same turn through the
web API (the first token event of POST /api/threads/{id}/messages), on the same scripted model with a thinking
time before its first token. Both through one `jarvis run` app, interleaved so that load hits both alike.
Floor (issue 29): Telegram <= 1.2 x the web API; goal <= 1.05 x.

Then throughput: messages handled per second by the one process with `--chats` principal chats (100) writing at
once, `--rounds` times, the scripted model answering at once: from the first message of a round until every chat
shows its whole answer.

    .venv/bin/python bench/channels.py [--reps 9] [--think-ms 300] [--chats 100] [--rounds 3]
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
        if not state.lock.wait_for(lambda: len(state.sent) > before, timeout=30):
            raise AssertionError("no answer reached Telegram")
    first = time.perf_counter() - start
    deadline = time.monotonic() + 30
    while hub.running_ids() and time.monotonic() < deadline:  # the turn ends before the next one starts
        time.sleep(0.005)
    return first


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
        cfg = Path(tmp) / "config.yml"
        cfg.write_text(yaml.safe_dump({
            "models": {"primary": {"base_url": server.base_url, "model": "scripted-model", "api_key": "bench",
                                   "max_retries": 0}},
            "storage": {"data_dir": str(Path(tmp) / "data")}, "tools_dir": str(Path(tmp) / "tools"),
            "mcp": {"dir": str(Path(tmp) / "mcp")}, "fs": {"roots": [tmp]}, "sandbox": {"required": False},
            "channels": {"telegram": {"enabled": True, "token": {"secret": "telegram_token"},
                                      "api_base": telegram.base_url, "poll_timeout_s": 5, "chat_per_minute": 1000},
                         "user_identities": [f"telegram:{c}" for c in (PRINCIPAL, *crowd)]}}))
        jarvis = App(load_settings(cfg))
        app = create_app(jarvis, services=["orchestrator.server.services:telegram_inbound_service"])
        with serve_in_thread(app) as url:
            api, tg = [], []
            for rep in range(args.reps + 1):
                pair = ((lambda rep=rep: api.append(api_first_token(url, app.state.token, server, think, rep))),
                        (lambda: tg.append(telegram_first_character(telegram, server, think, jarvis))))
                for run in pair if rep % 2 == 0 else pair[::-1]:
                    run()
            api, tg = api[1:], tg[1:]  # the first of each warms up
            handled, seconds = throughput(telegram, server, crowd, args.rounds)
    a, t = statistics.median(api) * 1000, statistics.median(tg) * 1000
    ratio = t / a
    print("[channels: inbound message -> first character of the answer]")
    print(f"  web API first token: {a:.1f} ms (median of {len(api)})")
    print(f"  Telegram first character: {t:.1f} ms (median of {len(tg)})")
    print(f"  ratio: {ratio:.3f} (floor <= 1.2, goal <= 1.05) -> {'OK' if ratio <= 1.2 else 'MISSED'}")
    print(f"[channels: one process, {len(crowd)} chats writing at once, {args.rounds} rounds]")
    print(f"  {handled} messages answered in {seconds:.2f} s: {handled / seconds:.1f} messages/s")


if __name__ == "__main__":
    main()
