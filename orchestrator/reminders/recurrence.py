"""Times and recurrence rules.

Rules (RFC 5545 RRULE, python-dateutil) run on naive wall-clock times in the user's zone, then each
occurrence is converted to UTC for storage. So "every day at 09:00" stays 09:00 local across a DST change
(its UTC time moves by an hour), which is what a person means.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, time, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil import parser as date_parser
from dateutil.rrule import rrule, rruleset, rrulestr

from orchestrator.core.config import Settings

LOCAL_FORMAT = "%Y-%m-%dT%H:%M:%S"
_UNTIL_UTC = re.compile(r"UNTIL=(\d{8}T\d{6})Z", re.I)


class RecurrenceError(ValueError):
    """A time or a rule the user gave cannot be used; the message says why and what to write instead."""


def zone_name(settings: Settings) -> str:
    """The IANA name of the user's zone: config `timezone`, else $TZ, else /etc/localtime, else UTC."""
    if settings.timezone:
        return settings.timezone
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                ZoneInfo(name)
                return name
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return "UTC"


def user_zone(settings: Settings) -> ZoneInfo:
    return ZoneInfo(zone_name(settings))


# Local time first: a time without a zone is the user's (a `Z` is UTC, which people rarely mean).
EXAMPLE_TIMES = "2025-06-01T09:00 (your local time), or with a zone: 2025-06-01T09:00+02:00"
DAY_ONLY_HOUR = 9
SPOKEN_EXAMPLES = "tomorrow at 9am, in 20 minutes, friday 6pm"
# Words a person or a small model writes for a time; a bare number ("1") is not one (dateparser reads it as a day).
_HAS_WORD_OR_CLOCK = re.compile(r"[A-Za-z]{2,}|\d:\d")
# "next friday", "this friday": the coming one, which dateparser reads from the day's name alone (not with the word)
_NEXT_WEEKDAY = re.compile(r"\b(?:next|this|coming)\s+(?=(?:mon|tues|wednes|thurs|fri|satur|sun)day\b)", re.I)


def parse_when(text: str, naive_zone: tzinfo, now: datetime | None = None) -> datetime:
    """A time as an aware UTC datetime: ISO 8601 (a time without zone is read in `naive_zone`), or the user's own
    words ("tomorrow at 9am", "in 20 minutes", "friday 6pm"), read by dateparser against `now` (default: the clock)
    in `naive_zone`, the next such time when the words leave the day open ("9am" late in the evening is tomorrow)."""
    raw = (text or "").strip()
    if not raw:
        raise RecurrenceError(f"the time is empty; give a time such as {SPOKEN_EXAMPLES} or {EXAMPLE_TIMES}")
    value = _iso_time(raw) or _spoken_time(raw, naive_zone, now)
    if value.tzinfo is None:
        value = value.replace(tzinfo=naive_zone)
    return value.astimezone(timezone.utc)


def _iso_time(raw: str) -> datetime | None:
    """`raw` read as ISO 8601 (Python's reading, then dateutil's for the forms it misses), else None."""
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        try:
            return date_parser.isoparse(raw)
        except (ValueError, OverflowError):
            return None


def _spoken_time(raw: str, zone: tzinfo, now: datetime | None) -> datetime:
    """The aware time the words mean, read in English; RecurrenceError (saying what to write) when they mean none."""
    import dateparser  # imported on first use: only words, never an ISO time, need it

    wrong = RecurrenceError(f"{raw!r} is not a time Jarvis can read; write it like {SPOKEN_EXAMPLES}, "
                            f"or as {EXAMPLE_TIMES}")
    if len(raw) > 100 or not _HAS_WORD_OR_CLOCK.search(raw):
        raise wrong
    base = (now or datetime.now(timezone.utc)).astimezone(zone).replace(tzinfo=None)
    try:
        value = dateparser.parse(_NEXT_WEEKDAY.sub("", raw), languages=["en"], settings={
            "RELATIVE_BASE": base, "PREFER_DATES_FROM": "future", "RETURN_AS_TIMEZONE_AWARE": False})
    except (ValueError, OverflowError):
        value = None
    if value is None:
        raise wrong
    if value.time() == time(0) and not re.search(r"\d|midnight", raw, re.I):
        value = value.replace(hour=DAY_ONLY_HOUR)  # "on monday": a reminder in the morning, not at midnight
    return value.replace(tzinfo=zone) if value.tzinfo is None else value


def fixed_time(text: str, zone: tzinfo, now: datetime | None = None) -> str:
    """`text` as the ISO 8601 instant it means now, in the user's zone: words such as "in 20 minutes" mean another
    time tomorrow, so a call is settled to the instant before the user is asked about it. An ISO time, or words
    that mean no time, come back as they are (creating the reminder then says what is wrong)."""
    raw = (text or "").strip()
    if _iso_time(raw) is not None:
        return text
    try:
        return parse_when(raw, zone, now).astimezone(zone).isoformat(timespec="minutes")
    except RecurrenceError:
        return text


