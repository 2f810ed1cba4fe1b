"""The built-in model on the first tasks a newcomer asks, scored as the user would see them.

22 simple requests (list, read, write -> a confirmation, remind at a time, remember, recall, summarize a PDF, search
documents, what time is it, chit-chat), each in a new thread, through Jarvis's whole graph on the built-in backend
(the embedded llama.cpp server, `jarvis-chatml-tools`, the built-in model's settings of llm/discovery.py). Each
turn is scored: the right tool (its first call), the right arguments (what the request names: the file, the time,
the fact), a sensible final answer (not empty, not a restated call, and for chit-chat no tool at all), and the
time the turn took. A write's confirmation is answered "deny", so nothing is written.

    .venv/bin/python bench/builtin_models.py [--gguf PATH] [--name NAME] [--threads 2] [--only N]
        [--kinds list,read,...] [--per-kind N] [-v]

Without --gguf, the built-in model of llm/discovery.py (the first installed of builtin_models); a GGUF given runs with `chat_format: jarvis-tools` (its handler picked from its metadata). Needs `make install-local demo-model`. The goal (issue [32]): the right
tool with the right arguments on >= 80% of the set.

Measured, SmolLM2-135M (2 cores at a load average of 11): the right tool 15 of 22, the right tool and arguments
7 of 22 (time 2/2, remember 2/2, chit-chat 2/2, remind 1/3; list, read, write, recall, PDF and search 0: invented
paths such as /Users/jarvis/..., memory_remember for "what does shopping.txt say?"), 64 s a turn (median), 108 s
the slowest; its words after a call were mostly a restated call or unrelated text.

Measured, Qwen2.5-Coder-0.5B through `jarvis-qwen-tools` (2 threads, 2 cores at a load average of 12-17, shared
with seven other engineers' tests; the first 8 requests only, stopped for time): the right tool 7 of 8, the right
tool and arguments 3 of 8 (read notes/todo.txt, write 'buy milk' to groceries.txt, the reminder at 09:00 the next
day; SmolLM2 had list, read and write 0 right), list 0/3 (the right tool, an invented path: /path/to/folder,
/projects, /home/user/notes), "hello.txt containing hello world" wrote "Hello, world!", "what does shopping.txt
say?" called find_tools; 135-335 s a turn, the first 319 s with the server's start. Its words after a result were mostly a call written as JSON (Jarvis now
shows the results instead: llm/model_output.py restates_call). Qwen 1.5B was not run here for lack of time.

Measured, Qwen2.5-Coder-0.5B again after fs_list_dir's folder argument named the user's folder and find_tools'
example query went (2 threads, load average 7.4 at the start, 6.4 at the end; one request of each of six kinds:
`--kinds list,read,write,remind,remember,recall --per-kind 1`): the right tool 5 of 6, the right tool and arguments
5 of 6 as scored then (list with the home's own path, read notes/todo.txt, write "'buy milk'" to groceries.txt,
remember the dentist; "who is my dentist?" called jorb_create). The reminder's `when` was today at 09:00, not
tomorrow: the scorer of then took any T09:00, it now takes tomorrow's date only, so 4 of 6. A sensible answer 0 of 6:
each answer was a call as JSON, most with JSON lines after it (the listing, a made-up schema), which restates_call
did not catch; it does now, so the results are shown. 98-325 s a turn (median 166), the first 294 s with the
server's start.

Measured, Qwen2.5-Coder-0.5B with Qwen's own words (llm/family_prompts.py: "'.' for the user's folder" in the
folder arguments, without the folder's path; find_tools' query without an example; a call repeated after its result
answered with the results), SmolLM2's prompt unchanged (2 threads, load average 9.4 at the start, 10.0 at the end,
11-14 between; one request of each kind, `--per-kind 1`, 10 requests): the right tool 8 of 10, the right tool and
arguments 7 of 10 (list, read, write, remember, PDF, search, time); remind 0/1 (the right tool, `when` not
tomorrow at 09:00), recall 0/1 ("who is my dentist?" called jorb_create), chit-chat 0/1 ("hello, how are you?"
called messages_send). The list's path was './my_folder', a folder that is not there (scored right as a relative
path; Jarvis answers it with the names that are there), not '.'. A sensible answer 10 of 10 by the rough bar: nine
were the results shown for a call repeated, and "what time is it?" ended at the step limit (12 steps) after
time_now, the model calling on after its rounds ran out. 57-524 s a turn (median 227), the first 245 s with the
server's start. On the same 10 kinds, SmolLM2's 22-request run above was right on time, remember and chit-chat
(and some reminders): about 3-4 of 10. Qwen 1.5B was not run (no time on the loaded machine).

Measured, Qwen2.5-Coder-0.5B once its calls were kept as it wrote them (llm/qwen_handler.py: it had been made to
write after an opened <tool_call>, ended its turn at once, and every call was written again under the constraint,
seconds a token), `--per-kind 1`, 2 threads, the machine otherwise idle (load average 1.1 at the start, 1.5 at the
end): the right tool 8 of 10, the right tool and arguments 7 of 10 (the same kinds wrong: remind's `when`, recall,
chit-chat), a sensible answer 10 of 10; **37 s a turn (median)**, 11-94 s but one (232 s, remember), the first 94 s
with the server's start.

Measured side by side in one session, `--per-kind 1` each (10 requests), once a reminder's time could be the user's
words (reminders/recurrence.py reads "tomorrow at 9am"), the machine shared with the AgentDojo bench (load 2-6):

| model | right tool | right tool and arguments | sensible answer | a turn (median) | first turn |
|---|---|---|---|---|---|
| SmolLM2-135M | 8/10 | 4/10 (remember, remind, search, time) | 4/10 | 32 s | 37 s |
| Qwen2.5-Coder-0.5B | 8/10 | **8/10** (all but recall and chit-chat) | 10/10 | 22 s | 145 s |
| Qwen2.5-Coder-1.5B | 8/10 | **8/10** (all but recall and chit-chat) | 10/10 | 18 s | 209 s |

SmolLM2 still invents paths (/Users/jarvis.mccallister/...) for list, read, write and PDF. Both Qwen models wrote the
reminder as "tomorrow at 9am"; "who is my dentist?" was answered without a call (0.5B: "Dr Lee", made up) or with
docs_search, and "hello, how are you?" made a call. The default stays SmolLM2 for now: under the first-run
settings (`llm/discovery.choose_model`: 4 tools bound, tool writing off) Qwen 0.5B answered "Write hello to
note.txt." with docs_search, not the write (it wrote with the bench's settings), and filled reminder_create's
optional arguments with a daily rule and a made-up webhook URL.

Measured under a first run's settings (discovery.fit_planner_to_builtin: 4 tools bound, a 1,500-token history,
tool writing off; the bench used to bind every tool), with the stricter scoring (a path must be there, a refusal
is no answer, a recall may be answered from the memory block), all 22 requests, 2 threads:

| model | right tool | right tool and arguments | sensible answer | a turn (median) | first turn | load |
|---|---|---|---|---|---|---|
| Qwen2.5-Coder-1.5B, before Qwen's results were named | 20/22 | 18/22 | 22/22 by the old bar, 12 refusals | 32 s | 35 s | 0.6-1.8 |
| Qwen2.5-Coder-0.5B, the same code | 16/22 | 13/22 | made-up facts, the question echoed | 23 s | 22 s | 1.7-3.7 |
| Qwen2.5-Coder-1.5B, results named, an answer asked after them | 20/22 | 18/22 (82%) | 22/22 | 28 s | 48 s | 1.0-1.9 |
| the same, folders relative to the user's | 20/22 | **19/22 (86%)** | 22/22 | 55 s | 55 s | 1.4-5.9 (make test beside) |

The 0.5B model's row was scored by the old bar's paths, corrected by hand from its -v lines (list 1, read 1, pdf 1
more). SmolLM2-135M had 4 of 10 on one request of each kind (the table above). So the default built-in model is
Qwen2.5-Coder-1.5B (llm/discovery.py builtin_models). Its misses in the last run: "show me what is in the notes
folder" (.notes), "what does shopping.txt say?" (prose, then its call in a ```json fence, which is not run), "find
documents about the insurance contract" (find_tools); a remember failed on `expires: "never"`, now no expiry.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Args = dict[str, Any]


def _has(*words: str) -> Callable[[Args], bool]:
    """The arguments' text holds every word (case-insensitive)."""
    return lambda args: all(w.lower() in " ".join(str(v) for v in args.values()).lower() for w in words)


