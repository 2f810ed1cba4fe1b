"""Asking a chat model for a tool's code, its tests, and repairs (any LangChain chat model, passed in).

An answer cut off (a stream closed before the model said it was done, or a stop at its token limit) may hold
code that parses and passes a weak test while missing its end: it is never tested, registered or run. The
caller passes the judgement in (`check_reply(reply, what)`, orchestrator/llm/answer_end.checked_reply: jarb_core
does not import the orchestrator), which raises with a sentence saying what to do (raise max_tokens).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from .codecheck import extract_code, trim_output
from .spec import ToolSpec

log = logging.getLogger(__name__)

CODE_SYSTEM = """You write one small, self-contained Python 3.11 module that implements a tool for a personal assistant.
Rules:
- Define the entry point exactly as `{signature}` at top level, with a docstring. Helpers are fine.
- Use the standard library only, unless a side effect below requires a third-party client (e.g. requests for network).
- Allowed side effects: {effects}. Anything else is forbidden: no network, no subprocesses, no writing or deleting
  files, no eval/exec/importlib/ctypes unless the side effect is listed.
- No code runs at import time besides definitions. No input(), no printing of the result: return it.
- Return JSON-serializable values matching the return type. Raise ValueError with a clear message for bad input.
Reply with the complete module in one ```python fenced block and nothing else."""

TESTS_SYSTEM = """You write pytest tests for a tool module before seeing its code.
Rules:
- Import the tool exactly as `from {name} import {name}` (never a versioned module name).
- 3 to 8 small, deterministic test functions named test_...; cover the examples and simple invariants
  (types, edge cases such as empty input). Expected values must follow from the spec, not from guesses.
- No network, no subprocesses, no files outside pytest's tmp_path, nothing slow.
Reply with the complete test module in one ```python fenced block and nothing else."""

REPAIR_SYSTEM = """You fix a Python tool module whose tests failed. Keep the entry point `{signature}`.
The same rules as before apply (allowed side effects: {effects}; standard library unless a side effect needs more).
If a test expectation contradicts the spec, follow the spec.
Reply with the complete corrected module in one ```python fenced block and nothing else."""


def spec_text(spec: ToolSpec) -> str:
    return json.dumps(spec.model_dump(exclude_defaults=False), indent=2, ensure_ascii=False)


def _effects(spec: ToolSpec) -> str:
    return ", ".join(spec.effects()) or "none (the tool only computes and returns a value)"


@dataclass
class Draft:
    """One model answer: the extracted code (None when none could be found) and the raw reply."""

    code: str | None
    reply: str
    problems: list[str] = field(default_factory=list)


class CodeGenerator:
    def __init__(self, llm: BaseChatModel, check_reply: Callable[[Any, str], Any] | None = None):
        self.llm = llm
        self.check_reply = check_reply  # (reply, what it is) -> the reply, or raises: a cut answer is not code

    def _ask(self, system: str, user: str, config: RunnableConfig | None, marker: str | None, what: str) -> Draft:
        reply = self.llm.invoke([SystemMessage(content=system), HumanMessage(content=user)], config=config)
        if self.check_reply is not None:
            reply = self.check_reply(reply, f"{what} (none of that answer was tested, registered or run)")
        text = reply.text if hasattr(reply, "text") and isinstance(reply.text, str) else str(reply.content)
        code = extract_code(text, marker)
        problems = [] if code else ["the reply contained no Python code"]
        return Draft(code=code, reply=text, problems=problems)

    def write_module(self, spec: ToolSpec, config: RunnableConfig | None = None) -> Draft:
        system = CODE_SYSTEM.format(signature=spec.signature(), effects=_effects(spec))
        user = f"Tool spec:\n{spec_text(spec)}\n\nWrite the module `{spec.name}.py`."
        return self._ask(system, user, config, f"def {spec.name}(", f"the code of the new tool {spec.name}")

    def write_tests(self, spec: ToolSpec, config: RunnableConfig | None = None) -> Draft:
        system = TESTS_SYSTEM.format(name=spec.name)
        user = (f"Tool spec:\n{spec_text(spec)}\n\nThe entry point is `{spec.signature()}` in module `{spec.name}`.\n"
                f"Write `test_{spec.name}.py`.")
        return self._ask(system, user, config, "def test", f"the tests of the new tool {spec.name}")

    def repair_module(self, spec: ToolSpec, code: str, tests: str, failure: str,
                      config: RunnableConfig | None = None) -> Draft:
        system = REPAIR_SYSTEM.format(signature=spec.signature(), effects=_effects(spec))
        user = (f"Tool spec:\n{spec_text(spec)}\n\nCurrent module `{spec.name}.py`:\n```python\n{code}```\n\n"
                f"Tests:\n```python\n{tests}```\n\nWhat went wrong:\n{trim_output(failure, 6000)}\n\n"
                "Return the corrected module.")
        return self._ask(system, user, config, f"def {spec.name}(", f"the repaired code of the new tool {spec.name}")

    def rewrite_tests(self, spec: ToolSpec, tests: str, problems: list[str],
                      config: RunnableConfig | None = None) -> Draft:
        system = TESTS_SYSTEM.format(name=spec.name)
        user = (f"Tool spec:\n{spec_text(spec)}\n\nThese tests cannot be used:\n```python\n{tests}```\n"
                f"Problems: {'; '.join(problems)}\nWrite `test_{spec.name}.py` again.")
        return self._ask(system, user, config, "def test", f"the tests of the new tool {spec.name}")

