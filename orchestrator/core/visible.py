"""The one rule for showing text Jarvis did not write: what a person is shown is what is there.

Text from outside (a file, an email, a web page, a model's answer, an MCP server's error) may hold characters that
act on whatever shows it instead of being shown:
- on a terminal, C0 and C1 control characters: an escape sequence moves the cursor, erases the line, hides text,
  sets the window title or, on some terminals, the clipboard (OSC 52); a carriage return or a backspace writes over
  what came before on the line. A confirmation that shows `Write notes.txt\\rWrite .bashrc` shows one of them;
- anywhere, bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, the isolates...) reorder what is shown: a file
  named `invoice\\u202efdp.exe` shows as `invoiceexe.pdf`;
- anywhere, invisible characters (zero-width spaces, the word joiner, the BOM, Unicode tag characters, which can
  carry a whole hidden instruction) make two different values look the same.
Each is shown as its escape (`\\x1b`, `\\r`, `\\u202e`), which is also how JSON and Python write it. Newlines and
tabs stay, except in `one_line` text (a confirmation's summary, where a newline could start a line that looks like
Jarvis's own). Zero-width joiners stay: emoji and Persian text need them.

Used where such text reaches a person: every line the `jarvis` CLI prints, a confirmation's summary and reason (on
the terminal, in the web UI and on the phone alike), the arguments a confirmation shows.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_INVISIBLE = "\u200b\u2060-\u2064\ufeff\U000e0000-\U000e007f\u2028\u2029"
_ACTING = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_INVISIBLE}]")
_ACTING_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}{_INVISIBLE}]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HIDING = re.compile(f"[{_BIDI}{_INVISIBLE}]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with every character that would act instead of being shown written as its escape."""
    return (_ACTING_ONE_LINE if one_line else _ACTING).sub(_escape, text)


def hiding_characters(text: str) -> list[str]:
    """Where `text` holds characters that reorder or hide what a reader sees (bidirectional controls, invisible
    characters), as "line N: \\u202e": in code, what a reviewer reads would not be what runs ("Trojan Source")."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        found += [f"line {number}: {_escape(m)}" for m in _HIDING.finditer(line)]
    return found


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible_json(value: Any, **dumps: Any) -> str:
    """`value` as JSON that shows every character (json.dumps escapes C0 controls; these escape the rest): it
    reads back as the same value, so a person can edit it and send it back."""
    return _ACTING.sub(_json_escape, json.dumps(value, ensure_ascii=False, **dumps))


def elide(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters in the middle, saying how much is left out: the end of a value (a
    file's name at the end of its path, the last address of a list) is often what matters to the person shown it."""
    if len(text) <= limit:
        return text
    keep = max(4, (limit - 20) // 2)
    return f"{text[:keep]} …[{len(text) - 2 * keep} characters]… {text[-keep:]}"


def shown_arguments(args: Any, per_value: int = 240) -> str:
    """A call's arguments as a confirmation shows them on a terminal or a phone: every argument named, each value as
    JSON (`visible_json`) cut in the middle past `per_value` characters. A cut of the whole call hid whatever came
    after a long value (an event's attendees after its description). Not JSON to send back: edits use visible_json."""
    if not isinstance(args, dict):
        return elide(visible_json(args, default=str), per_value)
    parts = [f"{visible_json(str(key))}: {elide(visible_json(value, default=str), per_value)}"
             for key, value in args.items()]
    return "{" + ", ".join(parts) + "}"
