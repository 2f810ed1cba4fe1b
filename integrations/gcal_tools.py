"""Google Calendar tools over the REST API: list events, propose free slots, create an event (calendar_write).

Times are ISO 8601; a time without an offset is taken in the user's time zone. Event creation carries a
client-chosen event id, so a retry after a lost answer finds the event instead of creating it twice. The three
exchanges (`GoogleCalendar`) also serve Google Calendar as the account `google` of the neutral calendar_* tools
(integrations/gcal_provider.py); the gcal_* tools keep their own names, outputs and contract.
"""

from __future__ import annotations

import logging
import uuid
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Any
from urllib.parse import quote

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool
from .google_api import GoogleApi

log = logging.getLogger(__name__)


def user_zone(name: str | None) -> tzinfo:
    if name:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    return datetime.now().astimezone().tzinfo  # type: ignore[return-value]


def parse_time(value: str, tz: tzinfo, field: str) -> datetime:
    from dateutil import parser

    text = (value or "").strip()
    if not text:
        raise ToolError(f"{field} is empty: give a date and time in ISO 8601, like 2025-03-01T09:00.")
    try:
        parsed = parser.isoparse(text)
    except (ValueError, OverflowError):
        raise ToolError(f"{field}={value!r} is not a date/time: use ISO 8601, like 2025-03-01T09:00 or "
                        "2025-03-01T09:00+01:00.") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=tz)
    return parsed


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def _parse_hhmm(value: str, field: str) -> time:
    try:
        hh, mm = value.strip().split(":")
        return time(int(hh), int(mm))
    except ValueError:
        raise ToolError(f"{field}={value!r} is not a time of day: use HH:MM, like 09:00.") from None


class ListArgs(BaseModel):
    time_min: str = Field(description="start of the window, ISO 8601 (e.g. 2025-03-01T00:00)")
    time_max: str = Field(description="end of the window, ISO 8601")
    max_results: int = Field(50, ge=1, le=500)


class FreeSlotsArgs(BaseModel):
    duration_minutes: int = Field(ge=5, le=24 * 60, description="length of the meeting")
    time_min: str = Field(description="earliest start, ISO 8601")
    time_max: str = Field(description="latest end, ISO 8601")
    day_start: str = Field("09:00", description="working day starts (HH:MM, user's time zone)")
    day_end: str = Field("18:00", description="working day ends (HH:MM)")
    max_slots: int = Field(10, ge=1, le=50)


class CreateEventArgs(BaseModel):
    summary: str = Field(description="the event's title")
    start: str = Field(description="start, ISO 8601 (e.g. 2025-03-02T09:00); a date alone makes an all-day event")
    end: str | None = Field(None, description="end, ISO 8601; default: start + duration_minutes")
    duration_minutes: int | None = Field(None, ge=1, le=14 * 24 * 60, description="used when end is not given (default 30)")
    description: str | None = None
    location: str | None = None
    attendees: list[str] = Field(default_factory=list, description="email addresses to invite")
    reminder_minutes: int | None = Field(None, ge=0, le=40320, description="a popup reminder this many minutes before")


def _event_out(ev: dict) -> dict[str, Any]:
    start = ev.get("start") or {}
    end = ev.get("end") or {}
    return {
        "id": ev.get("id"),
        "summary": ev.get("summary", "(no title)"),
        "start": start.get("dateTime") or start.get("date"),
        "end": end.get("dateTime") or end.get("date"),
        "location": ev.get("location"),
        "attendees": [a.get("email") for a in ev.get("attendees") or [] if a.get("email")],
        "link": ev.get("htmlLink"),
    }


