"""The clock, in the user's time zone."""

from __future__ import annotations

from datetime import datetime, timezone

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from .base import make_tool


class NowArgs(BaseModel):
    pass


def build_time_tools(tz_name: str | None = None) -> list[BaseTool]:
    def time_now() -> str:
        """The current date and time in the user's time zone (ISO 8601, with the weekday)."""
        if tz_name:
            from zoneinfo import ZoneInfo

            now = datetime.now(ZoneInfo(tz_name))
        else:
            now = datetime.now(timezone.utc).astimezone()
        return f"{now.isoformat(timespec='seconds')} ({now.strftime('%A')}, zone {now.tzname()})"

    return [make_tool(time_now, args_schema=NowArgs, trusted_output="the clock of this machine")]
