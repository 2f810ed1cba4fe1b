"""JARB wired to the settings: the sandbox, the registry, the generated-tools provider and the factory.

jarb_core is a plain library that knows nothing of Settings; this module builds its parts from them
(engines through orchestrator.storage.engines, limits from `sandbox:` and `jarb:`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from jarb_core.factory import ToolFactory
from jarb_core.loader import GeneratedToolProvider
from jarb_core.registry import ToolRegistry
from jarb_core.sandbox import Limits, Sandbox

from orchestrator.core.config import REPO_ROOT, Settings
from orchestrator.storage.engines import TOOL_REGISTRY_DB, engine_for

def sandbox_limits(settings: Settings) -> Limits:
    c = settings.sandbox
    return Limits(cpu_seconds=c.cpu_seconds, memory_mb=c.memory_mb, max_processes=c.max_processes,
                  file_size_mb=c.file_size_mb, workdir_mb=c.workdir_mb, wall_timeout_s=c.wall_timeout_s,
                  output_limit_kb=c.output_limit_kb, open_files=c.open_files, cpu_cores=c.cpu_cores,
                  protocol_limit_mb=c.protocol_limit_mb)


# What a key or a password may sit in, under the home directory (hidden from tools even when a root holds them).
# Under the home, what no generated tool sees and no file tool writes. Folders are covered even before they exist
# (made empty first, so a tool cannot create them); files only when they exist: a missing one made as a folder
# broke the program that later writes it (~/.netrc), and an empty ~/.bash_login made would shadow ~/.profile.
KEY_STORES = (".local/share/python_keyring", ".config/python_keyring", ".local/share/keyrings", ".ssh", ".gnupg",
              ".password-store", ".config/gcloud", ".aws", ".config/gh", ".kube")
KEY_FILES = (".netrc", ".git-credentials", ".docker/config.json")
# Run by the user's next shell or login, outside every sandbox: a write there is a program started
STARTUP_FOLDERS = (".config/autostart", ".config/systemd/user")
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile",
                 ".zshenv", ".zlogin", ".xprofile", ".xsessionrc", ".config/fish/config.fish")
# What runs later from the home without being a start-up file: programs on PATH at the next login, the user
# site-packages whose .pth files every Python of the user runs, git's configuration (hooks, aliases). The file
# tools never write them; a generated tool cannot write the home's top level at all (sandbox_backends.py).
PROGRAM_PLACES = (".local/bin", "bin", ".local/lib", ".gitconfig", ".config/git", ".config/fish",
                  ".config/environment.d")


def protected_paths(settings: Settings, *, for_writes: bool = False) -> list[Path]:
    """What a generated tool must never see, and the file tools never write, even inside a folder of fs.roots:
    Jarvis's data, tools, config and checkout (else a tool, or a document talking the model into a write, could
    turn the autonomy policy off or rewrite Jarvis), key stores, and the files a shell or login runs.
    `for_writes` (the file tools): also the key and start-up files that do not exist yet (a check by name hides
    nothing and makes nothing) and PROGRAM_PLACES."""
    # The config file itself, not its folder: a config given as ~/jarvis.yml would otherwise cover the whole home.
    # The MCP folder: a server TOML written there would start a program at Jarvis's next start.
    paths = [settings.data_dir, settings.tools_dir, settings.mcp.dir, REPO_ROOT]
    if settings.source_path is not None:
        paths.append(settings.source_path)
    if settings.google.client_secrets is not None:
        paths.append(settings.google.client_secrets)
    home = Path.home()
    paths += [home / p for p in (*KEY_STORES, *STARTUP_FOLDERS)]
    if for_writes:
        return paths + [home / p for p in (*KEY_FILES, *STARTUP_FILES, *PROGRAM_PLACES)]
    paths += [home / p for p in (*KEY_FILES, *STARTUP_FILES) if (home / p).exists()]
    return paths


def call_limits(settings: Settings) -> Limits:
    """A generated tool's call: the sandbox limits with the call timeout of `jarb.call_timeout_s`."""
    return replace(sandbox_limits(settings), wall_timeout_s=settings.jarb.call_timeout_s)


def make_sandbox(settings: Settings) -> Sandbox:
    """A sandbox for this configuration (raises SandboxUnavailable with a fix). The App keeps one per process;
    choosing the backend is cheap after the first time (jarb_core.sandbox remembers what it probed)."""
    c = settings.sandbox
    return Sandbox(sandbox_limits(settings), required=c.required, backend=c.backend, unprivileged_uid=c.unprivileged_uid)


def open_registry(settings: Settings) -> ToolRegistry:
    return ToolRegistry(engine_for(settings, TOOL_REGISTRY_DB))


def generated_provider(settings: Settings, sandbox: Callable[[], Sandbox] | None = None) -> GeneratedToolProvider:
    """The catalog provider of generated tools; it opens nothing until the catalog is first read. `sandbox`
    returns the process's sandbox (the App's); without it one is made for this provider."""
    return GeneratedToolProvider(lambda: open_registry(settings), sandbox or _own_sandbox(settings),
                                 trust_after=settings.jarb.trust_after, call_limits=call_limits(settings),
                                 file_roots=settings.fs.roots,
                                 protected=lambda: protected_paths(settings))


def make_factory(settings: Settings, taken_names: Callable[[], Iterable[str]] = lambda: (),
                 sandbox: Callable[[], Sandbox] | None = None) -> ToolFactory:
    return ToolFactory(open_registry(settings), sandbox or _own_sandbox(settings), settings.tools_dir,
                       trust_after=settings.jarb.trust_after, test_limits=sandbox_limits(settings),
                       taken_names=taken_names)


def _own_sandbox(settings: Settings) -> Callable[[], Sandbox]:
    """A sandbox made on first use and kept by the one object given this function."""
    made: list[Sandbox] = []

    def get() -> Sandbox:
        if not made:
            made.append(make_sandbox(settings))
        return made[0]

    return get
