"""Calendar tools over CalDAV: a month of events (300, a few of them weekly repeats) listed from Radicale (the
test server of tests/dav_server.py) through calendar_list_events, against the caldav library used directly for the
same work (the month's events, repeats expanded, each one's title and times read). Each side opens its own
client per call, as the tool does. Target: ratio <= 1.2."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from _common import REPO, interleaved_medians  # noqa: F401 - REPO puts the checkout on sys.path

# this file is named caldav.py: with bench/ first on the path, `import caldav` would find it, not the library
sys.path[:] = [p for p in sys.path if p != str(REPO / "bench")]

from integrations.caldav_tools import build_caldav_tools  # noqa: E402
from integrations.dav_account import DavAccount  # noqa: E402
from tests.dav_server import Radicale  # noqa: E402

SINGLE, WEEKLY = 292, 2  # 292 events and 2 weekly repeats (4 occurrences each): 300 in the month
RUNS = 20
USER, PASSWORD = "bench", "bench-password"
ZONE = "Europe/Paris"


def event(uid: str, start: datetime, summary: str, rule: str = "") -> str:
    end = start + timedelta(minutes=45)
    return (f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\n"
            f"DTSTAMP:20260101T000000Z\r\nDTSTART:{start:%Y%m%dT%H%M%SZ}\r\nDTEND:{end:%Y%m%dT%H%M%SZ}\r\n"
            f"SUMMARY:{summary}\r\nLOCATION:Room {uid[-2:]}\r\nDESCRIPTION:Agenda of {summary}.\r\n{rule}"
            "END:VEVENT\r\nEND:VCALENDAR\r\n")


def main() -> int:
    try:
        server = Radicale({USER: PASSWORD}).start()
    except BaseException as exc:  # noqa: BLE001 - pytest's skip outside pytest
        print(f"skipped: Radicale could not start ({exc}); pip install -e '.[dev]'")
        return 0
    try:
        calendar = server.client(USER).principal().make_calendar(name="Work", cal_id="work")
        month = datetime(2026, 3, 1, tzinfo=ZoneInfo("UTC"))
        for n in range(SINGLE):
            calendar.save_event(event(f"one-{n:03d}", month + timedelta(hours=7 + n * 2.5), f"Meeting {n}"))
        for n in range(WEEKLY):
            calendar.save_event(event(f"weekly-{n}", month + timedelta(days=n, hours=6), f"Weekly {n}",
                                      "RRULE:FREQ=WEEKLY;COUNT=4\r\n"))
        account = DavAccount(name="bench", kind="caldav", url=server.url, user=USER, password=lambda: PASSWORD,
                             tls_ca_file=server.ca)
        tools = {t.name: t for t in build_caldav_tools({"bench": account}, ZONE)}
        window = {"time_min": "2026-03-01T00:00", "time_max": "2026-04-01T00:00", "max_results": 1000}
        listed = tools["calendar_list_events"].invoke(window)["events"]
        lo, hi = datetime(2026, 3, 1, tzinfo=ZoneInfo(ZONE)), datetime(2026, 4, 1, tzinfo=ZoneInfo(ZONE))

        def tool_list(_: int) -> object:
            return tools["calendar_list_events"].invoke(window)

        def direct_list(_: int) -> object:
            with server.client(USER) as client:
                found = client.calendar(url=str(calendar.url)).search(start=lo, end=hi, event=True, expand=True)
                return [(e.icalendar_component.get("SUMMARY"), e.icalendar_component.decoded("DTSTART"),
                         e.icalendar_component.decoded("DTEND")) for e in found]

        def direct_lean(_: int) -> object:
            """The least work caldav allows for it: the month's objects as stored, repeats expanded here."""
            import recurring_ical_events

            with server.client(USER) as client:
                found = client.calendar(url=str(calendar.url)).search(start=lo, end=hi, event=True)
                return [(e.get("SUMMARY"), e.decoded("DTSTART"), e.decoded("DTEND")) for obj in found
                        for e in recurring_ical_events.of(obj.icalendar_instance).between(lo, hi)]

        counts = (len(direct_list(0)), len(direct_lean(0)))
        print(f"events in the month: tool {len(listed)}, caldav {counts[0]} (expand=True), {counts[1]} (lean)")
        ours, bare = interleaved_medians(tool_list, direct_lean, RUNS)
        ratio = ours / bare
        print(f"list a month ({len(listed)} events): tool {ours:.1f} ms, caldav with recurring-ical-events "
              f"{bare:.1f} ms, ratio {ratio:.2f} (target <= 1.2)")
        ours_again, expanded = interleaved_medians(tool_list, direct_list, RUNS // 2)
        print(f"(caldav's own search(expand=True): {expanded:.1f} ms against the tool's {ours_again:.1f} ms, ratio "
              f"{ours_again / expanded:.2f})")
        return 1 if ratio > 1.2 or {len(listed)} != set(counts) else 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
