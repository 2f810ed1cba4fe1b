"""One factory for the chat models of each role (`primary`, `heavy`), all OpenAI-compatible over HTTP."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import httpx
from langchain_core.language_models import BaseChatModel

from orchestrator.core import secrets
from orchestrator.core.config import ModelConfig, Settings
from .embedded import check_embedded, embedded_server  # a child llama.cpp server, started on first use
from orchestrator.core.errors import ModelEndpointError, causes
from orchestrator.core.owned_transport import ServerOfAnotherUser, owned_async_client, owned_client, server_users
from .answer_bounds import bound_answers
from .model_list import BodyTooLarge, get_small_json, read_model_list
from .request_shape import adapt_for_server

log = logging.getLogger(__name__)

Role = Literal["primary", "heavy"]


def _fast_chat_openai_class():
    from langchain_openai import ChatOpenAI

    class FastChatOpenAI(ChatOpenAI):
        """ChatOpenAI that hands the already API-shaped messages and tools to the openai SDK as `extra_body`.

        The SDK otherwise walks every request body with typing introspection (`_transform_recursive`), which
        costs about 100-250 ms per call once a conversation has some history and a dozen tools (measured here;
        see openai-python PR 3616). The JSON sent over the wire is the same.
        """

        def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
            payload = super()._get_request_payload(input_, stop=stop, **kwargs)
            if "input" in payload:  # the Responses API path: leave it alone
                return payload
            adapt_for_server(payload, str(self.openai_api_base or ""))
            extra = dict(payload.get("extra_body") or {})
            extra["messages"] = payload["messages"]
            payload["messages"] = []
            if "tools" in payload:
                extra["tools"] = payload.pop("tools")
            payload["extra_body"] = extra
            return payload

        # Some servers send a tool call's arguments as a JSON object instead of a string; langchain-openai then
        # fails inside its own parsing, before model_output.py's repairs could run. They are made strings first.
        def _convert_chunk_to_generation_chunk(self, chunk: dict, default_chunk_class: type,
                                               base_generation_info: dict | None) -> Any:
            return super()._convert_chunk_to_generation_chunk(string_arguments(chunk), default_chunk_class,
                                                              base_generation_info)

        def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> Any:
            if hasattr(response, "model_dump"):
                response = response.model_dump()
            return super()._create_chat_result(string_arguments(response), generation_info)

    return FastChatOpenAI


def string_arguments(body: Any) -> Any:
    """A chat completion (or chunk) whose tool calls carry their arguments as JSON text, as the API defines."""
    if not isinstance(body, dict):
        return body
    for choice in body.get("choices") or []:
        for part in ("delta", "message"):
            message = choice.get(part) if isinstance(choice, dict) else None
            for call in (message or {}).get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and function.get("arguments") is not None \
                        and not isinstance(function["arguments"], str):
                    function["arguments"] = json.dumps(function["arguments"])
    return body


def model_config(settings: Settings, role: Role = "primary") -> tuple[str, ModelConfig]:
    """The role's config, falling back to primary when heavy is not set. Returns (role actually used, config)."""
    if role == "heavy" and settings.models.heavy is not None:
        return "heavy", settings.models.heavy
    return "primary", settings.models.primary


def endpoint_url(settings: Settings, role: Role, cfg: ModelConfig) -> str:
    if cfg.provider == "embedded":
        return embedded_server(settings, role, cfg).base_url
    return cfg.base_url


# A model call's tries, counted by the HTTP client's request hook. The openai SDK retries a call that timed out or
# got a 5xx / 429 by itself, silently: a slow server showed nothing for three tries of a minute each. While a call
# has not answered, the turn now says so every few seconds ("waiting for the model (35 s, try 2 of 3)"), and when a
# new try starts ("trying again, try 2 of 3"), as progress events the UI and CLI show.
_call_tries: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("jarvis_model_call_tries", default=None)
WAITING_KEY = "model_wait"  # the key of the waiting events: the UI shows the latest in place of the one before


