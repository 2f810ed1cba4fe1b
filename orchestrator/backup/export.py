"""`jarvis export`: the user's threads, memory, reminders and jorbs in files they can read and another tool can
import: one JSON file each (`memory.json` in the format `jarvis memory import` reads) and one Markdown file each.
Unlike a backup it is not meant to be restored whole: it is the user's data in plain form.

This module only writes what the command gathered (the threads' messages come from the chat graph, which sits
above this package); every text is written as it is in JSON, and in Markdown inside fenced or quoted blocks, so
a message that holds Markdown or HTML is shown, not rendered as part of the page.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FORMAT = "jarvis-export-1"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _quoted(text: Any) -> str:
    """A text as a Markdown block quote: its lines shown, not read as headings, lists or HTML."""
    lines = str(text if text is not None else "").splitlines() or [""]
    return "\n".join("> " + line.replace("<", "&lt;") for line in lines)


def _threads_md(threads: list[dict]) -> str:
    out = ["# Threads", ""]
    for t in threads:
        out += [f"## {t.get('title') or t['thread_id']}", "", f"`{t['thread_id']}`, last active {t.get('updated_at')}",
                ""]
        for m in t.get("messages", []):
            who = {"human": "You", "ai": "Jarvis", "tool": f"Tool {m.get('name') or ''}".strip()}.get(m["type"],
                                                                                                  m["type"])
            calls = ", ".join(c["name"] for c in m.get("tool_calls", []))
            out += [f"**{who}**" + (f" (calls {calls})" if calls else ""), "", _quoted(m.get("content")), ""]
    return "\n".join(out)


def _memory_md(memory: dict) -> str:
    out = ["# Memory", ""]
    for f in memory.get("facts", []):
        about = f"{f['about']['name']} ({f['about']['kind']}): " if f.get("about") else ""
        mark = "" if f.get("trusted") else " (from outside content)"
        out.append(f"- {about}{f['text']}{mark}".replace("<", "&lt;"))
    return "\n".join(out) + "\n"


def _reminders_md(reminders: list[dict]) -> str:
    out = ["# Reminders", ""]
    for r in reminders:
        out += [f"## {r.get('title')}".replace("<", "&lt;"), "",
                f"{r.get('status')}, due {r.get('due_at') or r.get('next_fire_at') or r.get('when')}"
                + (f", repeats `{r['rrule']}`" if r.get("rrule") else "") + f", to {r.get('target_kind')}", ""]
        if r.get("description"):
            out += [_quoted(r["description"]), ""]
    return "\n".join(out)


def _jorbs_md(jorbs: list[dict]) -> str:
    out = ["# Jorbs", ""]
    for j in jorbs:
        out += [f"## {j.get('name')}".replace("<", "&lt;"), "", f"`{j['id']}`, {j.get('status')}", "",
                _quoted(j.get("plan")), ""]
        for h in j.get("history", []):
            out += [f"**{h.get('role')}**", "", _quoted(h.get("text")), ""]
        if j.get("result") is not None:
            out += ["Result:", "", "```json", json.dumps(j["result"], indent=2, default=str), "```", ""]
    return "\n".join(out)


def write_export(folder: Path, *, threads: list[dict], memory: dict | None, reminders: list[dict],
                 jorbs: list[dict]) -> list[Path]:
    """Write each part as JSON and Markdown into `folder`; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    parts: dict[str, tuple[Any, Any]] = {
        "threads": ({"format": FORMAT, "threads": threads}, _threads_md(threads)),
        "reminders": ({"format": FORMAT, "reminders": reminders}, _reminders_md(reminders)),
        "jorbs": ({"format": FORMAT, "jorbs": jorbs}, _jorbs_md(jorbs)),
    }
    if memory is not None:
        parts["memory"] = (memory, _memory_md(memory))
    written = []
    for name, (data, markdown) in parts.items():
        for path, text in ((folder / f"{name}.json", json.dumps(data, indent=2, ensure_ascii=False, default=str)),
                           (folder / f"{name}.md", markdown)):
            _write(path, text)
            written.append(path)
    return written
