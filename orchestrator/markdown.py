"""Markdown answers to safe HTML for the web UI.

markdown-it-py renders CommonMark (plus tables and strikethrough) with raw HTML disabled, so whatever the model
writes, `<script>` stays text and `javascript:` links are dropped; nh3 (the ammonia sanitizer) then keeps only
an allow-list of tags and attributes, so a future plugin cannot open a hole either. The browser inserts this
HTML as is and everything else (user text, tool arguments and results) as plain text.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

_TAGS = {
    "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span",
}
# No images: a model answer (possibly steered by a document it read) must not make the browser fetch a URL.
_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"]
    )


def render_markdown(text: str) -> str:
    html = _parser().render(text or "")
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
