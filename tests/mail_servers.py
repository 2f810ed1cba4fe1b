"""Real mail servers for the IMAP/SMTP tests: Debian's Dovecot (IMAP, and LMTP for delivery) started in a temporary
folder on free loopback ports with its own configuration, and a real SMTP submission server (aiosmtpd) that asks
for STARTTLS and a password and delivers into Dovecot over LMTP. TLS comes from a test CA made here.

Without Dovecot the tests are skipped with the reason; JARVIS_REQUIRE_DOVECOT=1 (make test, where apt-get can
install it) turns that into a failure, so CI cannot skip them silently.
"""

from __future__ import annotations

import datetime
import grp
import os
import pwd
import shutil
import smtplib
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DOVECOT = "/usr/sbin/dovecot"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca_and_cert(folder: Path, host: str = "localhost") -> tuple[Path, Path, Path, str]:
    """A test CA and a server certificate it signed for `host` and 127.0.0.1: (ca.pem, cert.pem, key.pem, the
    server certificate's SHA-256 fingerprint as hex)."""
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("Jarvis test CA")).issuer_name(_name("Jarvis test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(host)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return (*paths, cert.fingerprint(hashes.SHA256()).hex())


def _unavailable(reason: str) -> None:
    if os.environ.get("JARVIS_REQUIRE_DOVECOT") == "1":
        pytest.fail(f"IMAP tests cannot run: {reason} (JARVIS_REQUIRE_DOVECOT=1)")
    pytest.skip(f"IMAP tests skipped: {reason}")


_CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = required
ssl_cert = <{cert}
ssl_key = <{key}
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = yes
auth_mechanisms = plain login
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
first_valid_uid = {uid}
last_valid_uid = {uid}
mail_uid = {uid}
mail_gid = {gid}
mail_location = maildir:{root}/mail/%u
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \\Drafts
    auto = subscribe
  }}
  mailbox Sent {{
    special_use = \\Sent
    auto = subscribe
  }}
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
  {chroot}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
{services}
lmtp_save_to_detail_mailbox = no
"""


class Dovecot:
    """One Dovecot for a test module: users from a passwd file, IMAP with STARTTLS and IMAPS, LMTP for delivery."""

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.root = Path(tempfile.mkdtemp(prefix="jarvis-dovecot-"))
        self.imap_port, self.imaps_port, self.lmtp_port = free_port(), free_port(), free_port()
        self.ca, self.cert, self.key, self.fingerprint = make_ca_and_cert(self.root)
        self.proc: subprocess.Popen | None = None

    @property
    def conf(self) -> Path:
        return self.root / "dovecot.conf"

    def start(self) -> "Dovecot":
        if not Path(DOVECOT).exists():
            _unavailable("dovecot not found (apt-get install dovecot-imapd dovecot-lmtpd)")
        if os.geteuid() == 0:  # as root: the mail and login processes run as the package's unprivileged user
            account = pwd.getpwnam("dovecot")
            services, chroot = "", ""
        else:  # as a user: every process runs as this user (no chroot, no privilege change)
            account = pwd.getpwuid(os.geteuid())
            services = "\n".join(f"service {s} {{\n  user = {account.pw_name}\n}}"
                                 for s in ("anvil", "auth", "auth-worker", "dict", "director", "imap-hibernate",
                                           "stats", "log", "config"))
            chroot = "chroot ="
        for sub in ("run", "state", "mail", "home"):
            (self.root / sub).mkdir()
        (self.root / "passwd").write_text("".join(f"{u}:{{PLAIN}}{p}::::::\n" for u, p in self.users.items()))
        self.conf.write_text(_CONFIG.format(
            root=self.root, cert=self.cert, key=self.key, user=account.pw_name,
            group=grp.getgrgid(account.pw_gid).gr_name, uid=account.pw_uid, gid=account.pw_gid,
            imap_port=self.imap_port, imaps_port=self.imaps_port, lmtp_port=self.lmtp_port,
            services=services, chroot=chroot))
        for path in (self.root, self.root / "mail", self.root / "home"):
            os.chmod(path, 0o755)
            if os.geteuid() == 0:
                os.chown(path, account.pw_uid, account.pw_gid) if path != self.root else None
        self.proc = subprocess.Popen([DOVECOT, "-F", "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                _unavailable(f"dovecot exited: {err}{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.lmtp_port), 1), \
                        socket.create_connection(("127.0.0.1", self.imaps_port), 1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        _unavailable(f"dovecot did not listen within 30 s: {self.log_text()}")
        return self

    def log_text(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def deliver(self, to: str, message: bytes, sender: str = "sender@example.org") -> None:
        """Deliver one message into `to`'s INBOX through Dovecot's own LMTP server."""
        with smtplib.LMTP("127.0.0.1", self.lmtp_port) as lmtp:
            lmtp.sendmail(sender, [to], message)

    def doveadm(self, *args: str) -> str:
        return subprocess.run(["doveadm", "-c", str(self.conf), *args], check=True, capture_output=True,
                              text=True, timeout=60).stdout

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.root, ignore_errors=True)


class Submission:
    """A real SMTP submission server (aiosmtpd): STARTTLS required before AUTH, the Dovecot users' passwords, and
    every accepted message delivered into Dovecot over LMTP (and kept in `received` for the test to read)."""

    def __init__(self, dovecot: Dovecot):
        self.dovecot = dovecot
        self.port = free_port()
        self.received: list[tuple[str, list[str], bytes]] = []
        self.controller = None

    def start(self) -> "Submission":
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        server = self

        class Handler:
            async def handle_DATA(self, smtp, session, envelope):  # noqa: ANN001 - aiosmtpd's hook signature
                data = envelope.original_content or envelope.content
                server.received.append((envelope.mail_from, list(envelope.rcpt_tos), data))
                for rcpt in envelope.rcpt_tos:
                    if rcpt.lower() in server.dovecot.users:
                        server.dovecot.deliver(rcpt.lower(), data, envelope.mail_from)
                return "250 OK"

        def authenticator(smtp, session, envelope, mechanism, auth_data):  # noqa: ANN001
            user, password = (v.decode() if isinstance(v, bytes) else v for v in (auth_data.login, auth_data.password))
            return AuthResult(success=self.dovecot.users.get(user) == password)

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.dovecot.cert), str(self.dovecot.key))
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, tls_context=context,
                                     require_starttls=True, authenticator=authenticator, auth_required=True)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()


@contextmanager
def dovecot_and_submission(users: dict[str, str]) -> Iterator[tuple[Dovecot, Submission]]:
    """A Dovecot with these users (address -> password) and its SMTP submission server, both stopped after."""
    dovecot = Dovecot(users).start()
    submission = Submission(dovecot).start()
    try:
        yield dovecot, submission
    finally:
        submission.stop()
        dovecot.stop()


class Proxy:
    """A TCP relay between a client and a server on loopback that can play the man in the middle: `rewrite` edits
    each chunk the server sends (stripping STARTTLS from its capabilities), `cut_after` drops the connection once
    the server has sent that many bytes through it, `cut_when` drops it before relaying the first chunk the server
    sends once `cut_when()` is true (a state the test reads on the server itself, so the cut does not depend on how
    many bytes each exchange happened to take), `drop()` cuts the connections open now. `sent` counts the server's
    bytes relayed."""

    def __init__(self, target_port: int, rewrite=None, cut_after: int | None = None,  # noqa: ANN001
                 cut_when=None, port: int = 0):  # noqa: ANN001
        """`port`: where it listens (0: a free port; a closed relay's port: the same relay back)."""
        import threading

        self.target_port, self.rewrite, self.cut_after, self.cut_when = target_port, rewrite, cut_after, cut_when
        self.sent = 0
        self.open: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self._threads = threading
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self.open += [client, server]
            self._threads.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            self._threads.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if from_server:
                    if self.cut_when is not None and self.cut_when():
                        break
                    if self.rewrite:
                        chunk = self.rewrite(chunk)
                    if self.cut_after is not None and self.sent + len(chunk) > self.cut_after:
                        dst.sendall(chunk[:max(0, self.cut_after - self.sent)])
                        self.sent = self.cut_after
                        break
                    self.sent += len(chunk)
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def drop(self) -> None:
        """Cut every connection relayed so far (a server restarting, a network change); new ones still pass."""
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.open = []

    def close(self) -> None:
        # close() alone leaves a thread blocked in accept() listening for one more connection: shut it down first
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
