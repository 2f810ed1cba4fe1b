"""Running a generated tool's tests (pytest) and its calls in the sandbox.

Inputs are staged: copied into a fresh world-readable temporary folder and bound read-only into the
sandbox's work directory, the module under its plain name (`word_count.py`), so tests written as
`from word_count import word_count` run against whichever version is being tested. Staging also means the
bytes that run are the bytes that were checked (hash, static checks), whatever happens to the files later.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .codecheck import trim_output
from .sandbox import Bind, Limits, Sandbox, SandboxResult

RUNNER = Path(__file__).with_name("tool_runner.py")
_SUMMARY_RE = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+)(?: in [\d.]+s)?.*$", re.M)


class Staging:
    """A temporary folder of files readable by the sandbox user; removed on exit."""

    def __init__(self, files: Mapping[str, str | bytes]):
        self.dir = Path(tempfile.mkdtemp(prefix="jarvis-stage-"))
        self.dir.chmod(0o755)
        self.files: dict[str, Path] = {}
        for name, content in files.items():
            path = self.dir / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
            path.chmod(0o644)
            self.files[name] = path

    def binds(self) -> list[Bind]:
        return [Bind(path, name) for name, path in self.files.items()]

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc: Any) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class TestReport:
    passed: bool
    summary: str
    output: str = ""
    reasons: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    backend: str = ""
    warnings: list[str] = field(default_factory=list)
    returncode: int | None = None
    static: bool = False  # failed the checks before running (nothing was executed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "TestReport | None":
        if not data:
            return None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def failure_text(self, limit: int = 4000) -> str:
        """What went wrong, in plain words, then the trimmed output: for the planner and the repair prompt."""
        head = self.summary
        if self.reasons:
            head += " (" + "; ".join(self.reasons) + ")"
        body = trim_output(self.output.strip(), limit)
        return head + ("\n" + body if body else "")


def _pytest_summary(output: str) -> str | None:
    found = [m.group(1).strip().rstrip(",") for m in _SUMMARY_RE.finditer(output)
             if re.search(r"\b(passed|failed|error|errors|skipped|deselected|xfailed|xpassed)\b", m.group(1))]
    return found[-1] if found else None


def run_pytest(sandbox: Sandbox, name: str, module_code: str, tests: Mapping[str, str],
               limits: Limits | None = None) -> TestReport:
    """Run the test files `tests` (file name -> code) against `module_code`, importable as `name`."""
    files: dict[str, str] = {f"{name}.py": module_code, **tests}
    argv = [sandbox.python, "-I", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no",
            "--tb=short", "-o", "addopts=", "-o", "python_files=test_*.py", *tests]
    with Staging(files) as stage:
        result = sandbox.run(argv, binds=stage.binds(), limits=limits, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return report_from(result)


def report_from(result: SandboxResult) -> TestReport:
    output = result.stdout_text + (("\n" + result.stderr_text) if result.stderr.strip() else "")
    summary = _pytest_summary(result.stdout_text)
    passed = result.ok and result.returncode == 0
    if passed:
        text = summary or "tests passed"
    elif result.returncode == 5:
        text = "no tests ran (pytest collected nothing)"
    elif result.killed or result.process_limit_hits:
        text = "the tests were stopped"
    else:
        text = f"tests failed: {summary}" if summary else f"the test run failed (exit status {result.returncode})"
    reasons = [r for r in result.reasons if not r.startswith("exited with status")]
    return TestReport(passed=passed, summary=text, output=trim_output(output, 20000), reasons=reasons,
                      duration_s=round(result.duration_s, 3), backend=result.backend, warnings=list(result.warnings),
                      returncode=result.returncode)


@functools.lru_cache(maxsize=1)
def _runner_source() -> str:
    return RUNNER.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def site_dirs() -> tuple[str, ...]:
    """This interpreter's site-packages folders (visible read-only in the sandbox with the interpreter)."""
    import site

    return tuple(d for d in site.getsitepackages() if Path(d).is_dir())


@dataclass
class CallResult:
    ok: bool
    result: Any = None
    error: str | None = None
    details: str = ""  # traceback / stderr tail / sandbox reasons
    warnings: list[str] = field(default_factory=list)


def call_tool(sandbox: Sandbox, name: str, module_code: str, arguments: Mapping[str, Any], *,
              network: bool = False, limits: Limits | None = None, writable: Sequence[Path] = (),
              hide: Sequence[Path] = (), home: Path | None = None) -> CallResult:
    """Run `name(**arguments)` from `module_code` in the sandbox: JSON in, JSON out.
    writable: host folders the tool may write (at their own paths); hide: folders kept out of sight; home: the
    user's home, whose top level stays read-only where `writable` shows it (sandbox_backends._home_lock_args)."""
    binds_extra = [Bind(Path(p), writable=True) for p in writable if Path(p).is_dir()]
    with Staging({f"{name}.py": module_code, "_jarb_call.py": _runner_source()}) as stage:
        result = sandbox.run([sandbox.python, "-I", "-S", "-B", "_jarb_call.py", name, *site_dirs()],
                             input=json.dumps(dict(arguments)).encode(), binds=[*binds_extra, *stage.binds()],
                             network=network, limits=limits, hide=hide, home=home)
    lines = [ln for ln in result.stdout_text.splitlines() if ln.strip()]
    answer: dict[str, Any] | None = None
    if lines:
        try:
            answer = json.loads(lines[-1])
        except json.JSONDecodeError:
            answer = None
    if result.killed or answer is None:
        why = "; ".join(result.reasons) or f"it ended without an answer (exit status {result.returncode})"
        return CallResult(False, error=why, details=result.stderr_text[-2000:], warnings=result.warnings)
    if not answer.get("ok"):
        return CallResult(False, error=str(answer.get("error") or "the tool failed"),
                          details=str(answer.get("traceback") or "")[-2000:], warnings=result.warnings)
    return CallResult(True, result=answer.get("result"), warnings=result.warnings)
