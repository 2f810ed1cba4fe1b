"""The tool catalog: every tool Jarvis can call, from every provider (static, MCP, generated).

This module is only the container; the App (orchestrator/app.py) fills it with the providers a process uses.

Providers are asked for their tools each time the catalog is read, so a tool registered by JARB or a
restarted MCP server shows up in the running graph at once (hot loading). A provider that fails is logged
and left out; the others keep working. Tools the user disabled (orchestrator/tools/switches.py) are left out of
`all()`, `names()` and `get()`; `disabled_message(name)` tells the executor what to answer a call to one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from langchain_core.tools import BaseTool

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


class ToolCatalog:
    def __init__(self, providers: Iterable[ToolProvider] = (), switches: Any = None):
        self.providers: list[ToolProvider] = list(providers)
        self.errors: dict[str, str] = {}
        self.switches = switches  # tool_switches.ToolSwitches, or None: nothing can be disabled

    def _disabled(self) -> frozenset[str]:
        return self.switches.disabled() if self.switches is not None else frozenset()

    def disabled_message(self, name: str) -> str | None:
        """What a call to a tool the user disabled gets back (None when `name` is not disabled)."""
        if name not in self._disabled():
            return None
        return disabled_message(name)

    def unavailable_message(self, name: str) -> str | None:
        """Why a tool that exists cannot be called right now (its MCP server is restarting...), or None."""
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

    def _tools_by_name(self) -> dict[str, BaseTool]:
        found: dict[str, BaseTool] = {}
        off = self._disabled()
        for provider in self.providers:
            try:
                tools = provider.list_tools()
                self.errors.pop(provider.name, None)
            except Exception as exc:  # noqa: BLE001 - one broken provider must not take the others down
                if self.errors.get(provider.name) != str(exc):
                    log.warning("tool provider %s failed: %s", provider.name, exc)
                self.errors[provider.name] = str(exc)
                continue
            for tool in tools:
                if tool.name in off:
                    continue
                if tool.name in found:
                    log.debug("tool %s from %s shadowed by an earlier provider", tool.name, provider.name)
                    continue
                found[tool.name] = tool
        return found

    def all(self) -> list[BaseTool]:
        return list(self._tools_by_name().values())

    def names(self) -> list[str]:
        return list(self._tools_by_name())

    def get(self, name: str) -> BaseTool | None:
        if name in self._disabled():
            return None
        for provider in self.providers:
            getter = getattr(provider, "get_tool", None)
            try:
                if getter is not None:
                    tool = getter(name)
                    if tool is not None:
                        return tool
                    continue
                for tool in provider.list_tools():
                    if tool.name == name:
                        return tool
            except Exception as exc:  # noqa: BLE001
                self.errors[provider.name] = str(exc)
        return None
