"""A scripted OpenAI-compatible server: the real ChatOpenAI client talks to it over HTTP.

It replays a script of responses (and/or answers by rules matched against the request), streamed or not,
with tool calls (several in one message too), usage figures, and /v1/embeddings with deterministic vectors.
Every request body is kept in `server.requests` so tests can check what the model was shown.

A response is a dict:
    {"content": "text"}
    {"tool_calls": [{"name": "fs_list_dir", "arguments": {"path": "/tmp"}}]}   # arguments may be a raw string
    {"content": "...", "delay_s": 0.5, "token_delay_s": 0.01}
    {"content": "la ", "endless": True}          # streamed again and again until the client hangs up
    {"error": {"status": 500, "message": "boom"}}
A rule is {"match": "regex searched in the last message's text", "response": {...}, "times": N (optional)}
or, in Python, (predicate(request) -> bool, response dict or callable(request) -> response dict).
Rules are tried first; otherwise the next scripted response is used; when none is left the server answers 500.

By hand:  python -m tests.fakes.llm_server --port 1337 --script script.json   (a JSON list of responses/rules)
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.fakes.http_json import JsonHandler, LocalServer

Response = dict[str, Any]
Predicate = Callable[[dict], bool]


def last_message_text(request: dict) -> str:
    messages = request.get("messages") or []
    if not messages:
        return ""
    return _content_text(messages[-1].get("content"))


def last_user_text(request: dict) -> str:
    for m in reversed(request.get("messages") or []):
        if m.get("role") == "user":
            return _content_text(m.get("content"))
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def tool_results(request: dict) -> list[dict]:
    """The tool messages of the request, in order ({tool_call_id, content})."""
    return [m for m in request.get("messages") or [] if m.get("role") == "tool"]


def count_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def embed_text(text: str, dims: int = 64) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way."""
    vec = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        h = int(hashlib.sha256(word.encode()).hexdigest(), 16)
        vec[h % dims] += 1.0 if (h >> 8) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class ScriptedBrain:
    def __init__(self, script: list[Response] | None = None, rules: list | None = None, model: str = "scripted-model"):
        self.lock = threading.Lock()
        self.model = model
        self.script: list[Response] = []
        self.rules: list[dict] = []
        self.requests: list[dict] = []
        self.embedding_requests: list[dict] = []
        self.embeddings_enabled = True
        # A test's own answer to POST /embeddings (a callable given the inputs, returning the body's bytes): the
        # shapes a broken or hostile server sends. None: deterministic vectors (embed_text).
        self.embedding_answer: Callable[[list[str]], bytes] | None = None
        # What GET /props answers (llama.cpp's server; None: 404, as other servers) and the fields each model of
        # GET /models carries beyond its id (vLLM's max_model_len); a test sets them.
        self.props: dict | None = None
        self.model_fields: dict = {}
        self.gets: list[str] = []
        self.load(script or [], rules or [])

    def load(self, script: list, rules: list | None = None) -> None:
        with self.lock:
            self.script = []
            self.rules = []
            for item in script:
                if isinstance(item, dict) and "match" in item:
                    self._add_rule(item)
                else:
                    self.script.append(item)
            for rule in rules or []:
                self._add_rule(rule)

    def _add_rule(self, rule: Any) -> None:
        if isinstance(rule, tuple):
            pred, resp = rule
            self.rules.append({"pred": pred, "response": resp, "times": None})
        else:
            pattern = re.compile(rule["match"], re.I | re.S)
            self.rules.append(
                {"pred": lambda req, p=pattern: bool(p.search(last_message_text(req))), "response": rule["response"],
                 "times": rule.get("times")}
            )

    def push(self, *responses: Response) -> None:
        with self.lock:
            self.script.extend(responses)

    def add_rule(self, predicate: Predicate, response: Response | Callable[[dict], Response], times: int | None = None) -> None:
        with self.lock:
            self.rules.append({"pred": predicate, "response": response, "times": times})

    @property
    def remaining(self) -> int:
        return len(self.script)

    def next_response(self, request: dict) -> Response:
        with self.lock:
            self.requests.append(request)
            for rule in self.rules:
                if rule["times"] is not None and rule["times"] <= 0:
                    continue
                try:
                    matched = rule["pred"](request)
                except Exception:  # noqa: BLE001
                    matched = False
                if matched:
                    if rule["times"] is not None:
                        rule["times"] -= 1
                    resp = rule["response"]
                    return resp(request) if callable(resp) else resp
            if self.script:
                resp = self.script.pop(0)
                return resp(request) if callable(resp) else resp
        return {"error": {"status": 500, "message": "scripted server: no scripted response left for this request"}}


def _tool_calls(resp: Response) -> list[dict]:
    calls = []
    for i, call in enumerate(resp.get("tool_calls") or []):
        args = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
                "index": i,
            }
        )
    return calls


def _usage(request: dict, resp: Response, calls: list[dict]) -> dict:
    prompt = count_tokens(json.dumps(request.get("messages", []))) + count_tokens(json.dumps(request.get("tools", [])))
    completion = count_tokens(resp.get("content") or "") + sum(
        count_tokens(c["function"]["name"] + c["function"]["arguments"]) for c in calls
    )
    usage = resp.get("usage") or {}
    return {
        "prompt_tokens": usage.get("prompt_tokens", prompt),
        "completion_tokens": usage.get("completion_tokens", completion),
        "total_tokens": usage.get("prompt_tokens", prompt) + usage.get("completion_tokens", completion),
    }


def _split_tokens(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text) or [""]


