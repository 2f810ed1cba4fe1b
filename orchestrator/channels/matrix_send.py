"""Matrix as a channel a jorb or the planner sends through (`jarvis.messages.send('matrix', '@bob:server', ...)`):
each person is written to in a direct room of the bot and that person, made on the first message (invite-only,
without encryption, the person invited) and used again after.

The room belongs to that one person: its record (`party_of:<room>` in `channel_state`) is what the sync loop
(channels/matrix.MatrixPoller) reads to hand a message on to the jorbs; only a text message whose sender, as the
homeserver authenticated it, is the room's person is handed on (with the room as its conversation, so the reply
finds the jorb that wrote). Anyone else in that room (someone the person invited) is never handed on, so their
words never wake the jorb nor reach the switchboard's model.
"""

from __future__ import annotations

import re

import nio

from orchestrator.core.config import Settings
from .base import ChannelError, Sent
from .matrix import HOW_TO, MatrixAPI, party_of
from .models import ChannelState
from .ratelimit import bucket

USER_ID = re.compile(r"@[a-z0-9._=/+-]+:[A-Za-z0-9.:\[\]-]+")  # a Matrix user id (the spec's localpart grammar)


class MatrixChannel:
    name = "matrix"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.state = ChannelState(settings, "matrix")
        if not settings.channels.matrix.enabled:
            raise ChannelError(HOW_TO)

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent:
        party = to.strip()
        if not USER_ID.fullmatch(party):
            raise ChannelError(f"{to!r} is not a Matrix user id: write to @name:server")
        if party == self.settings.channels.matrix.user_id:
            raise ChannelError("that is Jarvis's own Matrix account")
        if not bucket("matrix", self.settings.channels.send_per_minute).acquire(timeout=120):
            raise ChannelError("Matrix sending is rate limited (channels.send_per_minute); try again later")
        api = MatrixAPI(self.settings)
        try:
            room = self._room(api, party, thread_key)
            event_id = api.send(room, {"msgtype": "m.text", "body": text})
        finally:
            api.close()
        return Sent(channel=self.name, to=party, external_id=event_id, thread_key=room)

    def _room(self, api: MatrixAPI, party: str, thread_key: str | None) -> str:
        """The person's direct room: the conversation's, the one made for them before while they are still in it
        (joined, or invited), else a new one."""
        for room in (thread_key, self.state.get(f"dm:{party}")):
            if room and party_of(self.state, room) == party and self._in_room(api, room, party):
                return room
        made = api.call("room_create", is_direct=True, preset=nio.RoomPreset.private_chat, invite=[party])
        room = str(made.room_id)
        self.state.set(f"party_of:{room}", party)
        self.state.set(f"dm:{party}", room)
        return room

    @staticmethod
    def _in_room(api: MatrixAPI, room: str, party: str) -> bool:
        answer = api.run(api.client.room_get_state_event(room, "m.room.member", party))
        return not isinstance(answer, nio.ErrorResponse) and answer.content.get("membership") in ("join", "invite")
