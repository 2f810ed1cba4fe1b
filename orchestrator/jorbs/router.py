"""Routing an inbound message to the jorb it belongs to (the switchboard).

1. an explicit jorb id wins;
2. a reply in a conversation thread a jorb started (an email thread) goes to that jorb;
3. an exact match of the normalized sender against each open jorb's contacts (one match, or the one jorb
   waiting on that very sender);
4. only when that finds nothing or several, one call to the primary model judges (channels/switchboard.py);
   low confidence, spam and unknown senders go to the inbox with the reasoning, never to a guess.
A message from one of the user's own addresses is the user's intervention, shown to the jorb as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.channels.addresses import normalize_party
from orchestrator.channels.handle_pins import account_of
from orchestrator.channels.ratelimit import bucket
from orchestrator.channels.switchboard import judge
from orchestrator.core.config import Settings
from .schema import OPEN_STATUSES, JorbStatus
from .store import JorbStore


@dataclass
class Route:
    jorb_id: str | None
    status: str  # routed | unmatched | ambiguous | spam | low_confidence
    reasoning: str
    confidence: float = 1.0
    flags: list[str] = field(default_factory=list)
    is_user: bool = False


def route_inbound(settings: Settings, store: JorbStore, llm: Any, channel: str, sender: str, text: str,
                  jorb_id: str | None = None, thread_key: str | None = None, use_model: bool = True,
                  verified: bool = True, sender_id: str | None = None) -> Route:
    """`llm`: the model that judges when the rules find no single jorb (`use_model`). `verified`: whether the
    channel vouches for the sender (an email's From: only when the mail server's DKIM/DMARC checks passed): a
    message claiming one of the user's identities unverified is not the user, only a counterpart. `sender_id`: the
    sender as the platform authenticates it (`telegram:<user id>`), matched against channels.user_identities too."""
    who = normalize_party(sender, settings.channels.default_region)
    identities = {normalize_party(u, settings.channels.default_region) for u in settings.channels.user_identities}
    accounts = {u.strip().lower() for u in settings.channels.user_identities}
    account = sender_id.lower() if sender_id else None
    if who.startswith("@") and who in identities and account is not None and account not in accounts:
        first = account_of(settings.data_dir, who, account)  # a handle can change hands: the account it first was
        if first != account:
            route = route_inbound(settings, store, llm, channel, f"unverified:{who}", text, jorb_id, thread_key,
                                  use_model)
            route.flags.append("handle_changed_hands")
            route.reasoning += (f" (the sender writes as you, {who}, but from another account ({account}) than the one "
                                f"that handle was first seen with ({first or 'unknown'}): treated as someone else)")
            return route
    claims_user = who in identities or (account is not None and account in accounts)
    is_user = claims_user and verified
    if claims_user and not verified:
        route = route_inbound(settings, store, llm, channel, f"unverified:{who}", text, jorb_id, thread_key, use_model)
        route.flags.append("unverified_sender")
        route.reasoning += (f" (the sender claims to be you, {who}, but the mail server did not verify it: treated "
                            "as someone else)")
        return route
    if jorb_id:
        row = store.get(jorb_id)
        if row.status not in OPEN_STATUSES:
            return Route(None, "unmatched", f"jorb {row.id} named by the message is {row.status}", is_user=is_user)
        return Route(row.id, "routed", f"the message names jorb {row.id}", is_user=is_user)
    if thread_key:
        row = store.jorb_for_thread(channel, thread_key)
        if row is not None:
            return Route(row.id, "routed", f"a reply in the {channel} conversation jorb {row.id} ({row.name}) started",
                         is_user=is_user)
    if is_user:
        return Route(None, "unmatched", "your own message, in no conversation a jorb started: assign it to a jorb",
                     is_user=True)
    matches = store.jorbs_with_contact(who)
    if len(matches) == 1:
        return Route(matches[0].id, "routed", f"{who} is a contact of jorb {matches[0].id} ({matches[0].name})")
    waiting = [r for r in matches if r.status == JorbStatus.AWAITING_REPLY and normalize_party(r.waiting_party or "") == who]
    if len(waiting) == 1:
        return Route(waiting[0].id, "routed", f"jorb {waiting[0].id} ({waiting[0].name}) is waiting for {who}")
    exact_note = (f"{who} is a contact of several open jorbs ({', '.join(r.id for r in matches)})" if matches
                  else f"no open jorb has {who or 'this sender'} as a contact")
    candidates = matches or store.open_jorbs()
    if not use_model or not candidates:
        return Route(None, "ambiguous" if matches else "unmatched", exact_note)
    # one budget per Jarvis (its data folder), shared by its pollers
    if not bucket(f"switchboard:{settings.data_dir}", settings.channels.judge_per_minute).acquire(timeout=0):
        return Route(None, "ambiguous" if matches else "unmatched",
                     f"{exact_note}; not judged: more than channels.judge_per_minute messages needed the switchboard "
                     "this minute (please assign it)", flags=["not_judged"])
    decision = judge(llm, channel, who, text, candidates)
    reasoning = f"{exact_note}; the switchboard model says: {decision.reasoning or 'no reason given'}"
    if decision.flags:
        reasoning += f" (flags: {', '.join(decision.flags)})"
    minimum = settings.channels.route_min_confidence
    if "spam" in decision.flags:
        return Route(None, "spam", reasoning, decision.confidence, list(decision.flags))
    if decision.jorb_id and decision.confidence >= minimum:
        return Route(decision.jorb_id, "routed", reasoning + f" (confidence {decision.confidence:.2f})",
                     decision.confidence, list(decision.flags))
    if decision.jorb_id:
        return Route(None, "low_confidence", reasoning + f" (confidence {decision.confidence:.2f} < {minimum}: "
                     f"maybe jorb {decision.jorb_id}; please assign)", decision.confidence, list(decision.flags))
    return Route(None, "ambiguous" if matches else "unmatched", reasoning, decision.confidence, list(decision.flags))
