"""Accounts in Settings (server/api/accounts.py, web/accounts.js) against a real Dovecot and SMTP submission server
(tests/mail_servers.py) and a real Radicale: the API refuses bad input and keeps nothing, and a real Chromium adds a
mail account, sees it listed and tested, and removes it, at 390 px and at 1280 px."""

from __future__ import annotations

import pytest
import yaml

from orchestrator.core import secrets
from tests.mail_servers import dovecot_and_submission
from tests.test_ui_browser import PHONE, _overflow, browser, open_ui, shot  # noqa: F401 - fixtures
from tests.ui_server import start_ui

ALICE = "alice@example.test"
USERS = {ALICE: "alice-app-password"}


@pytest.fixture(scope="module")
def servers():
    with dovecot_and_submission(USERS) as both:
        yield both


def form(servers, **changes) -> dict:
    dovecot, submission = servers
    return {"name": "home", "kind": "mail", "address": ALICE, "password": USERS[ALICE], "imap_host": "127.0.0.1",
            "imap_port": dovecot.imaps_port, "smtp_host": "127.0.0.1", "smtp_port": submission.port,
            "smtp_tls": "starttls", "tls_ca_file": str(dovecot.ca), **changes}


def local_file(env):
    return env.config_path.with_name("config.local.yml")


def test_bad_input_is_refused_and_nothing_is_kept(servers, jarvis_env):
    """A bad address, an unknown preset, a bad name: 400 with the reason. A wrong password: 400 with Dovecot's own
    words (the login was really tried), and neither the file nor the keyring holds anything afterwards."""
    with start_ui(jarvis_env) as ui, ui.client() as c:
        bad = c.post("/api/accounts", json=form(servers, address="not-an-address"))
        assert bad.status_code == 400 and "is not an email address" in bad.json()["detail"]
        bad = c.post("/api/accounts", json=form(servers, name="../etc"))
        assert bad.status_code == 400 and "letters, digits" in bad.json()["detail"]
        bad = c.post("/api/accounts", json=form(servers, kind="calendar", url="http://plain.example"))
        assert bad.status_code == 400 and "only https" in bad.json()["detail"]
        wrong = c.post("/api/accounts", json=form(servers, password="wrong-password"))
        assert wrong.status_code == 400, wrong.text
        said = wrong.json()["detail"]
        assert "[AUTHENTICATIONFAILED]" in said and "not saved" in said and "wrong-password" not in said
        assert not local_file(jarvis_env).exists()
        assert secrets.get_secret("mail_home", required=False) is None
        listed = c.get("/api/accounts").json()["accounts"]
        assert listed == []


def test_add_test_and_remove_through_the_api(servers, jarvis_env):
    """Added: the password in the keyring (never in a file or an answer), the account in config.local.yml, the
    tracked config untouched; listed with its test; a second add of the name is refused; an account written by
    hand in the tracked file is listed but its removal answers 409 naming the file, which stays as it was."""
    jarvis_env.write_config(accounts={"handmade": {"address": "h@example.test", "password": {"secret": "mail_h"},
                                                   "imap_host": "127.0.0.1", "smtp_host": "127.0.0.1"}})
    tracked = jarvis_env.config_path.read_text()
    with start_ui(jarvis_env) as ui, ui.client() as c:
        added = c.post("/api/accounts", json=form(servers))
        assert added.status_code == 200, added.text
        assert "logged in as alice@example.test" in added.json()["message"]
        assert secrets.get_secret("mail_home") == USERS[ALICE]
        assert USERS[ALICE] not in local_file(jarvis_env).read_text()
        assert yaml.safe_load(local_file(jarvis_env).read_text())["accounts"]["home"]["password"] == {
            "secret": "mail_home"}
        assert jarvis_env.config_path.read_text() == tracked
        rows = {a["name"]: a for a in c.get("/api/accounts").json()["accounts"]}
        assert rows["home"]["last_test"]["ok"] is True and rows["handmade"]["in_tracked_file"] is True
        assert USERS[ALICE] not in c.get("/api/accounts").text
        again = c.post("/api/accounts", json=form(servers))
        assert again.status_code == 400 and "already an account" in again.json()["detail"]
        tested = c.post("/api/accounts/home/test").json()
        assert tested["ok"] is True and "folders" in tested["message"]
        failed = c.post("/api/accounts/handmade/test").json()  # no server on its port 993
        assert failed["ok"] is False and "could not connect" in failed["message"]
        rows = {a["name"]: a for a in c.get("/api/accounts").json()["accounts"]}
        assert rows["handmade"]["last_test"]["ok"] is False
        kept = c.delete("/api/accounts/handmade")
        assert kept.status_code == 409 and str(jarvis_env.config_path) in kept.json()["detail"]
        assert jarvis_env.config_path.read_text() == tracked
        gone = c.delete("/api/accounts/home")
        assert gone.status_code == 200 and "mail_home" in gone.json()["message"]
        assert "accounts" not in (yaml.safe_load(local_file(jarvis_env).read_text()) or {})
        assert [a["name"] for a in c.get("/api/accounts").json()["accounts"]] == ["handmade"]
    assert "home" not in jarvis_env.settings.accounts  # a fresh load agrees: nothing left behind