def _at_nine_tomorrow(args: Args) -> bool:
    """"tomorrow at 9", or tomorrow's date at 09:00: 09:00 today is not the time asked for."""
    when = str(args.get("when", ""))
    if "tomorrow" in when.lower():
        return bool(re.search(r"\b0?9(:00)?\s*(am|a\.m\.)?\b", when.lower()))
    return f"{date.today() + timedelta(days=1)}T09:00" in when


_REFUSAL = re.compile(r"\b(can't|cannot|can not|unable to) (assist|help|access|execute)", re.I)
HOME: Path | None = None  # the bench's home folder while it runs


def _in_home(args: Args) -> bool:
    """"my folder": the home Jarvis was given (a relative path, ~, or the folder itself), not an invented one."""
    path = str(args.get("path", ""))
    return not path.startswith("/") or "jarvis-builtin-bench-" in path


def _there(args: Args) -> bool:
    """The path is one that is there in the home (as the user would see it: listed or read, not an error):
    './notes' is, '.projects' or '/home/user/notes' is not."""
    path = str(args.get("path", "")).strip()
    if HOME is None or not path:
        return False
    if path.startswith("~"):
        path = path.lstrip("~").lstrip("/")
    found = Path(path) if path.startswith("/") else HOME / path
    return found.exists() and found.resolve().is_relative_to(HOME.resolve())


