"""Which keyring entries are Jarvis's: the `{secret: NAME}` references of the settings and of the MCP server files,
and the Google sign-in's token. The keyring cannot list its entries, so these are the ones a backup with
`--include-secrets` carries (encrypted) and a restore puts back.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.core import secrets
from orchestrator.core.config import SecretRef, Settings
from orchestrator.tools.google_auth import token_secret_name


def _refs(value: Any) -> list[str]:
    if isinstance(value, SecretRef):
        return [value.secret] if value.secret else []
    if isinstance(value, BaseModel):
        return [n for field in type(value).model_fields for n in _refs(getattr(value, field))]
    if isinstance(value, dict):
        if isinstance(value.get("secret"), str) and len(value) == 1:
            return [value["secret"]]
        return [n for v in value.values() for n in _refs(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in _refs(v)]
    return []


def secret_names(settings: Settings) -> list[str]:
    names = _refs(settings) + [token_secret_name(settings)]
    for path in sorted(Path(settings.mcp.dir).glob("*.toml")) if Path(settings.mcp.dir).is_dir() else []:
        try:
            names += _refs(tomllib.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # a server file Jarvis itself cannot read names no secret it uses
    return sorted(set(names))


def read_secrets(settings: Settings) -> dict[str, str]:
    """{name: value} of the secrets that are set."""
    found = {}
    for name in secret_names(settings):
        value = secrets.get_secret(name, required=False)
        if value is not None:
            found[name] = value
    return found