class GoogleCalendar:
    """One Google calendar's three exchanges, shared by the gcal_* tools and the calendar provider
    (integrations/gcal_provider.py)."""

    def __init__(self, api: GoogleApi, calendar_id: str, tz: tzinfo):
        self.api, self.calendar_id, self.tz = api, calendar_id, tz
        self.events_path = f"/calendar/v3/calendars/{quote(calendar_id, safe='')}/events"

    def events(self, lo: datetime, hi: datetime, limit: int) -> list[dict]:
        """Google's own event items of [lo, hi), repeats expanded by Google, in order, at most `limit`."""
        params = {"timeMin": _iso(lo), "timeMax": _iso(hi), "singleEvents": "true", "orderBy": "startTime"}
        return list(self.api.paginate(self.events_path, params, "items", limit, page_cap=250, what="The calendar"))

    def busy(self, lo: datetime, hi: datetime) -> list[tuple[datetime, datetime]]:
        """The busy (start, end) pairs of [lo, hi) from freeBusy, in the user's zone, sorted."""
        body = {"timeMin": _iso(lo), "timeMax": _iso(hi), "items": [{"id": self.calendar_id}]}
        answer = self.api.request("POST", "/calendar/v3/freeBusy", json=body, idempotent=True,
                                  what="The calendar") or {}
        cal = (answer.get("calendars") or {}).get(self.calendar_id) or {}
        if cal.get("errors"):
            raise ToolError(f"Google Calendar could not give the busy times of {self.calendar_id}: "
                            f"{cal['errors'][0].get('reason', 'unknown reason')}.")
        return sorted((parse_time(b["start"], self.tz, "busy start").astimezone(self.tz),
                       parse_time(b["end"], self.tz, "busy end").astimezone(self.tz)) for b in cal.get("busy") or [])

    def insert(self, body: dict) -> dict:
        """Insert an event_body under a client-chosen id (a retried insert cannot create a second event); with
        attendees Google emails them an invitation (sendUpdates=all). Returns Google's event item."""
        body = {**body, "id": uuid.uuid4().hex}
        params = {"sendUpdates": "all"} if body.get("attendees") else None
        try:
            ev = self.api.request("POST", self.events_path, params=params, json=body, idempotent=True,
                                  what="The calendar")
        except ToolError as exc:
            if "conflict" not in str(exc):
                raise
            ev = self.api.request("GET", f"{self.events_path}/{body['id']}", what="The new event")  # an earlier try
        return ev or {}


def build_gcal_tools(api: GoogleApi, calendar_id: str = "primary", timezone: str | None = None) -> list[BaseTool]:
    tz = user_zone(timezone)
    google = GoogleCalendar(api, calendar_id, tz)

    def _window(time_min: str, time_max: str) -> tuple[datetime, datetime]:
        lo = parse_time(time_min, tz, "time_min")
        hi = parse_time(time_max, tz, "time_max")
        if hi <= lo:
            raise ToolError(f"time_max ({_iso(hi)}) must be after time_min ({_iso(lo)}).")
        return lo, hi

    def gcal_list_events(time_min: str, time_max: str, max_results: int = 50) -> list[dict]:
        """The events of the user's Google Calendar between two times (ISO 8601), in order, with id, summary,
        start, end, location and attendees."""
        lo, hi = _window(time_min, time_max)
        return [_event_out(ev) for ev in google.events(lo, hi, max_results)]

    def gcal_free_slots(duration_minutes: int, time_min: str, time_max: str, day_start: str = "09:00",
                        day_end: str = "18:00", max_slots: int = 10) -> dict:
        """Propose free times of at least duration_minutes between time_min and time_max, within working hours
        (day_start-day_end in the user's time zone), from the calendar's busy times."""
        lo, hi = _window(time_min, time_max)
        ds, de = _parse_hhmm(day_start, "day_start"), _parse_hhmm(day_end, "day_end")
        if de <= ds:
            raise ToolError("day_end must be after day_start.")
        return free_slots(google.busy(lo, hi), lo, hi, ds, de, tz, duration_minutes, max_slots)

    def gcal_create_event(summary: str, start: str, end: str | None = None, duration_minutes: int | None = None,
                          description: str | None = None, location: str | None = None,
                          attendees: list[str] | None = None, reminder_minutes: int | None = None) -> dict:
        """Create an event in the user's Google Calendar (also for reminders: an event at the time with
        reminder_minutes=0). The user is asked to confirm first."""
        body = event_body(summary, start, end, duration_minutes, description, location, attendees, reminder_minutes, tz)
        out = _event_out(google.insert(body))
        out["status"] = "created"
        return out

    def describe_create(args: dict) -> str:
        try:
            body = event_body(args.get("summary", ""), args.get("start", ""), args.get("end"), args.get("duration_minutes"),
                              None, args.get("location"), args.get("attendees"), args.get("reminder_minutes"), tz)
        except ToolError as exc:
            return f"Create calendar event {args.get('summary')!r} (the times look wrong: {exc})"
        start, end = body["start"], body["end"]
        when = (f"on {start['date']} (all day)" if "date" in start else
                f"{_human(start['dateTime'])} to {_human(end['dateTime'], time_only=True)}")
        extra = ""
        if body.get("attendees"):
            extra += ", inviting " + ", ".join(a["email"] for a in body["attendees"])
        if args.get("reminder_minutes") is not None:
            extra += f", with a reminder {args['reminder_minutes']} min before"
        return f"Create the Google Calendar event \"{body['summary']}\" {when}{extra}."

    return [
        make_tool(gcal_list_events, args_schema=ListArgs),
        make_tool(gcal_free_slots, args_schema=FreeSlotsArgs,
                  trusted_output="free slots Jarvis computes from the calendar's busy times (no event's text)"),
        make_tool(gcal_create_event, args_schema=CreateEventArgs, side_effects=["calendar_write"],
                  side_effects_for=_event_effects, summarize=describe_create,
                  trusted_output="the event as the calendar saved it from this call's own arguments",
                  deciding_args=("start", "end", "attendees", "location")),
    ]


