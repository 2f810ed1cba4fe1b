"""Files handed to Jarvis (dropped on the web UI, sent in a Telegram chat): size-limited, checked, stored under
`<data_dir>/uploads/<id>/<name>` (their record in `<id>/.upload.json`), and turned into attachments the planner sees
(state.attachments). A file's name is its maker's, never the user's words: `with_attachments` gives the message
the planner reads when the user wrote none, and the attachment taints the thread (chat/state.names_outside)."""

from __future__ import annotations

import json
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.config import Settings

UPLOADS_DIR = "uploads"
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".csv", ".json", ".html", ".htm", ".xml", ".yaml", ".yml", ".log", ".rst"}
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
_SAFE_NAME_RE = re.compile(r"[^A-Za-z0-9._ -]+")
# The upload's own record, next to the file: safe_name strips leading dots, so no upload can take this name
# (`upload.json` could: a file dropped under it was overwritten by the record).
META_NAME = ".upload.json"
LEGACY_META_NAME = "upload.json"


class UploadError(Exception):
    """The upload cannot be used; `status` is the HTTP status, the message says what to do."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class StoredUpload:
    upload_id: str
    kind: str  # pdf | text
    path: Path
    name: str
    size: int

    def attachment(self) -> dict[str, Any]:
        return {"kind": self.kind, "ref": str(self.path), "name": self.name}

    def as_dict(self) -> dict[str, Any]:
        return {"upload_id": self.upload_id, "kind": self.kind, "name": self.name, "size": self.size}


def uploads_root(settings: Settings) -> Path:
    root = settings.data_path(UPLOADS_DIR)
    root.mkdir(parents=True, exist_ok=True)
    return root


def safe_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    cleaned = _SAFE_NAME_RE.sub("_", base).strip(" .")
    return cleaned[:120] or "upload"


def max_bytes(settings: Settings) -> int:
    return settings.server.max_upload_mb * 1024 * 1024


class UploadWriter:
    """Receives an upload in chunks; refuses it as soon as it passes the size limit."""

    def __init__(self, settings: Settings, filename: str):
        self.settings = settings
        self.name = safe_name(filename)
        suffix = Path(self.name).suffix.lower()
        if suffix != ".pdf" and suffix not in TEXT_SUFFIXES:
            raise UploadError(f"{self.name}: only PDF and text files can be attached "
                              f"(.pdf, {', '.join(sorted(TEXT_SUFFIXES))})", 415)
        self.kind = "pdf" if suffix == ".pdf" else "text"
        self.limit = max_bytes(settings)
        self.upload_id = secrets.token_urlsafe(12)
        self.folder = uploads_root(settings) / self.upload_id
        self.folder.mkdir(parents=True)
        self.path = self.folder / self.name
        self.size = 0
        self._fh = open(self.path, "wb")  # noqa: SIM115 - closed in finish/abort
        self._head = b""

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            self.abort()
            raise UploadError(f"{self.name} is larger than {self.settings.server.max_upload_mb} MB "
                              "(server.max_upload_mb in the config)", 413)
        if len(self._head) < 2048:
            self._head += chunk[: 2048 - len(self._head)]
        self._fh.write(chunk)

    def finish(self) -> StoredUpload:
        self._fh.close()
        if self.size == 0:
            self.abort()
            raise UploadError(f"{self.name} is empty")
        if self.kind == "pdf" and not self._head.lstrip().startswith(b"%PDF-"):
            self.abort()
            raise UploadError(f"{self.name} is not a PDF file (it does not start with %PDF-)", 415)
        if self.kind == "text" and b"\x00" in self._head:
            self.abort()
            raise UploadError(f"{self.name} does not look like a text file", 415)
        stored = StoredUpload(self.upload_id, self.kind, self.path, self.name, self.size)
        (self.folder / META_NAME).write_text(json.dumps(stored.as_dict()), encoding="utf-8")
        return stored

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def find_upload(settings: Settings, upload_id: str) -> StoredUpload | None:
    if not _ID_RE.match(upload_id or ""):
        return None
    folder = uploads_root(settings) / upload_id
    meta = folder / META_NAME
    if not meta.is_file():
        meta = folder / LEGACY_META_NAME  # an upload made before the record moved
        if not meta.is_file():
            return None
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        path = folder / info["name"]
    except (ValueError, KeyError, TypeError):  # not a record: a file of that name was dropped before the move
        return None
    if not path.is_file():
        return None
    return StoredUpload(upload_id, info["kind"], path, info["name"], info["size"])


def with_attachments(old: list[Any], new: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The thread's attachment list once `new` is added: the state keeps one list per thread and a message's
    input replaces it, so the old ones are carried (None when nothing is new)."""
    if not new:
        return None
    kept = [a.model_dump() if hasattr(a, "model_dump") else dict(a) for a in old]
    seen = {a["ref"] for a in kept}
    return kept + [a for a in new if a["ref"] not in seen]


def attached_words(new: list[dict[str, Any]]) -> str:
    """What the planner is told the user said when they sent files and no words: the URLs they pasted and how
    many files, never a file's name (its maker chose it: shown to the planner as data, in the attachments)."""
    urls = [a["ref"] for a in new if not a.get("name")]
    files = len(new) - len(urls)
    return "I attached " + ", ".join(urls + ([f"{files} file" + "s" * (files > 1)] if files else [])) + "."
