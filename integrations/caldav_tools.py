"""Any CalDAV account (iCloud, Fastmail, Nextcloud, a company server) as a provider of the neutral calendar tools
(integrations/calendar_tools.py: list events, find free time, create an event, asked first with its account, times
and attendees shown).

The server picks the events of the window (a calendar-query REPORT with a time range); Jarvis expands their
repeats itself with recurring-ical-events, bounded: a rule that would repeat more than MAX_EXPANSION times up to
the window's end (every second, for centuries) is not expanded but listed once with a note saying so, and free
time counts it busy from its start (fail closed). An event that cannot be read (a bogus time zone, broken text)
is named in `unreadable` and the others are still listed. Event text is outside content (untrusted), as
calendar_tools declares it.

An event is created with a client-chosen UID: when the connection drops after the server stored it, the next try
finds it instead of creating it twice.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

from langchain_core.tools import BaseTool

from .base import ToolError
from .calendar_tools import CalendarProvider, build_calendar_tools
from .dav_account import DavAccount, dav_client, dav_error
from .gcal_tools import user_zone

MAX_EXPANSION = 20_000  # occurrences one event may have up to the window's end before it is not expanded
MAX_PER_EVENT = 500  # occurrences of one event listed in a window
MAX_TEXT = 500  # characters of an event's description
_FREQ_SECONDS = {"SECONDLY": 1, "MINUTELY": 60, "HOURLY": 3600, "DAILY": 86400, "WEEKLY": 7 * 86400,
                 "MONTHLY": 28 * 86400, "YEARLY": 365 * 86400}
_EXPANDING = ("BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH")


def occurrence_bound(component: Any, hi: datetime, tz: tzinfo) -> int:
    """An upper bound of the occurrences of an event's RRULEs from its start up to `hi`, computed from the rule
    alone (no expansion): what decides whether expanding it is safe."""
    rules = component.get("RRULE")
    if rules is None:
        return 1
    start = _aware(component.decoded("DTSTART"), tz)
    total = 1
    for rule in rules if isinstance(rules, list) else [rules]:
        freq = str((rule.get("FREQ") or ["DAILY"])[0]).upper()
        interval = max(1, int((rule.get("INTERVAL") or [1])[0]))
        end = hi
        if rule.get("UNTIL"):
            end = min(end, _aware(rule["UNTIL"][0], tz))
        periods = max(0.0, (end - start).total_seconds()) / (_FREQ_SECONDS.get(freq, 1) * interval) + 1
        per_period = math.prod(len(rule.get(key) or [1]) for key in _EXPANDING)
        count = periods * per_period
        if rule.get("COUNT"):
            count = min(count, int(rule["COUNT"][0]))
        total += int(min(count, 10**12))
    return total + len(component.get("RDATE") or [])


def _aware(value: date | datetime, tz: tzinfo) -> datetime:
    """A date (all day) or a floating time is the user's; an aware time is kept."""
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=tz)
    return value if value.tzinfo is not None else value.replace(tzinfo=tz)


def _text(component: Any, key: str, cut: int = MAX_TEXT) -> str | None:
    value = component.get(key)
    if value is None:
        return None
    text = str(value)
    return text[:cut] + f" [... {len(text) - cut} more characters]" if len(text) > cut else text


def _event_out(component: Any, tz: tzinfo) -> dict[str, Any]:
    start = component.decoded("DTSTART")
    end = component.decoded("DTEND") if component.get("DTEND") is not None else None
    if end is None:
        duration = component.decoded("DURATION") if component.get("DURATION") is not None else None
        end = start + duration if duration is not None else start
    all_day = not isinstance(start, datetime)
    attendees = component.get("ATTENDEE") or []
    out = {"uid": str(component.get("UID", "")), "summary": _text(component, "SUMMARY", 200) or "(no title)",
           "start": start.isoformat() if all_day else _aware(start, tz).astimezone(tz).isoformat(timespec="seconds"),
           "end": end.isoformat() if all_day else _aware(end, tz).astimezone(tz).isoformat(timespec="seconds"),
           "all_day": all_day, "location": _text(component, "LOCATION", 200),
           "description": _text(component, "DESCRIPTION"),
           "attendees": [str(a).removeprefix("mailto:").removeprefix("MAILTO:")
                         for a in (attendees if isinstance(attendees, list) else [attendees])][:50],
           "transparent": str(component.get("TRANSP", "")).upper() == "TRANSPARENT"}
    return out