def _home_there(*words: str) -> Callable[[Args], bool]:
    named = _home_and(*words)
    return lambda args: named(args) and _there(args)


def _home_and(*words: str) -> Callable[[Args], bool]:
    """A path in the home that names `words` ("/Users/jarvis/x/notes/y" names notes, but is not the user's)."""
    named = _has(*words)
    return lambda args: _in_home(args) and named(args)


@dataclass
class Case:
    request: str
    tools: tuple[str, ...]  # the right first call (one of); () for an answer in words
    args_ok: Callable[[Args], bool] = lambda args: True
    kind: str = ""
    answered_with: str = ""  # or no call and an answer that names this


CASES = [
    Case("list the files in my folder", ("fs_list_dir",), _there, "list"),
    Case("what files are in the projects folder?", ("fs_list_dir",), _home_there("projects"), "list"),
    Case("show me what is in the notes folder", ("fs_list_dir",), _home_there("notes"), "list"),
    Case("read notes/todo.txt", ("fs_read_text",), _home_there("todo.txt"), "read"),
    Case("what does shopping.txt say?", ("fs_read_text",), _home_there("shopping.txt"), "read"),
    Case("write 'buy milk' to groceries.txt", ("fs_write_text",), _home_and("groceries.txt", "milk"), "write"),
    Case("create a file hello.txt containing hello world", ("fs_write_text",), _home_and("hello.txt", "hello world"),
         "write"),
    Case("remind me tomorrow at 9am to call the dentist", ("reminder_create",), _at_nine_tomorrow, "remind"),
    Case("set a reminder to water the plants tomorrow at 9:00", ("reminder_create",), _at_nine_tomorrow, "remind"),
    Case("what reminders do I have?", ("reminder_list",), kind="remind"),
    Case("remember that my dentist is Dr Zorblat", ("memory_remember",), _has("Zorblat"), "remember"),
    Case("remember that my sister's birthday is on 3 May", ("memory_remember",), _has("sister", "May"), "remember"),
    # recalled by a search, or answered from the facts Jarvis puts beside the request (chat/context_block.py)
    Case("who is my dentist?", ("memory_search", "memory_about"), _has("dentist"), "recall", "Zorblat"),
    Case("what do you know about my sister?", ("memory_search", "memory_about"), _has("sister"), "recall", "May"),
    Case("summarize report.pdf", ("pdf_summarize",), _home_there("report.pdf"), "pdf"),
    Case("give me a short summary of the PDF report.pdf", ("pdf_summarize",), _home_there("report.pdf"), "pdf"),
    Case("search my documents for the budget", ("docs_search", "docs_ask", "fs_search"), _has("budget"), "search"),
    Case("find documents about the insurance contract", ("docs_search", "docs_ask", "fs_search"),
         _has("insurance"), "search"),
    Case("what time is it?", ("time_now",), kind="time"),
    Case("what is today's date?", ("time_now",), kind="time"),
    Case("hello, how are you?", (), kind="chat"),
    Case("thanks, that's all for now", (), kind="chat"),
]


