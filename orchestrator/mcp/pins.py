"""An MCP server's tools as they were first seen: a tool whose description or input schema changes afterwards is
not offered to the model until the user has looked at the change (`jarvis mcp review SERVER --accept`).

A tool's description is read by the model as instructions, every turn, in every thread, and no taint marks it:
it is trusted the way the user's own configuration is. A server that was harmless when the user set it up can
change what its tools say later ("rug pull"): an update of its package, a server that answers differently after a
while. So the first listing of each tool is kept (trust on first use), and a later one that differs withholds that
tool, with its old and new text kept for the review. A tool the server adds after its first listing is withheld
the same way (a rug pull by addition: a new tool's description is read in every thread at once), until reviewed.

The pins are what every later listing is judged by: a file that cannot be read (corrupt, not JSON, cut short)
is not taken as "nothing pinned", which would accept every tool as it is now. `PinsUnreadable` is raised, and the
provider withholds every MCP tool and says why (status, doctor) until the file is mended or removed.

Kept in <data>/mcp/tool_pins.json: {server: {tool: {"digest", "description", "input_schema"}}}.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import types as mt

from orchestrator.core.private_file import write_private

log = logging.getLogger(__name__)


class PinsUnreadable(Exception):
    """The pin file exists but cannot be read as pins: no tool can be judged against it."""


@dataclass(frozen=True)
class ToolChange:
    server: str
    tool: str
    before: dict[str, Any]  # {"description", "input_schema", "title", "annotations"} as first seen (accepted)
    now: dict[str, Any]
    added: bool = False  # not in the server's first listing: `before` is empty


    def changed_parts(self) -> list[str]:
        """What changed besides the description: the arguments, the title the model may read, the annotations
        the effects are judged by (readOnlyHint flipped on makes a tool run without asking)."""
        return [part for part in ("input_schema", "title", "annotations") if self.before.get(part) != self.now.get(part)]

    @property
    def digest(self) -> str:
        """Names the text shown: an accept that gives it takes that text only, not one the server changed to since."""
        return _digest(self.now)


def _shape(tool: mt.Tool) -> dict[str, Any]:
    """What is pinned of a tool: what the model reads (description, title, argument schema) and what its effects
    are judged by (annotations: a tool that turns itself read-only would run without asking)."""
    annotations = tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else {}
    return {"description": tool.description or "", "input_schema": tool.inputSchema or {},
            "title": getattr(tool, "title", None) or "", "annotations": annotations}


def _first_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """The shape pins had before titles and annotations were pinned: such a pin that still matches is brought up
    to date as it is now, not reported as a change (an upgrade of Jarvis must not withhold every tool)."""
    return {"description": shape["description"], "input_schema": shape["input_schema"]}


def _digest(shape: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(shape, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def pins_of(data_dir: str | Path) -> "ToolPins":
    """The pins of a data folder (<data>/mcp/tool_pins.json)."""
    return ToolPins(Path(data_dir) / "mcp" / "tool_pins.json")


class ToolPins:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    @contextmanager
    def _held(self) -> Iterator[None]:
        """One read-change-write at a time, across processes too (`jarvis run` pins a new tool while `jarvis mcp
        review --accept` writes its answer: neither may write back what it read before the other wrote)."""
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                lock = open(self.path.with_suffix(".lock"), "a")  # noqa: SIM115 - held for the block below
            except OSError:
                yield  # a folder that cannot be written: nothing will be written either
                return
            with lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                yield

    def _read(self) -> dict[str, dict[str, dict[str, Any]]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise PinsUnreadable(f"cannot read {self.path} ({type(exc).__name__}: {exc}); every MCP tool is withheld "
                                 "until it is mended or removed (removed, every tool is taken as it is now)") from None
        if not isinstance(data, dict) or not all(isinstance(tools, dict) and all(isinstance(t, dict) for t in tools.values())
                                                 for tools in data.values()):
            raise PinsUnreadable(f"{self.path} is not a file of MCP tool pins; every MCP tool is withheld until it is "
                                 "mended or removed (removed, every tool is taken as it is now)")
        return data

    def _write(self, data: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_private(self.path, json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False))
        except OSError:
            log.warning("cannot write %s: MCP tools seen now are not pinned", self.path, exc_info=True)

    def version(self) -> int:
        """Changes when the file does (an accept from another process): the provider then judges its tools again."""
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return 0

    def changed(self, server: str, tools: list[mt.Tool]) -> dict[str, ToolChange]:
        """The tools of `server` that differ from how they were first seen, or that were not in its first listing
        (by tool name). The server's first listing is kept as it is. Raises PinsUnreadable."""
        with self._held():
            data = self._read()
            first_listing = server not in data
            pinned = data.setdefault(server, {})
            changes: dict[str, ToolChange] = {}
            write = first_listing
            for tool in tools:
                shape = _shape(tool)
                kept = pinned.get(tool.name)
                first_kind = isinstance(kept, dict) and "annotations" not in kept
                if kept is None and not first_listing:  # added since: held until reviewed, as a changed one is
                    changes[tool.name] = ToolChange(server, tool.name, {part: type(v)() for part, v in shape.items()},
                                                    shape, added=True)
                elif not isinstance(kept, dict) or (first_kind and kept.get("digest") == _digest(_first_shape(shape))):
                    pinned[tool.name] = {**shape, "digest": _digest(shape)}
                    write = True
                elif kept.get("digest") != _digest(shape):
                    before = {part: kept.get(part, shape[part] if first_kind and part in ("title", "annotations")
                                             else "") for part in shape}
                    changes[tool.name] = ToolChange(server, tool.name, before, shape)
            if write:
                self._write(data)
            return changes

    def accept(self, server: str, tools: list[mt.Tool], shown: Mapping[str, str] | None = None) -> list[str]:
        """Keep the tools of `server` as they are now: those in `shown` (name -> the digest of the text the user was
        shown; a tool whose text changed again since is left as it was), or all. Returns the names accepted."""
        with self._held():
            data = self._read()
            pinned = data.setdefault(server, {})
            accepted = []
            for tool in tools:
                shape = _shape(tool)
                if shown is not None and shown.get(tool.name) != _digest(shape):
                    continue  # not shown, or shown as it was before it changed again
                if (pinned.get(tool.name) or {}).get("digest") != _digest(shape):
                    pinned[tool.name] = {**shape, "digest": _digest(shape)}
                    accepted.append(tool.name)
            if accepted:
                self._write(data)
            return accepted
