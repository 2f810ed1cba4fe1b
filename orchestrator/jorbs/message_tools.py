"""The planner's and jorb scripts' way to talk to people: `messages_send(channel, to, text)`."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from integrations.base import ToolError, make_tool

from orchestrator.core.config import Settings
from orchestrator.core import ids
from orchestrator.jorbs.store import JorbStore
from orchestrator.channels.base import ChannelError
from orchestrator.channels.registry import get_channel, known_channels

EMAIL_CHANNELS = {"email"}


class SendArgs(BaseModel):
    channel: str = Field(description="how to send: 'local' (shown in Jarvis), 'email', 'telegram', 'matrix' (as configured)")
    to: str = Field(description="the recipient: an email address, a @handle, a Matrix @name:server, a phone number or a name")
    text: str = Field(description="the message")


def channel_name(value: Any) -> str:
    """The channel a call will use, as the tool reads it: judged and sent from the same normalised name."""
    return str(value or "").strip().lower()


def _effects_for(args: dict[str, Any]) -> list[str]:
    """Judged on the channel the message will really go through ("email " is email); a channel not known here
    gets the strictest effects, since what it does cannot be told."""
    name = channel_name(args.get("channel"))
    if name in EMAIL_CHANNELS:
        return ["email_send"]
    if name in known_channels():
        return ["message_send"]
    return ["email_send", "message_send"]


def jorb_of_run(config: RunnableConfig | None) -> str | None:
    thread = str(((config or {}).get("configurable") or {}).get("thread_id") or "")
    return ids.conversation_of(thread).jorb_id


def build_message_tools(settings: Settings) -> list[BaseTool]:
    store = JorbStore(settings)

    def messages_send(channel: str, to: str, text: str, config: RunnableConfig = None) -> dict[str, Any]:
        """Send a message to a person over a channel. Within a jorb, set await_reply to wait for their answer."""
        name = channel_name(channel)
        jorb_id = jorb_of_run(config)
        thread = store.last_thread(jorb_id, name, to) if jorb_id else None  # stay in the conversation
        try:
            ch = get_channel(settings, name)
            sent = ch.send(to, text, thread_key=thread)
        except ChannelError as exc:
            raise ToolError(f"{exc} (channels: {', '.join(known_channels())})") from None
        row = store.log_message(direction="out", channel=name, party=sent.to, text=text, status="sent", jorb_id=jorb_id,
                                external_id=sent.external_id, thread_key=sent.thread_key)
        if jorb_id:
            store.add_contact(jorb_id, sent.to)
        return {"message_id": row.id, "channel": name, "to": row.party, "status": "sent"}

    return [make_tool(messages_send, args_schema=SendArgs, side_effects=["message_send"], side_effects_for=_effects_for,
                      summarize=lambda a: f"Send a {a.get('channel')} message to {a.get('to')}: \"{str(a.get('text'))[:160]}\"",
                      trusted_output="the id, channel and recipient of the message this call sent",
                      deciding_args=("channel", "to"))]
