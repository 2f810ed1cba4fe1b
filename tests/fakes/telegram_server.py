"""A local HTTP server speaking the Telegram Bot API subset Jarvis uses: getMe, getUpdates (offsets, long-poll
timeout), sendMessage, error bodies, 429 with retry_after. Tests queue inbound messages with `say()`."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TelegramState:
    def __init__(self, token: str):
        self.token = token
        self.lock = threading.Condition()
        self.updates: list[dict[str, Any]] = []
        self.next_update = 1
        self.next_message = 100
        self.sent: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail_next: list[tuple[int, dict[str, Any]]] = []  # (status, body) answered to the next sendMessage calls
        self.known_chats: set[int] = set()

    def say(self, text: str, username: str | None = "alice", user_id: int = 42, chat_id: int | None = None) -> None:
        chat = chat_id or user_id
        with self.lock:
            self.known_chats.add(chat)
            sender = {"id": user_id, "is_bot": False, "first_name": (username or "anon").title()}
            if username:
                sender["username"] = username
            self.updates.append({"update_id": self.next_update, "message": {
                "message_id": self.next_message, "from": sender, "chat": {"id": chat, "type": "private"},
                "date": int(time.time()), "text": text}})
            self.next_update += 1
            self.next_message += 1
            self.lock.notify_all()


class _Handler(BaseHTTPRequestHandler):
    server: "TelegramServer._HTTP"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        st = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        prefix = f"/bot{st.token}/"
        if not self.path.startswith(prefix):
            self._reply(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            return
        method = self.path[len(prefix):]
        st.calls.append((method, payload))
        if method == "getMe":
            self._reply(200, {"ok": True, "result": {"id": 999, "is_bot": True, "username": "jarvis_test_bot"}})
        elif method == "getUpdates":
            offset = int(payload.get("offset") or 0)
            deadline = time.monotonic() + min(float(payload.get("timeout") or 0), 5)
            with st.lock:
                while True:
                    ready = [u for u in st.updates if u["update_id"] >= offset]
                    if ready or time.monotonic() >= deadline:
                        break
                    st.lock.wait(timeout=max(0.01, deadline - time.monotonic()))
            self._reply(200, {"ok": True, "result": ready})
        elif method == "sendMessage":
            if st.fail_next:
                status, body = st.fail_next.pop(0)
                self._reply(status, body)
                return
            chat_id = int(payload["chat_id"])
            if chat_id not in st.known_chats:
                self._reply(400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"})
                return
            with st.lock:
                st.next_message += 1
                message = {"message_id": st.next_message, "chat": {"id": chat_id}, "text": payload["text"],
                           "date": int(time.time())}
                st.sent.append(message)
            self._reply(200, {"ok": True, "result": message})
        else:
            self._reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})


class TelegramServer:
    class _HTTP(ThreadingHTTPServer):
        daemon_threads = True
        state: TelegramState

    def __init__(self, token: str = "123:TEST"):
        self.state = TelegramState(token)
        self.httpd = self._HTTP(("127.0.0.1", 0), _Handler)
        self.httpd.state = self.state
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "TelegramServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
