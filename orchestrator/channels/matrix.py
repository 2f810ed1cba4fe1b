"""Matrix through matrix-nio: a bot account on any homeserver (`channels.matrix`), its client-server API calls made
from Jarvis's threads, and a sync loop that hands each invite and each room event to the user's conversation
(conversations/matrix.py).

nio is asyncio; Jarvis's channels are threads. MatrixAPI runs one AsyncClient on an event loop of its own thread,
and every call is made from any thread and waited for (`call`), an error response raised as ChannelError.

Once: the sync token (`since`) is kept in the database after each batch is handed on, so a restart goes on where it
stopped; a batch handed on twice (a crash before the token was kept) is made harmless by the conversation's
processed-event record. The very first sync (no token yet) takes the invites waiting for the bot but not the rooms'
history: the bot answers what is written from then on. Invites sent while Jarvis was stopped come in the next sync
(pending invites are part of every sync that has not seen them).

End-to-end encryption is not supported: nio needs libolm (python-olm, a C library no longer maintained) for it. An
encrypted room is refused with why (conversations/matrix.py).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiohttp
import nio

from orchestrator.core import secrets
from orchestrator.core.config import Settings
from orchestrator.storage.claims import Claims
from .base import ChannelError, FileTooLarge
from .inbound import InboundMessage
from .models import ChannelState
from .retrying import Outage

log = logging.getLogger(__name__)

HOW_TO = ("Matrix is not configured: make a bot account on your homeserver, run `jarvis secrets set matrix_token` "
          "(its access token), and set channels.matrix: {enabled: true, homeserver: https://..., user_id: "
          "'@jarvis:example.org', access_token: {secret: matrix_token}} in the config; then invite the bot to a room "
          "of your own")
SYNC_CLAIM = "channel:matrix:sync"
# A sync gives at most this many of a room's new events (Synapse's default is 10: more written while Jarvis was
# stopped would be skipped); past it the timeline is "limited" and the older ones are said to be skipped.
SYNC_FILTER = {"room": {"timeline": {"limit": 100}}}
MAX_TIMEOUTS = 2
MEDIA_ID = re.compile(r"[A-Za-z0-9_-]+")  # a media id as the spec allows it: nothing that walks a URL path


class MatrixAPI:
    """The bot's logged-in nio client. `call(name, *args)`: AsyncClient's method `name`, its answer (an error
    answer raised as ChannelError)."""

    def __init__(self, settings: Settings, timeout: float = 60.0):
        cfg = settings.channels.matrix
        if not cfg.enabled:
            raise ChannelError(HOW_TO)
        self.timeout = timeout
        self.user_id = cfg.user_id
        self.state = ChannelState(settings, "matrix")
        try:
            token = secrets.resolve(cfg.access_token, what="channels.matrix.access_token") if cfg.access_token else None
            password = None if token else secrets.resolve(cfg.password, what="channels.matrix.password")
        except secrets.SecretError as exc:
            raise ChannelError(f"{exc}. {HOW_TO}") from None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="matrix-client", daemon=True)
        self._thread.start()
        self._password = password
        try:
            self.client = self.run(self._client(cfg.homeserver, token))
        except BaseException:
            self.close()
            raise
        try:
            self.login()
        except Exception as exc:  # noqa: BLE001 - a homeserver down at start: the sync loop logs in when it is back
            log.warning("Matrix login failed: %s (tried again with each sync)", exc)

    async def _client(self, homeserver: str, token: str | None) -> nio.AsyncClient:
        # the device a password login made before is used again: one device for the bot, not one a start
        # nio tries a connection that fails again without end (max_timeouts None): a homeserver that is down
        # would leave the sync hanging, unseen; after a second refusal it is raised, and the sync loop backs off
        config = nio.AsyncClientConfig(encryption_enabled=False, store_sync_tokens=False, max_timeouts=MAX_TIMEOUTS)
        client = nio.AsyncClient(homeserver, self.user_id, device_id=self.state.get("device_id") or "", config=config)
        if token:
            client.access_token = token
        return client

    def login(self) -> None:
        """With a password: logs in unless logged in already (raises why not; the sync loop retries it with its
        backoff). With an access token: nothing to do."""
        if self.client.access_token or self._password is None:
            return
        answer = self.run(self.client.login(password=self._password, device_name="Jarvis"))
        if isinstance(answer, nio.LoginError):
            raise ChannelError(f"the homeserver refused the bot's login ({answer.message}): check "
                               "channels.matrix.user_id and its password")
        self.state.set("device_id", answer.device_id)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout or self.timeout)

    def call(self, name: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        answer = self.run(getattr(self.client, name)(*args, **kwargs), timeout)
        if isinstance(answer, nio.ErrorResponse):
            if answer.status_code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
                raise ChannelError(f"the homeserver refused the bot's access token ({answer.message}): {HOW_TO}")
            raise ChannelError(f"Matrix {name} failed: {answer.message} ({answer.status_code})")
        return answer

    def soon(self, name: str, *args: Any, **kwargs: Any) -> None:
        """AsyncClient's method `name` called without waiting for its answer (a typing notification: the answer's
        first words must not wait for it); a failure is logged."""
        def done(future: Any) -> None:
            failed = future.exception() or (future.result() if isinstance(future.result(), nio.ErrorResponse) else None)
            if failed is not None:
                log.info("Matrix %s failed: %s", name, getattr(failed, "message", failed))

        asyncio.run_coroutine_threadsafe(getattr(self.client, name)(*args, **kwargs), self.loop).add_done_callback(done)

    def send(self, room: str, content: dict[str, Any], kind: str = "m.room.message") -> str:
        """One event into the room; its event id."""
        return str(self.call("room_send", room, kind, content).event_id)

    def members(self, room: str) -> set[str]:
        """Who has joined the room, as the homeserver says now."""
        return {m.user_id for m in self.call("joined_members", room).members}

    def event(self, room: str, event_id: str) -> dict[str, Any]:
        """An event of the room as the homeserver has it (its sender is the one the homeserver authenticated)."""
        return dict(self.call("room_get_event", room, event_id).event.source)

    def download(self, mxc: str, limit: int, sink: Callable[[bytes], None]) -> int:
        """A file of the homeserver (its mxc:// URI) into `sink` chunk by chunk; FileTooLarge as soon as what
        streams passes `limit` bytes (whatever the event or the response said of its length). Returns the bytes
        read.

        nio makes the request (Api.download: the authenticated media API; AsyncClient.send on its session, with
        the bot's token), but the body is read here: AsyncClient.download reads all of it, in memory or on disk,
        before it returns, so a file that streams far more than its event said would be fetched whole."""
        url = urlsplit(mxc)
        media = url.path.lstrip("/")
        if url.scheme != "mxc" or not url.netloc or not MEDIA_ID.fullmatch(media):
            raise ChannelError("the event names no file of a homeserver (an mxc:// URI)")
        return int(self.run(self._download(url.netloc, media, limit, sink)))

    async def _download(self, server: str, media: str, limit: int, sink: Callable[[bytes], None]) -> int:
        _, path = nio.Api.download(server, media)
        url = urlsplit(path)  # the token goes in a header, not in the URL (nio's own requests do the same)
        path = urlunsplit(url._replace(query=urlencode([q for q in parse_qsl(url.query) if q[0] != "access_token"])))
        try:
            resp = await self.client.send("GET", path, headers={"Authorization": f"Bearer {self.client.access_token}"})
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelError(f"the file's download from the homeserver failed: {type(exc).__name__}") from None
        size = 0
        try:
            if resp.status != 200:
                raise ChannelError(f"the homeserver's file download answered HTTP {resp.status}")
            async for chunk in resp.content.iter_chunked(64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise FileTooLarge(size, limit)
                sink(chunk)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelError(f"the file's download from the homeserver failed: {type(exc).__name__}") from None
        finally:
            resp.close()  # a file cut short is not read to its end
        return size

    def encrypted(self, room: str) -> bool:
        answer = self.run(self.client.room_get_state_event(room, "m.room.encryption"))
        return not isinstance(answer, nio.ErrorResponse)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None and self.loop.is_running():
            try:
                self.run(client.close(), timeout=10)
            except Exception as exc:  # noqa: BLE001 - the process ends its sockets anyway
                log.info("closing the Matrix client: %s", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def party_of(state: ChannelState, room: str) -> str | None:
    """The person a direct room was made for (channels/matrix_send.py), None for any other room."""
    return state.get(f"party_of:{room}")


class Conversation(Protocol):
    """What the sync loop hands events to (conversations/matrix.MatrixChat)."""

    def invited(self, room: str, inviter: str | None) -> None: ...

    def take(self, room: str, event: dict[str, Any]) -> bool: ...


class MatrixPoller(Outage):
    """The sync loop in a background thread: each invite to the bot and each event of a room it joined go to
    `chat` (events the bot sent itself excepted). One worker of several syncs (a claim), as for Telegram. A
    homeserver that is down or refuses is tried again with the channels' backoff (channels/retrying.py), and shown
    in /api/health and `jarvis doctor` (`status_note`)."""

    tries = "sync"

    def __init__(self, settings: Settings, chat: Conversation, api: MatrixAPI,
                 deliver: Callable[[InboundMessage], Any] | None = None):
        """`deliver`: takes a message the user's conversation did not (the jorbs' inbound), only a reply of the
        person a direct room was made for (`_hand_on`)."""
        self.settings = settings
        self.deliver = deliver
        self.cfg = settings.channels.matrix
        self.chat = chat
        self.api = api
        self.state = ChannelState(settings, "matrix")
        self.claims = Claims(settings)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        Outage.__init__(self)

    def status_note(self) -> str | None:
        """What the services report says of the sync loop: None when it syncs, why not otherwise."""
        return self.down_note() if self.last_error else None

    def sync_once(self, timeout_s: float | None = None) -> int:
        """One sync from the kept token; returns how many events and invites were handed on."""
        self.api.login()  # a password login the homeserver did not take yet (down at start)
        since = self.state.get("since")
        wait = self.cfg.sync_timeout_s if timeout_s is None else timeout_s
        answer = self._sync(since, wait)
        handed = 0
        for room, info in answer.rooms.invite.items():
            inviter = next((e.sender for e in info.invite_state
                            if isinstance(e, nio.InviteMemberEvent) and e.state_key == self.api.user_id
                            and e.membership == "invite"), None)
            self.chat.invited(room, inviter)
            handed += 1
        if since is not None:  # the first sync's timelines are the rooms' history: not answered
            for room, info in answer.rooms.join.items():
                if info.timeline.limited:
                    log.warning("matrix room %s: more events came than one sync gives (%d): the older ones are not "
                                "read", room, SYNC_FILTER["room"]["timeline"]["limit"])
                for event in info.timeline.events:
                    source = getattr(event, "source", None)
                    if not isinstance(source, dict) or source.get("sender") == self.api.user_id:
                        continue
                    if not self.chat.take(room, source) and self.deliver is not None:
                        self._hand_on(room, source)
                    handed += 1
        self.state.set("since", answer.next_batch)
        return handed

    def _hand_on(self, room: str, event: dict[str, Any]) -> None:
        """A text message in a direct room a jorb wrote in, from the person it was written to, to `deliver`
        (once: its event id claimed first, so a replayed sync hands nothing on twice). Anyone else's, in that
        room or any other, is not handed on: it wakes no jorb and reaches no model."""
        content = event.get("content") or {}
        sender, text = event.get("sender"), content.get("body")
        if (event.get("type") != "m.room.message" or content.get("msgtype") not in ("m.text", "m.notice", "m.emote")
                or not isinstance(text, str) or (content.get("m.relates_to") or {}).get("rel_type") == "m.replace"):
            return
        party = party_of(self.state, room)
        if party is None or sender != party:
            log.info("matrix message from %s in %s not handed on: only the person a direct room was made for is "
                     "(%s)", sender, room, party or "no such room")
            return
        if not self.state.claim(f"delivered:{room}:{event.get('event_id')}"):
            return
        assert self.deliver is not None
        self.deliver(InboundMessage("matrix", party, text, external_id=str(event.get("event_id")), thread_key=room,
                                    sender_id=f"matrix:{party}"))

    def _sync(self, since: str | None, wait: float) -> Any:
        return self.api.run(self._sync_call(since, wait), timeout=wait + 60)

    async def _sync_call(self, since: str | None, wait: float) -> Any:
        answer = await self.api.client.sync(timeout=int((0 if since is None else wait) * 1000), since=since,
                                            sync_filter=SYNC_FILTER)
        if isinstance(answer, nio.ErrorResponse):
            raise ChannelError(f"Matrix sync failed: {answer.message} ({answer.status_code})")
        return answer

    def _run(self) -> None:
        standby_wait = min(30.0, self.claims.lease.total_seconds() / 3)
        while not self._stop.is_set():
            try:
                if not self.claims.acquire(SYNC_CLAIM):
                    self._stop.wait(standby_wait)
                    continue
                self.sync_once()
                self.recovered()
            except Exception as exc:  # noqa: BLE001 - keep syncing; say why it failed
                delay = self.failed(exc)
                log.warning("matrix sync failed: %s (retrying in %.1f s)", exc, delay)
                self._stop.wait(delay)

    def start(self) -> "MatrixPoller":
        self._thread = threading.Thread(target=self._run, name="matrix-sync", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.cfg.sync_timeout_s + 15)
        try:
            self.claims.release(SYNC_CLAIM)
        except Exception as exc:  # noqa: BLE001 - the lease ends on its own
            log.warning("could not release the Matrix sync claim: %s", exc)
        self.api.close()
