"""What a thread id names is read in one place (core/ids.conversation_of): a jorb's own thread is never taken for
a chat the user may write in (a chat turn there would overwrite the jorb's checkpoints), and a chat is never taken
for a jorb."""

from __future__ import annotations

import pytest

from orchestrator.core.ids import ConversationKind, conversation_of, jorb_thread_id
from orchestrator.jorbs.store import new_jorb_id
from orchestrator.mcp_server.clients import client_thread


def test_a_jorbs_thread_names_its_jorb_and_every_other_thread_names_none():
    jorb_id = new_jorb_id()
    jorb = conversation_of(jorb_thread_id(jorb_id))
    assert (jorb.kind, jorb.jorb_id) == (ConversationKind.JORB, jorb_id)
    client = conversation_of(client_thread("claude", "work"))
    assert (client.kind, client.jorb_id) == (ConversationKind.MCP_CLIENT, None)


@pytest.mark.parametrize("thread_id", [None, "", "default", "jorb:", "jorbs:abc", "my jorb:abc", "email-18c2f",
                                       "telegram-42-1", "JORB:abc"])
def test_a_thread_id_that_names_no_jorb_is_a_chat(thread_id):
    conversation = conversation_of(thread_id)
    assert conversation.kind is ConversationKind.CHAT and conversation.jorb_id is None


def test_the_kind_is_stored_as_its_readable_name():
    assert [k.value for k in ConversationKind] == ["chat", "jorb", "mcp_client"]
    assert ConversationKind("jorb") is ConversationKind.JORB
