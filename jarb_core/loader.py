"""Generated tools as LangChain tools: a catalog provider that reads the registry lazily.

Each registered tool becomes a `StructuredTool` with the spec's argument schema (JSON schema) and Jarvis
ToolMeta (integrations/base.py): side_effects, source "generated", its output trusted only when it neither uses
the network nor writes files (PURE_OUTPUT), and `requires_confirmation` while it is in the `confirm` trust tier. Calling it runs the
module in the sandbox (arguments in as JSON, the result out as JSON, a timeout), never in this process.
The module's bytes are checked against the registered sha256 first: a changed file is refused.

Nothing is read at construction: the registry is opened on the first `list_tools()` / `get_tool()`, so a
registry of a thousand tools costs nothing at graph start-up, and built tools are cached by row state.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from integrations.base import ToolError, set_tool_meta

from .registry import ACTIVE, TRUST_CONFIRM, ToolRecord, ToolRegistry
from .sandbox import Limits, Sandbox, SandboxUnavailable
from .testing import call_tool

log = logging.getLogger(__name__)

# Why a generated tool without network or file access has trusted output: the sandbox shows it nothing of the
# machine, so what it returns is computed from the call's own arguments.
PURE_OUTPUT = "a sandboxed computation over the call's own arguments (no network, no files)"


class ModuleChanged(ToolError):
    """The module file no longer matches the sha256 recorded at registration."""


def registered_source(record: ToolRecord) -> str | None:
    """The source kept in the registry, if it is there and matches the registered sha256."""
    if record.source is not None and hashlib.sha256(record.source.encode("utf-8")).hexdigest() == record.sha256:
        return record.source
    return None


def read_verified(record: ToolRecord) -> str:
    """The module's source, if its bytes still match the registry; ModuleChanged (with what to do) if not. A
    module file that is not on this machine (a tool another worker built) runs from the registry's copy."""
    path = Path(record.path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if (kept := registered_source(record)) is not None:
            return kept
        raise ModuleChanged(f"{record.label} cannot be loaded: its module {path} is missing. "
                            f"Restore the file or register the tool again.") from None
    except OSError as exc:
        raise ModuleChanged(f"{record.label} cannot be loaded: its module {path} cannot be read ({exc.strerror}). "
                            f"Restore the file or register the tool again.") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != record.sha256:
        raise ModuleChanged(
            f"{record.label} was refused: {path} was changed after it was registered (sha256 {digest[:12]} != "
            f"registered {record.sha256[:12]}). Restore the file, or register the changed code with "
            f"`jarvis tools register` so that its tests run again.")
    return data.decode("utf-8")


def confirmation_note(record: ToolRecord, trust_after: int) -> str:
    return (f"{record.name} is a newly generated tool (v{record.version}): each call is confirmed until "
            f"{trust_after} calls have succeeded ({record.confirmed_calls} so far), or until you run "
            f"`jarvis tools trust {record.name}`")


def describe(record: ToolRecord) -> str:
    spec = record.spec
    text = (spec.get("description") or "").strip()
    ret = spec.get("return_type")
    if ret and ret != "Any":
        text += f" Returns {ret}."
    return text + f" (generated tool, v{record.version})"


class GeneratedToolProvider:
    """The catalog provider of generated tools (duck-typed ToolProvider: name, list_tools, get_tool)."""

    name = "generated"

    def __init__(self, open_registry: Callable[[], ToolRegistry], open_sandbox: Callable[[], Sandbox], *,
                 trust_after: int = 3, call_limits: Limits | None = None, file_roots: Sequence[Path] = (),
                 protected: Sequence[Path] | Callable[[], Sequence[Path]] = ()):
        """file_roots: the folders a tool declaring fs_write may write (fs.roots); other tools see no user files.
        protected: folders such a tool must never see even inside those roots (Jarvis' data and tools), or what
        gives them at each call (a key file made since start is covered too)."""
        self._open_registry = open_registry
        self._open_sandbox = open_sandbox
        self.trust_after = trust_after
        self.call_limits = call_limits
        self.file_roots = list(file_roots)
        self._protected = protected if callable(protected) else (lambda fixed=list(protected): fixed)
        self._registry: ToolRegistry | None = None
        self._lock = threading.Lock()
        self._tools: dict[str, tuple[tuple, BaseTool]] = {}
        self._hashes: dict[str, tuple[int, int, str]] = {}  # path -> (mtime_ns, size, sha256)
        self._kept_ok: set[int] = set()  # registry ids whose kept source matches their sha256
        self.refused: dict[str, str] = {}  # name -> why it is not listed
        self._revision: tuple | None = None
        self._in_use: list[ToolRecord] = []

    @property
    def registry(self) -> ToolRegistry:
        with self._lock:
            if self._registry is None:
                self._registry = self._open_registry()
            return self._registry

    def _intact(self, record: ToolRecord) -> bool:
        try:
            st = os.stat(record.path)
        except OSError:
            # built by a worker on another machine: runs from the registry's copy (hashed once per version)
            if record.id in self._kept_ok or registered_source(record) is not None:
                self._kept_ok.add(record.id)
                self.refused.pop(record.name, None)
                return True
            self.refused[record.name] = f"{record.path} is missing"
            return False
        cached = self._hashes.get(record.path)
        if cached is None or cached[:2] != (st.st_mtime_ns, st.st_size):
            digest = hashlib.sha256(Path(record.path).read_bytes()).hexdigest()
            cached = (st.st_mtime_ns, st.st_size, digest)
            self._hashes[record.path] = cached
        if cached[2] != record.sha256:
            if record.name not in self.refused:
                log.warning("generated tool %s refused: %s changed after registration", record.label, record.path)
            self.refused[record.name] = f"{record.path} was changed after registration"
            return False
        self.refused.pop(record.name, None)
        return True

    def list_tools(self) -> list[BaseTool]:
        registry = self.registry
        revision = registry.revision()
        if revision != self._revision:  # re-read the rows only when something changed (read on every turn)
            self._in_use = registry.in_use()
            self._revision = revision
        return [self.tool_for(r) for r in self._in_use if self._intact(r)]

    def get_tool(self, name: str) -> BaseTool | None:
        record = self.registry.get(name)
        return self.tool_for(record) if record is not None else None

    def tool_for(self, record: ToolRecord) -> BaseTool:
        key = (record.id, record.sha256, record.trust, record.confirmed_calls, record.status, record.network_approved)
        cached = self._tools.get(record.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        tool = self._build(record)
        self._tools[record.name] = (key, tool)
        return tool

    def _build(self, record: ToolRecord) -> BaseTool:
        tool_id, name = record.id, record.name

        def run(**arguments: Any) -> Any:
            return self.call(tool_id, name, arguments)

        tool = StructuredTool(name=name, description=describe(record), args_schema=record.schema, func=run)
        # what it returns may come from the web or the user's files: treat it like any content from outside
        untrusted = "network" in record.side_effects or "fs_write" in record.side_effects
        demand = confirmation_note(record, self.trust_after) if record.trust == TRUST_CONFIRM else None
        return set_tool_meta(tool, side_effects=record.side_effects, source="generated", requires_confirmation=demand,
                             trusted_output="" if untrusted else PURE_OUTPUT,
                             shown={"version": record.version, "trust": record.trust})

    def call(self, tool_id: int, name: str, arguments: dict[str, Any]) -> Any:
        record = next((r for r in self.registry.versions(name) if r.id == tool_id), None)
        if record is None or record.status != ACTIVE:
            raise ToolError(f"{name} is no longer active (see `jarvis tools show {name}`).")
        source = read_verified(record)
        try:
            sandbox = self._open_sandbox()
        except SandboxUnavailable as exc:
            raise ToolError(str(exc)) from None
        network = "network" in record.side_effects and record.network_approved
        writes = "fs_write" in record.side_effects
        try:
            outcome = call_tool(sandbox, name, source, arguments, network=network, limits=self.call_limits,
                                writable=self.file_roots if writes else (), hide=list(self._protected()),
                                home=Path.home())
        except SandboxUnavailable as exc:  # e.g. network approved but slirp4netns missing: say how to fix it
            raise ToolError(f"{record.label} cannot run: {exc}") from None
        for warning in outcome.warnings:
            log.warning("%s: %s", record.label, warning)
        if not outcome.ok:
            detail = f"\n{outcome.details.strip()[-1500:]}" if outcome.details.strip() else ""
            raise ToolError(f"{outcome.error}{detail}")
        if record.trust == TRUST_CONFIRM:
            self.registry.record_confirmed_success(record.id, self.trust_after)
        return outcome.result
