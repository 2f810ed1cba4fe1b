"""A jorb decider (heuristic policy) that breaks on its first step and works after, across processes: the
first call leaves a mark in the folder $JARVIS_TEST_FLAKY names. For `jarvis jorbs retry` tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

from langchain_core.messages import AIMessage


async def breaks_once(ctx, observations, options=None, **kwargs):
    mark = Path(os.environ["JARVIS_TEST_FLAKY"]) / f"broke-{ctx.jorb['id']}"
    if not mark.exists():
        mark.write_text("1")
        raise RuntimeError("the decider broke (a bug, say)")
    return [AIMessage(content=json.dumps({"reasoning": "fine now", "done": True, "result": "finished after the retry"}))]
