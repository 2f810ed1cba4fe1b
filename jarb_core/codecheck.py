"""Getting code out of a model's reply, and the checks run on it before anything is executed."""

from __future__ import annotations

import ast
import re

from orchestrator.core.visible import hiding_characters

from .spec import ToolSpec

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_CODE_START_RE = re.compile(r"^(?:from\s+\w|import\s+\w|def\s+\w|async\s+def\s|class\s+\w|@\w|#|\"\"\"|'''|[A-Za-z_]\w*\s*=)")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError):
        return False


def extract_code(reply: str, must_contain: str | None = None) -> str | None:
    """The Python code in a model reply: a fenced block (```python or plain ```, closed or cut off), or the
    reply itself, or the longest run of lines that parses once prose before and after is dropped.
    With several blocks, the one containing `must_contain` (e.g. 'def word_count(') wins, then the longest."""
    text = (reply or "").replace("\r\n", "\n")
    blocks = [(lang.lower(), body) for lang, body in _FENCE_RE.findall(text)]
    if blocks:
        python_like = [b for lang, b in blocks if lang in ("", "python", "py", "python3")] or [b for _, b in blocks]
        if must_contain:
            with_marker = [b for b in python_like if must_contain in b]
            if with_marker:
                python_like = with_marker
        best = max(python_like, key=len).strip("\n")
        return best + "\n" if best.strip() else None
    stripped = text.strip("\n")
    if not stripped.strip():
        return None
    if _parses(stripped) and _looks_like_code(stripped):
        return stripped + "\n"
    lines = stripped.split("\n")
    starts = [i for i, line in enumerate(lines) if _CODE_START_RE.match(line)]
    for start in starts:
        for end in range(len(lines), start, -1):
            chunk = "\n".join(lines[start:end]).strip("\n")
            if chunk and _parses(chunk) and _looks_like_code(chunk):
                if must_contain is None or must_contain in chunk or start == starts[-1]:
                    return chunk + "\n"
    return None


def _looks_like_code(code: str) -> bool:
    """Prose can parse as Python (a single name, a sentence with no verbs...); code has statements."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef |
                          ast.Assign | ast.AnnAssign) for n in tree.body)


def syntax_problem(code: str, label: str) -> str | None:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        return f"{label} has a syntax error at {where}: {exc.msg}"
    except ValueError as exc:
        return f"{label} cannot be parsed: {exc}"
    return None


def hidden_problem(code: str, label: str) -> str | None:
    """Code with bidirectional controls or invisible characters reads differently from how it runs ("Trojan
    Source": an override inside a comment or a string moves what follows): the user approves the code they read."""
    found = hiding_characters(code)
    if not found:
        return None
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return (f"{label} contains characters that reorder or hide what a reader sees ({shown}); write it without "
            "bidirectional controls or invisible characters")


def check_module(code: str, spec: ToolSpec) -> list[str]:
    """Before running anything: it parses, reads as it runs, and defines `def <name>(<the spec's arguments>)` at top
    level."""
    problem = syntax_problem(code, "the module") or hidden_problem(code, "the module")
    if problem:
        return [problem]
    tree = ast.parse(code)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == spec.name]
    if not funcs:
        return [f"the module does not define the entry point `{spec.signature()}` at top level"]
    fn = funcs[-1]
    problems: list[str] = []
    if isinstance(fn, ast.AsyncFunctionDef):
        problems.append(f"the entry point {spec.name} must be a plain function, not async")
    a = fn.args
    params = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    wanted = [arg.name for arg in spec.args]
    if a.vararg or a.kwarg:
        problems.append(f"the entry point {spec.name} must take exactly the spec's arguments, without *args/**kwargs")
    missing = [w for w in wanted if w not in params]
    extra = [p for p in params if p not in wanted]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        problems.append(f"the entry point's parameters do not match the spec ({'; '.join(parts)}); "
                        f"it must be `{spec.signature()}`")
    defaults_from = len(a.posonlyargs) + len(a.args) - len(a.defaults)
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    with_default = set(positional[defaults_from:]) | {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    required_without = [arg.name for arg in spec.args if not arg.required and arg.name not in with_default
                        and arg.name in params]
    if required_without:
        problems.append(f"optional arguments need a default (None): {', '.join(required_without)}")
    return problems


def check_tests(code: str, spec: ToolSpec) -> list[str]:
    """Tests parse, read as they run, import the tool by its plain name and define at least one test function."""
    problem = syntax_problem(code, "the tests") or hidden_problem(code, "the tests")
    if problem:
        return [problem]
    tree = ast.parse(code)
    problems: list[str] = []
    imports_tool = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == spec.name:
                imports_tool = True
            elif re.fullmatch(rf"{re.escape(spec.name)}_v\d+", node.module):
                problems.append(f"the tests import {node.module}; import the tool by its plain name: "
                                f"`from {spec.name} import {spec.name}`")
        elif isinstance(node, ast.Import):
            if any(alias.name == spec.name for alias in node.names):
                imports_tool = True
    if not imports_tool:
        problems.append(f"the tests never import the tool: start with `from {spec.name} import {spec.name}`")
    tests = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    if not tests:
        problems.append("the tests define no test function (def test_...)")
    return problems


def trim_output(text: str, limit: int = 6000) -> str:
    """Keep the start (which test failed) and the end (the summary) of long test output."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return text[:head] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-tail:]
