"""The CalDAV and CardDAV servers of the common providers, so a user gives a user name and an app password.

A preset fills the `url` an account leaves unset; the client then finds the user's calendars or address books from
there (current-user-principal, then the calendar or address book home). Nextcloud runs on the user's own host, so
its account gives that host's URL and the preset only says where the DAV root is under it.
"""

from __future__ import annotations

PRESETS: dict[str, dict[str, str]] = {
    "icloud": {"caldav": "https://caldav.icloud.com/", "carddav": "https://contacts.icloud.com/"},
    "fastmail": {"caldav": "https://caldav.fastmail.com/dav/", "carddav": "https://carddav.fastmail.com/dav/"},
}
NEXTCLOUD_DAV_PATH = "/remote.php/dav/"


def preset_url(preset: str | None, kind: str, url: str | None) -> str | None:
    """The URL an account of `kind` talks to: its own, completed by its preset."""
    if preset == "nextcloud" and url:
        base = url.rstrip("/")
        return url if "/remote.php/" in url else base + NEXTCLOUD_DAV_PATH
    return url or PRESETS.get(preset or "", {}).get(kind)
