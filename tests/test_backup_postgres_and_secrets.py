"""Backups of a PostgreSQL Jarvis (pg_dump / pg_restore, on the real server of the storage tests), and backups that
carry the keyring's secrets: only encrypted, and refused when the passphrase is wrong or a byte changed."""

from __future__ import annotations

import json

from orchestrator.backup import postgres_parts
from orchestrator.core import secrets
from orchestrator.channels.inbound import InboundMessage
from tests.backup_helpers import other_machine


def step(**fields) -> dict:
    return {"content": json.dumps(fields)}


def test_a_postgresql_jarvis_is_backed_up_and_restored_into_an_empty_database(pg_env, postgres_server, tmp_path):
    from orchestrator.app import App
    from orchestrator.reminders import ReminderRequest, ReminderStore

    pg_env.server.push(step(reasoning="ask", script="jarvis.messages.send('local', 'bob', 'free?')",
                            await_reply=True),
                       step(reasoning="answered", done=True, result="Bob is free"))
    ReminderStore(pg_env.settings).create(ReminderRequest(title="call mum", when="2030-01-01T10:00", thread_id="t"))
    jorb = App(pg_env.settings).jorbs.create("Ask Bob", "Ask Bob", autonomy={"message_send": "auto"})
    made = pg_env.cli("backup", "create", "--to", str(tmp_path / "b"), "--verify", check=True)
    assert "verified:" in made.stdout
    (backup,) = (tmp_path / "b").glob("*.jarvis-backup")
    before = postgres_parts.describe(pg_env.pg_url)["tables"]

    new = other_machine(pg_env, tmp_path / "new")
    sqlite_here = new.cli("backup", "restore", str(backup))
    assert sqlite_here.returncode == 1 and "set storage.url" in sqlite_here.stderr
    new_url = postgres_server.new_database()
    new.write_config(storage={"url": new_url})
    new.cli("backup", "restore", str(backup), check=True)
    after = postgres_parts.describe(new_url)["tables"]
    del before["schema_versions"]  # the restore's migration stamps the tables this backup's Jarvis never made
    assert {t: after[t] for t in before} == before and before["reminders"] == 1 and before["checkpoints"] > 0
    again = new.cli("backup", "restore", str(backup))
    assert again.returncode == 1 and "already has tables" in again.stderr

    there = App(new.settings).jorbs  # the waiting jorb, its checkpoint in the restored database, takes its reply
    assert there.inbound(InboundMessage("local", "bob", "yes")).jorb_id == jorb.row.id
    there.wait_background()
    assert there.view(jorb.row.id).row.result == "Bob is free"


def test_secrets_stay_out_unless_included_and_then_only_encrypted(jarvis_env, tmp_path, monkeypatch):
    jarvis_env.write_config(models={"primary": {"api_key": {"secret": "model_key"}}})
    secrets.set_secret("model_key", "sk-the-users-own-key-123")
    jarvis_env.data.mkdir(exist_ok=True)
    (jarvis_env.data / "server_token").write_text("the-ui-session-token")
    plain = jarvis_env.cli("backup", "create", "--to", str(tmp_path / "plain"), check=True)
    (plain_file,) = (tmp_path / "plain").glob("*.jarvis-backup")
    raw = plain_file.read_bytes()
    assert b"sk-the-users-own-key-123" not in raw and b"the-ui-session-token" not in raw, plain.stdout

    no_pass = jarvis_env.cli("backup", "create", "--to", str(tmp_path / "enc"), "--include-secrets")
    assert no_pass.returncode == 1 and "passphrase" in no_pass.stderr
    assert not (tmp_path / "enc").exists() or not list((tmp_path / "enc").iterdir())
    monkeypatch.setenv("JARVIS_BACKUP_PASSPHRASE", "correct horse battery staple")
    made = jarvis_env.cli("backup", "create", "--to", str(tmp_path / "enc"), "--include-secrets", "--verify",
                          check=True)
    assert "secrets (encrypted)" in made.stdout and "verified:" in made.stdout
    (enc,) = (tmp_path / "enc").glob("*.jarvis-backup")
    sealed = enc.read_bytes()
    assert b"sk-the-users-own-key-123" not in sealed and b"manifest.json" not in sealed  # the whole file is sealed

    new = other_machine(jarvis_env, tmp_path / "new")
    new.write_config(models={"primary": {"api_key": {"secret": "model_key"}}})
    secrets.delete_secret("model_key")
    monkeypatch.setenv("JARVIS_BACKUP_PASSPHRASE", "wrong horse")
    wrong = new.cli("backup", "restore", str(enc))
    assert wrong.returncode == 1 and "passphrase is wrong" in wrong.stderr
    monkeypatch.setenv("JARVIS_BACKUP_PASSPHRASE", "correct horse battery staple")
    flipped = tmp_path / "flipped.jarvis-backup"
    flipped.write_bytes(sealed[:-100] + bytes([sealed[-100] ^ 1]) + sealed[-99:])
    bad = new.cli("backup", "restore", str(flipped))
    assert bad.returncode == 1 and "tampered" in bad.stderr, bad.stderr
    cut = tmp_path / "cut.jarvis-backup"
    cut.write_bytes(sealed[: len(sealed) - 40])
    short = new.cli("backup", "restore", str(cut))
    assert short.returncode == 1 and ("truncated" in short.stderr or "tampered" in short.stderr), short.stderr
    assert secrets.get_secret("model_key", required=False) is None

    done = new.cli("backup", "restore", str(enc), check=True)
    assert "model_key" in done.stdout
    assert secrets.get_secret("model_key", required=False) == "sk-the-users-own-key-123"


def test_an_open_backup_that_carries_secrets_is_refused(jarvis_env, tmp_path):
    """Only a sealed backup puts secrets into the keyring: a plain file saying it holds some was not made by
    Jarvis, and restoring it would write its author's values over the user's keys."""
    import hashlib

    from orchestrator.backup.create import create_backup
    from tests.backup_helpers import rewrite

    good = create_backup(jarvis_env.settings, tmp_path / "b").path
    blob = json.dumps({"model_key": "sk-the-attackers-key"}).encode()
    forged = tmp_path / "forged.jarvis-backup"

    def add_secrets(name: str, data: bytes) -> bytes:
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["parts"].append({"name": "secrets/keyring.json", "kind": "secrets", "size": len(blob),
                                  "sha256": hashlib.sha256(blob).hexdigest()})
        return json.dumps(manifest).encode()

    rewrite(good, forged, add_secrets, extra={"secrets/keyring.json": blob})
    new = other_machine(jarvis_env, tmp_path / "new")
    out = new.cli("backup", "restore", str(forged))
    assert out.returncode == 1 and "holds secrets but is not encrypted" in out.stderr, out.stderr
    assert secrets.get_secret("model_key", required=False) is None
