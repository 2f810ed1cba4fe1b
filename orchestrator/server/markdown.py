"""Markdown answers to safe HTML for the web UI.

markdown-it-py renders CommonMark (plus tables and strikethrough) with raw HTML disabled, so whatever the model
writes, `<script>` stays text and `javascript:` links are dropped; nh3 (the ammonia sanitizer) then keeps only
an allow-list of tags and attributes, so a future plugin cannot open a hole either. The browser inserts this
HTML as is and everything else (user text, tool arguments and results) as plain text. A link stays a link only
when it is an absolute http(s) URL with a host, or a mailto with an address, and then says where it goes.
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape
from urllib.parse import parse_qsl, unquote, urlsplit

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

_TAGS = {
    "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span",
}
# No images: a model answer (possibly steered by a document it read) must not make the browser fetch a URL.
_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"]
    )
    md.core.ruler.push("link_destinations", _show_link_destinations)
    return md


_WEB = ("http://", "https://")
_HOST = re.compile(r"^(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])$")  # what a browser goes to, as shown
_RECIPIENT_FIELDS = ("to", "cc", "bcc")


def destination(href: str) -> str | None:
    """Where a link goes, as a person should read it: the host (IDNA-encoded, so a look-alike letter from another
    script shows as `xn--`), or a mailto's addresses. None for any other link, which is not kept: browsers resolve
    `https:evil.example/`, `https:/evil.example/` and `https:///evil.example/` to https://evil.example/ where
    urlsplit sees no host, and a relative link would open a page of Jarvis itself (see _show_link_destinations)."""
    if href[:7].lower() == "mailto:":
        return _recipients(href[7:]) or None
    try:
        parts = urlsplit(href)
        if not href.lower().startswith(_WEB) or not parts.hostname:
            return None
        host = unquote(parts.hostname)  # a browser decodes `%2E` in a host
        host = host.encode("idna").decode("ascii").lower()
    except (ValueError, UnicodeError):
        return None
    host = f"[{host}]" if ":" in host else host  # an IPv6 address, written as in the URL
    return host if _HOST.match(host) else None


def _recipients(address: str) -> str:
    """Every address a mailto: writes to: its path and its `to`, `cc` and `bcc` fields (`mailto:?to=eve@...`
    has no path at all)."""
    path, _, query = address.partition("?")
    found = [unquote(path)] if path else []
    found += [v for k, v in parse_qsl(query) if k.lower() in _RECIPIENT_FIELDS]
    return ", ".join(a.strip() for a in found if a.strip())


def _show_link_destinations(state: StateCore) -> None:
    """A link whose text is not its address is followed by where it goes: `[your bank](https://evil.example/?d=...)`
    reads "your bank (evil.example)". A model steered by a page or a mail it read can write such a link to carry
    the user's data off in its address; the click is the user's, made knowing where it goes.

    A link that is not an absolute http(s) URL with a host, nor a mailto with an address, is dropped and its text
    kept. That includes relative and fragment links (`#chat/<id>`, `/api/...`): a model has no page of Jarvis to
    link to, and such a link would take the user to a path of the UI's server (some GETs of the API have effects)
    or to another conversation dressed as whatever its text says."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        href: str | None = None
        where: str | None = None
        text: list[str] = []
        for token in block.children:
            if token.type == "link_open":
                href, text = str(token.attrGet("href") or ""), []
                where = destination(href)
                if where is None:
                    continue
            elif token.type == "link_close" and href is not None:
                shown = "".join(text).strip()
                if where is not None:
                    out.append(token)
                    if shown not in (href, where, f"mailto:{where}"):
                        note = Token("text", "", 0)
                        note.content = f" ({where})"
                        out.append(note)
                href = where = None
                continue
            elif href is not None and token.type in ("text", "code_inline"):
                text.append(token.content)
            out.append(token)
        block.children = out


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def drop_unmatched_fence(text: str) -> str:
    """A fence line that opens a code block nothing closes, with nothing after it (models end answers with a
    stray ```), would render as an empty code box: it is left out."""
    lines = text.split("\n")
    opened: int | None = None
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            opened = None if opened is not None else i
    if opened is not None and not "\n".join(lines[opened + 1:]).strip():
        del lines[opened]
    return "\n".join(lines)


# Markdown is rendered up to here, the rest shown as plain text: parsing is far from linear on some shapes (a table
# of 100,000 rows, 3 MB, took 9 s), every opening of a thread renders every answer again, and an answer can be
# tens of MB (models.*.max_answer_kb).
MAX_MARKDOWN_CHARS = 200_000


def render_markdown(text: str) -> str:
    text = text or ""
    rest = ""
    if len(text) > MAX_MARKDOWN_CHARS:
        cut = text.rfind("\n", 0, MAX_MARKDOWN_CHARS) + 1 or MAX_MARKDOWN_CHARS  # at a line's end when there is one
        text, rest = text[:cut], text[cut:]
    html = _parser().render(drop_unmatched_fence(text))
    if rest:
        html += f"<pre>{escape(rest)}</pre>"
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
