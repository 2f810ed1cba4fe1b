"""The document index (data/docs_index.sqlite): what the user added, what Jarvis read, searchable later.

    index = App().docs_index                  # one per App, shared by its tools and the CLI
    index.add(read_document) / index.search("query", k=5) / files.add_paths(index, [Path("~/notes")])
"""

from __future__ import annotations

from .store import AddResult, DocsIndex, Document, Hit, fuse
from .tools import IndexSink, build_docs_tools

__all__ = ["AddResult", "DocsIndex", "Document", "Hit", "IndexSink", "build_docs_tools", "fuse"]
