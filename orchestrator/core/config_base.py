"""What every configuration section shares: strict sections (an unknown key is an error), secrets by reference,
the autonomy modes, the error a bad file raises. Its own module so that the sections kept beside config.py (the
accounts: core/account_config.py) build on it without importing config.py."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

Mode = Literal["auto", "confirm", "deny"]


class ConfigError(Exception):
    """The configuration file cannot be used; the message says where and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class SecretRef(_Section):
    """`{secret: NAME}` reads the keyring entry NAME (or $JARVIS_SECRET_NAME); `{env: VAR}` reads $VAR."""

    secret: str | None = None
    env: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "SecretRef":
        if bool(self.secret) == bool(self.env):
            raise ValueError("give exactly one of 'secret' (a keyring entry name) or 'env' (an environment variable)")
        return self


SecretValue = str | SecretRef | None
