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
from enum import StrEnum
from typing import Any

from orchestrator.channels.addresses import normalize_party
from orchestrator.channels.handle_pins import account_of
from orchestrator.channels.inbound import InboundMessage
from orchestrator.channels.ratelimit import bucket
from orchestrator.channels.switchboard import judge
from orchestrator.core.config import Settings
from .schema import OPEN_STATUSES, JorbStatus
from .store import JorbStore


class RouteFlag(StrEnum):
    """The switchboard's own flags on a route (the model's flags, such as "spam", are kept as it says them)."""

    UNVERIFIED_SENDER = "unverified_sender"  # claims one of the user's identities; the channel did not vouch for it
    HANDLE_CHANGED_HANDS = "handle_changed_hands"  # the user's @handle, from another account than it first was
    NOT_JUDGED = "not_judged"  # the switchboard model's budget for the minute was spent


class RouteStatus(StrEnum):
    ROUTED = "routed"
    UNMATCHED = "unmatched"
    AMBIGUOUS = "ambiguous"
    SPAM = "spam"
    LOW_CONFIDENCE = "low_confidence"


@dataclass
class Route:
    jorb_id: str | None
    status: RouteStatus
    reasoning: str
    confidence: float = 1.0
    flags: list[str] = field(default_factory=list)
    is_user: bool = False


def route_inbound(settings: Settings, store: JorbStore, llm: Any, message: InboundMessage,
                  use_model: bool = True) -> Route:
    """`llm`: the model that judges when the rules find no single jorb (`use_model`). A message claiming one of the
    user's identities that the channel did not vouch for (`message.verified`) is not the user, only a counterpart;
    so is one under the user's @handle from another account (`message.sender_id`, matched against
    channels.user_identities too) than the one that handle was first seen with."""
    who = normalize_party(message.sender, settings.channels.default_region)
    identities = {normalize_party(u, settings.channels.default_region) for u in settings.channels.user_identities}
    accounts = {u.strip().lower() for u in settings.channels.user_identities}
    account = message.sender_id.lower() if message.sender_id else None
    if who.startswith("@") and who in identities and account is not None and account not in accounts:
        first = account_of(settings.data_dir, who, account)  # a handle can change hands: the account it first was
        if first != account:
            route = _route(settings, store, llm, message, who, False, use_model, impostor=True)
            route.flags.append(RouteFlag.HANDLE_CHANGED_HANDS)
            route.reasoning += (f" (the sender writes as you, {who}, but from another account ({account}) than the one "
                                f"that handle was first seen with ({first or 'unknown'}): treated as someone else)")
            return route
    claims_user = who in identities or (account is not None and account in accounts)
    if claims_user and not message.verified:
        route = _route(settings, store, llm, message, who, False, use_model, impostor=True)
        route.flags.append(RouteFlag.UNVERIFIED_SENDER)
        route.reasoning += (f" (the sender claims to be you, {who}, but the mail server did not verify it: treated "
                            "as someone else)")
        return route
    return _route(settings, store, llm, message, who, claims_user, use_model, impostor=False)


def _route(settings: Settings, store: JorbStore, llm: Any, message: InboundMessage, who: str, is_user: bool,
           use_model: bool, impostor: bool) -> Route:
    """The rules, then the model, once who the sender is has been settled. An impostor of the user is matched
    against no jorb's contacts (the user's own address is no counterpart), and the model sees it labelled."""
    channel, text, jorb_id, thread_key = message.channel, message.text, message.jorb_id, message.thread_key
    if impostor:
        who = f"unverified:{who}"
    if jorb_id:
        row = store.get(jorb_id)
        if row.status not in OPEN_STATUSES:
            return Route(None, RouteStatus.UNMATCHED, f"jorb {row.id} named by the message is {row.status}",
                         is_user=is_user)
        return Route(row.id, RouteStatus.ROUTED, f"the message names jorb {row.id}", is_user=is_user)
    if thread_key:
        started = store.jorb_for_thread(channel, thread_key)
        if started is not None:
            return Route(started.id, RouteStatus.ROUTED,
                         f"a reply in the {channel} conversation jorb {started.id} ({started.name}) started",
                         is_user=is_user)
    if is_user:
        return Route(None, RouteStatus.UNMATCHED,
                     "your own message, in no conversation a jorb started: assign it to a jorb", is_user=True)
    matches = store.jorbs_with_contact(who)
    if len(matches) == 1:
        return Route(matches[0].id, RouteStatus.ROUTED,
                     f"{who} is a contact of jorb {matches[0].id} ({matches[0].name})")
    waiting = [r for r in matches if r.status == JorbStatus.AWAITING_REPLY and normalize_party(r.waiting_party or "") == who]
    if len(waiting) == 1:
        return Route(waiting[0].id, RouteStatus.ROUTED,
                     f"jorb {waiting[0].id} ({waiting[0].name}) is waiting for {who}")
    exact_note = (f"{who} is a contact of several open jorbs ({', '.join(r.id for r in matches)})" if matches
                  else f"no open jorb has {who or 'this sender'} as a contact")
    candidates = matches or store.open_jorbs()
    unsure = RouteStatus.AMBIGUOUS if matches else RouteStatus.UNMATCHED
    if not use_model or not candidates:
        return Route(None, unsure, exact_note)
    # one budget per Jarvis (its data folder), shared by its pollers
    if not bucket(f"switchboard:{settings.data_dir}", settings.channels.judge_per_minute).acquire(timeout=0):
        return Route(None, unsure,
                     f"{exact_note}; not judged: more than channels.judge_per_minute messages needed the switchboard "
                     "this minute (please assign it)", flags=[RouteFlag.NOT_JUDGED])
    decision = judge(llm, channel, who, text, candidates)
    reasoning = f"{exact_note}; the switchboard model says: {decision.reasoning or 'no reason given'}"
    if decision.flags:
        reasoning += f" (flags: {', '.join(decision.flags)})"
    minimum = settings.channels.route_min_confidence
    if "spam" in decision.flags:
        return Route(None, RouteStatus.SPAM, reasoning, decision.confidence, list(decision.flags))
    if decision.jorb_id and decision.confidence >= minimum:
        return Route(decision.jorb_id, RouteStatus.ROUTED, reasoning + f" (confidence {decision.confidence:.2f})",
                     decision.confidence, list(decision.flags))
    if decision.jorb_id:
        return Route(None, RouteStatus.LOW_CONFIDENCE,
                     reasoning + f" (confidence {decision.confidence:.2f} < {minimum}: maybe jorb {decision.jorb_id}; "
                     "please assign)", decision.confidence, list(decision.flags))
    return Route(None, unsure, reasoning, decision.confidence, list(decision.flags))