def _stream_writer() -> Callable[[Any], None] | None:
    """The graph run's stream writer, or None outside a graph run (nobody to tell)."""
    from langgraph.config import get_stream_writer

    try:
        return get_stream_writer()
    except RuntimeError:
        return None


@contextmanager
def waiting_for_model(total: int, every_s: float = 0.0) -> Iterator[Callable[[], None]]:
    """Count the HTTP tries of the model call made inside (see _call_tries; `total` is 1 + its retries) and, when
    `every_s` > 0 inside a graph run, say every `every_s` seconds how long the call has waited and which try it is
    on, until the first token. Yields `answered`, to be called when the first token arrives: no waiting event is
    written after it returns. The ticking thread ends with the block, whatever happens inside."""
    tries = [0, total]
    token = _call_tries.set(tries)
    writer = _stream_writer() if every_s > 0 else None
    done = threading.Event()
    lock = threading.Lock()  # answered() waits for a tick being written, so none comes after it
    started = time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            with lock:
                if done.is_set():
                    return
                waited, now_on = round(time.monotonic() - started), max(1, tries[0])
                try:
                    writer({"event": "progress", "stage": "waiting for the model", "key": WAITING_KEY,
                            "waited_s": waited, "try": now_on, "tries": total,
                            "message": f"waiting for the model ({waited} s, try {now_on} of {total})"})
                except Exception:  # noqa: BLE001 - the run ended under us: nobody listens any more
                    log.debug("a waiting event could not be written", exc_info=True)
                    return

    def answered() -> None:
        with lock:
            done.set()

    # run in a copy of the caller's context: the graph's writer finds its run there
    ticker = threading.Thread(target=contextvars.copy_context().run, args=(tick,), name="model-wait",
                              daemon=True) if writer is not None else None
    if ticker is not None:
        ticker.start()
    try:
        yield answered
    finally:
        answered()
        if ticker is not None:
            ticker.join()
        _call_tries.reset(token)


def _count_try(request: httpx.Request) -> None:
    tries = _call_tries.get()
    if tries is None or not request.url.path.endswith("/chat/completions"):
        return
    tries[0] += 1
    if tries[0] < 2:
        return
    writer = _stream_writer()
    if writer is not None:
        writer({"event": "progress", "stage": "waiting for the model",
                "message": f"The model has not answered; trying again (try {tries[0]} of {tries[1]})."})


async def _count_try_async(request: httpx.Request) -> None:
    _count_try(request)


def with_try_counting(sync_client: httpx.Client, async_client: httpx.AsyncClient) -> tuple[httpx.Client, httpx.AsyncClient]:
    sync_client.event_hooks["request"].append(_count_try)
    async_client.event_hooks["request"].append(_count_try_async)
    return sync_client, async_client


def make_chat_model(settings: Settings, role: Role = "primary", *, streaming: bool = True) -> BaseChatModel:
    used_role, cfg = model_config(settings, role)
    api_key = secrets.resolve(cfg.api_key, what=f"models.{used_role}.api_key") or "none"
    kwargs: dict = {}
    if cfg.temperature is not None:
        kwargs["temperature"] = cfg.temperature
    if cfg.max_tokens is not None:
        kwargs["max_tokens"] = cfg.max_tokens
    if cfg.provider == "embedded":
        # its clients start (and restart) the child server on demand
        clients = embedded_server(settings, used_role, cfg).http_clients()
    else:
        # openai's own clients' settings, with each connection to a server on this machine checked to be this
        # user's (or the config's server_user's) before the prompt is sent
        from openai._constants import DEFAULT_TIMEOUT

        users = server_users(cfg)
        clients = (owned_client(users, timeout=DEFAULT_TIMEOUT, follow_redirects=True),
                   owned_async_client(users, timeout=DEFAULT_TIMEOUT, follow_redirects=True))
    base_url = endpoint_url(settings, used_role, cfg)
    kwargs["http_client"], kwargs["http_async_client"] = bound_answers(with_try_counting(*clients), cfg, base_url,
                                                                       used_role)
    model = _fast_chat_openai_class()(
        base_url=base_url,
        api_key=api_key,
        model=cfg.model,
        timeout=cfg.timeout_s,
        max_retries=cfg.max_retries,
        streaming=streaming,
        stream_usage=True,
        **kwargs,
    )
    # Remembered for error messages: which URL and which config key to change.
    model.metadata = {**(model.metadata or {}), "jarvis_role": used_role,
                      "jarvis_progress_every_s": cfg.progress_every_s}  # read by chat.planner.call_model
    return model


