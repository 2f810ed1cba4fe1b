"""The provider-neutral calendar tools over every calendar account: calendar_list_events, calendar_find_free_time
and calendar_create_event (calendar_write, asked first with its account, times and attendees shown; with
attendees also email_send, as the server may invite them).

Each account is a `CalendarProvider` (a CalDAV account: caldav_tools.caldav_provider; Google Calendar:
gcal_provider.google_calendar_provider). The tools validate the window and the event here, once for every
provider, and route each call to the account named by `account` (default: the first); an unknown name is refused
with the list of known ones. Event text is outside content whatever the provider: no tool here declares a trusted
output but free time, which returns times only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool
from .gcal_tools import _event_effects, _human, _parse_hhmm, event_body, free_slots, parse_time, user_zone

MAX_WINDOW_DAYS = 400


@dataclass(frozen=True)
class CalendarProvider:
    """One account's three operations. `events(lo, hi, limit)` returns (events in order, at most `limit`, notes,
    unreadable); `busy(lo, hi)` returns the busy (start, end) pairs in the user's zone, sorted, and a warning or
    None; `create(body)` saves an event_body (gcal_tools) and returns the event as the server took it."""

    events: Callable[[datetime, datetime, int], tuple[list[dict], list[str], list[dict]]]
    busy: Callable[[datetime, datetime], tuple[list[tuple[datetime, datetime]], str | None]]
    create: Callable[[dict], dict]


class _Account(BaseModel):
    account: str | None = Field(None, description="the calendar account's name; default: the first")


class ListArgs(_Account):
    time_min: str = Field(description="start of the window, ISO 8601 (e.g. 2025-03-01T00:00)")
    time_max: str = Field(description="end of the window, ISO 8601")
    max_results: int = Field(100, ge=1, le=1000)


class FreeTimeArgs(_Account):
    duration_minutes: int = Field(ge=5, le=24 * 60, description="length of the meeting")
    time_min: str = Field(description="earliest start, ISO 8601")
    time_max: str = Field(description="latest end, ISO 8601")
    day_start: str = Field("09:00", description="working day starts (HH:MM, user's time zone)")
    day_end: str = Field("18:00", description="working day ends (HH:MM)")
    max_slots: int = Field(10, ge=1, le=50)


class CreateArgs(_Account):
    summary: str = Field(description="the event's title")
    start: str = Field(description="start, ISO 8601 (e.g. 2025-03-02T09:00); a date alone makes an all-day event")
    end: str | None = Field(None, description="end, ISO 8601; default: start + duration_minutes")
    duration_minutes: int | None = Field(None, ge=1, le=14 * 24 * 60, description="used when end is not given "
                                         "(default 30)")
    description: str | None = None
    location: str | None = None
    attendees: list[str] = Field(default_factory=list, description="email addresses to invite")
    reminder_minutes: int | None = Field(None, ge=0, le=40320, description="an alarm this many minutes before "
                                         "(a reminder: an event at the time with reminder_minutes=0)")


def build_calendar_tools(providers: dict[str, CalendarProvider], timezone: str | None = None) -> list[BaseTool]:
    tz = user_zone(timezone)

    def account_of(name: str | None) -> tuple[str, CalendarProvider]:
        if not providers:
            raise ToolError("No calendar account is set up: run `jarvis accounts add NAME --kind caldav` or "
                            "`jarvis auth google`.")
        if not name:
            return next(iter(providers.items()))
        if name not in providers:
            raise ToolError(f"No calendar account named {name!r}; the calendar accounts are: {', '.join(providers)}.")
        return name, providers[name]

    def window(time_min: str, time_max: str) -> tuple[datetime, datetime]:
        lo, hi = parse_time(time_min, tz, "time_min"), parse_time(time_max, tz, "time_max")
        if hi <= lo:
            raise ToolError(f"time_max ({hi.isoformat()}) must be after time_min ({lo.isoformat()}).")
        if hi - lo > timedelta(days=MAX_WINDOW_DAYS):
            raise ToolError(f"The window is longer than {MAX_WINDOW_DAYS} days: ask for a shorter one.")
        return lo, hi

    def calendar_list_events(time_min: str, time_max: str, max_results: int = 100, account: str | None = None) -> dict:
        """The events of a calendar account between two times (ISO 8601), in order, repeats expanded: uid,
        summary, start, end, location, description and attendees."""
        name, provider = account_of(account)
        lo, hi = window(time_min, time_max)
        events, notes, unreadable = provider.events(lo, hi, max_results)
        out: dict[str, Any] = {"account": name, "events": events}
        if notes:
            out["notes"] = notes
        if unreadable:
            out["unreadable"] = unreadable
        return out

    def calendar_find_free_time(duration_minutes: int, time_min: str, time_max: str, day_start: str = "09:00",
                                day_end: str = "18:00", max_slots: int = 10, account: str | None = None) -> dict:
        """Propose free times of at least duration_minutes between time_min and time_max, within working hours
        (day_start-day_end in the user's time zone), around the calendar account's events."""
        name, provider = account_of(account)
        lo, hi = window(time_min, time_max)
        ds, de = _parse_hhmm(day_start, "day_start"), _parse_hhmm(day_end, "day_end")
        if de <= ds:
            raise ToolError("day_end must be after day_start.")
        busy, warning = provider.busy(lo, hi)
        result = free_slots(busy, lo, hi, ds, de, tz, duration_minutes, max_slots)
        result["account"] = name
        if warning:
            result["warnings"] = warning
        return result

    def calendar_create_event(summary: str, start: str, end: str | None = None, duration_minutes: int | None = None,
                              description: str | None = None, location: str | None = None,
                              attendees: list[str] | None = None, reminder_minutes: int | None = None,
                              account: str | None = None) -> dict:
        """Create an event in a calendar account (also for reminders: an event at the time with
        reminder_minutes=0). The user is asked to confirm first."""
        name, provider = account_of(account)
        body = event_body(summary, start, end, duration_minutes, description, location, attendees, reminder_minutes, tz)
        return {"account": name, **provider.create(body)}

    def describe_create(args: dict) -> str:
        try:
            name, _ = account_of(args.get("account"))
            body = event_body(args.get("summary", ""), args.get("start", ""), args.get("end"),
                              args.get("duration_minutes"), None, args.get("location"), args.get("attendees"),
                              args.get("reminder_minutes"), tz)
        except ToolError as exc:
            return f"Create calendar event {args.get('summary')!r} (the times or the account look wrong: {exc})"
        start, end = body["start"], body["end"]
        when = (f"on {start['date']} (all day)" if "date" in start else
                f"{_human(start['dateTime'])} to {_human(end['dateTime'], time_only=True)}")
        extra = ""
        if body.get("attendees"):
            extra += ", inviting " + ", ".join(a["email"] for a in body["attendees"])
        if body.get("location"):
            extra += f", at {body['location'][:80]!r}"
        if args.get("reminder_minutes") is not None:
            extra += f", with a reminder {args['reminder_minutes']} min before"
        return f"Create the event \"{body['summary'][:120]}\" in calendar account {name} {when}{extra}."

    return [
        make_tool(calendar_list_events, args_schema=ListArgs),
        make_tool(calendar_find_free_time, args_schema=FreeTimeArgs,
                  trusted_output="free slots Jarvis computes from the calendar's busy times (no event's text)"),
        # the created event is echoed as the server took it: outside content, as every event read is
        make_tool(calendar_create_event, args_schema=CreateArgs, side_effects=["calendar_write"],
                  side_effects_for=_event_effects, summarize=describe_create,
                  deciding_args=("start", "end", "duration_minutes", "attendees", "location", "account")),
    ]

