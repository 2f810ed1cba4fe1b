"""Writing the user's own settings: the git-ignored file beside the config (`config.local.yml`), merged over it by
core.config. What Jarvis writes for the user (the model chosen in Settings, the accounts added in Settings or with
`jarvis accounts add`) goes there, never into the tracked config file, which a `git pull` would conflict with.

The file is edited with ruamel.yaml's round trip, so what the user wrote in it (comments, order, quoting) stays;
nulls stay `null`. The new text replaces the file in one rename, with the config's permissions (a config kept
private stays private).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Settings, local_overlay_path

LOCAL_HEADER = """\
# Your own settings, merged over {config} (git-ignored). Jarvis writes here when you choose in the UI
# (Settings: the model, the accounts) or add an account with `jarvis accounts add`; you may edit it too.
# Delete it to go back to {config} alone.
"""


class NoConfigFile(ValueError):
    """Jarvis runs on built-in defaults: there is no config file to put the user's file beside."""


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return yaml


def local_path(settings: Settings, keeping: str) -> Path:
    """The user's file; NoConfigFile (saying `keeping` cannot be kept) without a config file."""
    if settings.source_path is None:
        raise NoConfigFile(f"Jarvis runs on built-in defaults with no config file: start it with --config FILE "
                           f"(or JARVIS_CONFIG) to keep {keeping}")
    return local_overlay_path(settings.source_path)


def edit_local(settings: Settings, change: Callable[[Any], None], keeping: str) -> Path:
    """Load the user's file (created if need be), let `change` edit its top mapping in place, write it back."""
    path = local_path(settings, keeping)
    config = settings.source_path
    assert config is not None
    yaml = _yaml()
    text = path.read_text(encoding="utf-8") if path.exists() else LOCAL_HEADER.format(config=config.name)
    data = yaml.load(text)
    if data is None:
        data = yaml.load(text + "{}\n")  # only comments so far: a mapping that keeps them
    change(data)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        yaml.dump(data, f)
    source = path if path.exists() else config
    tmp.chmod(source.stat().st_mode & 0o777 if source.exists() else 0o600)
    tmp.replace(path)
    return path


def read_mapping(path: Path) -> dict[str, Any]:
    """A YAML file's top mapping as plain data ({} when the file is missing or empty)."""
    import yaml

    if not path.is_file():
        return {}
    found = yaml.safe_load(path.read_text(encoding="utf-8"))
    return found if isinstance(found, dict) else {}
