"""A Jarvis process with one extra side-effecting tool that can be made slow, for crash tests.

usage: python -m tests.helpers.slow_effect_proc start|approve|recover THREAD
The tool `slow_send(text)` appends the text to $SLOW_LOG, then sleeps $SLOW_SECONDS before returning, so a test
can kill -9 the process after the side effect happened and before its result was stored.
"""

from __future__ import annotations

import json
import os
import sys
import time

from langgraph.types import Command
from pydantic import BaseModel, Field

from integrations.base import make_tool
from orchestrator.core.config import load_settings
from orchestrator.app import App


class SendArgs(BaseModel):
    text: str = Field(description="what to send")


def slow_send(text: str) -> str:
    """Send a message (slowly)."""
    with open(os.environ["SLOW_LOG"], "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    print("SENT", flush=True)
    time.sleep(float(os.environ.get("SLOW_SECONDS", "0")))
    return f"sent {text}"


def main() -> None:
    command, thread = sys.argv[1], sys.argv[2]
    settings = load_settings()
    tool = make_tool(slow_send, args_schema=SendArgs, side_effects=["message_send"],
                     summarize=lambda a: f"Send the message {a.get('text')!r}.", trusted_output="an echo of its own argument")
    app = App(settings, tools=[tool])
    graph = app.graph
    config = {"configurable": {"thread_id": thread}}
    if command == "start":
        out = graph.invoke({"messages": [("user", "send hello")]}, config, version="v2")
    elif command == "approve":
        pending = app.pending(thread)
        resume = {p["interrupt_id"]: ({"decision": "approve", "key": p["key"]} if p.get("kind") == "in_doubt"
                                      else {"decision": "approve"}) for p in pending}
        out = graph.invoke(Command(resume=resume), config, version="v2")
    elif command == "skip":
        pending = app.pending(thread)
        out = graph.invoke(Command(resume={p["interrupt_id"]: {"decision": "skip"} for p in pending}), config, version="v2")
    elif command == "recover":
        app.recover_in_doubt(thread)
        print(json.dumps(app.pending(thread)))
        return
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps({"interrupts": [i.value for i in out.interrupts],
                      "last": out.value["messages"][-1].content}), flush=True)


if __name__ == "__main__":
    main()
