"""A second `jarvis run`-like worker for the multi-worker tests: it recovers and wakes jorbs from the shared
database with a few threads, and prints the ids it resumed as JSON.

    python -m tests.helpers.jorb_worker <config.yml> <threads>

The heuristic policy below decides every jorb step without a model, and logs each decision (pid, jorb, event)
to $JARVIS_TEST_DECISIONS, so a test can count how many times each jorb was resumed, across processes.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from langchain_core.messages import AIMessage


async def ask_then_finish(ctx, observations, options=None, **kwargs):
    """Ask once and wait; finish with the reply."""
    event = observations[-1].content
    kind = "reply" if '"reply"' in event else "created"
    with open(os.environ["JARVIS_TEST_DECISIONS"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"pid": os.getpid(), "jorb": ctx.jorb["id"], "event": kind}) + "\n")
    if kind == "reply":
        return [AIMessage(content=json.dumps({"reasoning": "got it", "done": True, "result": f"pid {os.getpid()}"}))]
    return [AIMessage(content=json.dumps({"reasoning": "ask and wait", "await_reply": True}))]


def main() -> None:
    from orchestrator.core.config import load_settings
    from tests.app_helpers import jorb_service

    settings = load_settings(sys.argv[1])
    svc = jorb_service(settings, llm=object())
    resumed: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        ids = svc.recover()
        with lock:
            resumed.extend(ids)

    threads = [threading.Thread(target=work) for _ in range(int(sys.argv[2]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"pid": os.getpid(), "resumed": resumed}))


if __name__ == "__main__":
    main()
