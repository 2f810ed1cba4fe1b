"""The user picks the model in Settings: a local server found answering, one they name, or the built-in model.

`use_server` checks the server (it answers GET /models and lists the model, or holds only one), `use_builtin`
checks the built-in model is installed; then `models.primary` is written into the user's own file beside the config
(`config.local.yml`, git-ignored, merged over the config by core.config) and the running Jarvis switches its chat
model at once. The tracked config file is never rewritten (a `git pull` would conflict with it). The local file is
edited with ruamel.yaml's round trip, so what the user wrote in it stays; only `models.primary` is replaced, and
nulls stay `null`. A profile that sets its own `models.primary` still wins on the next start: the answer says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from orchestrator.core.config import ModelConfig, Settings
from .discovery import builtin_model, fit_planner_to_builtin, probe


class ModelChoiceError(ValueError):
    """What was wrong with the choice and what to do; nothing was changed."""


def check_server(base_url: str, model: str | None) -> tuple[str, str]:
    """(base_url, model) once the server answers with that model; raises ModelChoiceError saying what failed."""
    base_url = base_url.strip().rstrip("/")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelChoiceError(f"{base_url!r} is not an http(s) URL; give the server's OpenAI-compatible base URL, "
                               "e.g. http://localhost:11434/v1")
    found = probe("the server", base_url, timeout_s=5.0)
    if found is None:
        raise ModelChoiceError(f"nothing answers GET {base_url}/models; start the server, or check the URL "
                               "(it usually ends in /v1)")
    if found.other_user:
        raise ModelChoiceError(f"{base_url} was not used: {found.other_user}")
    model = (model or "").strip()
    if not model:
        if len(found.models) != 1:
            listed = ", ".join(found.models[:8]) or "none"
            raise ModelChoiceError(f"{base_url} lists {len(found.models)} models ({listed}); say which to use")
        model = found.models[0]
    elif found.models and not found.serves(model):
        raise ModelChoiceError(f"{base_url} has no model named {model!r} (it lists: {', '.join(found.models[:8])})")
    return base_url, model


def write_primary(settings: Settings, values: dict[str, Any]) -> Path:
    """Replace `models.primary` in the user's local file (created if need be); returns the file written."""
    from orchestrator.core.local_settings import NoConfigFile, edit_local

    def change(data: Any) -> None:
        models = data.get("models")
        if models is None:
            data["models"] = models = {}
        models["primary"] = {k: v for k, v in values.items() if v is not None}

    try:
        return edit_local(settings, change, "a choice")
    except NoConfigFile as exc:
        raise ModelChoiceError(str(exc)) from None


def _apply(settings: Settings, runtime: Any, cfg: ModelConfig) -> None:
    from .client import make_chat_model

    settings.models.primary = cfg
    if runtime is not None:
        runtime.llm = make_chat_model(settings, "primary")


def use_server(settings: Settings, runtime: Any, base_url: str, model: str | None) -> dict[str, Any]:
    base_url, model = check_server(base_url, model)
    values = {"base_url": base_url, "model": model, "api_key": "none"}
    path = write_primary(settings, values)
    _apply(settings, runtime, ModelConfig(**values))
    return _answer(settings, path, f"{model} at {base_url}")


def use_builtin(settings: Settings, runtime: Any) -> dict[str, Any]:
    cfg = builtin_model()
    if cfg is None:
        raise ModelChoiceError("the built-in model is not installed: run `make install-local demo-model`")
    values = cfg.model_dump(mode="json", include={"provider", "gguf", "model", "api_key", "chat_format", "n_ctx",
                                                 "max_tokens", "temperature", "timeout_s", "notice"})
    path = write_primary(settings, values)
    fit_planner_to_builtin(settings)
    _apply(settings, runtime, cfg)
    return _answer(settings, path, f"the built-in model {cfg.model}")


def _answer(settings: Settings, path: Path, what: str) -> dict[str, Any]:
    note = f"Now using {what} for chats; saved in {path}."
    if settings.profile and ((settings.profiles.get(settings.profile) or {}).get("models") or {}).get("primary"):
        note += f" The profile {settings.profile!r} sets its own model and wins on the next start."
    note += " Jorbs, missions and reminders switch when Jarvis restarts."
    return {"ok": True, "message": note, "model": settings.models.primary.model,
            "base_url": None if settings.models.primary.provider == "embedded" else settings.models.primary.base_url}
