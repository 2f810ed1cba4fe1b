"""One inbound message from the world, as every channel hands it on (pollers, webhooks, POST /api/inbound).

A frozen record instead of loose parameters: the switchboard (jorbs/router.py), the jorb service and the user's
own conversations (conversations/) read the same fields, and a new channel fills the same ones, with the facts
that decide who the sender is (`verified`, `sender_id`) typed, never spelled into the sender's text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InboundMessage:
    """`sender`: the address, number or @handle the channel shows. `jorb_id`: a jorb the message names outright.
    `thread_key`: the channel's conversation (an email thread, a Telegram chat) a jorb may have started.
    `external_id`: the channel's own id of the message. `verified`: whether the channel vouches for the sender (an
    email's From: only when the mail server's DKIM/DMARC checks passed). `sender_id`: the sender as the platform
    authenticates it (`telegram:<user id>`), which a @handle changing hands does not change."""

    channel: str
    sender: str
    text: str
    jorb_id: str | None = None
    thread_key: str | None = None
    external_id: str | None = None
    verified: bool = True
    sender_id: str | None = None
