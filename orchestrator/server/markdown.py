"""Markdown answers to safe HTML for the web UI.

markdown-it-py renders CommonMark (plus tables and strikethrough) with raw HTML disabled, so whatever the model
writes, `<script>` stays text and `javascript:` links are dropped; nh3 (the ammonia sanitizer) then keeps only
an allow-list of tags and attributes, so a future plugin cannot open a hole either. The browser inserts this
HTML as is and everything else (user text, tool arguments and results) as plain text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape
from urllib.parse import urlsplit

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


def destination(href: str) -> str:
    """Where a link goes, as a person should read it: the host (IDNA-encoded, so a look-alike letter from another
    script shows as `xn--`), or a mailto's address."""
    parts = urlsplit(href)
    if parts.scheme == "mailto":
        return parts.path
    host = parts.hostname or ""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host.encode("ascii", "backslashreplace").decode("ascii")


def _show_link_destinations(state: StateCore) -> None:
    """A link whose text is not its address is followed by where it goes: `[your bank](https://evil.example/?d=...)`
    reads "your bank (evil.example)". A model steered by a page or a mail it read can write such a link to carry
    the user's data off in its address; the click is the user's, made knowing where it goes."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        href: str | None = None
        text: list[str] = []
        for token in block.children:
            out.append(token)
            if token.type == "link_open":
                href, text = str(token.attrGet("href") or ""), []
            elif token.type == "link_close" and href is not None:
                shown = "".join(text).strip()
                where = destination(href)
                if where and shown not in (href, where, f"mailto:{where}"):
                    note = Token("text", "", 0)
                    note.content = f" ({where})"
                    out.append(note)
                href = None
            elif href is not None and token.type in ("text", "code_inline"):
                text.append(token.content)
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
