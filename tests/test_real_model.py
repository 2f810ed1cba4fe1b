"""The graph fuzzed by a real model: 50 varied turns against SmolLM2-135M through the embedded llama.cpp server,
with the real tools bound and fs_write on confirm (tests/real_model_fuzz.py has the turns and the checks).

The run's wall time is not checked here: it is mostly the model's, and how much the model writes changes from machine
to machine even when it decodes greedily (the same commit took 201 s here, 278 s here a day later and 318 s in CI,
against a 300 s bound: the time_now results in its threads differ, and float sums differ between CPUs). The 5-minute
target is bench/real_model.py's, scaled by the anchor request. Here the run is held to what Jarvis decides: its share
of each turn's time, and how much of each prompt the model server found in its cache (a prompt that breaks the
prefix cache makes the model read every turn's whole conversation again). A hang guard stops the run at 15 minutes."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

import pytest

from orchestrator.chat import planner
from tests.real_model_fuzz import (
    HANG_GUARD_S, MIN_CACHED_SHARE, MIN_VALID_SHARE, PLAIN_TURNS, SIMPLE_REQUESTS, SIMPLE_ROUNDS,
    TURNS, cached_share, fuzz_overrides, make_files, plain_overrides, require_real_model, run_fuzz,
    summary_lines,
)


# It runs beside the rest of the suite (3 workers on 2 cores: 326 s here, 180 s alone), and beside another
# `make test` on a busy machine: its hang guard is the bench's (tests/real_model_fuzz.py) times the load it may meet.
# How long the turns took, and Jarvis's share of it, is bench/real_model.py's to judge, alone on the machine.
SUITE_LOAD = 2.5


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(3000)  # a hang guard; the run's own deadline below comes first
def test_fifty_turns_against_a_real_tiny_model(jarvis_env, monkeypatch):
    gguf = require_real_model()
    pin_prompt_clock(monkeypatch)
    canary = make_files(jarvis_env.root)
    jarvis_env.write_config(**fuzz_overrides(jarvis_env.root, gguf))
    graph = jarvis_env.graph()

    def plain_graph():
        jarvis_env.write_config(**plain_overrides(jarvis_env.root, gguf))
        return jarvis_env.graph()

    def progress(i, rec):
        print(f"  turn {i:2d} {rec.outcome:<10} {rec.duration_ms:6.0f} ms  {rec.model_calls} requests, "
              f"{rec.prompt_tokens} prompt tokens ({rec.cached_tokens} cached), {rec.completion_tokens} written  "
              f"{rec.request[:40]!r}", file=sys.stderr)

    report = run_fuzz(graph, jarvis_env.settings, jarvis_env.root, canary, progress=progress, plain_graph=plain_graph,
                      plain_turns=PLAIN_TURNS, deadline=time.monotonic() + SUITE_LOAD * HANG_GUARD_S)
    print("\n".join(summary_lines(report)), file=sys.stderr)
    if cached_share(report) < MIN_CACHED_SHARE:
        report.violations.append(f"the model server found {cached_share(report):.0%} of the prompt tokens in its cache "
                                 f"(at least {MIN_CACHED_SHARE:.0%}): the prompt's prefix changes from request to request")

    assert not report.violations, "\n".join(report.violations)
    assert len(report.records) == TURNS
    for rec in report.records:
        # every turn ends with an answer or a clear error (the model's endpoint, in words; never a traceback)
        assert rec.outcome in ("answer", "step_limit", "error"), rec
        if rec.outcome == "error":
            assert rec.error_kind == "model_endpoint" and rec.error and "Traceback" not in rec.error, rec
        else:
            assert rec.answer.strip(), rec
    assert report.counts()["tool_calls"] > 0  # the tools were really bound and called
    # the threads stay readable from another process, through the real CLI
    for thread_id in report.threads:
        shown = jarvis_env.cli_json("threads", "show", thread_id, "--json")
        assert shown["thread_id"] == thread_id and shown["messages"][0]["type"] == "human"


# The system prompt says the date and the hour (chat/planner.py), and greedy decoding makes the 135M model's calls a
# function of the whole prompt: over the 12 even hours of 2026-11-26, "Read notes.txt." read file.txt at 00:00 and
# 02:00, and "List the files in my folder." wrote /home/user/my-folder.txt at 16:00 (refused, then, without the names
# the refusal now gives). With the wall clock the check below passed or failed by the hour CI ran at. The prompt's
# clock is pinned to one instant (in UTC, whatever the machine's zone), so the floor is checked on the same prompt
# every run. The 50-turn fuzz pins it too, so its figures move less from run to run.
PINNED_PROMPT_TIME = datetime(2026, 11, 26, 19, 30, tzinfo=timezone.utc)


def pin_prompt_clock(monkeypatch) -> None:
    class PinnedClock(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls.fromtimestamp(PINNED_PROMPT_TIME.timestamp(), tz or timezone.utc)

        def astimezone(self, tz=None):  # the prompt shows local time: UTC here, on every machine
            return datetime.astimezone(self, tz or timezone.utc)

    monkeypatch.setattr(planner, "datetime", PinnedClock)


@pytest.mark.slow
@pytest.mark.long  # no time bound, only a hang guard
@pytest.mark.timeout(900)
def test_the_tiny_model_really_calls_tools_for_simple_requests(jarvis_env, monkeypatch):
    """Issue [18]'s floor for the built-in model, through the real graph and executor: most calls valid (a tool it
    was given, arguments that fit), nothing written without an approval, every turn answered in words, never a
    traceback."""
    gguf = require_real_model()
    pin_prompt_clock(monkeypatch)
    canary = make_files(jarvis_env.root)
    jarvis_env.write_config(**fuzz_overrides(jarvis_env.root, gguf))  # greedy: the same prompt gives the same calls
    requests = [text for text, _ in SIMPLE_REQUESTS]
    # Each request in a thread of its own, as a new user's first message: a 135M model copies the calls it sees
    # earlier in its thread, whatever is asked next.
    report = run_fuzz(jarvis_env.graph(), jarvis_env.settings, jarvis_env.root, canary, requests=requests,
                      turns=len(requests) * SIMPLE_ROUNDS, turns_per_thread=1,
                      progress=lambda i, rec: print(f"  turn {i:2d} {rec.outcome:<8} calls {rec.called} "
                                                    f"confirmations {rec.confirmations} {rec.request!r}", file=sys.stderr))
    print("\n".join(summary_lines(report)), file=sys.stderr)
    assert not report.violations, "\n".join(report.violations)  # nothing written without an approval
    counts = report.counts()
    assert counts["tool_calls"] >= len(report.records) // 3, counts
    assert counts["valid_calls"] >= MIN_VALID_SHARE * counts["tool_calls"], counts
    writes = [rec for i, rec in enumerate(report.records) if SIMPLE_REQUESTS[i % len(SIMPLE_REQUESTS)][1]]
    print(f"write requests that reached a confirmation: {sum(r.confirmations > 0 for r in writes)} of {len(writes)}",
          file=sys.stderr)
    # Greedy, the write reached fs_write_text in 18 of 18 prompts tried here (3 dates x 6 hours of the system
    # prompt's clock line); sampled at 0.2 it went to find_tools or to words about half the time.
    for rec in writes:
        assert rec.confirmations >= 1, f"a write request never reached a confirmation: {rec}"
    for rec in report.records:
        assert rec.outcome == "answer" and rec.answer.strip(), rec
    # What was asked comes back: the folder's files, the file's text (in the model's words, or, when it only repeats
    # its call, the results Jarvis shows instead).
    files = [p.name for p in jarvis_env.root.iterdir() if p.is_file()]
    for rec in report.records:
        if rec.request == "List the files in my folder.":
            assert any(name in rec.answer for name in files), rec
        elif rec.request == "Read notes.txt.":
            assert "Buy bread" in rec.answer, rec
