"""The environment of every program Jarvis starts outside the sandbox: Jarvis's own, minus its secrets.

Programs that parse outside content (ffmpeg decoding a recording, eSpeak NG speaking a model's text, the model
server reading every prompt, slirp4netns carrying the sandbox's packets, a reminder's agent, a jorb script run
unsandboxed) must not hold Jarvis's keys: one that is made to run code, or to dump its memory, would give them
away. Dropped: `JARVIS_SECRET_*`, anything named like a secret (OPENAI_API_KEY, GITHUB_TOKEN, PGPASSWORD,
AWS_SECRET_ACCESS_KEY...), and any value holding a URL with a password (DATABASE_URL=postgresql://u:pw@db/x).
tests/test_child_environment.py scans the code for process starts that do not go through this helper.
"""

from __future__ import annotations

import os
import re

from .redaction import is_secret_key, redact_urls

_SECRET_ENV = re.compile(r"(SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|ACCESS_KEY|PRIVATE_KEY|API_?KEY)", re.I)


def secret_variable(name: str, value: str) -> bool:
    return (name.upper().startswith("JARVIS_SECRET_") or is_secret_key(name) or bool(_SECRET_ENV.search(name))
            or redact_urls(value) != value)


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Jarvis's environment without its secrets, with `extra` (the caller's own settings) on top."""
    env = {k: v for k, v in os.environ.items() if not secret_variable(k, v)}
    env.update(extra or {})
    return env
