"""The IMAP/SMTP mail tools against a real Dovecot and a real SMTP submission server (tests/mail_servers.py)."""

from __future__ import annotations

import socket
import ssl
import threading
from email.message import EmailMessage
from email.utils import make_msgid

import pytest

from integrations.base import ToolError
from integrations.imap_tools import MAX_MESSAGE_BYTES, build_imap_tools
from integrations.mail_account import MailAccount, TlsRefused, connect_imap, connect_smtp
from tests.mail_servers import Dovecot, Submission

ALICE, BOB = "alice@example.test", "bob@example.test"
USERS = {ALICE: "alice-app-password", BOB: "bob-app-password"}
AUTHSERV = "mx.example.test"


@pytest.fixture(scope="module")
def servers():
    dovecot = Dovecot(USERS).start()
    submission = Submission(dovecot).start()
    yield dovecot, submission
    submission.stop()
    dovecot.stop()


def account(servers, user=ALICE, **changes) -> MailAccount:
    dovecot, submission = servers
    fields = dict(name=user.split("@")[0], address=user, user=user, password=lambda: USERS[user],
                  imap_host="127.0.0.1", imap_port=dovecot.imaps_port, imap_tls="tls", smtp_host="127.0.0.1",
                  smtp_port=submission.port, smtp_tls="starttls", tls_ca_file=dovecot.ca, authserv_id=AUTHSERV,
                  timeout_s=20)
    fields.update(changes)
    return MailAccount(**fields)


def tools_of(acct: MailAccount, **kw):
    return {t.name: t for t in build_imap_tools({acct.name: acct}, **kw)}


def mail(subject: str, sender: str = "carol@partner.example", to: str = ALICE, body: str = "Hello Alice.",
         **headers: str) -> bytes:
    msg = EmailMessage()
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = make_msgid(domain="partner.example")
    msg.set_content(body)
    return msg.as_bytes()


def find(tools, subject: str, user_account: str = "alice") -> dict:
    found = tools["mail_search"].invoke({"query": subject, "account": user_account})["messages"]
    assert found, f"{subject!r} not found"
    return found[0]


def test_search_read_draft_and_send_a_reply(servers):
    """The whole round: a mail arrives, Jarvis finds it, reads the thread, saves a reply in Drafts (nothing sent),
    and sending it delivers it to the sender through SMTP; the draft leaves Drafts and a copy lands in Sent."""
    dovecot, submission = servers
    first = mail("Dinner on Friday?", sender=BOB)
    dovecot.deliver(ALICE, first)
    tools = tools_of(account(servers))
    hit = find(tools, "Dinner on Friday")
    assert hit["from"] == BOB and hit["unread"] and hit["sender_verified"] is False
    thread = tools["mail_read_thread"].invoke({"message_id": hit["id"]})
    assert thread["messages"][0]["body"].strip() == "Hello Alice."
    before = len(submission.received)
    draft = tools["mail_draft_reply"].invoke({"message_id": hit["id"], "body_md": "Yes, **gladly**."})
    assert draft["status"] == "draft saved, not sent" and draft["to"] == BOB
    assert len(submission.received) == before
    assert ":Drafts" in draft["draft_id"]
    question = tools["mail_send_draft"].metadata["summarize"]({"draft_id": draft["draft_id"]})
    assert question.startswith(f"Send the email to {BOB} from {ALICE}: subject 'Re: Dinner on Friday?'")
    sent = tools["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})
    assert sent["sent"] and sent["to"] == [BOB]
    bob = tools_of(account(servers, BOB))
    got = find(bob, "Dinner on Friday", "bob")
    reply = bob["mail_read_thread"].invoke({"message_id": got["id"]})
    assert "gladly" in reply["messages"][-1]["body"]
    with pytest.raises(ToolError, match="not in the Drafts folder"):
        tools["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})
