"""Routing an inbound message to the jorb it belongs to.

An explicit jorb id wins; then an exact match of the normalized sender against each open jorb's contacts
(a jorb waiting on that very sender first). A message that matches nothing is kept in the inbox, never
dropped. (The switchboard of the channels issue adds the model's judgement for the unclear cases.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..channels.addresses import normalize_party
from .schema import OPEN_STATUSES

if TYPE_CHECKING:
    from .service import JorbService


@dataclass
class Route:
    jorb_id: str | None
    status: str  # routed | unmatched | ambiguous | spam | low_confidence
    reasoning: str
    confidence: float = 1.0
    flags: list[str] = field(default_factory=list)
    is_user: bool = False


def exact_candidates(service: "JorbService", sender: str) -> list:
    return service.store.jorbs_with_contact(sender)


def route_inbound(service: "JorbService", channel: str, sender: str, text: str, jorb_id: str | None = None) -> Route:
    if jorb_id:
        row = service.store.get(jorb_id)
        if row.status not in OPEN_STATUSES:
            return Route(None, "unmatched", f"jorb {row.id} named by the message is {row.status}")
        return Route(row.id, "routed", f"the message names jorb {row.id}")
    who = normalize_party(sender)
    matches = exact_candidates(service, sender)
    if len(matches) == 1:
        return Route(matches[0].id, "routed", f"{who} is a contact of jorb {matches[0].id} ({matches[0].name})")
    waiting = [r for r in matches if r.status == "awaiting_reply" and normalize_party(r.waiting_party or "") == who]
    if len(waiting) == 1:
        return Route(waiting[0].id, "routed", f"jorb {waiting[0].id} ({waiting[0].name}) is waiting for {who}")
    if matches:
        names = ", ".join(f"{r.id} ({r.name})" for r in matches)
        return Route(None, "ambiguous", f"{who} is a contact of several open jorbs: {names}")
    return Route(None, "unmatched", f"no open jorb has {who or 'this sender'} as a contact")
