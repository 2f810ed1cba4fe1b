"""The Google sign-in as one account among the others (issue 30): `jarvis accounts` and Settings list it as the
account `google` (kind google: mail and calendar) while it is connected and say how to connect it while it is not,
test it by renewing its token, refuse to add or remove it (it is connected by `jarvis auth google`); and the
neutral mail and calendar tools call it by that one name, `gmail` (the mail tools' name before) still understood.
Against the local fake of Google's endpoints (tests/fakes/google_server.py)."""

from __future__ import annotations

import pytest

from tests.test_ui_browser import browser, open_ui  # noqa: F401 - fixtures
from tests.ui_server import start_ui


def _configure(jarvis_env, google_server, **config):
    jarvis_env.write_config(timezone="Europe/Paris", google={
        "gmail_base_url": google_server.url, "calendar_base_url": google_server.url,
        "token_uri": google_server.token_uri, "backoff_s": 0.01}, **config)


def _sign_in(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.tools import google_auth

    google_auth.save_credentials(jarvis_env.settings,
                                 Credentials.from_authorized_user_info(google_server.authorized_user_info()))


def test_jarvis_accounts_lists_tests_and_refuses_to_add_or_remove_google(jarvis_env, google_server):
    _configure(jarvis_env, google_server)
    local = jarvis_env.config_path.with_name("config.local.yml")
    before = jarvis_env.config_path.read_text()

    listed = jarvis_env.cli_here("accounts", "list")
    assert listed.returncode == 0
    assert "Google (Gmail and Google Calendar) is not connected: run `jarvis auth google`" in listed.stdout
    assert "google: google" not in listed.stdout

    for add in (jarvis_env.cli_here("accounts", "add", "--kind", "google"),
                jarvis_env.cli_here("accounts", "add", "work", "--kind", "google")):
        assert add.returncode != 0 and "connected by signing in" in add.stderr and "`jarvis auth google`" in add.stderr
    assert not local.exists() and jarvis_env.config_path.read_text() == before
    unnamed = jarvis_env.cli_here("accounts", "add", "--address", "me@example.test")
    assert unnamed.returncode != 0 and "give the account a name" in unnamed.stderr
    named = jarvis_env.cli_here("accounts", "add", "google", "--address", "me@example.test", "--imap-host", "h",
                                "--smtp-host", "h", "--no-test", input="pw\n")
    assert named.returncode != 0 and "Google sign-in's" in named.stderr and not local.exists()

    _sign_in(jarvis_env, google_server)
    listed = jarvis_env.cli_here("accounts", "list").stdout
    assert "google: google (mail, calendar)" in listed and "never tested" in listed
    assert "not connected" not in listed and "No accounts" not in listed
    tested = jarvis_env.cli_here("accounts", "test", "google")
    assert tested.returncode == 0, tested.stderr
    assert "signed in; the token renews" in tested.stdout and google_server.state.refreshes == 1
    assert "last test worked" in jarvis_env.cli_here("accounts", "list").stdout
    removed = jarvis_env.cli_here("accounts", "remove", "google")
    assert removed.returncode != 0 and "jarvis auth google --logout" in removed.stderr

    google_server.revoke()
    failed = jarvis_env.cli_here("accounts", "test", "google")
    assert failed.returncode != 0 and "jarvis auth google" in failed.stderr
    assert "last test FAILED" in jarvis_env.cli_here("accounts", "list").stdout


def test_settings_lists_and_tests_google_or_says_how_to_connect_it(jarvis_env, google_server):
    _configure(jarvis_env, google_server)
    with start_ui(jarvis_env) as ui, ui.client() as c:
        found = c.get("/api/accounts").json()
        assert found["accounts"] == [] and "`jarvis auth google`" in found["google_hint"]
    _sign_in(jarvis_env, google_server)
    with start_ui(jarvis_env) as ui, ui.client() as c:
        found = c.get("/api/accounts").json()
        (row,) = found["accounts"]
        assert found["google_hint"] is None
        assert row["name"] == "google" and row["kind"] == "google" and row["provides"] == ["mail", "calendar"]
        assert row["last_test"] is None
        tested = c.post("/api/accounts/google/test").json()
        assert tested["ok"] is True and "token renews" in tested["message"]
        assert c.get("/api/accounts").json()["accounts"][0]["last_test"]["ok"] is True
        kept = c.delete("/api/accounts/google")
        assert kept.status_code == 409 and "--logout" in kept.json()["detail"]


def test_the_mail_and_calendar_tools_call_google_by_one_name_and_gmail_still_works(jarvis_env, google_server):
    from integrations.base import ToolError
    from orchestrator.tools.dav_accounts import calendar_tools
    from orchestrator.tools.mail_accounts import mail_tools

    _configure(jarvis_env, google_server)
    _sign_in(jarvis_env, google_server)
    google_server.add_message(sender="Carol <carol@example.com>", subject="Concert tickets", body="Two for Friday?")
    google_server.add_event("primary", "Review", "2027-02-01T09:00:00Z", "2027-02-01T10:00:00Z")
    mail = {t.name: t for t in mail_tools(jarvis_env.settings)}
    calendar = {t.name: t for t in calendar_tools(jarvis_env.settings)}

    found = mail["mail_search"].invoke({"query": "Concert", "account": "google"})
    (hit,) = found["messages"]
    assert found["account"] == "google" and hit["id"].startswith("google:")
    listed = calendar["calendar_list_events"].invoke({"time_min": "2027-02-01", "time_max": "2027-02-02",
                                                      "account": "google"})
    assert listed["account"] == found["account"] and [e["summary"] for e in listed["events"]] == ["Review"]

    old = mail["mail_search"].invoke({"query": "Concert", "account": "gmail"})  # the name before: still Google
    assert old["account"] == "google" and [m["id"] for m in old["messages"]] == [hit["id"]]
    old_id = "gmail:" + hit["id"].removeprefix("google:")  # an id kept from before the rename
    assert "Two for Friday?" in mail["mail_read_thread"].invoke({"message_id": old_id})["messages"][0]["body"]
    with pytest.raises(ToolError, match=r"the accounts are: google\."):
        mail["mail_search"].invoke({"query": "x", "account": "work"})


def test_an_imap_account_named_gmail_keeps_its_name(jarvis_env, google_server):
    """The old name is only an alias: an IMAP account called gmail is that account, and Google stays `google`."""
    from integrations.base import ToolError
    from orchestrator.tools.mail_accounts import mail_tools

    _configure(jarvis_env, google_server, accounts={"gmail": {
        "address": "me@example.test", "password": {"secret": "mail_gmail"}, "imap_host": "127.0.0.1",
        "imap_port": 1, "smtp_host": "127.0.0.1"}})
    _sign_in(jarvis_env, google_server)
    google_server.add_message(sender="Carol <carol@example.com>", subject="Concert tickets", body="Two for Friday?")
    mail = {t.name: t for t in mail_tools(jarvis_env.settings)}
    found = mail["mail_search"].invoke({"query": "Concert", "account": "google"})
    assert found["account"] == "google" and len(found["messages"]) == 1
    with pytest.raises(ToolError, match="for account 'gmail'"):  # the IMAP account's own server (none there)
        mail["mail_search"].invoke({"query": "Concert", "account": "gmail"})


@pytest.mark.browser
def test_settings_shows_the_google_account_with_test_but_no_remove(open_ui, jarvis_env, google_server):
    from playwright.sync_api import expect

    _configure(jarvis_env, google_server)
    page, _ = open_ui()
    page.get_by_role("link", name="Settings").click()
    section = page.get_by_role("region", name="Accounts")
    expect(section.locator(".google-hint")).to_contain_text("run `jarvis auth google`")

    _sign_in(jarvis_env, google_server)
    page, _ = open_ui()
    page.get_by_role("link", name="Settings").click()
    section = page.get_by_role("region", name="Accounts")
    row = section.locator('.account[data-account="google"]')
    expect(row).to_contain_text("google (mail, calendar)")
    expect(row.get_by_role("button", name="Remove")).to_have_count(0)
    expect(section.locator(".google-hint")).to_have_count(0)
    row.get_by_role("button", name="Test").click()
    expect(section.get_by_role("status")).to_contain_text("the token renews")
    expect(row.locator(".badge")).to_have_text("works")
    assert page.js_errors == []
