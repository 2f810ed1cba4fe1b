"""The one rule for showing configuration and secrets: what counts as a secret, and how it is hidden.

Used wherever a config or a value that may hold one is shown (GET /api/settings, the Settings view, logs).
A value is hidden when its key names a secret (api_key, token, password, client_secret, private_key...), and a
URL's password and the values of its query parameters named like secrets are hidden wherever the URL appears
(`postgresql://jarvis:s3cret@db/jarvis`, `http://host/v1?api_key=...`), whatever its key.
In config text, block scalars (`password: >-` followed by indented lines) and flow mappings are covered too.
`{secret: NAME}` and `{env: VAR}` references name where a secret is kept, not the secret: they stay readable.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

HIDDEN = "********"
SECRET_KEY = re.compile(r"(api[_-]?key|token|passw(or)?d|secret|credentials?|private[_-]?key|auth[_-]?key)$", re.I)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]*:)(?P<password>[^\s@/'\"]+)(?P<at>@)", re.I)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,;:!?)]", re.I)  # a sentence's full stop is not in it
_QUERY_PAIR = re.compile(r"(?P<head>[?&;](?P<name>[^=&;#\s]+)=)(?P<value>[^&;#\s]*)")
# Names SECRET_KEY leaves out but query strings use for keys and signatures (`?key=`, `subscription-key=`, `sig=`).
_SECRET_PARAM = re.compile(r"(?:^|[_-])(?:key|sig|signature|auth|pass|pwd)$", re.I)
_KEY_LINE = re.compile(r"^(?P<indent>\s*(?:-\s+)?)(?P<key>[\w.-]+)(?P<sep>\s*:\s*)(?P<rest>.*)$")
_FLOW_PAIR = re.compile(r"(?P<key>[\w.-]+)(?P<sep>\s*:\s*)(?P<quote>[\"']?)(?P<value>[^\"',}{\s#][^\"',}{#]*?)(?P=quote)"
                        r"(?=\s*[,}])")
_BLOCK_SCALAR = re.compile(r"^[|>][+-]?\d*\s*(#.*)?$")
_REFERENCE = re.compile(r"^\{\s*(secret|env)\s*:")


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(str(key)))


def secret_param(name: str) -> bool:
    name = unquote(name)
    return is_secret_key(name) or bool(_SECRET_PARAM.search(name))


def _hide_query(url: re.Match) -> str:
    base, mark, rest = url.group(0).partition("?")
    if not mark:
        return base
    query, hash_mark, fragment = rest.partition("#")
    query = _QUERY_PAIR.sub(lambda p: p.group("head") + HIDDEN if p.group("value") and secret_param(p.group("name"))
                            else p.group(0), "?" + query)[1:]
    return f"{base}?{query}{hash_mark}{fragment}"


def redact_urls(text: str) -> str:
    """A URL's password and secret-named query values, hidden: `scheme://user:password@host/?api_key=k` ->
    `scheme://user:********@host/?api_key=********`."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}{m.group('at')}", text)
    return _URL.sub(_hide_query, text)


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
