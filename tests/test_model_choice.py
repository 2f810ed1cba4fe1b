"""The model picker in Settings (issue [18] item 1): local servers found answering, another server by URL, or the
built-in model; the choice is checked, written into the user's own `config.local.yml` (the tracked config file is
left byte for byte as it was) and used at once."""

from __future__ import annotations

import pytest
import yaml

from orchestrator.llm import discovery as model_discovery
from tests.conftest import answer
from tests.fakes.llm_server import FakeLLMServer
from tests.real_model_fuzz import require_real_model
from tests.test_ui_browser import browser, open_ui, send  # noqa: F401 - fixtures
from tests.ui_server import ui_server  # noqa: F401 - fixture

CLOSED = "http://127.0.0.1:9/v1"


@pytest.fixture
def ollama(monkeypatch):
    """A second model server, found where Ollama listens (LOCAL_SERVERS points there)."""
    with FakeLLMServer() as other:
        other.brain.model_list = ["llama3.2:latest", "qwen2.5:7b"]
        monkeypatch.setattr(model_discovery, "LOCAL_SERVERS", [("Jan", CLOSED), ("Ollama", other.base_url)])
        yield other


def _local(env):
    from orchestrator.core.config import local_overlay_path

    return local_overlay_path(env.config_path)


def _with_comment(env) -> str:
    text = "# my own notes about this config\n" + env.config_path.read_text()
    env.config_path.write_text(text)
    return text


def test_a_found_server_is_listed_checked_written_and_used_at_once(ui_server, ollama):
    before = _with_comment(ui_server.env)
    ui_server.env.config_path.chmod(0o600)
    with ui_server.client() as c:
        found = c.get("/api/settings/models").json()
        assert found["servers"] == [{"name": "Ollama", "base_url": ollama.base_url,
                                     "models": ["llama3.2:latest", "qwen2.5:7b"]}]
        assert found["current"]["model"] == "scripted-model"
        done = c.post("/api/settings/models/primary", json={"base_url": ollama.base_url, "model": "qwen2.5:7b"})
        assert done.status_code == 200, done.text
        assert "Now using qwen2.5:7b" in done.json()["message"]
    assert ui_server.env.config_path.read_text() == before  # the tracked file is not rewritten
    local = _local(ui_server.env)
    assert local.stat().st_mode & 0o777 == 0o600  # a config kept private stays private
    text = local.read_text()
    assert text.startswith("# Your own settings") and " \n" not in text  # readable: says what it is, no trailing spaces
    primary = yaml.safe_load(text)["models"]["primary"]
    assert primary == {"base_url": ollama.base_url.rstrip("/"), "model": "qwen2.5:7b", "api_key": "none"}
    assert ui_server.env.settings.models.primary.model == "qwen2.5:7b"  # the next start keeps the choice
    # the next message goes to the new server, without a restart
    ollama.push(answer("Hello from Ollama."))
    events = ui_server.stream("/api/threads/web-switch/messages", {"text": "hi"})
    assert next(e for e in events if e["event"] == "done")["content"] == "Hello from Ollama.", events[-3:]
    assert ollama.requests[-1]["model"] == "qwen2.5:7b"


def test_a_bad_choice_says_what_is_wrong_and_changes_nothing(ui_server, ollama):
    before = _with_comment(ui_server.env)
    with ui_server.client() as c:
        for body, said in (
            ({"base_url": "file:///etc/passwd"}, "not an http(s) URL"),
            ({"base_url": CLOSED}, "nothing answers"),
            ({"base_url": ollama.base_url}, "lists 2 models"),  # which one?
            ({"base_url": ollama.base_url, "model": "gpt-9"}, "no model named 'gpt-9'"),
            ({}, "give the server's base URL"),
        ):
            resp = c.post("/api/settings/models/primary", json=body)
            assert resp.status_code == 400 and said in resp.json()["detail"], (body, resp.text)
    assert ui_server.env.config_path.read_text() == before and not _local(ui_server.env).exists()
    assert ui_server.app.state.jarvis.settings.models.primary.model == "scripted-model"


