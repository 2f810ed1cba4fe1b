"""IMAP mail tools over a 10,000-message Dovecot mailbox (the test server of tests/mail_servers.py) against
imapclient used directly for the same work: a search that returns the newest page of 20 summaries, and reading
one message. Each side opens its own connection per call (as the tools do). Target: ratio <= 1.2."""

from __future__ import annotations

import os
import smtplib
import sys
from email.message import EmailMessage

from _common import REPO, interleaved_medians  # noqa: F401 - REPO puts the checkout on sys.path

from integrations.imap_tools import _SUMMARY, MAX_MESSAGE_BYTES, build_imap_tools  # noqa: E402
from integrations.mail_account import MailAccount, connect_imap  # noqa: E402
from tests.mail_servers import Dovecot  # noqa: E402

MESSAGES = 10_000
RUNS = 30
USER, PASSWORD = "bench@example.test", "bench-password"


def fill(dovecot: Dovecot) -> None:
    """One message through LMTP (which makes the mailbox), the rest written into its Maildir as Dovecot's own
    delivery would (minutes of LMTP sessions saved)."""
    with smtplib.LMTP("127.0.0.1", dovecot.lmtp_port) as lmtp:
        lmtp.sendmail("sender@partner.example", [USER], message(0))
    new = dovecot.root / "mail" / USER / "new"
    owner = new.stat()
    for n in range(1, MESSAGES):
        path = new / f"{1_700_000_000 + n}.bench{n}.localhost"
        path.write_bytes(message(n))
        if os.geteuid() == 0:
            os.chown(path, owner.st_uid, owner.st_gid)


def message(n: int) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"] = f"sender{n % 97}@partner.example", USER
    msg["Subject"] = f"Report {n} {'invoice' if n % 50 == 0 else 'notes'}"
    msg["Message-ID"] = f"<bench-{n}@partner.example>"
    msg.set_content(f"Body of message {n}. " * 20)
    return msg.as_bytes()


def main() -> int:
    try:
        dovecot = Dovecot({USER: PASSWORD}).start()
    except BaseException as exc:  # noqa: BLE001 - pytest's skip outside pytest
        print(f"skipped: Dovecot could not start ({exc}); make install-mail-server")
        return 0
    try:
        fill(dovecot)
        account = MailAccount(name="bench", address=USER, user=USER, password=lambda: PASSWORD,
                              imap_host="127.0.0.1", imap_port=dovecot.imaps_port, imap_tls="tls",
                              smtp_host="127.0.0.1", smtp_port=1, smtp_tls="tls", tls_ca_file=dovecot.ca)
        tools = {t.name: t for t in build_imap_tools({"bench": account})}
        target = tools["mail_search"].invoke({"query": "invoice", "max_results": 1})["messages"][0]["id"]
        uid = int(target.split(":")[2])

        def tool_search(_: int) -> object:
            return tools["mail_search"].invoke({"query": "invoice", "max_results": 20})

        def direct_search(_: int) -> object:
            client = connect_imap(account)
            client.select_folder("INBOX", readonly=True)
            uids = sorted(client.search(["TEXT", "invoice"]), reverse=True)[:20]
            found = client.fetch(uids, [_SUMMARY, b"FLAGS", b"RFC822.SIZE"])
            client.logout()
            return found

        def tool_read(_: int) -> object:
            return tools["mail_read_thread"].invoke({"message_id": target})

        body = [f"BODY.PEEK[]<0.{MAX_MESSAGE_BYTES}>".encode(), b"RFC822.SIZE"]
        probe = connect_imap(account)
        probe.select_folder("INBOX", readonly=True)
        header = probe.fetch([uid], [b"BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"])[uid][b"BODY[HEADER.FIELDS (MESSAGE-ID)]"]
        probe.logout()
        mid = header.decode().split(":", 1)[1].strip()

        def direct_fetch(_: int) -> object:
            client = connect_imap(account)
            client.select_folder("INBOX", readonly=True)
            found = client.fetch([uid], body)
            client.logout()
            return found

        def direct_read(_: int) -> object:
            """The same work by hand: the message, then its thread (one search of the threading headers for its
            Message-ID) in the folder and in Sent."""
            client = connect_imap(account)
            client.select_folder("INBOX", readonly=True)
            found = client.fetch([uid], body)
            keys = ["OR", ["OR", ["HEADER", "Message-ID", mid], ["HEADER", "References", mid]],
                    ["HEADER", "In-Reply-To", mid]]
            uids = client.search(keys)
            sent = client.find_special_folder(b"\\Sent")
            if sent:
                client.select_folder(sent, readonly=True)
                client.search(keys)
            client.select_folder("INBOX", readonly=True)
            found = client.fetch(uids, body)
            client.logout()
            return found

        failed = False
        for what, mine, theirs in (("search, newest 20 of 10,000", tool_search, direct_search),
                                   ("read one message (and look for its thread)", tool_read, direct_read)):
            ours, bare = interleaved_medians(mine, theirs, RUNS)
            ratio = ours / bare
            failed = failed or ratio > 1.2
            print(f"{what}: tools {ours:.1f} ms, imapclient {bare:.1f} ms, ratio {ratio:.2f} (target <= 1.2)")
        ours, bare = interleaved_medians(tool_read, direct_fetch, RUNS)
        print(f"(the thread's search costs: read {ours:.1f} ms against a bare fetch of the message {bare:.1f} ms)")
        return 1 if failed else 0
    finally:
        dovecot.stop()


if __name__ == "__main__":
    sys.exit(main())