@dataclass
class Score:
    case: Case
    called: list[tuple[str, Args]] = field(default_factory=list)
    confirmed: int = 0
    answer: str = ""
    error: str | None = None
    seconds: float = 0.0
    args_fit: bool = False  # the first call's arguments are the right ones, judged while its files are there

    @property
    def answered_right(self) -> bool:
        return bool(self.case.answered_with) and not self.called and self.case.answered_with in self.answer

    @property
    def right_tool(self) -> bool:
        if not self.case.tools or self.answered_right:
            return not self.called
        return bool(self.called) and self.called[0][0] in self.case.tools

    @property
    def right_args(self) -> bool:
        return self.right_tool and (not self.case.tools or self.answered_right or self.args_fit)

    @property
    def sensible(self) -> bool:
        text = self.answer.strip()
        # a rough bar: words, not a call or an error; whether they are true is read in the -v lines
        # A refusal after a result the user was given is not an answer ("I'm sorry, but I can't assist with that."
        # after a file was read); after a denied confirmation, saying it could not be done is.
        refused = bool(_REFUSAL.search(text)) and self.confirmed == 0
        return (self.error is None and len(text) > 1 and not text.startswith(("{", "functions.", "```", '"Error'))
                and not refused and (self.case.kind != "write" or self.confirmed > 0))


def make_files(root: Path) -> None:
    from tests.fakes.pdfs import write_pdf

    for folder in ("projects", "notes"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "projects" / "plan.md").write_text("The plan: ship in May.\n")
    (root / "notes" / "todo.txt").write_text("call the bank\nbuy stamps\n")
    (root / "shopping.txt").write_text("apples, bread, coffee\n")
    (root / "budget.txt").write_text("The budget for 2026 is 12,000 euros.\n")
    write_pdf(root / "report.pdf", 2, title="Quarterly report", facts={1: "Sales rose by 7 percent."})


