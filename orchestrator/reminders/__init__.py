"""Reminders: a scheduler that fires into agents (seed 001's STDIO JSON-RPC), webhooks, jorbs and the chat.

    from orchestrator.reminders import Scheduler, ReminderStore, register_jorb_waker

See scheduler.py for the loop, agents.py for the agent contract, targets.py for the target interface.
"""

from .models import CANCELLED, FAILED, MISSED, PENDING, SENT, SKIPPED, STATUSES, Reminder, ReminderRow
from .scheduler import Scheduler, TickReport, start_scheduler
from .spec import ReminderInputError, ReminderRequest
from .store import ReminderNotFound, ReminderStateError, ReminderStore
from .targets import (
    DeliveryDeferred, DeliveryError, JorbWaker, ReminderEvent, ReminderTarget, jorb_waker, register_jorb_waker,
)

__all__ = [
    "CANCELLED", "FAILED", "MISSED", "PENDING", "SENT", "SKIPPED", "STATUSES", "DeliveryDeferred", "DeliveryError",
    "JorbWaker", "Reminder", "ReminderEvent", "ReminderInputError", "ReminderNotFound", "ReminderRequest",
    "ReminderRow", "ReminderStateError", "ReminderStore", "ReminderTarget", "Scheduler", "TickReport",
    "jorb_waker", "register_jorb_waker", "start_scheduler",
]
