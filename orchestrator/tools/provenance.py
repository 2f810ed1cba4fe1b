"""Argument provenance: which values that decide an effect came from outside the conversation ([20] item 5).

The blanket rule (autonomy.py) asks before every side effect once a thread has read outside content. With
`autonomy.argument_provenance` on, a tool that names its *deciding* arguments (ToolMeta `deciding_args`: the
recipient, path, URL, amount, id that choose where an effect goes or what it touches) is judged per call instead:

  - a value is trusted when it appears in the user's own words or in the successful result of a tool whose output
    is not untrusted (with that call's own arguments cut out of the result first, so a tool that echoes what it was
    given cannot launder a value the model took from a document);
  - after untrusted content has been read, any other value is untrusted: it appears only in outside content, or
    nowhere (the model derived it, and the derivation may be the injection's);
  - content arguments (a body, a subject) may carry outside text, but an address in them (a URL, any host name,
    an IP address in any form, an email address, an IBAN: tools/value_forms.py) counts as deciding: "send Alice
    this link" is a phishing attack through a trusted recipient;
  - numbers are compared as numbers: "2,500" in the user's words vouches for 2500, not for 2 or 500;
  - opaque arguments (ToolMeta `opaque_args`: ids) are trusted only from a trusted tool's result, never from the
    user's prose, where '13' is a date as often as a file id;
  - a call that sends data out may not carry, in its content, a number-like token (5+ digits: passport, card,
    account numbers, however separated or split) read from a tool marked `sensitive_output` (the user's own
    records) unless the user wrote it: an injection that mails the passport number to the user's own wife
    decides nothing else.

An effect whose deciding values are all trusted runs on its configured mode (auto) even in a tainted thread; one
with an untrusted value asks, whatever the policy. Not covered: whether the call should happen at all (an
injection that makes the model pay a trusted payee a trusted amount again) - values only, no control flow. A
tool that names no deciding arguments keeps the blanket rule. Summaries of folded history are not a trusted
source, so a value only there is untrusted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from integrations.base import is_untrusted, sends_out, side_effects_of, tool_meta
from orchestrator.core.visible import elide
from .value_forms import addresses_in, digit_runs, grouped_numbers_joined, plain

# How much of a value a reason shows, cut in the middle: a path's end (the file's name) is what the user must see.
SHOWN_VALUE = 120


@dataclass(frozen=True)
class Sources:
    """What the conversation itself vouches for. `tainted`: outside content has been read in the thread."""

    words: tuple[str, ...]  # the user's messages
    results: tuple[str, ...]  # successful results of trusted tools, their own arguments cut out
    tainted: bool
    sensitive: tuple[str, ...] = ()  # results of tools marked sensitive_output

    @property
    def trusted(self) -> tuple[str, ...]:
        return self.words + self.results


def deciding_args(tool: Any) -> tuple[str, ...] | None:
    """The tool's declared deciding arguments, or None when it declares none (then the blanket rule applies)."""
    return tool_meta(tool).deciding_args


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield value


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, default=str, ensure_ascii=False)


def _without_echoes(text: str, args: dict[str, Any]) -> str:
    """A result with its call's arguments cut out, whole and word by word, in any case: a search that answers
    'no results for MARK@EVIL.EXAMPLE' must not vouch for an address the model put in its query."""
    for leaf in _leaves(args):
        whole = str(leaf).strip()
        for echoed in sorted({whole, *re.split(r"[\s'\",;()<>\[\]]+", whole)}, key=len, reverse=True):
            if len(echoed) >= 2 or echoed == whole:
                text = re.sub(re.escape(echoed), " ", text, flags=re.I) if echoed else text
    return text


# A HumanMessage whose words are not the user's (an MCP client's request, orchestrator/mcp_server/offer.py): the
# model reads it as the message it answers, but none of its values is trusted for provenance.
OUTSIDE_WORDS = "jarvis_outside_words"


def outside_words(text: str, who: str) -> HumanMessage:
    return HumanMessage(content=text, additional_kwargs={OUTSIDE_WORDS: who})


def sources_from_messages(messages: Sequence[BaseMessage], untrusted_tool: Callable[[str], bool], tainted: bool,
                          sensitive_tool: Callable[[str], bool] = lambda name: False) -> Sources:
    """The user's words and the successful results of trusted tools, each result without its own call's arguments.
    `untrusted_tool(name)` must answer True for a tool it does not know."""
    args_by_call: dict[str, dict[str, Any]] = {}
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                args_by_call[str(call.get("id"))] = call.get("args") or {}
    words: list[str] = []
    results: list[str] = []
    sensitive: list[str] = []
    for m in messages:
        if isinstance(m, HumanMessage):
            if not m.additional_kwargs.get(OUTSIDE_WORDS):
                words.append(_text(m.content))
        elif isinstance(m, ToolMessage) and m.status == "success":
            if sensitive_tool(m.name or ""):
                sensitive.append(_text(m.content))
            if untrusted_tool(m.name or ""):
                continue
            results.append(_without_echoes(_text(m.content), args_by_call.get(m.tool_call_id, {})))
    return Sources(tuple(words), tuple(results), tainted, tuple(sensitive))


