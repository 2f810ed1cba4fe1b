"""The three Sheratan job kinds as tools confined to a mission's workspace: list_files, read_file, write_file.
They run through a ToolExecutor like every tool (write_file is an `fs_write` side effect)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from integrations.base import ToolError, make_tool, with_meta
from integrations.fs_tools import FsRoots

MISSION_KINDS = ("list_files", "read_file", "write_file")
MAX_FILES = 500
MAX_READ = 200_000


class ListArgs(BaseModel):
    patterns: list[str] = Field(default_factory=lambda: ["**/*"], description="glob patterns, e.g. ['**/*.py']")


class ReadArgs(BaseModel):
    path: str = Field(description="a path inside the workspace")


class WriteArgs(BaseModel):
    path: str = Field(description="a path inside the workspace")
    content: str = Field(description="the whole new content")


@functools.lru_cache(maxsize=64)
def mission_tools(workspace: str) -> list[BaseTool]:
    root = Path(os.path.realpath(workspace))
    allowed = FsRoots([root])

    def normalize(path: str) -> str:
        try:
            return allowed.resolve(path, must_exist=False).relative_to(root).as_posix()
        except (ToolError, ValueError):
            return str(path)

    def list_files(patterns: list[str] | None = None) -> list[str]:
        """Files in the mission's workspace matching any of the glob patterns (relative paths)."""
        found: set[str] = set()
        for pattern in patterns or ["**/*"]:
            if pattern.startswith("/") or ".." in Path(pattern).parts:
                raise ToolError(f"pattern {pattern!r} must stay inside the workspace")
            for p in root.glob(pattern):
                rel = p.relative_to(root)
                if p.is_file() and not any(part.startswith(".") for part in rel.parts):
                    found.add(rel.as_posix())
                if len(found) >= MAX_FILES:
                    break
        return sorted(found)[:MAX_FILES]

    def read_file(path: str) -> str:
        """The text of a file in the mission's workspace."""
        target = allowed.resolve(path if Path(path).is_absolute() else str(root / path))
        if target.is_dir():
            raise ToolError(f"{path} is a folder; use list_files")
        with target.open("rb") as f:  # no more than is returned: a 2 GB log costs what a 200 KB one does
            data = f.read(MAX_READ + 1)
        text = data[:MAX_READ].decode("utf-8", errors="replace")
        return text + (f"\n[... truncated at {MAX_READ} bytes]" if len(data) > MAX_READ else "")

    def write_file(path: str, content: str) -> str:
        """Create or replace a file in the mission's workspace."""
        target = allowed.resolve(path if Path(path).is_absolute() else str(root / path), must_exist=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"created {target.relative_to(root).as_posix()} ({len(content.encode('utf-8'))} bytes)"

    tools = [
        make_tool(list_files, args_schema=ListArgs),  # file names are content too
        make_tool(read_file, args_schema=ReadArgs),
        make_tool(write_file, args_schema=WriteArgs, side_effects=["fs_write"],
                  summarize=lambda a: f"Write {len(str(a.get('content', '')))} characters to {a.get('path')} in the mission workspace.",
                  trusted_output="the path and size of what this call wrote", deciding_args=("path",)),
    ]
    return [with_meta(tool, normalize=normalize) for tool in tools]
