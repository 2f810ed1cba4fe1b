"""The tool factory's steps as a plain library: validate a spec, check and test code in the sandbox,
register it (files + registry row), re-test a registered tool. The LangGraph subgraph
(orchestrator/chat/jarb_subgraph.py) and `jarvis tools register` both drive these steps.

Nothing runs before the static checks pass (syntax, the entry point with the spec's arguments, the
manifest derived from the code agrees with the declared side effects, tests that import the tool by its
plain name), and nothing is registered before its tests pass in the sandbox.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from integrations.base import KNOWN_SIDE_EFFECTS

from .codecheck import check_module, check_tests, hidden_problem
from .loader import read_verified
from .manifest import Manifest, derive_manifest
from .registry import ACTIVE, DISABLED, FAILED, TRUST_CONFIRM, TRUST_POLICY, RegistryError, ToolRecord, ToolRegistry
from .sandbox import Limits, Sandbox, SandboxUnavailable
from .spec import SpecError, ToolSpec, check_spec, parse_spec
from .testing import TestReport, run_pytest

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]


def progress_event(stage: str, attempt: int, message: str, **extra: Any) -> dict[str, Any]:
    return {"event": "progress", "stage": stage, "attempt": attempt, "message": message, **extra}


class ToolFactory:
    def __init__(self, registry: ToolRegistry, open_sandbox: Callable[[], Sandbox], tools_dir: Path, *,
                 trust_after: int = 3, test_limits: Limits | None = None,
                 known_effects: Mapping[str, str] = KNOWN_SIDE_EFFECTS,
                 taken_names: Callable[[], Iterable[str]] = lambda: ()):
        self.registry = registry
        self.open_sandbox = open_sandbox
        self.tools_dir = Path(tools_dir)
        self.trust_after = trust_after
        self.test_limits = test_limits
        self.known_effects = known_effects
        self.taken_names = taken_names

    # -- the steps ----------------------------------------------------------------------------------------
    def validate(self, raw: Any) -> ToolSpec:
        """Parse and check a spec. A generated tool's own name may be reused: that makes a new version."""
        spec = parse_spec(raw)
        check_spec(spec, known_effects=self.known_effects, taken_names=set(self.taken_names()) - self.registry.names())
        return spec

    def static_problems(self, spec: ToolSpec, code: str | None, tests: str | None) -> list[str]:
        problems: list[str] = []
        if not code:
            problems.append("there is no module code")
        else:
            problems += check_module(code, spec)
            if not problems:
                problems += derive_manifest(code).contradictions(spec.effects())
        if not tests:
            problems.append("there are no tests")
        else:
            problems += check_tests(tests, spec)
        return problems

    def test(self, spec: ToolSpec, code: str | None, tests: str | None) -> TestReport:
        """Static checks, then the tests in the sandbox. SandboxUnavailable propagates (nothing can be tested)."""
        problems = self.static_problems(spec, code, tests)
        if problems:
            return TestReport(passed=False, summary="refused before running: " + "; ".join(problems),
                              output="\n".join(problems), static=True)
        sandbox = self.open_sandbox()
        return run_pytest(sandbox, spec.name, code or "", {f"test_{spec.name}.py": tests or ""}, limits=self.test_limits)

    def register(self, spec: ToolSpec, code: str, tests: str, report: TestReport, *, network_approved: bool,
                 request_key: str | None = None) -> ToolRecord:
        """Write tools/<name>_v<n>.py and tools/tests/test_<name>_v<n>.py and insert the registry row."""
        if not report.passed:
            raise RegistryError(f"{spec.name} cannot be registered: its tests did not pass ({report.summary})")
        if request_key:
            existing = self.registry.by_request(request_key)
            if existing is not None:  # a replayed registration (resume after a crash): the same tool
                return existing
        hidden = hidden_problem(code, "its module") or hidden_problem(tests, "its tests")
        if hidden:  # the tests passed, but what the user approved must be what runs
            raise RegistryError(f"{spec.name} cannot be registered: {hidden}")
        manifest = derive_manifest(code)
        contradictions = manifest.contradictions(spec.effects())
        if contradictions:
            raise RegistryError(f"{spec.name} cannot be registered: " + "; ".join(contradictions))
        if "network" in spec.effects() and not network_approved:
            raise RegistryError(f"{spec.name} declares network access, which the user has not approved")
        tests_dir = self.tools_dir / "tests"
        tests_dir.mkdir(parents=True, exist_ok=True)
        version = self.registry.next_version(spec.name)
        for _ in range(100):
            module_path = self.tools_dir / f"{spec.name}_v{version}.py"
            tests_path = tests_dir / f"test_{spec.name}_v{version}.py"
            try:
                with open(module_path, "x", encoding="utf-8") as fh:
                    fh.write(code)
            except FileExistsError:  # left by a crashed run or taken by another process: next number
                version += 1
                continue
            tests_path.write_text(tests, encoding="utf-8")
            try:
                return self.registry.add(
                    name=spec.name, version=version, path=str(module_path), tests_path=str(tests_path), source=code,
                    tests_source=tests,
                    schema=spec.args_schema(), side_effects=spec.effects(), spec=spec.model_dump(),
                    manifest=manifest.as_dict(), test_report=report.to_dict(),
                    trust=TRUST_POLICY if self.trust_after == 0 else TRUST_CONFIRM,
                    network_approved=network_approved, request_key=request_key,
                )
            except RegistryError:
                module_path.unlink(missing_ok=True)
                tests_path.unlink(missing_ok=True)
                if request_key and (existing := self.registry.by_request(request_key)) is not None:
                    return existing
                version += 1
        raise RegistryError(f"could not find a free version number for {spec.name}")

    def save_failed(self, spec: ToolSpec, code: str | None, tests: str | None, report: TestReport | None) -> Path:
        """Keep the last attempt of a failed build for the user to look at (tools/.failed/<name>-<time>/)."""
        folder = self.tools_dir / ".failed" / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        if code:
            (folder / f"{spec.name}.py").write_text(code, encoding="utf-8")
        if tests:
            (folder / f"test_{spec.name}.py").write_text(tests, encoding="utf-8")
        if report:
            (folder / "report.txt").write_text(report.failure_text(20000), encoding="utf-8")
        return folder

    # -- by hand: `jarvis tools register` ---------------------------------------------------------------
    def register_files(self, raw_spec: Any, code: str, tests: str, *,
                       approve_network: Callable[[ToolSpec, Manifest], bool],
                       progress: Progress | None = None) -> tuple[ToolRecord | None, TestReport]:
        """The pipeline without the model: check, test in the sandbox, ask about network, register."""
        emit = progress or (lambda _e: None)
        spec = self.validate(raw_spec)
        emit(progress_event("run_tests", 0, f"testing {spec.name} in the sandbox"))
        report = self.test(spec, code, tests)
        if not report.passed:
            emit(progress_event("run_tests", 0, f"{spec.name}: {report.summary}", ok=False))
            return None, report
        emit(progress_event("run_tests", 0, f"{spec.name}: {report.summary}", ok=True))
        network = "network" in spec.effects()
        approved = approve_network(spec, derive_manifest(code)) if network else False
        if network and not approved:
            report.summary = "not registered: network access was not approved"
            return None, report
        record = self.register(spec, code, tests, report, network_approved=approved)
        emit(progress_event("register", 0, f"registered {record.label} ({record.path})", ok=True))
        return record, report

    # -- re-testing ---------------------------------------------------------------------------------------
    def retest(self, name: str, version: int | None = None, *, with_old_tests: bool = False) -> tuple[ToolRecord, TestReport]:
        """Run a registered version's tests (and every older version's with `with_old_tests`) again.
        A version that fails is marked `failed` (no longer offered); a failed one that passes is active again."""
        record = self.registry.get(name, version) or (self.registry.latest(name) if version is None else None)
        if record is None:
            raise RegistryError(f"no generated tool {name}" + (f" v{version}" if version else "") +
                                " is registered (see `jarvis tools list`)")
        code = read_verified(record)
        tests: dict[str, str] = {}
        sources = self.registry.versions(name) if with_old_tests else [record]
        for r in sources:
            if r.version > record.version:
                continue
            path = Path(r.tests_path)
            if path.exists():
                tests[path.name] = path.read_text(encoding="utf-8")
            elif r.tests_source is not None:  # registered on another machine: the registry's copy
                tests[path.name] = r.tests_source
        if not tests:
            raise RegistryError(f"{record.label} has no tests on disk ({record.tests_path} is missing) "
                                "nor in the registry (it was registered before the registry kept them)")
        report = run_pytest(self.open_sandbox(), name, code, tests, limits=self.test_limits)
        status = None
        if not report.passed and record.status == ACTIVE:
            status = FAILED
        elif report.passed and record.status == FAILED:
            status = ACTIVE
        record = self.registry.set_test_report(name, record.version, report.to_dict(), status)
        return record, report

    def trust(self, name: str, version: int | None = None) -> ToolRecord:
        record = self.registry.get(name, version) or self.registry.latest(name)
        if record is None:
            raise RegistryError(f"no generated tool {name} is registered (see `jarvis tools list`)")
        return self.registry.set_trust(name, record.version, TRUST_POLICY)

    def set_enabled(self, name: str, enabled: bool, version: int | None = None) -> list[ToolRecord]:
        if enabled:
            latest = self.registry.latest(name)
            target = version if version is not None else (latest.version if latest else None)
            if target is None:
                raise RegistryError(f"no generated tool {name} is registered (see `jarvis tools list`)")
            return self.registry.set_status(name, ACTIVE, target)
        return self.registry.set_status(name, DISABLED, version)


__all__ = ["ToolFactory", "SpecError", "SandboxUnavailable", "RegistryError", "progress_event", "Progress"]
