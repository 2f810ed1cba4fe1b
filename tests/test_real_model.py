"""The graph fuzzed by a real model: 50 varied turns against SmolLM2-135M through the embedded llama.cpp server,
with the real tools bound and fs_write on confirm (tests/real_model_fuzz.py has the turns and the checks)."""

from __future__ import annotations

import json

import pytest

from tests.real_model_fuzz import TURNS, fuzz_overrides, make_files, require_real_model, run_fuzz, summary_lines


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fifty_turns_against_a_real_tiny_model(jarvis_env):
    gguf = require_real_model()
    canary = make_files(jarvis_env.root)
    jarvis_env.write_config(**fuzz_overrides(jarvis_env.root, gguf))
    settings = jarvis_env.settings
    graph = jarvis_env.graph()

    report = run_fuzz(graph, settings, jarvis_env.root, canary)
    print("\n".join(summary_lines(report)))

    assert not report.violations, "\n".join(report.violations)
    assert len(report.records) == TURNS
    for rec in report.records:
        # every turn ends with an answer or a clear error (the model's endpoint, in words; never a traceback)
        assert rec.outcome in ("answer", "step_limit", "error"), rec
        if rec.outcome == "error":
            assert rec.error_kind == "model_endpoint" and rec.error and "Traceback" not in rec.error, rec
        else:
            assert rec.answer.strip(), rec
    counts = report.counts()
    assert counts["tool_calls"] > 0  # the tools were really bound and called
    # the threads stay readable from another process, through the real CLI
    for thread_id in report.threads:
        shown = jarvis_env.cli_json("threads", "show", thread_id, "--json")
        assert shown["thread_id"] == thread_id and shown["messages"][0]["type"] == "human"
