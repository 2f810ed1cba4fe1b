"""Google Calendar as one provider of the neutral calendar tools (integrations/calendar_tools.py), account
`google`, through the same exchanges as the gcal_* tools (gcal_tools.GoogleCalendar), which keep their names and
behaviour beside it.

Google expands repeating events itself (singleEvents); each event comes out in the shape the CalDAV provider
gives (uid, summary, start, end, all_day, location, description, attendees, transparent), its text cut as there.
An event created with attendees is sent to them by Google (sendUpdates=all): the tool judges it as an email too.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from .calendar_tools import CalendarProvider
from .gcal_tools import GoogleCalendar
from .google_api import GoogleApi

MAX_TEXT = 500  # characters of an event's description, as from a CalDAV account


def _cut(value: Any, cut: int) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text[:cut] + f" [... {len(text) - cut} more characters]" if len(text) > cut else text


def _event(ev: dict) -> dict[str, Any]:
    start, end = ev.get("start") or {}, ev.get("end") or {}
    return {"uid": ev.get("id"), "summary": _cut(ev.get("summary"), 200) or "(no title)",
            "start": start.get("dateTime") or start.get("date"), "end": end.get("dateTime") or end.get("date"),
            "all_day": "date" in start and "dateTime" not in start, "location": _cut(ev.get("location"), 200),
            "description": _cut(ev.get("description"), MAX_TEXT),
            "attendees": [a["email"] for a in ev.get("attendees") or [] if a.get("email")][:50],
            "transparent": ev.get("transparency") == "transparent", "link": ev.get("htmlLink")}


def google_calendar_provider(api: GoogleApi, calendar_id: str, tz: tzinfo) -> CalendarProvider:
    google = GoogleCalendar(api, calendar_id, tz)

    def events(lo: datetime, hi: datetime, limit: int) -> tuple[list[dict], list[str], list[dict]]:
        found = google.events(lo, hi, limit + 1)
        notes = ["more events in the window: narrow it to see them"] if len(found) > limit else []
        return [_event(ev) for ev in found[:limit]], notes, []

    def busy(lo: datetime, hi: datetime) -> tuple[list[tuple[datetime, datetime]], str | None]:
        return google.busy(lo, hi), None

    def create(body: dict) -> dict:
        ev = google.insert(body)
        out = _event(ev)
        return {"uid": out["uid"], "summary": out["summary"], "start": out["start"], "end": out["end"],
                "attendees": out["attendees"], "link": out["link"], "status": "created"}

    return CalendarProvider(events=events, busy=busy, create=create)