def _unknown_zone(master: Any) -> str | None:
    """The TZID of an event's start when no zone of that name exists (nor does the event define it)."""
    zone = getattr(master.get("DTSTART"), "params", {}).get("TZID")
    start = master.decoded("DTSTART")
    if zone and isinstance(start, datetime) and start.tzinfo is None:
        return (f"the event's time zone {str(zone)[:60]!r} is unknown: its times were read in yours and may be "
                "off")
    return None


def expand(calendar: Any, lo: datetime, hi: datetime, tz: tzinfo) -> tuple[list[dict], list[str]]:
    """The occurrences of one calendar object's events in [lo, hi), and notes on what was not expanded or cut."""
    import recurring_ical_events

    notes: list[str] = []
    masters = [c for c in calendar.walk("VEVENT") if c.get("RECURRENCE-ID") is None]
    for master in masters:
        bound = occurrence_bound(master, hi, tz)
        if bound > MAX_EXPANSION:
            out = _event_out(master, tz)
            out["repeats"] = master["RRULE"].to_ical().decode(errors="replace")[:200]
            out["not_expanded"] = True
            notes.append(f"event {out['uid'][:80]!r} repeats about {bound} times up to the window's end (rule "
                         f"{out['repeats']!r}): too many to list, shown once from its first start; free time counts "
                         "it busy from its start")
            return [out], notes
    found: list[dict] = []
    unknown = {str(m.get("UID", "")): _unknown_zone(m) for m in masters}
    for occurrence in recurring_ical_events.of(calendar).between(lo, hi):
        if len(found) >= MAX_PER_EVENT:
            notes.append(f"event {str(occurrence.get('UID', ''))[:80]!r} has more than {MAX_PER_EVENT} occurrences in "
                         f"the window: only the first {MAX_PER_EVENT} are listed")
            break
        out = _event_out(occurrence, tz)
        if unknown.get(out["uid"]):
            out["time_zone_note"] = unknown[out["uid"]]
        found.append(out)
    return found, notes