class _Handler(JsonHandler):
    server: "FakeLLMServer._HTTPServer"

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        return json.loads(raw or b"{}")

    def do_GET(self) -> None:  # noqa: N802
        brain = self.server.brain
        brain.gets.append(self.path)
        if self.path.rstrip("/").endswith("/models"):
            names = getattr(brain, "model_list", None) or [brain.model]  # a test may list several, as Ollama does
            # it answers whatever model name a request gives, as llama.cpp's server does, and says so the same way
            self.send_json(200, {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "llamacpp",
                                                        **brain.model_fields} for n in names]})
        elif self.path == "/props" and brain.props is not None:
            self.send_json(200, brain.props)
        elif self.path == "/_requests":
            self.send_json(200, brain.requests)
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        brain = self.server.brain
        body = self._body()
        if self.path == "/_script":
            brain.load(body.get("script", []), body.get("rules", []))
            self.send_json(200, {"ok": True})
        elif self.path.endswith("/chat/completions"):
            self._chat(brain, body)
        elif self.path.endswith("/embeddings"):
            if not brain.embeddings_enabled:
                self.send_json(404, {"error": {"message": "embeddings are not served here"}})
                return
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs or []
            brain.embedding_requests.append(body)
            if brain.embedding_answer is not None:
                raw = brain.embedding_answer([str(t) for t in inputs])
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            data = [{"object": "embedding", "index": i, "embedding": embed_text(str(t))} for i, t in enumerate(inputs)]
            self.send_json(200, {"object": "list", "data": data, "model": body.get("model", brain.model),
                             "usage": {"prompt_tokens": 0, "total_tokens": 0}})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def _chat(self, brain: ScriptedBrain, request: dict) -> None:
        resp = brain.next_response(request)
        if resp.get("delay_s"):
            time.sleep(resp["delay_s"])
        if "error" in resp:
            err = resp["error"]
            self.send_json(err.get("status", 500), {"error": {"message": err.get("message", "error"), "type": "server_error"}})
            return
        calls = _tool_calls(resp)
        usage = _usage(request, resp, calls)
        finish = resp.get("finish_reason") or ("tool_calls" if calls else "stop")
        cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        created = int(time.time())
        model = request.get("model", brain.model)
        if not request.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": resp.get("content")}
            if calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
            self.send_json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})
            return

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        if resp.get("close_mid_chunk"):  # a chunked body whose connection drops inside a chunk
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            first = b'data: {"choices": [{"index": 0, "delta": {"content": "Hal'
            self.wfile.write(f"{len(first) + 40:x}\r\n".encode() + first)
            self.wfile.flush()
            self.close_connection = True
            return
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish_reason: str | None = None, usage_obj: dict | None = None, choices: bool = True) -> None:
            payload: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}] if choices else []}
            if usage_obj is not None:
                payload["usage"] = usage_obj
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        try:
            chunk({"role": "assistant", "content": ""})
            token_delay = resp.get("token_delay_s", 0)
            tokens: Any = _split_tokens(resp.get("content") or "") if resp.get("content") else []
            if resp.get("endless"):  # a server that ignores max_tokens: the answer repeats until the client leaves
                tokens = itertools.cycle(tokens)
            hold = resp.get("hold")  # (reached, release): the answer stops after its first token until release
            for n, token in enumerate(tokens):
                if hold and n == 1:
                    hold[0].set()
                    hold[1].wait(120)
                if token_delay:
                    time.sleep(token_delay)
                chunk({"content": token})
            if resp.get("cut_stream"):  # the connection closes mid-answer: no finish_reason, no [DONE]
                return
            for c in calls:
                chunk({"tool_calls": [{"index": c["index"], "id": c["id"], "type": "function",
                                       "function": {"name": c["function"]["name"], "arguments": ""}}]})
                args = c["function"]["arguments"]
                if resp.get("arguments_as_object"):  # as some servers send them: an object, not JSON text
                    chunk({"tool_calls": [{"index": c["index"], "function": {"arguments": json.loads(args)}}]})
                    continue
                step = max(1, len(args) // 3)
                for i in range(0, len(args), step):
                    chunk({"tool_calls": [{"index": c["index"], "function": {"arguments": args[i:i + step]}}]})
            chunk({}, finish_reason=finish)
            if (request.get("stream_options") or {}).get("include_usage") and not resp.get("no_usage"):
                chunk({}, usage_obj=usage, choices=False)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class FakeLLMServer:
    """`with FakeLLMServer(script=[...]) as srv:` serves on srv.base_url (http://127.0.0.1:PORT/v1)."""

    class _HTTPServer(LocalServer):
        daemon_threads = True
        allow_reuse_address = True
        brain: ScriptedBrain

    def __init__(self, script: list | None = None, rules: list | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 model: str = "scripted-model"):
        self.brain = ScriptedBrain(script, rules, model=model)
        self.httpd = self._HTTPServer((host, port), _Handler)
        self.httpd.brain = self.brain
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[dict]:
        return self.brain.requests

    def push(self, *responses: Response) -> None:
        self.brain.push(*responses)

    def add_rule(self, predicate: Predicate, response: Response | Callable[[dict], Response], times: int | None = None) -> None:
        self.brain.add_rule(predicate, response, times)

    def start(self) -> "FakeLLMServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server for tests and demos.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1337)
    parser.add_argument("--script", help="JSON file: a list of responses and rules")
    parser.add_argument("--echo", action="store_true", help="when the script is exhausted, echo the last user message")
    args = parser.parse_args()
    script = json.load(open(args.script, encoding="utf-8")) if args.script else []
    server = FakeLLMServer(script, host=args.host, port=args.port)
    if args.echo:
        server.add_rule(lambda req: server.brain.remaining == 0, lambda req: {"content": f"You said: {last_user_text(req)}"})
    print(f"scripted OpenAI-compatible server on {server.base_url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