def _forms(value: Any) -> list[str]:
    if isinstance(value, float) and value.is_integer():
        return [str(int(value)), str(value)]
    return [grouped_numbers_joined(str(value).strip())]


_ISO_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}))?")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")


def _date_in(text: str, year: str, month: int, day: int) -> bool:
    """The date as written in ISO form, or as 'May 19th[, 2024]' / '19th of May' with its year in the same text."""
    if _appears(f"{year}-{month:02d}-{day:02d}", [text]):
        return True
    if not re.search(rf"(?<!\d){year}(?!\d)", text):
        return False
    name = _MONTHS[month - 1][:3] + r"[a-z]*\.?"
    suffix = r"(?:st|nd|rd|th)?"
    return bool(re.search(rf"\b{name}\s+{day}{suffix}\b|\b{day}{suffix}\s+(?:of\s+)?{name}\b", text, re.I))


def _trusted_value(value: Any, texts: Sequence[str]) -> bool:
    if isinstance(value, bool):
        return True  # a flag (recurring) chooses no target by itself
    if isinstance(value, str):
        m = _ISO_RE.fullmatch(value.strip())
        if m and 1 <= int(m.group(2)) <= 12:
            # a date or time the model wrote in ISO form from the user's prose: each part must be vouched for
            year, month, day, hour, minute = m.groups()
            date_ok = any(_date_in(t, year, int(month), int(day)) for t in texts)
            time_ok = hour is None or any(re.search(rf"(?<![\d:])0?{int(hour)}:{minute}(?!\d)", t) for t in texts)
            if date_ok and time_ok:
                return True
    joined = [grouped_numbers_joined(t) for t in texts]  # "2,500" is 2500, and neither 2 nor 500
    return any(_appears(form, joined) for form in _forms(value))


def _appears(form: str, texts: Sequence[str]) -> bool:
    """`form` as a whole token of a trusted text: '13' does not match inside '2024-05-13' or 'file_13'."""
    if not form:
        return True
    pattern = re.compile(r"(?<![\w\-./@])" + re.escape(form) + r"(?![\w\-/@]|\.\w)", re.I)
    return any(pattern.search(t) for t in texts)


def _within(digits: str, runs: list[str]) -> bool:
    """Whether `digits` is one of `runs`, a part of one (a card number split in two), or holds one."""
    return any(digits in run or run in digits for run in runs)


def untrusted_arguments(tool: Any, args: dict[str, Any], sources: Sources) -> list[str] | None:
    """The deciding values of this call not vouched for by the conversation, as 'arg=value' (empty: all trusted);
    None when the tool names no deciding arguments (provenance cannot judge it)."""
    deciding = deciding_args(tool)
    if deciding is None:
        return None
    if not sources.tainted:
        return []
    opaque = set(tool_meta(tool).opaque_args)
    outgoing = sends_out(tool, side_effects_of(tool, args))
    found: list[str] = []
    for name, value in args.items():
        if name in deciding:
            texts = sources.results if name in opaque else sources.trusted
            for leaf in _leaves(value):
                if not _trusted_value(leaf, texts):
                    found.append(f"{name}={elide(str(leaf), SHOWN_VALUE)!r}")
            continue
        for leaf in _leaves(value):
            if not isinstance(leaf, str):
                continue
            for address in addresses_in(plain(leaf)):
                if not _appears(address, sources.trusted) and not _appears(address, [plain(t) for t in sources.trusted]):
                    found.append(f"{name} mentions {elide(address, SHOWN_VALUE)!r}")
            if outgoing and sources.sensitive:
                private = [d for text in sources.sensitive for _w, d in digit_runs(text)]
                said = [d for text in sources.words for _w, d in digit_runs(text)]
                for written, digits in digit_runs(leaf):
                    if _within(digits, private) and not any(digits in d for d in said):
                        found.append(f"{name} carries {written[:40]!r} from your private records")
    return found


def judge_calls(catalog: Any, messages: Sequence[BaseMessage], tainted: bool) -> Callable[[dict[str, Any]], list[str] | None]:
    """For the chat graph's router: a function giving each planned call its untrusted deciding values (see
    `untrusted_arguments`). The sources are read once for all the calls of one planner step."""
    cache: list[Sources] = []

    def untrusted_tool(name: str) -> bool:
        tool = catalog.get(name)
        return tool is None or is_untrusted(tool)

    def sensitive_tool(name: str) -> bool:
        tool = catalog.get(name)
        return tool is not None and tool_meta(tool).sensitive_output

    def judge(call: dict[str, Any]) -> list[str] | None:
        tool = catalog.get(call.get("name") or "")
        args = call.get("args")
        if tool is None or not isinstance(args, dict) or deciding_args(tool) is None:
            return None
        if not cache:
            cache.append(sources_from_messages(messages, untrusted_tool, tainted, sensitive_tool))
        return untrusted_arguments(tool, args, cache[0])

    return judge
