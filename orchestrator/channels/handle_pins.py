"""Which account a @handle of the user's belonged to when it was first seen (trust on first use).

A Telegram @handle can change hands: the user renames theirs, someone else takes it, and a message from that
someone would be "the user" to a `channels.user_identities` entry written as the handle. Telegram says which
numeric account sent each message, so the first message from a handle in user_identities fixes the account it
stands for; a later one from another account under the same handle is not the user (jorbs/router.py). Writing
`telegram:<numeric id>` in user_identities needs none of this.

Kept in <data>/channels/handle_accounts.json: {"@handle": "telegram:<id>"}.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from orchestrator.core.private_file import write_private

log = logging.getLogger(__name__)
_lock = threading.Lock()


def _path(data_dir: str | Path) -> Path:
    return Path(data_dir) / "channels" / "handle_accounts.json"


def account_of(data_dir: str | Path, handle: str, account: str) -> str:
    """The account `handle` stands for: the one it was first seen with, which is `account` when this is the first
    time (then kept)."""
    path = _path(data_dir)
    with _lock:
        try:
            known = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            known = {}
        except (OSError, ValueError) as exc:  # unreadable: no handle is taken for the user until it is mended
            log.warning("cannot read %s (%s): no @handle is recognised as you until it is fixed or removed", path, exc)
            return ""
        if not isinstance(known, dict):
            known = {}
        first = known.get(handle)
        if isinstance(first, str) and first:
            return first
        known[handle] = account
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_private(path, json.dumps(known, indent=1, sort_keys=True))
        except OSError:
            log.warning("cannot write %s: %s is taken as %s for this message only", path, handle, account)
        return account
