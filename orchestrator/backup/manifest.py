"""What a backup holds: the Jarvis that made it, its storage, the schema version of every table, row counts per
table and the size and sha256 of each part. Written last in the archive, so a file cut short has no manifest and
is refused as truncated; read first by a restore, which refuses what this Jarvis cannot take (a newer format, a
newer schema) before it writes anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from jarb_core.sql_schema import LATEST

NAME = "manifest.json"
FORMAT = 1  # the layout of the archive; a newer one is refused by this Jarvis


class BackupRefused(Exception):
    """A backup this Jarvis will not write or restore; the message says why, in a sentence."""


def jarvis_version() -> str:
    try:
        return version("jarvis")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Manifest:
    storage: str  # "sqlite" or "postgresql"
    secrets: bool = False
    parts: list[dict[str, Any]] = field(default_factory=list)
    format: int = FORMAT
    jarvis_version: str = field(default_factory=jarvis_version)
    schema_latest: int = LATEST
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "Manifest":
        try:
            data = json.loads(raw)
            return cls(**{k: data[k] for k in ("storage", "secrets", "parts", "format", "jarvis_version",
                                                 "schema_latest", "created_at")})
        except (ValueError, KeyError, TypeError) as exc:
            raise BackupRefused(f"the backup's manifest cannot be read ({exc}): the file is damaged") from None

    def part(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.parts if p["name"] == name), None)

    def refuse_if_newer(self) -> None:
        """Refuse a backup made by a Jarvis newer than this one (its format or a table's schema)."""
        if self.format > FORMAT:
            raise BackupRefused(f"this backup was made by a newer Jarvis ({self.jarvis_version}, backup format "
                                f"{self.format}; this Jarvis {jarvis_version()} reads format {FORMAT} and older): "
                                "upgrade Jarvis, then restore")
        newest = max((v for p in self.parts for v in (p.get("schema_versions") or {}).values()), default=0)
        if newest > LATEST or self.schema_latest > LATEST:
            raise BackupRefused(f"this backup was made by a newer Jarvis ({self.jarvis_version}: schema version "
                                f"{max(newest, self.schema_latest)}, this Jarvis {jarvis_version()} knows up to "
                                f"{LATEST}): upgrade Jarvis, then restore")