def run(gguf: Path | None, verbose: bool, threads: int = 2) -> list[Score]:
    from orchestrator.app import build_graph
    from orchestrator.chat.turns import resume_command, stream_turn, user_input
    from orchestrator.core.config import settings_from_dict
    from orchestrator.llm.discovery import builtin_model, fit_planner_to_builtin
    from orchestrator.llm.embedded import embedded_server

    model = builtin_model()
    if model is None:
        raise SystemExit("needs llama-cpp-python[server] and the built-in model: run `make install-local demo-model`")
    values = model.model_dump(mode="json", exclude_none=True)
    if gguf is not None:  # its handler picked from its metadata (llm/chat_handlers.py)
        values.update(gguf=str(gguf.resolve()), model=gguf.stem, chat_format="jarvis-tools")
    values["threads"] = threads
    scores = []
    with tempfile.TemporaryDirectory(prefix="jarvis-builtin-bench-") as tmp:
        base = Path(tmp)
        root = base / "home"
        make_files(root)
        global HOME
        HOME = root
        settings = settings_from_dict({
            "storage": {"data_dir": str(base / "data")}, "tools_dir": str(base / "tools"), "mcp": {"dir": str(base / "mcp")},
            "sandbox": {"required": False}, "fs": {"roots": [str(root)]}, "models": {"primary": values}}, base)
        fit_planner_to_builtin(settings)  # as a first run on the built-in model gets them
        graph = build_graph(settings)
        embedded_server(settings, "primary", settings.models.primary).ensure_running()
        for i, case in enumerate(CASES):
            score = Score(case)
            thread = f"bench-{i:02d}"
            started = time.perf_counter()
            graph_input: Any = user_input(case.request)
            for _round in range(5):
                pending = []
                for ev in stream_turn(graph, thread, graph_input):
                    if ev["event"] == "tool_call":
                        score.called.append((ev.get("name") or ev.get("tool") or "", dict(ev.get("args") or {})))
                    elif ev["event"] == "confirmation":
                        pending.append(ev)
                    elif ev["event"] == "error":
                        score.error = ev.get("message")
                    elif ev["event"] == "done":
                        score.answer = ev.get("content") or ""
                if not pending:
                    break
                score.confirmed += len(pending)
                graph_input = resume_command({c["interrupt_id"]: {"decision": "deny"} for c in pending})
            score.seconds = time.perf_counter() - started
            score.args_fit = bool(score.called) and case.args_ok(score.called[0][1])
            scores.append(score)
            if verbose:
                first = score.called[0] if score.called else ("-", {})
                print(f"  {score.seconds:5.1f} s  tool {'Y' if score.right_tool else 'n'} args "
                      f"{'Y' if score.right_args else 'n'} answer {'Y' if score.sensible else 'n'}  "
                      f"{case.request[:40]!r} -> {first[0]} {str(first[1])[:140]} | {score.answer[:50]!r}", flush=True)
    return scores


def select(cases: list[Case], kinds: list[str] | None, per_kind: int | None) -> list[Case]:
    """A subset a loaded machine can afford: the kinds asked for, the first `per_kind` of each, in the set's order."""
    kept: list[Case] = []
    for case in cases:
        if (kinds is None or case.kind in kinds) and (per_kind is None or
                                                       sum(c.kind == case.kind for c in kept) < per_kind):
            kept.append(case)
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, help="another GGUF to run through the built-in backend")
    parser.add_argument("--name", help="the model's name in the table")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each turn")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's threads (default 2)")
    parser.add_argument("--only", type=int, help="the first N requests only")
    parser.add_argument("--kinds", help="only these kinds, comma-separated (list,read,write,remind,remember,recall...)")
    parser.add_argument("--per-kind", type=int, help="the first N requests of each kind")
    opts = parser.parse_args()
    CASES[:] = select(CASES, opts.kinds.split(",") if opts.kinds else None, opts.per_kind)
    if opts.only:
        del CASES[opts.only:]
    started = os.getloadavg()[0]
    scores = run(opts.gguf, opts.verbose, opts.threads)
    n = len(scores)
    right = sum(s.right_args for s in scores)
    times = sorted(s.seconds for s in scores)
    name = opts.name or (opts.gguf.stem if opts.gguf else "built-in")
    print(f"[builtin models: {name}]")
    print(f"  requests: {n}; load average {started:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"  right tool: {sum(s.right_tool for s in scores)} of {n}")
    print(f"  right tool and arguments: {right} of {n} ({right / n:.0%}; goal >= 80%)")
    print(f"  sensible answer: {sum(s.sensible for s in scores)} of {n}")
    print(f"  seconds a turn: median {times[n // 2]:.1f}, slowest {times[-1]:.1f}, first {scores[0].seconds:.1f}")
    kinds = sorted({s.case.kind for s in scores})
    print("  by kind (right tool and arguments): " + ", ".join(
        f"{k} {sum(s.right_args for s in scores if s.case.kind == k)}/{sum(s.case.kind == k for s in scores)}"
        for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
