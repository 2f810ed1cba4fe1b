"""The IMAP/SMTP mail tools against a real Dovecot and a real SMTP submission server (tests/mail_servers.py)."""

from __future__ import annotations

import dataclasses
import time
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

import pytest

from integrations.base import ToolError, tool_meta
from integrations.imap_tools import MAX_MESSAGE_BYTES, build_imap_tools
from integrations.mail_account import MailAccount, TlsRefused, connect_imap, connect_smtp
from tests.mail_servers import Proxy, dovecot_and_submission

ALICE, BOB, DAN = "alice@example.test", "bob@example.test", "dan@example.test"
USERS = {ALICE: "alice-app-password", BOB: "bob-app-password", DAN: "dan-app-password"}
AUTHSERV = "mx.example.test"


@pytest.fixture(scope="module")
def servers():
    with dovecot_and_submission(USERS) as both:
        yield both


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
    first = mail("Dinner on Friday?", sender=BOB, Date="Mon, 01 Dec 2025 10:00:00 +0000")
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
    question = tool_meta(tools["mail_send_draft"]).summarize({"draft_id": draft["draft_id"]})
    assert question.startswith(f"Send the email to {BOB} from {ALICE}: subject 'Re: Dinner on Friday?'")
    sent = tools["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})
    assert sent["sent"] and sent["to"] == [BOB]
    bob = tools_of(account(servers, BOB))
    got = find(bob, "Dinner on Friday", "bob")
    reply = bob["mail_read_thread"].invoke({"message_id": got["id"]})
    assert "gladly" in reply["messages"][-1]["body"]
    with pytest.raises(ToolError, match="not in the Drafts folder"):
        tools["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})
    dovecot.deliver(ALICE, mail("Re: Dinner on Friday?", sender=BOB, body="Great, 8 pm.", Date=formatdate(time.time() + 60),
                                References=f"{thread_id_of(first)}", In_Reply_To=thread_id_of(first)))
    whole = tools["mail_read_thread"].invoke({"message_id": hit["id"]})["messages"]
    assert [(m["from"], m["body"].split()[0]) for m in whole] == [(BOB, "Hello"), (ALICE, "Yes,"), (BOB, "Great,")]
    assert ":Sent" in whole[1]["id"]


def thread_id_of(raw: bytes) -> str:
    from email import message_from_bytes

    return str(message_from_bytes(raw)["Message-ID"])


def watched_password(user: str = ALICE) -> tuple[list[int], object]:
    asked: list[int] = []

    def password() -> str:
        asked.append(1)
        return USERS[user]
    return asked, password


def test_a_certificate_nobody_vouches_for_is_refused_before_the_password(servers):
    """Without the test CA the server's certificate is not trusted: both IMAP and SMTP refuse, and the password is
    never read, let alone sent."""
    asked, password = watched_password()
    acct = account(servers, tls_ca_file=None, password=password)
    with pytest.raises(TlsRefused, match="TLS failed"):
        connect_imap(acct)
    with pytest.raises(TlsRefused, match="TLS failed"):
        connect_smtp(acct)
    assert asked == []


def test_a_pinned_certificate_is_the_trust_and_any_other_is_refused(servers):
    """A self-signed server (Proton Bridge) is pinned by its SHA-256: the right pin connects without any CA, a wrong
    one is refused before the login is written, over implicit TLS, STARTTLS and SMTP alike."""
    dovecot, _ = servers
    good = account(servers, tls_ca_file=None, tls_fingerprint=dovecot.fingerprint)
    connect_imap(good).logout()
    connect_imap(account(servers, tls_ca_file=None, tls_fingerprint=dovecot.fingerprint, imap_tls="starttls",
                         imap_port=dovecot.imap_port)).logout()
    connect_smtp(good).quit()
    asked, password = watched_password()
    wrong = account(servers, tls_ca_file=None, tls_fingerprint="ab" * 32, password=password)
    for connect in (connect_imap, connect_smtp):
        with pytest.raises(TlsRefused, match="not the one pinned"):
            connect(wrong)
    with pytest.raises(TlsRefused, match="not the one pinned"):
        connect_imap(account(servers, tls_ca_file=None, tls_fingerprint="ab" * 32, password=password,
                             imap_tls="starttls", imap_port=dovecot.imap_port))
    assert asked == []


def test_starttls_stripped_by_a_man_in_the_middle_is_refused_not_skipped(servers):
    """Someone between Jarvis and the server removes STARTTLS from the capabilities: the connection is refused and
    the password is never sent in plain text (IMAP and SMTP)."""
    dovecot, submission = servers
    strip = Proxy(dovecot.imap_port, rewrite=lambda chunk: chunk.replace(b" STARTTLS", b""))
    strip_smtp = Proxy(submission.port, rewrite=lambda chunk: chunk.replace(b"250-STARTTLS\r\n", b""))
    try:
        asked, password = watched_password()
        acct = account(servers, imap_tls="starttls", imap_port=strip.port, smtp_port=strip_smtp.port,
                       password=password)
        with pytest.raises(TlsRefused, match="does not offer STARTTLS"):
            connect_imap(acct)
        with pytest.raises(TlsRefused, match="does not offer STARTTLS"):
            connect_smtp(acct)
        assert asked == []
        connect_imap(account(servers, imap_tls="starttls", imap_port=dovecot.imap_port)).logout()
    finally:
        strip.close()
        strip_smtp.close()


def test_a_big_mailbox_is_read_a_page_at_a_time(servers):
    dovecot, _ = servers
    for n in range(7):
        dovecot.deliver(ALICE, mail(f"Paged report {n}"))
    tools = tools_of(account(servers))
    seen, offset, pages = [], 0, 0
    while offset is not None:
        page = tools["mail_search"].invoke({"query": "Paged report", "max_results": 3, "offset": offset})
        assert page["total"] == 7 and len(page["messages"]) <= 3
        seen += [m["subject"] for m in page["messages"]]
        offset, pages = page["next_offset"], pages + 1
    assert pages == 3 and seen == [f"Paged report {n}" for n in reversed(range(7))]


def test_a_renumbered_folder_never_serves_another_message_for_an_old_id(servers):
    """The server changes the folder's UIDVALIDITY (a restore, a migration): an id from before is refused, nothing
    is read from whatever now holds that UID, and a new search finds the message again."""
    dovecot, _ = servers
    dovecot.deliver(BOB, mail("Renumbered invoice", to=BOB))
    tools = tools_of(account(servers, BOB))
    old = find(tools, "Renumbered invoice", "bob")["id"]
    validity = int(old.split(":")[1])
    dovecot.doveadm("mailbox", "update", "-u", BOB, "--uid-validity", str(validity + 1000), "INBOX")
    with pytest.raises(ToolError, match="renumbered"):
        tools["mail_read_thread"].invoke({"message_id": old})
    with pytest.raises(ToolError, match="renumbered"):
        tools["mail_draft_reply"].invoke({"message_id": old, "body_md": "ok"})
    new = find(tools, "Renumbered invoice", "bob")["id"]
    assert new != old
    assert tools["mail_read_thread"].invoke({"message_id": new})["messages"][0]["subject"] == "Renumbered invoice"


def test_a_sender_is_verified_only_by_the_accounts_own_server(servers):
    """Authentication-Results counts only when it is the topmost header and stamped by the account's authserv-id:
    one the sender wrote further down, or one from another server, leaves the sender unverified."""
    dovecot, _ = servers
    vouched = f"{AUTHSERV}; dmarc=pass header.from=partner.example"
    dovecot.deliver(ALICE, mail("Vouched sender", Authentication_Results=vouched))
    forged = mail("Forged vouch", Authentication_Results=vouched)
    dovecot.deliver(ALICE, f"Authentication-Results: {AUTHSERV}; dmarc=fail header.from=partner.example\r\n".encode()
                    + forged)
    dovecot.deliver(ALICE, mail("Other server", Authentication_Results="mx.elsewhere.example; dmarc=pass "
                                "header.from=partner.example"))
    tools = tools_of(account(servers))
    assert find(tools, "Vouched sender")["sender_verified"] is True
    assert find(tools, "Forged vouch")["sender_verified"] is False
    assert find(tools, "Other server")["sender_verified"] is False
    unconfigured = tools_of(account(servers, authserv_id=None))
    assert find(unconfigured, "Vouched sender")["sender_verified"] is False


def _stamped(headers: list[str], subject: str) -> bytes:
    """A mail as a receiving server leaves it: its Authentication-Results headers on top, in this order."""
    return "".join(f"Authentication-Results: {h}\r\n" for h in headers).encode() + mail(subject)


# The shapes iCloud and Fastmail really stamp (captured in deltachat-core-rust's dkimchecks test data): iCloud one
# header per check with its own id; Fastmail four headers from the receiving host, dkim and dmarc in the last.
PRESET_STAMPS = {
    "icloud": lambda dmarc, dkim: ['bimi.icloud.com; bimi=skipped reason="insufficient dmarc"',
                                   f"dmarc.icloud.com; dmarc={dmarc} header.from=partner.example",
                                   f"dkim-verifier.icloud.com; dkim={dkim} header.d=partner.example",
                                   "spf.icloud.com; spf=pass smtp.mailfrom=carol@partner.example"],
    "fastmail": lambda dmarc, dkim: ["mx6.messagingengine.com; x-csa=none; x-me-sender=none",
                                     "mx6.messagingengine.com; bimi=skipped (DMARC Policy is not at enforcement)",
                                     "mx6.messagingengine.com; arc=none (no signatures found)",
                                     f"mx6.messagingengine.com; dkim={dkim} header.d=partner.example; "
                                     f"dmarc={dmarc} header.from=partner.example; spf=pass smtp.mailfrom=carol@partner.example"],
}


@pytest.mark.parametrize("preset", ["icloud", "fastmail"])
def test_a_presets_authserv_id_verifies_its_servers_stamp_and_no_other(servers, preset):
    """An account on the iCloud or Fastmail preset (its servers pointed at Dovecot) verifies a sender its provider
    stamped as passing; not one stamped by another server, nor one the provider stamped as failing with a forged
    passing header of the provider's own id written below, nor one whose provider's verdict is only below a
    header of another id."""
    from orchestrator.core.account_config import MailAccountConfig
    from orchestrator.tools.mail_accounts import mail_account

    dovecot, submission = servers
    stamp = PRESET_STAMPS[preset]
    tag = preset.capitalize()
    dovecot.deliver(ALICE, _stamped(stamp("pass", "pass"), f"{tag} vouched"))
    dovecot.deliver(ALICE, _stamped(["mx.elsewhere.example; dmarc=pass header.from=partner.example; dkim=pass "
                                     "header.d=partner.example"], f"{tag} other server"))
    forged = {"icloud": "dmarc.icloud.com; dmarc=pass header.from=partner.example",
              "fastmail": "mx1.messagingengine.com; dmarc=pass header.from=partner.example"}[preset]
    dovecot.deliver(ALICE, _stamped([*stamp("none", "none"), forged], f"{tag} forged below"))
    dovecot.deliver(ALICE, _stamped(["mx.elsewhere.example; spf=none", *stamp("pass", "pass")], f"{tag} not on top"))
    config = MailAccountConfig(address=ALICE, preset=preset, password={"secret": "unused"}, imap_host="127.0.0.1",
                               imap_port=dovecot.imaps_port, smtp_host="127.0.0.1", smtp_port=submission.port,
                               smtp_tls="starttls", tls_ca_file=dovecot.ca)
    assert config.authserv_id  # from the preset
    acct = dataclasses.replace(mail_account("alice", config), password=lambda: USERS[ALICE])
    tools = tools_of(acct)
    assert find(tools, f"{tag} vouched")["sender_verified"] is True
    assert find(tools, f"{tag} other server")["sender_verified"] is False
    assert find(tools, f"{tag} forged below")["sender_verified"] is False
    assert find(tools, f"{tag} not on top")["sender_verified"] is False


def test_outlook_writes_no_authserv_id_so_its_senders_stay_unverified():
    """Outlook.com's header has no authserv-id: its preset names none, and a header shaped like it vouches for
    nobody, even under an id someone configured."""
    from integrations.mail_auth import server_vouches
    from orchestrator.core.account_config import MailAccountConfig

    assert MailAccountConfig(address="me@outlook.com", password={"secret": "o"}).authserv_id is None
    outlook = ("spf=pass (sender IP is 209.85.128.67) smtp.mailfrom=partner.example; dkim=pass (signature was "
               "verified) header.d=partner.example;dmarc=pass action=none header.from=partner.example;compauth=pass")
    assert not server_vouches("carol@partner.example", [outlook], "spf=pass")


def test_a_single_id_reads_only_the_topmost_header():
    """Gmail writes only `spf=` on a mail with no signature (deltachat's captured attack): with one id, a forged
    header of that id right below is never read, whatever a list of ids would do."""
    from integrations.mail_auth import server_vouches

    gmail = ["mx.google.com; spf=neutral smtp.mailfrom=carol@partner.example",
             "mx.google.com; dkim=pass header.d=partner.example; dmarc=pass header.from=partner.example"]
    assert not server_vouches("carol@partner.example", gmail, "mx.google.com")
    assert server_vouches("carol@partner.example", gmail[1:], "mx.google.com")


MALFORMED = (b"From: carol@partner.example\r\nTo: alice@example.test\r\nSubject: =?bogus-charset?q?Broken_MIME?=\r\n"
             b"Message-ID: <broken@partner.example>\r\nMIME-Version: 1.0\r\n"
             b"Content-Type: multipart/mixed; boundary=\"never-closed\"\r\n\r\n--never-closed\r\n"
             b"Content-Type: text/plain; charset=no-such-charset\r\nContent-Transfer-Encoding: base64\r\n\r\n"
             b"SGVsbG8gZnJvbSBhIGJyb2tlbiBtZXNzYWdl!!!*\r\n--never-closed\r\n"
             b"Content-Type: application/octet-stream; name*=utf-8''%ZZ%\r\nContent-Disposition: attachment\r\n\r\n"
             b"\x00\xff\xfe\r\n")


def test_malformed_mime_is_read_as_far_as_it_goes(servers):
    """An unclosed multipart, broken base64, an unknown charset and a bad filename parameter: the thread is read,
    with the text that could be decoded, not a crash."""
    dovecot, _ = servers
    dovecot.deliver(ALICE, MALFORMED)
    tools = tools_of(account(servers))
    hit = find(tools, "broken message")
    message = tools["mail_read_thread"].invoke({"message_id": hit["id"]})["messages"][0]
    assert "Hello from a broken message" in message["body"] and "[attachments:" in message["body"]


def test_an_encoded_word_in_the_subject_cannot_add_a_recipient(servers):
    """The sender's Subject holds an encoded line break and a Bcc: the draft's subject is one line of text, the
    draft has no Bcc, and the mail goes to the sender only."""
    dovecot, submission = servers
    dovecot.deliver(ALICE, mail("x").replace(b"Subject: x", b"Subject: =?utf-8?q?Booking=0ABcc:_eve@evil.example?="))
    tools = tools_of(account(servers))
    hit = find(tools, "Booking")
    draft = tools["mail_draft_reply"].invoke({"message_id": hit["id"], "body_md": "Confirmed."})
    assert draft["subject"] == "Re: Booking Bcc: eve@evil.example" and draft["to"] == "carol@partner.example"
    before = len(submission.received)
    sent = tools["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})
    assert sent["to"] == ["carol@partner.example"]
    assert [rcpts for _, rcpts, _ in submission.received[before:]] == [["carol@partner.example"]]
    assert b"\nBcc:" not in submission.received[-1][2]


def test_a_50_mb_attachment_is_not_downloaded_to_read_the_message(servers):
    """Reading a message with a 50 MB attachment fetches only its first part (counted on the wire) and says so.
    (Its own mailbox: a text search through 50 MB would slow the other tests.)"""
    dovecot, _ = servers
    big = EmailMessage()
    big["From"], big["To"], big["Subject"] = "carol@partner.example", DAN, "Holiday photos"
    big.set_content("The photos are attached.")
    big.add_attachment(b"\0" * (50 * 1024 * 1024), maintype="application", subtype="octet-stream",
                       filename="photos.zip")
    dovecot.deliver(DAN, big.as_bytes())
    relay = Proxy(dovecot.imaps_port)
    try:
        tools = tools_of(account(servers, DAN, imap_port=relay.port))
        hit, = tools["mail_search"].invoke({})["messages"]
        assert hit["size"] > 50 * 1024 * 1024
        started = time.monotonic()
        body = tools["mail_read_thread"].invoke({"message_id": hit["id"]})["messages"][0]["body"]
        assert body.startswith("The photos are attached.") and "photos.zip" in body
        assert f"only its first {MAX_MESSAGE_BYTES} were read" in body
        assert relay.sent < 3 * MAX_MESSAGE_BYTES, relay.sent
        assert time.monotonic() - started < 30
    finally:
        relay.close()


def test_a_connection_dropped_mid_fetch_is_a_clear_error_and_loses_nothing(servers):
    """The server's connection dies in the middle of a message: the tool says so, and the message is still there,
    still unread; a draft whose sending fails stays in Drafts."""
    dovecot, _ = servers
    dovecot.deliver(ALICE, mail("Long contract", body="clause " * 200_000))
    tools = tools_of(account(servers))
    hit = find(tools, "Long contract")
    relay = Proxy(dovecot.imaps_port, cut_after=200_000)
    try:
        cut = tools_of(account(servers, imap_port=relay.port))
        with pytest.raises(ToolError, match="dropped.*nothing in the mailbox was changed"):
            cut["mail_read_thread"].invoke({"message_id": hit["id"]})
    finally:
        relay.close()
    again = find(tools, "Long contract")
    assert again["id"] == hit["id"] and again["unread"]
    assert "clause clause" in tools["mail_read_thread"].invoke({"message_id": hit["id"]})["messages"][0]["body"]
    draft = tools["mail_draft_reply"].invoke({"message_id": hit["id"], "body_md": "Signed."})
    closed = Proxy(dovecot.imaps_port)
    closed.close()
    no_smtp = tools_of(account(servers, smtp_port=closed.port))
    with pytest.raises(ToolError, match="could not connect"):
        no_smtp["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})
    assert tools["mail_send_draft"].invoke({"draft_id": draft["draft_id"]})["sent"]


def _run(graph, thread: str, value):
    return graph.invoke(value, {"configurable": {"thread_id": thread}}, version="v2")


def test_the_email_summary_and_a_draft_reply_through_the_chat_graph(servers, jarvis_env):
    """Seed 002's mail flow on an IMAP account: the scripted model searches, reads the thread, drafts a reply (asked:
    the turn read an email) and sends it only after the user approves a question that names the recipient first."""
    import json

    from langgraph.types import Command

    from orchestrator.core import secrets
    from tests.conftest import answer, tool_call

    dovecot, submission = servers
    dovecot.deliver(ALICE, mail("Q4 budget review", sender=BOB, body="Can you review the Q4 budget by Monday?"))
    secrets.set_secret("home_mail", USERS[ALICE])
    jarvis_env.write_config(accounts={"home": {
        "address": ALICE, "password": {"secret": "home_mail"}, "imap_host": "127.0.0.1",
        "imap_port": dovecot.imaps_port, "smtp_host": "127.0.0.1", "smtp_port": submission.port,
        "smtp_tls": "starttls", "tls_ca_file": str(dovecot.ca), "authserv_id": AUTHSERV}},
        autonomy={"effects": {"email_draft": "auto"}})
    ref = find(tools_of(account(servers, name="home")), "Q4 budget review", "home")["id"]
    jarvis_env.server.push(
        tool_call("mail_search", query="Q4 budget", max_results=5),
        tool_call("mail_read_thread", message_id=ref),
        tool_call("mail_draft_reply", message_id=ref, body_md="Hi Bob,\n\nYes, I will review it by **Monday**."),
        answer("Bob asks for a review of the Q4 budget by Monday. I drafted a reply; shall I send it?"))
    graph = jarvis_env.graph()
    result = _run(graph, "imap-flow", {"messages": [("user", "summarize Bob's mail and draft a reply")]})
    (ask,) = result.interrupts
    assert ask.value["tool"] == "mail_draft_reply" and ask.value["escalated"] is True
    before = len(submission.received)
    result = _run(graph, "imap-flow", Command(resume={ask.id: {"decision": "approve"}}))
    assert not result.interrupts and "shall I send it?" in result.value["messages"][-1].content
    read = [m for m in result.value["messages"] if m.type == "tool" and m.name == "mail_read_thread"][0]
    assert "review the Q4 budget by Monday" in read.content
    drafted = [m for m in result.value["messages"] if m.type == "tool" and m.name == "mail_draft_reply"][0]
    draft_id = json.loads(drafted.content)["draft_id"]
    assert ":Drafts" in draft_id and len(submission.received) == before

    jarvis_env.server.push(tool_call("mail_send_draft", draft_id=draft_id), answer("Sent."))
    result = _run(graph, "imap-flow", {"messages": [("user", "yes, send it")]})
    (ask,) = result.interrupts
    assert ask.value["tool"] == "mail_send_draft" and ask.value["side_effects"] == ["email_send"]
    assert ask.value["summary"].startswith(f"Send the email to {BOB} from {ALICE}: subject 'Re: Q4 budget review'")
    assert len(submission.received) == before  # not before the answer
    result = _run(graph, "imap-flow", Command(resume={ask.id: {"decision": "approve"}}))
    assert result.value["messages"][-1].content == "Sent."
    assert [rcpts for _, rcpts, _ in submission.received[before:]] == [[BOB]]
    got = find(tools_of(account(servers, BOB)), "Re: Q4 budget review", "bob")
    assert got["from"] == ALICE


def test_jarvis_accounts_add_list_test_remove(servers, jarvis_env):
    """The account commands against the real servers: a wrong password is not saved (not even in the keyring), a
    right one is (its password in the keyring; the account in the user's config.local.yml, never the tracked
    config); a Proton-Bridge-like server (self-signed, STARTTLS on loopback) is pinned to its certificate's real
    fingerprint and then works; list says how each last test went; remove takes the account out, and refuses,
    saying where, an account written by hand in the tracked config."""
    import yaml

    from orchestrator.core import secrets

    dovecot, submission = servers
    local = jarvis_env.config_path.with_name("config.local.yml")
    common = ["--imap-host", "127.0.0.1", "--imap-port", str(dovecot.imaps_port), "--smtp-host", "127.0.0.1",
              "--smtp-port", str(submission.port), "--smtp-tls", "starttls", "--ca-file", str(dovecot.ca)]
    refused = jarvis_env.cli_here("accounts", "add", "work", "--address", ALICE, *common, input="wrong\n")
    assert refused.returncode != 0 and "login" in refused.stderr and "not saved" in refused.stderr
    assert not local.exists() and secrets.get_secret("mail_work", required=False) is None
    added = jarvis_env.cli_here("accounts", "add", "work", "--address", ALICE, *common, input=USERS[ALICE] + "\n")
    assert added.returncode == 0, added.stderr
    assert USERS[ALICE] not in local.read_text() and "accounts" not in yaml.safe_load(jarvis_env.config_path.read_text())
    bridge = jarvis_env.cli_here("accounts", "add", "bridge", "--address", BOB, "--preset", "proton-bridge",
                                 "--imap-port", str(dovecot.imap_port), "--smtp-port", str(submission.port), "--pin",
                                 input=USERS[BOB] + "\n")
    assert bridge.returncode == 0, bridge.stderr
    assert dovecot.fingerprint in bridge.stdout
    saved = yaml.safe_load(local.read_text())["accounts"]
    assert saved["bridge"]["tls_fingerprint"] == dovecot.fingerprint and "tls_ca_file" not in saved["bridge"]
    listed = jarvis_env.cli_here("accounts", "list").stdout
    assert f"work: {ALICE} (custom)" in listed and f"bridge: {BOB} (proton-bridge)" in listed
    assert "pinned" in listed and "last test worked" in listed
    tested = jarvis_env.cli_here("accounts", "test", "bridge")
    assert tested.returncode == 0 and "logged in as bob@example.test" in tested.stdout
    assert jarvis_env.cli_here("accounts", "remove", "work").returncode == 0
    assert list(yaml.safe_load(local.read_text())["accounts"]) == ["bridge"]

    jarvis_env.write_config(accounts={"handmade": {"address": ALICE, "password": {"secret": "mail_handmade"},
                                                   "imap_host": "127.0.0.1", "smtp_host": "127.0.0.1"}})
    kept = jarvis_env.cli_here("accounts", "remove", "handmade")
    assert kept.returncode != 0 and str(jarvis_env.config_path) in kept.stderr and "by hand" in kept.stderr
    assert "handmade" in jarvis_env.config_path.read_text()


def test_account_settings_fill_presets_and_never_turn_verification_off():
    from pydantic import ValidationError

    from orchestrator.core.account_config import MailAccountConfig

    icloud = MailAccountConfig(address="me@icloud.com", password={"secret": "icloud"})
    assert (icloud.preset, icloud.imap_host, icloud.imap_port, icloud.smtp_host, icloud.smtp_tls) == (
        "icloud", "imap.mail.me.com", 993, "smtp.mail.me.com", "starttls")
    fast = MailAccountConfig(address="me@example.org", preset="fastmail", password={"secret": "fm"})
    assert (fast.imap_host, fast.smtp_port, fast.smtp_tls) == ("imap.fastmail.com", 465, "tls")
    with pytest.raises(ValidationError, match="tls_fingerprint"):
        MailAccountConfig(address="me@proton.me", password={"secret": "pb"})
    with pytest.raises(ValidationError, match="64 hex"):
        MailAccountConfig(address="me@proton.me", password={"secret": "pb"}, tls_fingerprint="abc")
    for off in ({"tls_verify": False}, {"imap_tls": "none"}, {"smtp_tls": "plain"}):
        with pytest.raises(ValidationError):
            MailAccountConfig(address="me@icloud.com", password={"secret": "x"}, **off)
    with pytest.raises(ValidationError, match="imap_host"):
        MailAccountConfig(address="me@example.org", password={"secret": "x"})
