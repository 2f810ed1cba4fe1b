"""The document index (data/docs_index.sqlite): what the user added, what Jarvis read, searchable later.

    index = docs_index_for(settings)          # one per settings object, shared by tools and CLI
    index.add(read_document) / index.search("query", k=5) / files.add_paths(index, [Path("~/notes")])
"""

from __future__ import annotations

import threading

from orchestrator.core.config import Settings
from .store import AddResult, DocsIndex, Document, Hit, fuse
from .tools import IndexSink, build_docs_tools

_indexes: dict[int, DocsIndex] = {}
_lock = threading.Lock()


_KEEP = 8  # settings objects are few in a process (tests make many): keep the last ones only


def docs_index_for(settings: Settings) -> DocsIndex:
    with _lock:
        index = _indexes.get(id(settings))
        if index is None or index.settings is not settings:
            index = _indexes[id(settings)] = DocsIndex(settings)
            while len(_indexes) > _KEEP:
                _indexes.pop(next(iter(_indexes)))
        return index


__all__ = ["AddResult", "DocsIndex", "Document", "Hit", "IndexSink", "build_docs_tools", "docs_index_for", "fuse"]
