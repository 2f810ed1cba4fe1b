"""Telegram through the Bot API: `sendMessage` to send (side effect `message_send`), long polling of
`getUpdates` for inbound messages, an allowlist of who may talk to Jarvis.

A bot can only write to people who have written to it first, so every message written to the bot in private
records the sender's @handle -> their private chat in a small directory; `to` may be a @handle from it or a
numeric chat id. A message written in a group is not recorded: "to @alice" must reach Alice, never a group she
last spoke in. The token lives in
the keyring (`jarvis secrets set telegram_token`, then `channels.telegram.token: {secret: telegram_token}`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from orchestrator.core import secrets
from orchestrator.storage.claims import Claims
from orchestrator.core.config import Settings
from .addresses import normalize_party
from .base import ChannelError, FileTooLarge, Sent
from .inbound import InboundMessage
from .models import ChannelState
from .ratelimit import bucket
from .retrying import Outage

log = logging.getLogger(__name__)

HOW_TO = ("Telegram is not configured: create a bot with @BotFather, run `jarvis secrets set telegram_token`, and set "
          "channels.telegram: {enabled: true, token: {secret: telegram_token}, allowlist: ['@you']} in the config")


class TelegramRetry(Exception):
    """A temporary failure: 429 (after its retry_after) or a 5xx / network error."""

    def __init__(self, message: str, retry_after: float = 0.0):
        super().__init__(message)
        self.retry_after = retry_after


class TelegramAPI:
    """The Bot API subset Jarvis uses, over httpx, with 429 retry_after obeyed and 5xx retried with backoff."""

    def __init__(self, api_base: str, token: str, timeout: float = 40.0, attempts: int = 4):
        self.base = f"{api_base.rstrip('/')}/bot{token}"
        self.files = f"{api_base.rstrip('/')}/file/bot{token}"
        self.client = httpx.Client(timeout=timeout)
        self.attempts = attempts

    def call(self, method: str, payload: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        def once() -> Any:
            try:
                resp = self.client.post(f"{self.base}/{method}", json=payload or {}, timeout=timeout or self.client.timeout)
            except httpx.TransportError as exc:
                raise TelegramRetry(f"cannot reach Telegram: {type(exc).__name__}") from None
            try:
                body = resp.json()
            except ValueError:
                body = {"ok": False, "description": resp.text[:200]}
            if resp.status_code == 429 or body.get("error_code") == 429:
                retry_after = float((body.get("parameters") or {}).get("retry_after", 1))
                raise TelegramRetry(f"Telegram rate limit: {body.get('description')}", retry_after)
            if resp.status_code >= 500:
                raise TelegramRetry(f"Telegram answered HTTP {resp.status_code}")
            if not body.get("ok"):
                desc = body.get("description") or f"HTTP {resp.status_code}"
                if resp.status_code == 401:
                    raise ChannelError(f"Telegram refused the bot token ({desc}): check `jarvis secrets set telegram_token`")
                raise ChannelError(f"Telegram {method} failed: {desc}")
            return body.get("result")

        def wait(retry_state: Any) -> float:
            exc = retry_state.outcome.exception()
            backoff = wait_exponential(multiplier=0.5, max=30)(retry_state)
            return max(getattr(exc, "retry_after", 0.0), backoff)

        for attempt in Retrying(retry=retry_if_exception(lambda e: isinstance(e, TelegramRetry)),
                                stop=stop_after_attempt(self.attempts), wait=wait, reraise=True):
            with attempt:
                return once()
        raise AssertionError("unreachable")


    def download(self, file_id: str, limit: int, sink: Callable[[bytes], None]) -> int:
        """A file a user sent, into `sink` chunk by chunk; FileTooLarge before anything is fetched when getFile
        says it is larger than `limit` bytes, and as soon as what streams passes `limit` (the size getFile
        says is the sender's word, not a bound). Returns the bytes read."""
        info = self.call("getFile", {"file_id": file_id}) or {}
        declared, path = info.get("file_size"), info.get("file_path")
        if isinstance(declared, int) and declared > limit:
            raise FileTooLarge(declared, limit)
        if not isinstance(path, str) or not path or ".." in path.split("/"):
            raise ChannelError("Telegram gave no file to download")
        size = 0
        try:
            with self.client.stream("GET", f"{self.files}/{path}") as resp:
                if resp.status_code != 200:
                    raise ChannelError(f"Telegram's file download answered HTTP {resp.status_code}")
                for chunk in resp.iter_bytes(64 * 1024):
                    size += len(chunk)
                    if size > limit:
                        raise FileTooLarge(size, limit)
                    sink(chunk)
        except httpx.TransportError as exc:
            raise ChannelError(f"the file's download from Telegram failed: {type(exc).__name__}") from None
        return size


def telegram_token(settings: Settings) -> str:
    cfg = settings.channels.telegram
    if not cfg.enabled or cfg.token is None:
        raise ChannelError(HOW_TO)
    try:
        token = secrets.resolve(cfg.token, what="channels.telegram.token")
    except secrets.SecretError as exc:
        raise ChannelError(f"{exc}. {HOW_TO}") from None
    if not token:
        raise ChannelError(HOW_TO)
    return token


def bot_api(settings: Settings, timeout: float = 40.0) -> TelegramAPI:
    """The Bot API client of the configured bot (ChannelError saying how to set it up when it is not)."""
    return TelegramAPI(settings.channels.telegram.api_base, telegram_token(settings), timeout=timeout)


def lazy_bot_api() -> cached_property:
    """A class attribute: `self.settings`' bot_api, built on first use, so an object that may never send (the
    approvals notifier with email only) does not need the bot token to be built."""
    return cached_property(lambda self: bot_api(self.settings))


class TelegramChannel:
    name = "telegram"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.api = bot_api(settings)
        self.directory = ChannelState(settings, "telegram")

    def chat_id_for(self, to: str) -> str:
        text = to.strip()
        if text.lstrip("-").isdigit():
            return text
        handle = normalize_party(text if text.startswith("@") else "@" + text)
        chat = self.directory.get(f"chat:{handle}")
        if chat is None or not private_chat_id(chat):  # a group's id (negative) recorded by an older version
            raise ChannelError(f"Telegram bots can only write to people who wrote to the bot first: ask {handle} to send "
                               "any message to the bot, then try again")
        return chat

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent:
        if not bucket("telegram", self.settings.channels.send_per_minute).acquire(timeout=120):
            raise ChannelError("Telegram sending is rate limited (channels.send_per_minute); try again later")
        chat_id = self.chat_id_for(to)
        result = self.api.call("sendMessage", {"chat_id": chat_id, "text": text})
        party = to if to.strip().startswith("@") else chat_id
        return Sent(channel=self.name, to=party, external_id=str((result or {}).get("message_id", "")), thread_key=chat_id)



POLL_CLAIM = "channel:telegram:getUpdates"
def private_chat_id(chat_id: str) -> bool:
    """A person's private chat with the bot: the Bot API numbers it as the user (positive); groups, supergroups
    and channels are negative."""
    return chat_id.isdigit() and int(chat_id) > 0


class TelegramPoller(Outage):
    """Long polling of getUpdates in a background thread; each allowed message goes to `deliver`."""

    tries = "poll"

    def __init__(self, settings: Settings, deliver: Callable[[InboundMessage], Any],
                 on_callback: Callable[[dict[str, Any]], Any] | None = None,
                 converse: Callable[[dict[str, Any]], bool] | None = None):
        """`on_callback`: takes each button press (a callback_query; approvals/remote.py checks who pressed).
        `converse`: offered each allowed message first; True when it took it (the user's own conversation with
        Jarvis, conversations/telegram.py), else it goes to `deliver` (jorbs, inbox)."""
        self.settings = settings
        self.on_callback = on_callback
        self.converse = converse
        self.cfg = settings.channels.telegram
        self.api = bot_api(settings, timeout=self.cfg.poll_timeout_s + 10)
        self.state = ChannelState(settings, "telegram")
        self.deliver = deliver
        self.allowed = {normalize_party(a) for a in self.cfg.allowlist} | {a.strip() for a in self.cfg.allowlist}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        Outage.__init__(self)  # polls failed in a row: Telegram down, refusing, answering 5xx
        # Telegram allows one getUpdates at a time per bot: of the workers sharing a database (or two `jarvis
        # run` on one data folder) only the claim's holder polls; the others stand by and take over when its
        # lease ends.
        self.claims = Claims(settings)
        self.standing_by_for: str | None = None

    def status_note(self) -> str | None:
        """What the services report says of the poller: None when it polls, why not otherwise."""
        if self.last_error:
            return self.down_note()
        return f"standing by: {self.standing_by_for} polls Telegram" if self.standing_by_for else None

    def take_turn(self) -> bool:
        """Hold (or renew) the polling claim; False when another worker polls."""
        if self.claims.acquire(POLL_CLAIM):
            self.standing_by_for = None
            return True
        self.standing_by_for = self.claims.holder(POLL_CLAIM) or "another worker"
        return False

    def me(self) -> dict[str, Any]:
        return self.api.call("getMe")

    def poll_once(self, timeout: int | None = None) -> int:
        offset = int(self.state.get("offset", "0") or 0)
        updates = self.api.call("getUpdates", {"offset": offset, "timeout": self.cfg.poll_timeout_s if timeout is None else timeout,
                                               "allowed_updates": ["message", "callback_query"] if self.on_callback
                                               else ["message"]},
                                timeout=(self.cfg.poll_timeout_s if timeout is None else timeout) + 10) or []
        handled = 0
        for update in updates:
            offset = str(int(update["update_id"]) + 1)
            message = update.get("message") or {}
            if update.get("callback_query") or not message or not isinstance(message, dict):
                self.state.set("offset", offset)
                if update.get("callback_query") and self.on_callback is not None:
                    self.on_callback(update["callback_query"])
                    handled += 1
                continue
            # the user's conversation records each message it takes: the offset moves once it is taken, so a
            # process killed before that sees the message again (conversations/once.py); other messages move it first.
            # A message that raises is passed over all the same: it must not hold back the later ones for ever.
            try:
                party = self._allowed_party(message)
                taken = party is not None and self.converse is not None and self.converse(message)
            except Exception:
                self.state.set("offset", offset)
                raise
            if taken:
                self.state.set("offset", offset)
                handled += 1
                continue
            self.state.set("offset", offset)
            text, sender, chat = message.get("text"), message.get("from") or {}, message.get("chat") or {}
            if party is None or not text:  # a file, a voice message: only the user's conversation takes one
                continue
            # the numeric user id is the sender as Telegram authenticates it (a @handle can change hands)
            self.deliver(InboundMessage("telegram", party, text, external_id=str(message.get("message_id")),
                                        thread_key=str(chat.get("id")),
                                        sender_id=f"telegram:{sender['id']}" if sender.get("id") else None))
            handled += 1
        return handled

    def _allowed_party(self, message: dict[str, Any]) -> str | None:
        """Who wrote the message (their @handle, else the chat id), recording a private chat's handle; None when
        the message is from no one the allowlist lets in, or is not a message a channel reads."""
        text, sender, chat = message.get("text"), message.get("from") or {}, message.get("chat") or {}
        if not chat or not (text or self.converse):
            return None
        handle = normalize_party("@" + sender["username"]) if sender.get("username") else None
        party = handle or str(chat.get("id"))
        if handle and chat.get("type") == "private" and str(chat.get("id")) == str(sender.get("id")):
            self.state.set(f"chat:{handle}", str(chat["id"]))  # a group the handle wrote in stands for no one
        if self.allowed and party not in self.allowed and str(sender.get("id")) not in self.allowed:
            log.info("telegram message from %s ignored: not on channels.telegram.allowlist", party)
            return None
        return party

    def _run(self) -> None:
        standby_wait = min(30.0, self.claims.lease.total_seconds() / 3)
        while not self._stop.is_set():
            try:
                if not self.take_turn():
                    self._stop.wait(standby_wait)
                    continue
                self.poll_once()
                self.recovered()
            except Exception as exc:  # noqa: BLE001 - keep polling; say why it failed
                delay = self.failed(exc)
                log.warning("telegram polling failed: %s (retrying in %.1f s)", exc, delay)
                self._stop.wait(delay)

    def start(self) -> "TelegramPoller":
        self._thread = threading.Thread(target=self._run, name="telegram-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.cfg.poll_timeout_s + 15)
        try:
            self.claims.release(POLL_CLAIM)  # another worker takes over without waiting for the lease
        except Exception as exc:  # noqa: BLE001 - the lease ends on its own
            log.warning("could not release the Telegram polling claim: %s", exc)