TRANSIENT_STATUS = (408, 409, 425, 429)  # timeout, conflict, too early, too many requests: worth asking again


def describe_endpoint_error(exc: BaseException, base_url: str, role: str = "primary") -> ModelEndpointError | None:
    """Translate a client exception into one clear sentence, or None when it is not an endpoint problem."""
    import httpx
    import openai

    chain = list(causes(exc))
    # an error raised inside the HTTP client (the embedded server) comes wrapped
    raised = next((e for e in chain if isinstance(e, ModelEndpointError)), None)
    if raised is not None:
        return raised
    squatter = next((e for e in chain if isinstance(e, ServerOfAnotherUser)), None)
    if squatter is not None:  # not transient: asking again would only ask the same program
        return ModelEndpointError(f"The model endpoint at {base_url} was not used: {squatter} "
                                  f"(models.{role}.server_user).")
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return ModelEndpointError(
            f"The model at {base_url} did not answer in time: check that the model is loaded, "
            f"or raise models.{role}.timeout_s.", transient=True)
    # by name: the openai SDK may bring its own copy of httpx (httpx2), whose classes are not httpx's
    if any(type(e).__name__ in ("RemoteProtocolError", "ReadError") for e in chain):
        # reached, then the connection closed mid-answer: not "cannot reach", and not a place to suggest Jan
        return ModelEndpointError(
            f"The model at {base_url} closed the connection in the middle of its answer, so nothing of it was "
            "kept. Ask again; if it keeps happening, look at the model server's log (it may have crashed or "
            "run out of memory).", transient=True)
    if isinstance(exc, openai.APIConnectionError | httpx.ConnectError | ConnectionError):
        return ModelEndpointError(
            f"Cannot reach the model endpoint at {base_url}. Start your model server (Jan: open it, load a model "
            "and turn on its Local API Server, port 1337); or choose another model in the web UI's Settings (it "
            f"switches at once, no restart); or point models.{role}.base_url in "
            "config/config.yml (or a --profile) at another OpenAI-compatible endpoint; or run a GGUF model inside "
            f"Jarvis with models.{role}.provider: embedded and gguf: PATH (`make demo` shows a tiny one).",
            transient=True)
    if isinstance(exc, openai.AuthenticationError):
        return ModelEndpointError(
            f"The model endpoint at {base_url} refused the API key: set models.{role}.api_key "
            "(for example `jarvis secrets set NAME` and `api_key: {secret: NAME}`)."
        )
    if isinstance(exc, openai.NotFoundError):
        return ModelEndpointError(
            f"The model endpoint at {base_url} does not know the model requested: "
            f"check models.{role}.model (GET {base_url.rstrip('/')}/models lists them)."
        )
    if isinstance(exc, openai.APIStatusError):
        window = context_overflow(exc.body, str(exc))
        if window is not None:
            size = f" ({window} tokens)" if window else ""
            return ModelEndpointError(
                f"The conversation does not fit the context window of the model at {base_url}{size}: "
                f"{secrets.redact(_server_message(exc))[:200]}. Set models.{role}.context_tokens to the window{size} "
                "so Jarvis folds older turns to fit, or start the server with a larger one (llama.cpp: --ctx-size; "
                "Ollama: OLLAMA_CONTEXT_LENGTH; vLLM: --max-model-len).")
        # busy, restarting or behind a proxy that lost it: the same request may pass later; other 4xx will not
        return ModelEndpointError(
            f"The model endpoint at {base_url} answered HTTP {exc.status_code}: {secrets.redact(str(exc))[:300]}",
            transient=exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500)
    if isinstance(exc, openai.APIError):  # an error event inside a stream that had begun (vLLM, OpenAI)
        return ModelEndpointError(
            f"The model at {base_url} stopped with an error in the middle of its answer, so nothing of it was kept: "
            f"{secrets.redact(_server_message(exc))[:300]}. Ask again; if it keeps happening, look at the model "
            "server's log.", transient=True)
    return None


