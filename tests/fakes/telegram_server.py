"""A local HTTP server speaking the Telegram Bot API subset Jarvis uses: getMe, getUpdates (offsets, long-poll
timeout, allowed_updates), sendMessage (with an inline keyboard; parse_mode HTML parsed as the Bot API does: an
unknown tag or a bare `&` refused, at most 4096 characters), editMessageText, sendChatAction,
answerCallbackQuery, editMessageReplyMarkup, getFile and the file download (GET /file/bot<token>/<path>), error
bodies, 429 with retry_after. Tests queue inbound messages with `say()`, button presses with `press()`, files with
`add_file()`; `down` answers every call with a 5xx (or, as "refuse", closes the listening socket's connections).

As in the Bot API: callback_data is 1-64 bytes (else BUTTON_DATA_INVALID); a callback query is answered once (a
second answerCallbackQuery, or one for an unknown id, is "query is too old ... or query ID is invalid"); only a
message the bot sent can have its keyboard edited, and an edit that changes nothing is refused ("message is not
modified")."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from typing import Any

from tests.fakes.http_json import JsonHandler, LocalServer


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
        self.queries: dict[str, dict[str, Any]] = {}  # callback query id -> the query, until answered
        self.answered: list[dict[str, Any]] = []  # answerCallbackQuery payloads, in order
        self.next_query = 5000
        self.actions: list[dict[str, Any]] = []  # sendChatAction payloads
        self.edits: list[tuple[float, dict[str, Any]]] = []  # (when, editMessageText payload) of each edit made
        self.files: dict[str, dict[str, Any]] = {}  # file_id -> {"data", "file_size" (what getFile says), "path"}
        self.downloads: list[str] = []  # the file paths whose download started
        self.down: int | None = None  # an HTTP status (502, 503) every Bot API call is answered with while set

    def add_file(self, file_id: str, data: bytes, *, declared: int | None = None, stream_mb: int = 0) -> None:
        """A file the user sent: getFile says `declared` (default: its real size) and the download gives `data`,
        or, with `stream_mb`, that many MB of zeros with no Content-Length (a file that streams past what it said)."""
        with self.lock:
            self.files[file_id] = {"data": data, "file_size": len(data) if declared is None else declared,
                                   "path": f"documents/{file_id}", "stream_mb": stream_mb}

    def update(self, update: dict[str, Any]) -> None:
        """Any update as it is (an edited_message, a document), numbered here."""
        with self.lock:
            self.updates.append({"update_id": self.next_update, **update})
            self.next_update += 1
            self.lock.notify_all()

    def shown(self, chat_id: int) -> list[str]:
        """The texts of the bot's messages in a chat as the user sees them now (entities read)."""
        with self.lock:
            return [html.unescape(_TAGS.sub("", m["text"])) if m.get("parse_mode") == "HTML" else m["text"]
                    for m in self.sent if m["chat"]["id"] == chat_id]

    def say(self, text: str | None, username: str | None = "alice", user_id: int = 42, chat_id: int | None = None,
            chat_type: str = "private", **extra: Any) -> int:
        """A message from `user_id`; with `chat_id` (negative, as the Bot API numbers groups) and `chat_type`
        ("group", "supergroup"), written in that group rather than to the bot in private."""
        chat = chat_id or user_id
        with self.lock:
            self.known_chats.add(chat)
            sender = {"id": user_id, "is_bot": False, "first_name": (username or "anon").title()}
            if username:
                sender["username"] = username
            self.updates.append({"update_id": self.next_update, "message": {
                "message_id": self.next_message, "from": sender, "chat": {"id": chat, "type": chat_type},
                "date": int(time.time()), **({"text": text} if text is not None else extra)}})
            self.next_update += 1
            self.next_message += 1
            self.lock.notify_all()
            return self.next_message - 1


    def press(self, message: dict[str, Any], data: str, user_id: int = 42, username: str | None = "alice") -> str:
        """A user presses the button whose callback_data is `data` under the bot's `message`; returns the query id."""
        with self.lock:
            self.next_query += 1
            qid = str(self.next_query)
            sender = {"id": user_id, "is_bot": False, "first_name": (username or "anon").title()}
            if username:
                sender["username"] = username
            query = {"id": qid, "from": sender, "chat_instance": f"ci{message['chat']['id']}",
                     "message": {k: message[k] for k in ("message_id", "chat", "date", "text")}, "data": data}
            self.queries[qid] = query
            self.updates.append({"update_id": self.next_update, "callback_query": query})
            self.next_update += 1
            self.lock.notify_all()
            return qid

    def buttons(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The inline keyboard a sent message shows now (flattened)."""
        markup = message.get("reply_markup") or {}
        return [b for row in markup.get("inline_keyboard") or [] for b in row]


_TAGS = re.compile(r"</?(b|strong|i|em|u|ins|s|strike|del|code|pre|a|tg-spoiler|blockquote)(\s[^>]*)?>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")


def _bad_text(payload: dict[str, Any]) -> str | None:
    """What the Bot API refuses in a message's text: too long (after entities are parsed), and with parse_mode
    HTML a tag it does not know or an `&` that starts no entity."""
    text = str(payload.get("text") or "")
    shown = text
    if payload.get("parse_mode") == "HTML":
        rest = _ENTITY.sub("", _TAGS.sub("", text))
        if "<" in rest or ">" in rest:
            return "Bad Request: can't parse entities: Unsupported start tag"
        if "&" in rest:
            return "Bad Request: can't parse entities: Unsupported HTML entity"
        shown = html.unescape(_TAGS.sub("", text))
    if not shown.strip():
        return "Bad Request: message text is empty"
    if len(shown) > 4096:
        return "Bad Request: message is too long"
    return None


def _bad_markup(markup: Any) -> str | None:
    if markup is None:
        return None
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return "Bad Request: can't parse reply keyboard markup JSON object"
    for button in (b for r in rows for b in r):
        if not isinstance(button, dict) or not button.get("text"):
            return "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
        data = button.get("callback_data")
        if data is not None and not 1 <= len(str(data).encode()) <= 64:
            return "Bad Request: BUTTON_DATA_INVALID"
    return None


class _Handler(JsonHandler):
    server: "TelegramServer._HTTP"

    def do_GET(self) -> None:  # noqa: N802
        st = self.server.state
        prefix = f"/file/bot{st.token}/"
        entry = next((f for f in st.files.values() if self.path == prefix + f["path"]), None)
        if entry is None:
            self.send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        st.downloads.append(entry["path"])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if entry["stream_mb"]:
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            chunk = bytes(1024 * 1024)
            try:
                for _ in range(entry["stream_mb"]):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading: what a bounded download does
            return
        self.send_header("Content-Length", str(len(entry["data"])))
        self.end_headers()
        self.wfile.write(entry["data"])

    def do_POST(self) -> None:  # noqa: N802
        st = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        if st.down is not None:
            self.send_json(st.down, {"ok": False, "error_code": st.down, "description": "Bad Gateway"})
            return
        prefix = f"/bot{st.token}/"
        if not self.path.startswith(prefix):
            self.send_json(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            return
        method = self.path[len(prefix):]
        st.calls.append((method, payload))
        if method == "getMe":
            self.send_json(200, {"ok": True, "result": {"id": 999, "is_bot": True, "username": "jarvis_test_bot"}})
        elif method == "getUpdates":
            offset = int(payload.get("offset") or 0)
            deadline = time.monotonic() + min(float(payload.get("timeout") or 0), 5)
            allowed = payload.get("allowed_updates") or ["message", "callback_query"]  # the default: all but a few
            with st.lock:
                while True:
                    ready = [u for u in st.updates if u["update_id"] >= offset and any(k in u for k in allowed)]
                    if ready or time.monotonic() >= deadline:
                        break
                    st.lock.wait(timeout=max(0.01, deadline - time.monotonic()))
            self.send_json(200, {"ok": True, "result": ready})
        elif method == "getFile":
            entry = st.files.get(str(payload.get("file_id")))
            if entry is None:
                self.send_json(400, {"ok": False, "error_code": 400, "description": "Bad Request: invalid file_id"})
            else:
                self.send_json(200, {"ok": True, "result": {"file_id": payload["file_id"], "file_unique_id": "u",
                                                            "file_size": entry["file_size"], "file_path": entry["path"]}})
        elif method == "sendChatAction":
            with st.lock:
                st.actions.append(payload)
            self.send_json(200, {"ok": True, "result": True})
        elif method == "editMessageText":
            problem = _bad_text(payload)
            with st.lock:
                message = next((m for m in st.sent if m["message_id"] == int(payload.get("message_id") or 0)
                                and m["chat"]["id"] == int(payload.get("chat_id") or 0)), None)
                if problem:
                    status, body = 400, {"ok": False, "error_code": 400, "description": problem}
                elif message is None:
                    status, body = 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
                elif message["text"] == payload["text"]:
                    status, body = 400, {"ok": False, "error_code": 400, "description": "Bad Request: message is not "
                                         "modified"}
                else:
                    message["text"] = payload["text"]
                    st.edits.append((time.monotonic(), dict(payload)))
                    status, body = 200, {"ok": True, "result": message}
            self.send_json(status, body)
        elif method == "sendMessage":
            problem = _bad_text(payload)
            if problem:
                self.send_json(400, {"ok": False, "error_code": 400, "description": problem})
                return
            if st.fail_next:
                status, body = st.fail_next.pop(0)
                self.send_json(status, body)
                return
            chat_id = int(payload["chat_id"])
            if chat_id not in st.known_chats:
                self.send_json(400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"})
                return
            problem = _bad_markup(payload.get("reply_markup"))
            if problem:
                self.send_json(400, {"ok": False, "error_code": 400, "description": problem})
                return
            with st.lock:
                st.next_message += 1
                message = {"message_id": st.next_message, "chat": {"id": chat_id}, "text": payload["text"],
                           "date": int(time.time())}
                if payload.get("parse_mode"):
                    message["parse_mode"] = payload["parse_mode"]
                if payload.get("reply_markup"):
                    message["reply_markup"] = payload["reply_markup"]
                st.sent.append(message)
                st.lock.notify_all()  # a waiter for the bot's answer (bench/channels.py) wakes at once
            self.send_json(200, {"ok": True, "result": message})
        elif method == "answerCallbackQuery":
            with st.lock:
                query = st.queries.pop(str(payload.get("callback_query_id")), None)
                if query is not None:
                    st.answered.append({**payload, "from": query["from"]["id"]})
            if query is None:
                self.send_json(400, {"ok": False, "error_code": 400, "description": "Bad Request: query is too old and "
                                  "response timeout expired or query ID is invalid"})
            else:
                self.send_json(200, {"ok": True, "result": True})
        elif method == "editMessageReplyMarkup":
            with st.lock:
                message = next((m for m in st.sent if m["message_id"] == int(payload.get("message_id") or 0)
                                and m["chat"]["id"] == int(payload.get("chat_id") or 0)), None)
                markup = payload.get("reply_markup") or {"inline_keyboard": []}
                if message is None:
                    status, body = 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
                elif (message.get("reply_markup") or {"inline_keyboard": []}) == markup:
                    status, body = 400, {"ok": False, "error_code": 400, "description": "Bad Request: message is not "
                                         "modified: specified new message content and reply markup are exactly the "
                                         "same as a current content and reply markup of the message"}
                else:
                    message["reply_markup"] = markup
                    status, body = 200, {"ok": True, "result": message}
            self.send_json(status, body)
        else:
            self.send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})


class TelegramServer:
    class _HTTP(LocalServer):
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

    def refuse(self) -> None:
        """Stop listening: every connection is refused until `reopen`."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def reopen(self) -> None:
        """Listen again on the same port, with the same state."""
        port = int(self.base_url.rsplit(":", 1)[1])
        self.httpd = self._HTTP(("127.0.0.1", port), _Handler)
        self.httpd.state = self.state
        self.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