def caldav_provider(account: DavAccount, tz: tzinfo, connect: Callable[[DavAccount], Any] = dav_client
                    ) -> CalendarProvider:
    """One CalDAV account as a provider of the neutral calendar tools (integrations/calendar_tools.py)."""
    calendar_url: list[str] = []  # its calendar's URL, found once

    @contextmanager
    def calendar_of(changed: str = "nothing was changed") -> Iterator[Any]:
        try:
            client = connect(account)
            with client:
                if calendar_url:
                    yield client.calendar(url=calendar_url[0])
                    return
                calendars = client.principal().calendars()
                chosen = [c for c in calendars if account.calendar in (None, c.name)]
                if not chosen:
                    names = ", ".join(str(c.name) for c in calendars) or "none"
                    raise ToolError(f"Account {account.name!r} has no calendar named {account.calendar!r} (its "
                                    f"calendars: {names}).")
                calendar_url.append(str(chosen[0].url))
                yield chosen[0]
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of the exchange becomes one clear sentence
            raise dav_error(account, exc, changed) from None

    def events_between(lo: datetime, hi: datetime) -> tuple[list[dict], list[str], list[dict]]:
        with calendar_of() as calendar:
            objects = calendar.search(start=lo, end=hi, event=True, expand=False)
            events: list[dict] = []
            notes: list[str] = []
            unreadable: list[dict] = []
            for obj in objects:
                try:
                    found, said = expand(obj.icalendar_instance, lo, hi, tz)
                except Exception as exc:  # noqa: BLE001 - one unreadable event must not hide the others
                    unreadable.append({"href": str(obj.url)[-120:], "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                    continue
                events += found
                notes += said
        events.sort(key=lambda e: _sort_key(e, tz))
        return events, notes, unreadable

    def events(lo: datetime, hi: datetime, limit: int) -> tuple[list[dict], list[str], list[dict]]:
        found, notes, unreadable = events_between(lo, hi)
        if len(found) > limit:
            notes.append(f"{len(found) - limit} more events in the window: narrow it to see them")
        return found[:limit], notes, unreadable

    def busy(lo: datetime, hi: datetime) -> tuple[list[tuple[datetime, datetime]], str | None]:
        found, notes, unreadable = events_between(lo, hi)
        pairs = []
        for ev in found:
            if ev["transparent"]:
                continue
            start = _aware(datetime.fromisoformat(ev["start"]) if "T" in ev["start"] else
                           date.fromisoformat(ev["start"]), tz)
            end = hi if ev.get("not_expanded") else _aware(datetime.fromisoformat(ev["end"]) if "T" in ev["end"]
                                                           else date.fromisoformat(ev["end"]), tz)
            pairs.append((max(start, lo).astimezone(tz), max(end, start).astimezone(tz)))
        warning = None
        if notes or unreadable:
            warning = (f"{len(notes)} repeating event(s) were too frequent to expand and count as busy from "
                       f"their start; {len(unreadable)} event(s) could not be read and are not counted")
        return sorted(pairs), warning

    def create(body: dict) -> dict:
        uid = f"{uuid.uuid4()}@jarvis"
        ical = to_ical(body, uid)
        lost = "the event may or may not have been saved: list the calendar before trying again"
        with calendar_of(lost) as calendar:
            try:
                calendar.save_event(ical)
            except Exception as exc:  # noqa: BLE001 - a dropped answer: the client-chosen UID tells if it was saved
                try:
                    calendar.event_by_uid(uid)
                except Exception:  # noqa: BLE001 - not there (or still unreachable): the first error is the answer
                    raise exc from None
        return {"uid": uid, "summary": body["summary"],
                "start": body["start"].get("dateTime") or body["start"]["date"],
                "end": body["end"].get("dateTime") or body["end"]["date"],
                "attendees": [a["email"] for a in body.get("attendees", [])], "status": "created"}

    return CalendarProvider(events=events, busy=busy, create=create)


def build_caldav_tools(accounts: dict[str, DavAccount], timezone: str | None = None,
                       connect: Callable[[DavAccount], Any] = dav_client) -> list[BaseTool]:
    """The neutral calendar tools over these CalDAV accounts alone."""
    tz = user_zone(timezone)
    return build_calendar_tools({name: caldav_provider(account, tz, connect) for name, account in accounts.items()},
                                timezone)


def to_ical(body: dict, uid: str) -> str:
    """The VCALENDAR of an event_body (the Google-shaped dict gcal_tools validates), with icalendar."""
    from icalendar import Alarm, Calendar, Event, vCalAddress

    cal = Calendar()
    cal.add("prodid", "-//Jarvis//caldav_tools//EN")
    cal.add("version", "2.0")
    event = Event()
    event.add("uid", uid)
    event.add("dtstamp", datetime.now().astimezone())
    event.add("summary", body["summary"])
    for key in ("start", "end"):
        value = body[key]
        event.add(f"dt{key}", date.fromisoformat(value["date"]) if "date" in value
                  else datetime.fromisoformat(value["dateTime"]))
    for key in ("description", "location"):
        if body.get(key):
            event.add(key, body[key])
    for attendee in body.get("attendees", []):
        address = vCalAddress(f"mailto:{attendee['email']}")
        address.params["ROLE"] = "REQ-PARTICIPANT"
        address.params["RSVP"] = "TRUE"
        event.add("attendee", address, encode=False)
    for override in (body.get("reminders") or {}).get("overrides", []):
        alarm = Alarm()
        alarm.add("action", "DISPLAY")
        alarm.add("description", body["summary"])
        alarm.add("trigger", timedelta(minutes=-int(override["minutes"])))
        event.add_component(alarm)
    cal.add_component(event)
    return cal.to_ical().decode()


def _sort_key(event: dict, tz: tzinfo) -> float:
    value = event["start"]
    try:
        return _aware(datetime.fromisoformat(value) if "T" in value else date.fromisoformat(value), tz).timestamp()
    except ValueError:
        return 0.0
