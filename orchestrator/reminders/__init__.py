"""Reminders: a scheduler that fires into agents (seed 001's STDIO JSON-RPC), webhooks, jorbs and the chat.

    from orchestrator.reminders import ReminderRequest, ReminderStore
    from orchestrator.reminders.scheduler import Scheduler     # built by App.scheduler(), with the chat and jorbs

See scheduler.py for the loop, agents.py for the agent contract, targets.py for the target interface. The package
exports only the reminders themselves (models, spec, store), which the planner's tools use; the scheduler and its
targets are imported from their modules, so a user of the reminder tools does not load the scheduler.
"""

from .models import CANCELLED, FAILED, MISSED, PENDING, SENT, SKIPPED, STATUSES, Reminder, ReminderRow
from .spec import ReminderInputError, ReminderRequest
from .store import ReminderNotFound, ReminderStateError, ReminderStore

__all__ = [
    "CANCELLED", "FAILED", "MISSED", "PENDING", "SENT", "SKIPPED", "STATUSES", "Reminder", "ReminderInputError",
    "ReminderNotFound", "ReminderRequest", "ReminderRow", "ReminderStateError", "ReminderStore",
]
