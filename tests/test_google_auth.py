"""`jarvis auth google`: the real installed-app flow (google-auth-oauthlib) against the local fake of Google's
OAuth endpoints, the token stored in the (file) keyring, then loaded, used, refreshed and stored again."""

from __future__ import annotations

import json
import re
import subprocess
import time

import requests

from tests.conftest import JARVIS_BIN


def _google_config(jarvis_env, server, secrets_path=None):
    google = {"gmail_base_url": server.url, "calendar_base_url": server.url, "token_uri": server.token_uri,
              "backoff_s": 0.01}
    if secrets_path:
        google["client_secrets"] = str(secrets_path)
    jarvis_env.write_config(google=google, timezone="Europe/Paris")


def test_status_and_not_configured_messages(jarvis_env, google_server):
    _google_config(jarvis_env, google_server)
    proc = jarvis_env.cli("auth", "google", "--status")
    assert proc.returncode == 1 and "Google is not connected: run `jarvis auth google`" in proc.stderr
    proc = jarvis_env.cli("auth", "google", "--no-browser")
    assert proc.returncode == 1 and "google.client_secrets is not set" in proc.stderr


def test_installed_app_flow_stores_the_token_in_the_keyring(jarvis_env, google_server, tmp_path):
    secrets_path = tmp_path / "client_secret.json"
    secrets_path.write_text(json.dumps(google_server.client_secrets()), encoding="utf-8")
    _google_config(jarvis_env, google_server, secrets_path)
    env = jarvis_env.env()
    env["PYTHONUNBUFFERED"] = "1"
    env["OAUTHLIB_INSECURE_TRANSPORT"] = "1"  # oauthlib's documented switch for http:// token endpoints (the fake)
    proc = subprocess.Popen([str(JARVIS_BIN), "auth", "google", "--no-browser"], env=env, cwd=str(jarvis_env.path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.time() + 60
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"(http://\S+/o/oauth2/auth\?\S+)", line)
            url = m.group(1) if m else None
        assert url, proc.stderr.read() if proc.poll() is not None else "no sign-in address printed"
        assert "client_id=jarvis-test-client" in url and "gmail.compose" in url
        # the browser: the consent page redirects to Jarvis's local server with a code
        page = requests.get(url, timeout=30)
        assert page.status_code == 200 and "Jarvis is connected" in page.text
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Google is connected" in out

    status = jarvis_env.cli("auth", "google", "--status", check=True)
    assert "Google is connected" in status.stdout and "gmail.readonly" in status.stdout

    from orchestrator.tools import google_auth

    creds = google_auth.load_credentials(jarvis_env.settings)
    assert creds.refresh_token in google_server.state.refresh_tokens
    assert creds.token_uri == google_server.token_uri


def test_tools_use_refresh_and_store_the_renewed_token(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.tools import google_auth
    from orchestrator.app import App

    _google_config(jarvis_env, google_server)
    settings = jarvis_env.settings
    google_auth.save_credentials(settings, Credentials.from_authorized_user_info(google_server.authorized_user_info()))
    google_server.add_message(sender="Alice <alice@example.com>", subject="lunch?", body="Lunch on Friday?")
    google_server.expire_tokens()
    tools = {t.name: t for t in App(settings).static_tools()}
    assert tools["gmail_search"].invoke({"query": "from:alice"})[0]["subject"] == "lunch?"
    assert google_server.state.refreshes == 1
    stored = google_auth.load_credentials(settings)
    assert stored.token in google_server.state.access_tokens  # the renewed token was stored

    # a second process starts with the renewed token: no second refresh
    tools = {t.name: t for t in App(settings).static_tools()}
    tools["gmail_search"].invoke({"query": "from:alice"})
    assert google_server.state.refreshes == 1

    assert jarvis_env.cli("auth", "google", "--logout", check=True).returncode == 0
    assert google_auth.load_credentials(settings) is None
