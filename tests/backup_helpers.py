"""Helpers of the backup tests: a second Jarvis (another machine) on the same scripted model, archives rewritten."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from tests.conftest import JarvisEnv


def other_machine(env: JarvisEnv, folder: Path) -> JarvisEnv:
    """A Jarvis with its own config, data folder, tools and MCP folders, on the same model server and the same
    file root (the user's home moves with them)."""
    folder.mkdir()
    other = JarvisEnv(folder, folder / "config.yml", env.root, folder / "data", env.server)
    other.write_config()
    return other


def rewrite(src: Path, dest: Path, change, extra: dict[str, bytes] | None = None) -> None:
    """The archive `src` copied to `dest` with `change(name, data) -> data` applied to each member; `extra`:
    members added before the others."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tout:
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
        for member in tin:
            data = change(member.name, tin.extractfile(member).read())
            member.size = len(data)
            tout.addfile(member, io.BytesIO(data))


def with_manifest(src: Path, dest: Path, **fields) -> None:
    def change(name: str, data: bytes) -> bytes:
        if name != "manifest.json":
            return data
        return json.dumps({**json.loads(data), **fields}).encode()

    rewrite(src, dest, change)
