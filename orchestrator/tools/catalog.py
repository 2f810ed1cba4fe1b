"""The tool catalog: every tool Jarvis can call, from every provider (static, MCP, generated).

This module is only the container; the App (orchestrator/app.py) fills it with the providers a process uses.

Providers are asked for their tools each time the catalog is read, so a tool registered by JARB or a
restarted MCP server shows up in the running graph at once (hot loading). A provider that fails is logged
and left out; the others keep working. Tools the user disabled (orchestrator/tools/switches.py) are left out of
`all()`, `names()` and `get()`; `disabled_message(name)` tells the executor what to answer a call to one.

`offered()` is what the model may be given (the planner's tools, what find_tools searches): `all()` minus the tools
whose integration cannot work now (ToolMeta `unavailable` says why: Google not signed in), asked once per answer
(integrations/availability.py) at every view. They stay in `all()`: the Tools view lists them with the reason, a jorb
script's call to one gets the tool's own "run `jarvis auth google`".

Every tool a provider gives is checked against the tool contract (integrations/base.tool_meta) as it is added: one
without a ToolMeta, or with metadata outside it, is refused (left out, logged once, its error in `refused`), never
given a default: no default for a tool's effects is closed (integrations/base.py says why).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.tools import BaseTool

from integrations.base import ToolContractError, tool_meta

from .switches import disabled_message

log = logging.getLogger(__name__)


class ToolProvider(Protocol):
    name: str

    def list_tools(self) -> list[BaseTool]: ...


class StaticProvider:
    """A fixed list of tools (the hand-written integrations, or tools a caller passes in)."""

    def __init__(self, name: str, tools: Iterable[BaseTool]):
        self.name = name
        self._tools = list(tools)

    def list_tools(self) -> list[BaseTool]:
        return self._tools


@dataclass(frozen=True, eq=False)
class CatalogView:
    """The catalog's tools at one moment, in the providers' order, those disabled left out (ToolCatalog.view);
    `offered`: those the model may be given, `unavailable`: why each other one is not (its integration's answer)."""

    tools: tuple[BaseTool, ...]
    by_name: dict[str, BaseTool]
    unavailable: Mapping[str, str] = field(default_factory=dict)
    offered: tuple[BaseTool, ...] = ()

    @classmethod
    def of(cls, found: dict[str, BaseTool], unavailable: Mapping[str, str]) -> CatalogView:
        return cls(tuple(found.values()), found, dict(unavailable),
                   tuple(t for name, t in found.items() if name not in unavailable))


Asks = tuple[tuple[Callable[[], str | None], tuple[str, ...]], ...]  # each availability answer and its tools


def _asks(tools: Iterable[BaseTool]) -> Asks:
    """The tools that declare an availability answer, grouped by answer (one answer serves an integration's tools)."""
    groups: dict[int, tuple[Callable[[], str | None], list[str]]] = {}
    for tool in tools:
        ask = tool_meta(tool).unavailable
        if ask is not None:
            groups.setdefault(id(ask), (ask, []))[1].append(tool.name)
    return tuple((ask, tuple(names)) for ask, names in groups.values())


def _answers(asks: Asks) -> dict[str, str]:
    """Tool name -> why it cannot work now, for the tools whose answer gives a reason (one that raises: not offered)."""
    out: dict[str, str] = {}
    for ask, names in asks:
        try:
            reason = ask()
        except Exception as exc:  # noqa: BLE001 - a tool whose state cannot be told is not offered
            reason = f"cannot tell whether it works now: {type(exc).__name__}: {exc}"
        if reason:
            out.update(dict.fromkeys(names, reason))
    return out


def _same_tools(before: list[list[BaseTool] | None], now: list[list[BaseTool] | None]) -> bool:
    """Whether every provider gives the very tool objects it gave before (a changed tool is a new object)."""
    if len(before) != len(now):
        return False
    for old, new in zip(before, now):
        if old is None or new is None:
            if old is not new:
                return False
        elif len(old) != len(new) or not all(map(operator.is_, old, new)):
            return False
    return True


class ToolCatalog:
    def __init__(self, providers: Iterable[ToolProvider] = (), switches: Any = None):
        self.providers: list[ToolProvider] = list(providers)
        self.errors: dict[str, str] = {}
        self.switches = switches  # tool_switches.ToolSwitches, or None: nothing can be disabled
        # the last view, with the disabled set, each provider's tools it was built from and its availability answers
        self._last: tuple[frozenset[str], list[list[BaseTool] | None], CatalogView, Asks] | None = None
        self.refused: dict[str, str] = {}  # tool name -> why the contract refused it

    def _admitted(self, tool: BaseTool, provider: ToolProvider) -> bool:
        """Whether the tool keeps the contract; a refusal is logged once per tool and error."""
        try:
            tool_meta(tool)
        except ToolContractError as exc:
            if self.refused.get(tool.name) != str(exc):
                log.error("tool %s from %s refused: %s", tool.name, provider.name, exc)
            self.refused[tool.name] = str(exc)
            return False
        self.refused.pop(tool.name, None)
        return True

    def _disabled(self) -> frozenset[str]:
        return self.switches.disabled() if self.switches is not None else frozenset()

    def disabled_message(self, name: str) -> str | None:
        """What a call to a tool the user disabled gets back (None when `name` is not disabled)."""
        if name not in self._disabled():
            return None
        return disabled_message(name)

    def unavailable_message(self, name: str) -> str | None:
        """Why a tool that exists cannot be called right now (its MCP server is restarting, it breaks the tool
        contract...), or None."""
        if name in self.refused:
            return f"Error: {name} cannot be used: {self.refused[name]}."
        for provider in self.providers:
            ask = getattr(provider, "unavailable_message", None)
            if ask is None:
                continue
            try:
                message = ask(name)
            except Exception:  # noqa: BLE001 - a provider's trouble must not hide the plain answer
                log.debug("unavailable_message of %s failed", getattr(provider, "name", provider), exc_info=True)
                continue
            if message:
                return message
        return None

    def add_provider(self, provider: ToolProvider) -> None:
        self.providers.append(provider)

    def view(self) -> CatalogView:
        """The tools now. Every provider is asked (a tool registered or a server restarted a moment ago counts at
        once); while each gives the same tool objects as last time and no switch changed, the same view comes back,
        so what is derived from it (the planner's lookups, the search index) is not made again. The planner asks at
        every step, and building the view costs as much as everything else a step does at a thousand tools."""
        off = self._disabled()
        lists: list[list[BaseTool] | None] = []
        for provider in self.providers:
            try:
                lists.append(provider.list_tools())
                self.errors.pop(provider.name, None)
            except Exception as exc:  # noqa: BLE001 - one broken provider must not take the others down
                if self.errors.get(provider.name) != str(exc):
                    log.warning("tool provider %s failed: %s", provider.name, exc)
                self.errors[provider.name] = str(exc)
                lists.append(None)
        last = self._last
        if last is not None and last[0] == off and _same_tools(last[1], lists):
            unavailable = _answers(last[3])
            if unavailable == last[2].unavailable:
                return last[2]
            view = CatalogView.of(last[2].by_name, unavailable)  # an integration connected or lost: a new view
            self._last = (last[0], last[1], view, last[3])
            return view
        found: dict[str, BaseTool] = {}
        for provider, tools in zip(self.providers, lists):
            for tool in tools or ():
                if tool.name in off or not self._admitted(tool, provider):
                    continue
                if tool.name in found:
                    log.debug("tool %s from %s shadowed by an earlier provider", tool.name, provider.name)
                    continue
                found[tool.name] = tool
        asks = _asks(found.values())
        view = CatalogView.of(found, _answers(asks))
        self._last = (off, [list(tools) if tools is not None else None for tools in lists], view, asks)
        return view

    def all(self) -> list[BaseTool]:
        return list(self.view().tools)

    def offered(self) -> list[BaseTool]:
        """The tools the model may be given: all() minus those whose integration cannot work now."""
        return list(self.view().offered)

    def names(self) -> list[str]:
        return list(self.view().by_name)

    def get(self, name: str) -> BaseTool | None:
        if name in self._disabled():
            return None
        for provider in self.providers:
            getter = getattr(provider, "get_tool", None)
            try:
                if getter is not None:
                    tool = getter(name)
                    if tool is not None and self._admitted(tool, provider):
                        return tool
                    continue
                for tool in provider.list_tools():
                    if tool.name == name and self._admitted(tool, provider):
                        return tool
            except Exception as exc:  # noqa: BLE001
                self.errors[provider.name] = str(exc)
        return None
