"""One redaction rule for every place a config or a secret is shown ([16] finding 9), tested with the shapes
that got through before: a PostgreSQL password in a URL, Google's client_secret, folded YAML values."""

from __future__ import annotations

import logging

import yaml

from orchestrator.core.redaction import HIDDEN, redact_config_text, redact_urls, redact_value

CONFIG = """\
storage:
  url: postgresql://jarvis:pg-s3cret@db.local:5432/jarvis   # the shared database
google:
  client_secret: gcs-0123456789
  client_id: 1234.apps.example   # not a secret
models:
  primary: {base_url: "http://localhost:1337/v1", api_key: "sk-abc123", model: local/llama3}
  heavy: {api_key: {secret: openai_api_key}, model: gpt}
channels:
  email:
    password: >-
      folded-secret-line-one
      folded-secret-line-two
    user: me@example.org
  telegram:
    token: |
      literal-token-value
planner: {max_steps: 12}
context_tokens: 8192
"""
SECRETS = ["pg-s3cret", "gcs-0123456789", "sk-abc123", "folded-secret-line-one", "folded-secret-line-two",
           "literal-token-value"]


def test_config_text_hides_every_shape_and_keeps_the_rest():
    shown = redact_config_text(CONFIG)
    for secret in SECRETS:
        assert secret not in shown, secret
    for kept in ("postgresql://jarvis:", "@db.local:5432/jarvis", "# the shared database", "client_id: 1234",
                 "{secret: openai_api_key}", "user: me@example.org", "max_steps: 12", "context_tokens: 8192"):
        assert kept in shown, kept
    assert len(shown.splitlines()) == len(CONFIG.splitlines())


def test_effective_settings_hide_secret_keys_and_url_passwords():
    shown = redact_value(yaml.safe_load(CONFIG))
    text = repr(shown)
    for secret in SECRETS:
        assert secret not in text, secret
    assert shown["storage"]["url"] == f"postgresql://jarvis:{HIDDEN}@db.local:5432/jarvis"
    assert shown["google"]["client_id"] == "1234.apps.example" and shown["context_tokens"] == 8192


def test_logs_hide_url_passwords_never_registered_as_secrets(caplog):
    from orchestrator.core.secrets import RedactingFilter

    logger = logging.getLogger("jarvis.test.redaction")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="jarvis.test.redaction"):
        logger.info("connecting to %s", "postgresql://jarvis:pg-s3cret@db.local/jarvis")
    assert "pg-s3cret" not in caplog.text and redact_urls("https://u:p@h/") == f"https://u:{HIDDEN}@h/"


def test_run_telemetry_keeps_errors_without_url_passwords(tmp_path):
    """`jarvis runs show` keeps each run's error: a connection error quoting its URL must not keep the password."""
    import uuid

    from orchestrator.storage import writer
    from orchestrator.core.config import settings_from_dict
    from orchestrator.storage.telemetry import TelemetryHandler, list_runs

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)
    handler = TelemetryHandler(settings)
    root = uuid.uuid4()
    handler.on_chain_start({}, {}, run_id=root, parent_run_id=None, metadata={"thread_id": "t"})
    handler.on_chain_error(RuntimeError("cannot connect to postgresql://jarvis:pg-s3cret@db/jarvis"), run_id=root)
    writer.flush()
    (run,) = list_runs(settings, limit=5)
    assert "pg-s3cret" not in run.error and HIDDEN in run.error


def test_a_key_in_a_urls_query_is_hidden_wherever_the_url_is_shown():
    """`http://host/v1?api_key=...` in a log line, a CLI error or an API answer: the one rule hides the value of
    every query parameter named like a secret, and only those."""
    from orchestrator.core.secrets import redact, redacted

    url = "http://jarvis:S3CRET@127.0.0.1:9/v1?model=qwen&api_key=QSECRET&sig=SIGNED&x-api-key=K3Y#top"
    shown = redact(f"Cannot reach the model endpoint at {url}.")
    assert "S3CRET" not in shown and "QSECRET" not in shown and "SIGNED" not in shown and "K3Y" not in shown
    assert "model=qwen" in shown and shown.endswith("#top.")
    assert redacted({"models": [{"base_url": url}], "n": 3})["models"][0]["base_url"] == redact(url)
    assert redact("see https://example.com/search?q=key&page=2") == "see https://example.com/search?q=key&page=2"
