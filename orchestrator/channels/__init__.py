"""Channels: how jorbs talk to people (local, email, Telegram) and how replies come back.

Every channel sends through the ToolExecutor (the `messages_send` tool, side effect `message_send`, or
`email_send` for email) and logs each message in the channel_messages table; inbound messages are routed to
the jorb waiting on them by the switchboard, or kept in the inbox.
"""
