"""The graph fuzzed by a real model: 50 varied turns against SmolLM2-135M through the embedded llama.cpp server,
with the real tools bound and fs_write on confirm (tests/real_model_fuzz.py has the turns and the checks).

The run is bounded to 5 minutes at this machine's speed, measured by an anchor request (a turn's worth of model
work, tests/real_model_fuzz.py); when the machine is slower, the bound is scaled by the anchor's time, taken
before and after the run, at most 3 times."""

from __future__ import annotations

import sys
import time

import pytest

from orchestrator.embedded import embedded_server
from tests.real_model_fuzz import (
    ANCHOR_S,
    BUDGET_S,
    MAX_SLOWDOWN,
    PLAIN_TURNS,
    TURNS,
    anchor_request,
    anchored_budget,
    fuzz_overrides,
    make_files,
    plain_overrides,
    require_real_model,
    run_fuzz,
    summary_lines,
)


@pytest.mark.slow
@pytest.mark.solo  # its bound is timed: it runs after the parallel tests, alone on the machine
@pytest.mark.timeout(1200)  # a hang guard; the real bound is the run's own deadline below
def test_fifty_turns_against_a_real_tiny_model(jarvis_env):
    gguf = require_real_model()
    canary = make_files(jarvis_env.root)
    jarvis_env.write_config(**fuzz_overrides(jarvis_env.root, gguf))
    settings = jarvis_env.settings
    graph = jarvis_env.graph()
    server = embedded_server(settings, "primary", settings.models.primary)
    server.ensure_running()
    before_s, _ = anchor_request(server.base_url)

    def plain_graph():
        jarvis_env.write_config(**plain_overrides(jarvis_env.root, gguf))
        return jarvis_env.graph()

    def progress(i, rec):
        print(f"  turn {i:2d} {rec.outcome:<10} {rec.duration_ms:6.0f} ms  {rec.request[:40]!r}", file=sys.stderr)

    # The deadline is the most any anchor allows (a hang guard); the bound itself is checked after the run.
    report = run_fuzz(graph, settings, jarvis_env.root, canary, progress=progress, plain_graph=plain_graph,
                      plain_turns=PLAIN_TURNS, deadline=time.monotonic() + BUDGET_S * MAX_SLOWDOWN)
    after = jarvis_env.settings
    server = embedded_server(after, "primary", after.models.primary)  # the plain turns' model server
    server.ensure_running()
    after_s, _ = anchor_request(server.base_url)
    budget = anchored_budget(before_s, after_s)
    print("\n".join(summary_lines(report)) + f"\n(bound {budget:.0f} s; anchor request {before_s:.2f} s before the "
          f"run, {after_s:.2f} s after, {ANCHOR_S} s idle)", file=sys.stderr)
    if report.wall_s > budget:
        report.violations.append(f"the run took {report.wall_s:.0f} s, over its bound of {budget:.0f} s")

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