_WINDOW_PATTERNS = (re.compile(r"maximum context length is (\d+)"),  # OpenAI, vLLM
                    re.compile(r"available context size \((\d+) tokens\)"),  # llama.cpp
                    re.compile(r"context (?:window|length|size)[^.]*?(\d{3,}) tokens"))


def _error_of(body: Any) -> Any:
    """The error inside an error body: {"error": {...}} (OpenAI, llama.cpp, Ollama, newer vLLM), the body itself
    (older vLLM's top-level {"object": "error", ...}), or LM Studio's {"error": "text"}."""
    return body.get("error", body) if isinstance(body, dict) else body


def context_overflow(body: Any, text: str) -> int | None:
    """The model's window (0 when the server does not say it) when an error says the prompt does not fit, else None.
    Each server says it its own way: llama.cpp's `exceed_context_size_error` with `n_ctx`, OpenAI's
    `context_length_exceeded`, vLLM's "maximum context length is N tokens"."""
    error = _error_of(body)
    error = error if isinstance(error, dict) else {}
    kind = f"{error.get('type')} {error.get('code')}"
    message = str(error.get("message") or text)
    if not ("exceed_context_size" in kind or "context_length_exceeded" in kind
            or re.search(r"maximum context length|exceeds the available context size", message)):
        return None
    if isinstance(error.get("n_ctx"), int):
        return error["n_ctx"]
    for pattern in _WINDOW_PATTERNS:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return 0


def _server_message(exc: Any) -> str:
    """The server's own sentence from an error body ({"error": {"message": ...}} or a bare message), else the
    exception's text."""
    error = _error_of(getattr(exc, "body", None))
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"].rstrip(".")
    if isinstance(error, str):
        return error.rstrip(".")
    return str(getattr(exc, "message", exc)).rstrip(".")


def check_endpoint(settings: Settings, role: Role = "primary") -> tuple[bool, str]:
    """Health check used by `jarvis run`, the Settings view and `make run`: GET /models."""
    used_role, cfg = model_config(settings, role)
    if cfg.provider == "embedded":
        return check_embedded(used_role, cfg)
    url = cfg.base_url.rstrip("/") + "/models"
    try:
        status, body = get_small_json(url, secrets.resolve(cfg.api_key) or "", timeout_s=3,
                                      server_users=server_users(cfg))
        if status >= 400:
            return False, f"{cfg.base_url} answered HTTP {status}"
        listing = read_model_list(body)
        if listing is not None and not listing.serves(cfg.model):
            # the server answers, but every chat would fail with "model not found"
            listed = listing.ids
            shown = ", ".join(sorted(listed)[:8]) + (" ..." if len(listed) > 8 else "") if listed else "none"
            return False, (f"{cfg.base_url} answers, but has no model named {cfg.model!r} (it lists: {shown}); set "
                           f"models.{used_role}.model to one of them, or load {cfg.model!r} in the server")
        if listing is not None and cfg.model not in listing.ids and f"{cfg.model}:latest" not in listing.ids:
            return True, f"{cfg.base_url} answers with its one model {listing.ids[0]!r} (asked for {cfg.model!r})"
        return True, f"{cfg.base_url} answers ({cfg.model})"
    except BodyTooLarge as exc:
        return False, f"{exc}: not a model list (is this an OpenAI-compatible server?)"
    except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
        err = describe_endpoint_error(exc, cfg.base_url, used_role)
        return False, str(err or exc)