@pytest.fixture(scope="module")
def radicale():
    from tests.dav_server import Radicale

    server = Radicale({"carol": "carol-app-password"}).start()
    server.client("carol").principal().make_calendar(name="Work", cal_id="work")
    yield server
    server.stop()


def test_a_calendar_account_through_the_api(radicale, jarvis_env):
    """kind calendar: a wrong password is refused with the server's answer and keeps nothing; the right one is
    saved as a caldav account (its password in the keyring), listed with its test, and removed."""
    body = {"name": "cal", "kind": "calendar", "address": "carol", "password": "wrong", "url": radicale.url,
            "tls_ca_file": str(radicale.ca)}
    with start_ui(jarvis_env) as ui, ui.client() as c:
        wrong = c.post("/api/accounts", json=body)
        assert wrong.status_code == 400 and "refused the login" in wrong.json()["detail"]
        assert not local_file(jarvis_env).exists() and secrets.get_secret("caldav_cal", required=False) is None
        added = c.post("/api/accounts", json={**body, "password": "carol-app-password"})
        assert added.status_code == 200, added.text
        assert "1 calendars" in added.json()["message"]
        saved = yaml.safe_load(local_file(jarvis_env).read_text())["accounts"]["cal"]
        assert saved["kind"] == "caldav" and saved["user"] == "carol" and saved["password"] == {"secret": "caldav_cal"}
        assert secrets.get_secret("caldav_cal") == "carol-app-password"
        row, = c.get("/api/accounts").json()["accounts"]
        assert row["kind"] == "caldav" and row["last_test"]["ok"] is True
        assert c.delete("/api/accounts/cal").status_code == 200
        assert c.get("/api/accounts").json()["accounts"] == []


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [PHONE, {"width": 1280, "height": 800}], ids=["390px", "1280px"])
def test_settings_adds_tests_and_removes_a_mail_account(servers, open_ui, viewport):
    from playwright.sync_api import expect

    dovecot, submission = servers
    page, server = open_ui(viewport=viewport)
    page.get_by_role("link", name="Settings").click()
    section = page.get_by_role("region", name="Accounts")
    expect(section).to_contain_text("No accounts yet.")
    section.get_by_label("Account name").fill("home")
    section.get_by_label("Address").fill(ALICE)
    section.get_by_label("App password").fill("wrong-password")
    section.locator("summary").click()
    section.get_by_label("IMAP server").fill("127.0.0.1")
    section.get_by_label("IMAP port").fill(str(dovecot.imaps_port))
    section.get_by_label("SMTP server").fill("127.0.0.1")
    section.get_by_label("SMTP port").fill(str(submission.port))
    section.get_by_label("SMTP TLS").select_option("starttls")
    section.get_by_label("CA certificate file").fill(str(dovecot.ca))
    section.get_by_role("button", name="Add the account").click()
    expect(section.locator(".problem, .error").first).to_contain_text("AUTHENTICATIONFAILED")
    assert not local_file(server.env).exists()

    section.get_by_label("App password").fill(USERS[ALICE])
    section.get_by_role("button", name="Add the account").click()
    row = section.locator('.account[data-account="home"]')
    expect(row).to_contain_text(ALICE)
    expect(row.locator(".badge")).to_have_text("works")
    assert _overflow(page) <= 0, f"Settings is {_overflow(page)} px wider than the window"
    shot(page, f"settings-account-added-{viewport['width']}")
    row.get_by_role("button", name="Test").click()
    expect(section.get_by_role("status")).to_contain_text("logged in as alice@example.test")
    row.get_by_role("button", name="Remove").click()
    expect(row).to_have_count(0)
    expect(section.get_by_role("status")).to_contain_text("removed account home")
    assert "accounts" not in (yaml.safe_load(local_file(server.env).read_text()) or {})
    assert [e for e in page.js_errors if not e.startswith("Failed to load resource")] == []
