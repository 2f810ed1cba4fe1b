"""The ids that name things across modules, written once, and the one place that reads a thread id's kind.

A jorb runs in a LangGraph thread of its own, `jorb:<jorb id>`, so everything keyed by thread id (checkpoints,
claims, the effects ledger, pending confirmations) names it this way; an MCP client's work runs in `mcp:<client>:
<name>`; every other thread is a conversation with the user. What a thread id is (a chat the user may write in, or
a jorb's checkpoints that only the jorb writes) is decided here, by `conversation_of`, never by parsing the prefix
where it is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

JORB_PREFIX = "jorb:"
MCP_CLIENT_PREFIX = "mcp:"


class ConversationKind(StrEnum):
    """What a thread id names. A mission is a jorb (its row's mode says "mission"): its thread is a JORB thread."""

    CHAT = "chat"  # the user's conversation: the web UI, the CLI, Telegram or email
    JORB = "jorb"  # a jorb's (or a mission's) own thread: its checkpoints, which only the jorb writes
    MCP_CLIENT = "mcp_client"  # the chat thread an MCP client's work runs in


@dataclass(frozen=True)
class Conversation:
    thread_id: str
    kind: ConversationKind
    jorb_id: str | None = None  # set exactly when kind is JORB


def jorb_thread_id(jorb_id: str) -> str:
    return f"{JORB_PREFIX}{jorb_id}"


def conversation_of(thread_id: str | None) -> Conversation:
    """The kind of a thread id (and its jorb, for a jorb's thread). `jorb:` with no id names no jorb: a chat."""
    thread_id = thread_id or ""
    if thread_id.startswith(JORB_PREFIX) and thread_id[len(JORB_PREFIX):]:
        return Conversation(thread_id, ConversationKind.JORB, thread_id[len(JORB_PREFIX):])
    if thread_id.startswith(MCP_CLIENT_PREFIX):
        return Conversation(thread_id, ConversationKind.MCP_CLIENT)
    return Conversation(thread_id, ConversationKind.CHAT)
