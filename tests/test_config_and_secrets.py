"""Configuration loading, profiles, clear errors, and secrets through the keyring ([1])."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core import secrets
from orchestrator.core.config import ConfigError, load_settings
from tests.conftest import REPO, answer


def test_the_shipped_config_loads_with_the_documented_keys():
    s = load_settings(REPO / "config" / "config.yml")
    assert s.models.primary.base_url == "http://localhost:1337/v1"
    assert s.models.primary.model == "local/llama3" and s.models.heavy is None
    assert s.autonomy.default == "confirm"
    assert s.autonomy.effects == {"email_send": "confirm", "calendar_write": "confirm", "fs_write": "confirm",
                                  "ui_automation": "confirm", "process_start": "confirm", "memory_write": "auto"}
    assert s.fs.roots == [Path.home().resolve()]
    assert s.storage.data_dir == (REPO / "data").resolve() and s.storage.url is None
    assert s.tools_dir == (REPO / "tools").resolve() and s.mcp.dir == (REPO / "mcp").resolve()
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8765)
    assert s.sandbox.required is True


def test_paths_are_relative_to_the_config_file_and_profiles_overlay(tmp_path):
    cfg = tmp_path / "conf" / "jarvis.yml"
    cfg.parent.mkdir()
    cfg.write_text(
        "storage: {data_dir: state}\n"
        "fs: {roots: [docs, '~']}\n"
        "profiles:\n"
        "  work:\n"
        "    models: {primary: {base_url: 'http://gpu-box:8000/v1', model: big}}\n"
        "    storage: {data_dir: work-state}\n"
    )
    base = load_settings(cfg)
    assert base.storage.data_dir == tmp_path / "conf" / "state"
    assert base.fs.roots == [tmp_path / "conf" / "docs", Path.home().resolve()]
    work = load_settings(cfg, profile="work")
    assert work.models.primary.base_url == "http://gpu-box:8000/v1" and work.models.primary.model == "big"
    assert work.models.primary.api_key == "jan"  # untouched keys keep their defaults
    assert work.storage.data_dir == tmp_path / "conf" / "work-state"
    with pytest.raises(ConfigError, match="profile 'home' not found.*known: work"):
        load_settings(cfg, profile="home")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("autonomy: {defualt: auto}\n", r"autonomy\.defualt: unknown key"),
        ("autonomy: {default: maybe}\n", r"autonomy\.default: Input should be 'auto', 'confirm' or 'deny'"),
        ("server: {port: 99999}\n", r"server\.port: .*less than or equal to 65535"),
        ("models: {primary: {api_key: {secret: a, env: B}}}\n", r"models\.primary\.api_key"),
        ("- just a list\n", "the top level must be a mapping"),
        ("models: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_bad_config_fails_with_the_file_the_key_and_what_is_expected(tmp_path, text, expected):
    cfg = tmp_path / "bad.yml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_settings(cfg)
    assert str(cfg) in str(info.value)


def test_cli_reports_a_config_typo_and_exits_non_zero(jarvis_env):
    jarvis_env.config_path.write_text(jarvis_env.config_path.read_text() + "planer: {max_steps: 3}\n")
    proc = jarvis_env.cli("threads", "list")
    assert proc.returncode == 1
    assert "planer: unknown key" in proc.stderr and str(jarvis_env.config_path) in proc.stderr
    assert "Traceback" not in proc.stderr
    chat = jarvis_env.cli("chat", "hello")  # the chat builds the graph: the typo is said once, nothing after it
    assert chat.returncode == 1 and "planer: unknown key" in chat.stderr
    assert "could not start Jarvis" not in chat.stderr, chat.stderr


def test_config_option_beats_the_environment(jarvis_env, tmp_path):
    other = tmp_path / "other.yml"
    other.write_text("storage: {data_dir: other-data}\nplaner: 1\n")
    proc = jarvis_env.cli("--config", str(other), "threads", "list")
    assert proc.returncode == 1 and str(other) in proc.stderr


def test_secrets_set_and_use_never_leak(jarvis_env):
    value = "sk-test-9f8e7d6c5b4a"
    proc = jarvis_env.cli("secrets", "set", "llm_key", input=value + "\n")
    assert proc.returncode == 0, proc.stderr
    assert value not in proc.stdout + proc.stderr
    jarvis_env.write_config(models={"primary": {"api_key": {"secret": "llm_key"}}})
    jarvis_env.server.push(answer("hi"))
    chat = jarvis_env.cli("chat", "--thread", "s", "hello")
    assert chat.returncode == 0, chat.stderr
    # The key reached the model endpoint as the bearer token (ChatOpenAI sent it) ...
    # ... and is nowhere in the checkpoints or other state files.
    for db in jarvis_env.data.glob("*.sqlite*"):
        assert value.encode() not in db.read_bytes(), db
    assert jarvis_env.cli("secrets", "delete", "llm_key").returncode == 0
    gone = jarvis_env.cli("chat", "--thread", "s", "again")
    assert gone.returncode == 1 and "secret 'llm_key' is not set: run `jarvis secrets set llm_key`" in gone.stderr


def test_secret_values_are_redacted_from_logs_and_messages(monkeypatch):
    monkeypatch.setenv("JARVIS_SECRET_TOKEN_X", "very-secret-value-123")
    assert secrets.get_secret("token_x") == "very-secret-value-123"
    assert secrets.redact("auth failed for very-secret-value-123!") == "auth failed for ***!"


def test_secrets_from_the_environment(monkeypatch):
    from orchestrator.core.config import SecretRef

    monkeypatch.setenv("MY_API_KEY", "abc-123-xyz")
    assert secrets.resolve(SecretRef(env="MY_API_KEY")) == "abc-123-xyz"
    with pytest.raises(secrets.SecretError, match="environment variable NOPE_NOT_SET is not set"):
        secrets.resolve(SecretRef(env="NOPE_NOT_SET"))


def test_the_keyring_backend_is_shown_and_a_plaintext_one_warned_about(jarvis_env):
    """[18] item 6: which keyring holds the secrets, and a warning before storing in plain text (the tests use
    keyrings.alt's plaintext file backend, as a machine without a real keyring would)."""
    shown = jarvis_env.cli("secrets")
    assert shown.returncode == 0, shown.stderr
    assert "keyrings.alt.file.PlaintextKeyring" in shown.stdout and "plain text" in shown.stdout
    stored = jarvis_env.cli("secrets", "set", "some_token", input="t0k\n")
    assert stored.returncode == 0 and "Warning: secrets are stored in plain text" in stored.stderr


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the last of two equal keys silently: the shipped demo profile had `jarb:` twice, and a user who
    pastes a second `autonomy:` below the first would lose the first without a word."""
    from orchestrator.core.config import ConfigError, load_settings

    path = tmp_path / "config.yml"
    path.write_text("autonomy:\n  effects: {fs_write: deny}\nfs:\n  roots: [/tmp]\nautonomy:\n  default: auto\n",
                    encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "'autonomy' is given twice in one mapping (lines 1 and 5)" in str(err.value)
    assert str(path) in str(err.value)


def test_the_shipped_config_and_its_profiles_load():
    """With the duplicate check, the shipped config (which had a key twice) must still load, with each profile."""
    import yaml

    from orchestrator.core.config import load_settings

    shipped = Path(__file__).resolve().parent.parent / "config" / "config.yml"
    for profile in (None, *yaml.safe_load(shipped.read_text())["profiles"]):
        load_settings(shipped, profile)


def test_a_misspelt_effect_in_autonomy_is_refused_and_a_new_one_is_not(tmp_path):
    """`fs_wirte: deny` left fs_write on the default (auto, here) without a word. A name the tools may declare
    themselves (MCP servers, generated tools), such as calendar_read or payment, stays allowed."""
    from orchestrator.core.config import ConfigError, load_settings

    path = tmp_path / "config.yml"
    path.write_text("autonomy:\n  default: auto\n  effects: {fs_wirte: deny}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "'fs_wirte' is not an effect; did you mean 'fs_write'?" in str(err.value)
    path.write_text("autonomy:\n  effects: {calendar_read: auto, payment: deny, fs_write: deny}\n", encoding="utf-8")
    assert load_settings(path).autonomy.effects["payment"] == "deny"