def test_the_built_in_model_can_be_chosen(ui_server):
    require_real_model()
    with ui_server.client() as c:
        assert c.get("/api/settings/models").json()["builtin"] is True
        done = c.post("/api/settings/models/primary", json={"builtin": True})
        assert done.status_code == 200, done.text
    primary = yaml.safe_load(_local(ui_server.env).read_text())["models"]["primary"]
    assert primary["provider"] == "embedded" and primary["chat_format"] in ("jarvis-tools", "jarvis-chatml-tools")
    assert ui_server.app.state.jarvis.settings.models.primary.provider == "embedded"


def test_pick_another_server_in_settings_and_chat_with_it(open_ui, ollama):
    page, server = open_ui()
    page.get_by_role("link", name="Settings").click()
    page.locator('.found-server[data-server="Ollama"]').wait_for()
    page.get_by_label("Server URL").fill(ollama.base_url)
    page.get_by_label("Model name").fill("llama3.2:latest")
    page.get_by_role("button", name="Check and use").click()
    page.locator(".pick-status", has_text="Now using llama3.2:latest").wait_for()
    page.locator("#model-state", has_text="llama3.2:latest · answering").wait_for()  # the header follows
    page.get_by_role("link", name="Chat").click()
    ollama.push(answer("Hi from the server you picked."))
    send(page, "hello")
    page.locator(".msg.assistant", has_text="Hi from the server you picked.").wait_for()
    assert yaml.safe_load(_local(server.env).read_text())["models"]["primary"]["model"] == "llama3.2:latest"


@pytest.mark.parametrize("width", [390, 1280])
def test_a_model_named_by_its_file_shows_its_short_name_and_now_follows_the_switch(open_ui, ollama, width):
    gguf = "/home/someone/models/very-long-folder-name/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
    ollama.brain.model_list = [gguf]
    page, _server = open_ui(viewport={"width": width, "height": 800})
    page.get_by_role("link", name="Settings").click()
    now = page.locator(".now-model")
    now.wait_for()
    assert "scripted-model" in now.inner_text()
    page.locator('.found-server[data-server="Ollama"]').get_by_role("button", name="Use Ollama").click()
    page.locator(".pick-status", has_text="Now using").wait_for()
    assert now.inner_text() == f"Now: {gguf} at {ollama.base_url.rstrip('/')}."  # not the model before the switch
    header = page.locator("#model-state", has_text="Qwen2.5-7B-Instruct-Q4_K_M · answering")
    header.wait_for()
    assert "/home/someone" not in header.inner_text() and gguf in header.get_attribute("title")
    box = header.bounding_box()
    assert box["x"] + box["width"] <= width  # on screen
    assert page.js_errors == []


@pytest.fixture
def no_keyring():
    """A headless machine's keyring: no backend (keyring falls back to its `fail` backend)."""
    import keyring
    from keyring.backends import fail

    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(before)


@pytest.mark.parametrize("width", [390, 1280])
def test_settings_without_a_keyring_says_how_in_a_note_not_null_and_an_error(open_ui, no_keyring, width):
    page, _server = open_ui(viewport={"width": width, "height": 800})
    page.get_by_role("link", name="Settings").click()
    secrets = page.locator(".settings-info .secrets")
    secrets.locator(".keyring-missing").wait_for()
    text = secrets.inner_text()
    assert "null" not in text and "install keyrings.cryptfile" in text and "Secret Service" in text, text
    assert secrets.locator(".problem").count() == 0  # optional: a note, not a red error
    assert page.js_errors == []


def test_a_model_down_points_at_the_live_switch_not_a_restart(jarvis_env):
    from tests.ui_server import start_ui

    jarvis_env.write_config(models={"primary": {"base_url": CLOSED}})
    with start_ui(jarvis_env) as server, server.client() as c:
        (primary,) = c.get("/api/settings/health?sections=false").json()["models"]
    assert primary["ok"] is False
    assert "choose another model below" in primary["fix"] and "restart" not in primary["fix"], primary
    assert "restart `jarvis run`" not in primary["message"] and "Settings" in primary["message"], primary
