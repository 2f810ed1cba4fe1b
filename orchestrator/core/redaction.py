"""The one rule for showing configuration and secrets: what counts as a secret, and how it is hidden.

Used wherever a config or a value that may hold one is shown (GET /api/settings, the Settings view, logs).
A value is hidden when its key names a secret (api_key, token, password, client_secret, private_key...), and a
URL's password is hidden wherever the URL appears (`postgresql://jarvis:s3cret@db/jarvis`), whatever its key.
In config text, block scalars (`password: >-` followed by indented lines) and flow mappings are covered too.
`{secret: NAME}` and `{env: VAR}` references name where a secret is kept, not the secret: they stay readable.
"""

from __future__ import annotations

import re
from typing import Any

HIDDEN = "********"
SECRET_KEY = re.compile(r"(api[_-]?key|token|passw(or)?d|secret|credentials?|private[_-]?key|auth[_-]?key)$", re.I)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]*:)(?P<password>[^\s@/'\"]+)(?P<at>@)", re.I)
_KEY_LINE = re.compile(r"^(?P<indent>\s*(?:-\s+)?)(?P<key>[\w.-]+)(?P<sep>\s*:\s*)(?P<rest>.*)$")
_FLOW_PAIR = re.compile(r"(?P<key>[\w.-]+)(?P<sep>\s*:\s*)(?P<quote>[\"']?)(?P<value>[^\"',}{\s#][^\"',}{#]*?)(?P=quote)"
                        r"(?=\s*[,}])")
_BLOCK_SCALAR = re.compile(r"^[|>][+-]?\d*\s*(#.*)?$")
_REFERENCE = re.compile(r"^\{\s*(secret|env)\s*:")


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(str(key)))


def redact_urls(text: str) -> str:
    """A URL's password, hidden: `scheme://user:password@host` -> `scheme://user:********@host`."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}{m.group('at')}", text)


def redact_value(value: Any, key: str = "") -> Any:
    """A configuration value (dicts and lists walked) with its secrets hidden."""
    if isinstance(value, dict):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, key) for v in value]
    if isinstance(value, str) and value:
        return HIDDEN if is_secret_key(key) else redact_urls(value)
    return value


def redact_config_text(text: str) -> str:
    """Config file text (YAML) with its secrets hidden and its layout and comments kept."""
    out: list[str] = []
    block_indent: int | None = None  # inside a secret's block scalar: lines indented deeper than this
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if block_indent is not None:
            if not stripped or indent > block_indent:
                out.append(line if not stripped else " " * indent + HIDDEN + "\n")
                continue
            block_indent = None
        m = _KEY_LINE.match(line.rstrip("\r\n"))
        if m and is_secret_key(m.group("key")):
            rest = m.group("rest")
            if _BLOCK_SCALAR.match(rest.strip()):
                block_indent = indent
                out.append(line)
                continue
            if rest.strip() and not rest.lstrip().startswith("#") and not _REFERENCE.match(rest.strip()):
                comment = ""
                if " #" in rest:
                    rest, comment = rest.split(" #", 1)
                    comment = " #" + comment
                ending = line[len(line.rstrip("\r\n")):]
                out.append(f"{m.group('indent')}{m.group('key')}{m.group('sep')}{HIDDEN}{comment}{ending}")
                continue
        out.append(_redact_flow(line))
    return redact_urls("".join(out))


def _redact_flow(line: str) -> str:
    """`{password: x, user: y}` on one line: the secret pairs hidden (references kept)."""
    if "{" not in line:
        return line

    def hide(m: re.Match) -> str:
        if not is_secret_key(m.group("key")) or m.group("key").lower() in ("secret", "env"):
            return m.group(0)
        q = m.group("quote")
        return f"{m.group('key')}{m.group('sep')}{q}{HIDDEN}{q}"

    return _FLOW_PAIR.sub(hide, line)
