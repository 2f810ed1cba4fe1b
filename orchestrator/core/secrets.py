"""Secrets through the OS keyring (service "jarvis"), never in config files, logs or checkpoints.

A config value `{secret: NAME}` reads keyring entry NAME; `$JARVIS_SECRET_<NAME>` overrides it (for CI and
containers without a keyring). `{env: VAR}` reads $VAR. Every resolved secret is registered with the log
redactor so that it cannot leak through a log line or an error message.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from .config import SecretRef, SecretValue
from .redaction import redact_urls
from .visible import visible

SERVICE = "jarvis"
_known_secrets: set[str] = set()
_lock = threading.Lock()


class SecretError(Exception):
    pass


def _keyring():
    import keyring
    from keyring.errors import NoKeyringError

    try:
        backend = keyring.get_keyring()
    except NoKeyringError:  # pragma: no cover - depends on the machine
        backend = None
    if backend is None or type(backend).__name__ == "Keyring" and type(backend).__module__.endswith("fail"):
        raise SecretError(f"no keyring backend is available on this machine: {no_keyring_fix()}")
    return keyring


def _this_pip() -> str:
    """This Python's pip, as the user would type it (`.venv/bin/pip` from the checkout)."""
    pip = Path(sys.executable).with_name("pip")
    try:
        shown = os.path.relpath(pip)
    except ValueError:  # another drive (Windows)
        shown = str(pip)
    return str(pip) if shown.startswith("..") else shown


def no_keyring_fix() -> str:
    """Exactly how to give this Jarvis a keyring (an optional part: without one, secrets come from the environment)."""
    return (f"run `{_this_pip()} install keyrings.cryptfile` (an encrypted file, for a machine without a desktop), "
            "or use the Secret Service (GNOME Keyring or KWallet, e.g. `sudo apt install gnome-keyring`); until "
            "then set JARVIS_SECRET_<NAME> in the environment for the secrets the config names")


REAL_KEYRING_HINT = ("GNOME Keyring or KWallet (the Secret Service), the macOS Keychain, or an encrypted file "
                     "(`pip install keyrings.cryptfile`, which asks for a passphrase)")


def backend_info() -> dict[str, object]:
    """Which keyring backend holds the secrets, and whether it keeps them in plain text (keyrings.alt's file
    backend, which tests use: anyone who can read the user's files can read such secrets)."""
    try:
        backend = _keyring().get_keyring()
    except SecretError as exc:
        return {"name": None, "plaintext": False, "problem": str(exc), "missing": True, "fix": no_keyring_fix()}
    cls = type(backend)
    name = f"{cls.__module__}.{cls.__name__}"
    plaintext = "plaintext" in cls.__name__.lower() or name == "keyrings.alt.file.PlaintextKeyring"
    where = getattr(backend, "file_path", None)
    return {"name": name, "plaintext": plaintext, "file": str(where) if where else None,
            "problem": (f"secrets are stored in plain text{f' in {where}' if where else ''}; use {REAL_KEYRING_HINT}"
                        if plaintext else None)}


def _env_name(name: str) -> str:
    return "JARVIS_SECRET_" + "".join(c if c.isalnum() else "_" for c in name).upper()


def remember(value: str) -> str:
    if value and len(value) >= 4:
        with _lock:
            _known_secrets.add(value)
    return value


def set_secret(name: str, value: str) -> None:
    _keyring().set_password(SERVICE, name, value)
    remember(value)


def delete_secret(name: str) -> bool:
    from keyring.errors import PasswordDeleteError

    try:
        _keyring().delete_password(SERVICE, name)
        return True
    except PasswordDeleteError:
        return False


def get_secret(name: str, *, required: bool = True) -> str | None:
    value = os.environ.get(_env_name(name))
    if value is None:
        try:
            value = _keyring().get_password(SERVICE, name)
        except SecretError:
            if required:
                raise
            return None
    if value is None:
        if required:
            raise SecretError(f"secret {name!r} is not set: run `jarvis secrets set {name}`")
        return None
    return remember(value)


def resolve(value: SecretValue, *, what: str = "secret") -> str | None:
    """Turn a config secret value (plain string, {secret}, {env}) into the string it stands for."""
    if value is None or isinstance(value, str):
        return value
    assert isinstance(value, SecretRef)
    if value.env:
        env_value = os.environ.get(value.env)
        if env_value is None:
            raise SecretError(f"{what}: environment variable {value.env} is not set")
        return remember(env_value)
    return get_secret(value.secret or "")


def redact(text: str) -> str:
    with _lock:
        secrets = sorted(_known_secrets, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, "***")
    return redact_urls(text)  # a password inside a URL, known or not


def redacted(value: Any) -> Any:
    """An answer about Jarvis's own set-up (dicts and lists walked) with `redact` applied to every string in it:
    the API's settings and health views, whose base URLs and messages may quote a password or a key.
    Conversations and tool calls do not go through it: what they show is what is there."""
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v) for v in value]
    return redact(value) if isinstance(value, str) else value


class RedactingFilter(logging.Filter):
    """Replaces every known secret value, and any URL's password, in log records."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


class ShownFormatter(logging.Formatter):
    """A handler's formatter, wrapped: the whole text it writes, traceback included (an exception's message can
    quote a request's path, a server's error, a file name, a URL with its password), with known secrets masked and
    the characters that would act on the terminal the log is read on written out (core/visible.py)."""

    def __init__(self, inner: logging.Formatter | None = None):
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return visible(redact(self.inner.format(record)))


def install_log_redaction() -> None:
    """On the root logger and its handlers (uvicorn's records reach them too: server/app.make_server)."""
    root = logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for f in root.filters):
        root.addFilter(RedactingFilter())
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
        if not isinstance(handler.formatter, ShownFormatter):
            handler.setFormatter(ShownFormatter(handler.formatter))
