"""The side-effect vocabulary, in a module of its own (no imports) so the configuration can check effect names
without loading the tools."""

from __future__ import annotations

# The effect vocabulary. Anything else must be declared as new (JARB) or configured (MCP).
KNOWN_SIDE_EFFECTS: dict[str, str] = {
    "fs_write": "writes, moves or deletes files",
    "email_draft": "creates or edits an email draft",
    "email_send": "sends an email",
    "calendar_write": "creates, changes or deletes calendar events",
    "ui_automation": "controls applications or the screen",
    "task_write": "creates or changes tasks in a task manager",
    "reminder_write": "creates or cancels reminders",
    "message_send": "sends a message to a person (Telegram, SMS, ...)",
    "jorb_create": "starts a long-running task",
    "network": "talks to hosts on the network",
    "phone_automation": "controls the Android phone",
    "note_write": "creates or changes notes (Apple Notes, ...)",
    "tool_create": "writes and registers a new tool",
    "process_start": "starts a program on this machine, outside the sandbox",
    "memory_write": "stores, changes or forgets what Jarvis remembers about the user",
}