def to_local(value: datetime, zone: tzinfo) -> datetime:
    """The naive wall-clock time in `zone` of an aware datetime."""
    return value.astimezone(zone).replace(tzinfo=None)


def from_local(local: datetime, zone: tzinfo) -> datetime:
    """The aware UTC time of a wall-clock time. In a DST gap the earlier offset applies (02:30 becomes 03:30);
    in an overlap the first of the two instants is taken."""
    return local.replace(tzinfo=zone, fold=0).astimezone(timezone.utc)


def _normalise_rule(text: str, zone: tzinfo) -> str:
    rule = (text or "").strip()
    if rule.upper().startswith("RRULE:"):
        rule = rule[6:]
    if not rule:
        raise RecurrenceError("the recurrence rule is empty; write one such as FREQ=DAILY;BYHOUR=18")
    if "DTSTART" in rule.upper():
        raise RecurrenceError("give the first time as `when`, not as DTSTART inside the rule")
    if re.search(r"FREQ\s*=\s*SECONDLY", rule, re.I):
        raise RecurrenceError("FREQ=SECONDLY is not allowed; the finest recurrence is FREQ=MINUTELY")

    # The rule runs on naive local times, so an UNTIL in UTC is converted to local wall time.
    def _until(match: re.Match[str]) -> str:
        utc = datetime.strptime(match.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
        return "UNTIL=" + utc.astimezone(zone).strftime("%Y%m%dT%H%M%S")

    return _UNTIL_UTC.sub(_until, rule)


def build_rule(text: str, start_local: datetime, zone: tzinfo) -> rrule | rruleset:
    try:
        return rrulestr(_normalise_rule(text, zone), dtstart=start_local)
    except RecurrenceError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise RecurrenceError(
            f"{text!r} is not a valid RFC 5545 recurrence rule ({exc}); write one such as FREQ=DAILY;BYHOUR=18 "
            "or FREQ=WEEKLY;BYDAY=MO,WE"
        ) from None


def _after(rule: rrule | rruleset, local: datetime, inc: bool, text: str) -> datetime | None:
    # dateutil accepts some out-of-range parts (BYHOUR=25) and only fails while iterating.
    try:
        return rule.after(local, inc=inc)
    except (TypeError, ValueError, OverflowError, IndexError) as exc:
        why = str(exc) or type(exc).__name__
        raise RecurrenceError(f"{text!r} is not a valid RFC 5545 recurrence rule (a value is out of range: {why}); "
                              "write one such as FREQ=DAILY;BYHOUR=18") from None


def first_occurrence(when_utc: datetime, rule_text: str, zone: tzinfo,
                     not_before_utc: datetime | None = None) -> tuple[datetime, datetime]:
    """The first occurrence at or after `when` (UTC) and its local wall time. A series that starts in the past
    begins at its first occurrence at or after `not_before_utc`: old occurrences are not fired on creation."""
    start_local = to_local(when_utc, zone).replace(microsecond=0)
    rule = build_rule(rule_text, start_local, zone)
    first = _after(rule, start_local, True, rule_text)
    if first is not None and not_before_utc is not None and from_local(first, zone) < not_before_utc:
        first = _after(rule, to_local(not_before_utc, zone), True, rule_text)
    if first is None:
        raise RecurrenceError(f"the rule {rule_text!r} has no occurrence at or after {start_local.isoformat()}"
                              + (" that is still to come" if not_before_utc is not None else ""))
    return from_local(first, zone), first


def next_occurrence(rule_text: str, series_start_local: datetime, this_local: datetime, zone: tzinfo,
                    after_utc: datetime) -> tuple[datetime, datetime] | None:
    """The first occurrence strictly after both this one and `after_utc`, or None when the series is over.

    A rule without COUNT is re-anchored at this occurrence, so a minutely rule does not iterate from its
    first day every time; with COUNT the series start must stay the anchor (it counts from there).
    """
    anchor = series_start_local if re.search(r"COUNT\s*=", rule_text, re.I) else this_local
    rule = build_rule(rule_text, anchor, zone)
    after_local = max(this_local, to_local(after_utc, zone))
    nxt = _after(rule, after_local, False, rule_text)
    # The UTC instant must also be later than `after_utc` (a DST overlap maps two wall times to one hour).
    while nxt is not None and from_local(nxt, zone) <= after_utc:
        nxt = _after(rule, nxt, False, rule_text)
    if nxt is None:
        return None
    return from_local(nxt, zone), nxt


def format_local(local: datetime) -> str:
    return local.strftime(LOCAL_FORMAT)


def parse_local(text: str) -> datetime:
    return datetime.strptime(text, LOCAL_FORMAT)


def describe(value: datetime, zone: tzinfo) -> str:
    """A time for people: local wall time with its zone abbreviation."""
    local = value.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff: base, 2*base, 4*base, ... capped."""
    return min(cap, base * (2 ** max(0, attempt - 1)))


def later(now: datetime, seconds: float) -> datetime:
    return now + timedelta(seconds=seconds)