def _event_effects(args: dict) -> list[str]:
    """An event with attendees is created with sendUpdates=all: Google emails each of them an invitation carrying
    its title, time, place and description. That is an email sent, judged as one (email_send), not only a change
    to the user's own calendar."""
    return ["calendar_write", "email_send"] if any(str(a).strip() for a in args.get("attendees") or []) \
        else ["calendar_write"]


def _human(iso: str, time_only: bool = False) -> str:
    dt = datetime.fromisoformat(iso)
    return dt.strftime("%H:%M") if time_only else dt.strftime("%a %Y-%m-%d %H:%M (UTC%z)")


def event_body(summary: str, start: str, end: str | None, duration_minutes: int | None, description: str | None,
               location: str | None, attendees: list[str] | None, reminder_minutes: int | None, tz: tzinfo) -> dict:
    if not (summary or "").strip():
        raise ToolError("The event needs a title: pass summary.")
    body: dict[str, Any] = {"summary": summary.strip()}
    if len(start.strip()) == 10:  # a date alone: an all-day event
        try:
            day = date.fromisoformat(start.strip())
        except ValueError:
            raise ToolError(f"start={start!r} is not a date: use 2025-03-01 or 2025-03-01T09:00.") from None
        last = date.fromisoformat(end.strip()) if end and len(end.strip()) == 10 else day
        body["start"] = {"date": day.isoformat()}
        body["end"] = {"date": (last + timedelta(days=1)).isoformat()}
    else:
        begin = parse_time(start, tz, "start")
        finish = parse_time(end, tz, "end") if end else begin + timedelta(minutes=duration_minutes or 30)
        if finish <= begin:
            raise ToolError(f"end ({_iso(finish)}) must be after start ({_iso(begin)}).")
        zone = getattr(tz, "key", None)
        body["start"] = {"dateTime": _iso(begin), **({"timeZone": zone} if zone else {})}
        body["end"] = {"dateTime": _iso(finish), **({"timeZone": zone} if zone else {})}
    if description:
        body["description"] = description
    if location:
        body["location"] = location
    bad = [a for a in attendees or [] if "@" not in a]
    if bad:
        raise ToolError(f"{bad[0]!r} is not an email address; attendees must be email addresses.")
    if attendees:
        body["attendees"] = [{"email": a.strip()} for a in attendees]
    if reminder_minutes is not None:
        body["reminders"] = {"useDefault": False, "overrides": [{"method": "popup", "minutes": reminder_minutes}]}
    return body


def free_slots(busy: list[tuple[datetime, datetime]], lo: datetime, hi: datetime, ds: time, de: time, tz: tzinfo,
               duration_minutes: int, max_slots: int) -> dict:
    """Free times of duration_minutes within working hours (ds-de each day in tz) between lo and hi, around the
    busy (start, end) pairs (sorted); the same for every calendar provider."""
    need = timedelta(minutes=duration_minutes)
    slots: list[dict[str, str]] = []
    for day_lo, day_hi in _working_windows(lo, hi, ds, de, tz):
        cursor = day_lo
        for b_start, b_end in busy + [(day_hi, day_hi)]:
            if b_end <= cursor:
                continue
            gap_end = min(b_start, day_hi)
            if gap_end - cursor >= need:
                slots.append({"start": _iso(cursor), "end": _iso(cursor + need), "free_until": _iso(gap_end)})
                if len(slots) >= max_slots:
                    return {"duration_minutes": duration_minutes, "slots": slots}
            cursor = max(cursor, b_end)
            if cursor >= day_hi:
                break
    return {"duration_minutes": duration_minutes, "slots": slots,
            **({} if slots else {"note": "no free slot of that length in the window; widen it or shorten the meeting"})}


def _working_windows(lo: datetime, hi: datetime, ds: time, de: time, tz: tzinfo):
    """(start, end) of each day's working hours within [lo, hi], in the user's zone."""
    day = lo.astimezone(tz).date()
    last = hi.astimezone(tz).date()
    while day <= last:
        w_lo = datetime.combine(day, ds, tzinfo=tz)
        w_hi = datetime.combine(day, de, tzinfo=tz)
        w_lo, w_hi = max(w_lo, lo), min(w_hi, hi)
        if w_hi > w_lo:
            yield w_lo, w_hi
        day += timedelta(days=1)
