"""What the web UI does to a jorb, in the background: every decision names the interrupt it answers, so a
click on a question that has meanwhile moved on can never answer the next one, and a jorb that is still working
takes no decision until it parks again (the UI polls it).

The CLI keeps using JorbService's blocking methods (approve, reject, ...); both end in `JorbService.run`.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any, Literal

from langgraph.types import Command

from orchestrator.tools.answers import AnswerRefused, check_decision, resume_value, step_value, wake_value
from .schema import OPEN_STATUSES, parse_step
from .service import JorbError, JorbService, JorbView

log = logging.getLogger(__name__)


class JorbBusy(JorbError):
    """The jorb is working; decide again once it waits."""


class JorbMovedOn(JorbError):
    """The question answered is no longer pending."""


class JorbActions:
    def __init__(self, service: JorbService):
        self.svc = service
        self._cancelling: set[str] = set()  # cancelled while a step ran: stopped when it parks (see _after)

    # -- state ---------------------------------------------------------------------------------------
    def working(self, jorb_id: str) -> bool:
        return self.svc.busy(jorb_id)

    def _parked(self, jorb_id: str) -> JorbView:
        view = self.svc.view(jorb_id)
        if self.working(view.row.id):
            raise JorbBusy(f"jorb {view.row.id} is working; wait until it asks again")
        return view

    def _item(self, view: JorbView, interrupt_id: str, types: tuple[str, ...]) -> dict[str, Any]:
        item = next((p for p in view.pending if p["interrupt_id"] == interrupt_id), None)
        if item is None:
            raise JorbMovedOn(f"jorb {view.row.id} no longer waits for that (it was answered, or it moved on); "
                              "reload to see where it stands")
        if item.get("type") not in types:
            raise JorbError(f"jorb {view.row.id} waits for a {item.get('type')}, which cannot be answered that way")
        return item

    def _go(self, jorb_id: str, graph_input: Any) -> Future:
        future = self.svc.submit(jorb_id, graph_input)
        future.add_done_callback(lambda _f: self._after(jorb_id))
        return future

    def _after(self, jorb_id: str) -> None:
        """Once a run parks: a reply that came in while it worked wakes it; a cancel that raced it lands."""
        try:
            if self.working(jorb_id):
                return
            with self.svc.following_up(jorb_id):
                view = self.svc.view(jorb_id)
                if not view.pending:
                    self._cancelling.discard(jorb_id)
                    return
                if jorb_id in self._cancelling or view.row.status == "cancelled":
                    # A node that parks (wait, hold) sets its own status: the cancel is applied again here.
                    self.svc.store.update(jorb_id, status="cancelled")
                    self._go(jorb_id, Command(resume={p["interrupt_id"]: resume_value(p, "cancel") for p in view.pending}))
                elif self.svc.store.has_pending(jorb_id):
                    waiting = [p for p in view.pending if p.get("type") == "await_reply"]
                    if waiting:
                        self._go(jorb_id, Command(resume={waiting[0]["interrupt_id"]: wake_value()}))
        except Exception:  # noqa: BLE001 - a follow-up must never break the worker; the jorb row shows the state
            log.exception("follow-up of jorb %s failed", jorb_id)

    # -- decisions -------------------------------------------------------------------------------------
    def decide(self, jorb_id: str, interrupt_id: str, action: Literal["approve", "reject"],
               note: str | None = None) -> JorbView:
        """Approve or reject what a paused jorb asks (its own pause, a mission's question, or one confirmation)."""
        view = self._parked(jorb_id)
        item = self._item(view, interrupt_id, ("jorb_pause", "confirmation"))
        value = resume_value(item, "approve" if action == "approve" else "deny", note=note)
        self._go(view.row.id, Command(resume={interrupt_id: value}))
        return view

    def resume(self, jorb_id: str, decisions: dict[str, dict[str, Any]]) -> JorbView:
        """Answers from the confirmation dialog: {interrupt_id: {"decision": approve|edit|deny|skip, ...}}."""
        view = self._parked(jorb_id)
        asked = {p["interrupt_id"]: p for p in view.pending if p.get("type") == "confirmation"}
        if not asked:
            raise JorbMovedOn(f"jorb {view.row.id} is not waiting for a confirmation any more; reload")
        for interrupt_id, decision in decisions.items():
            item = asked.get(interrupt_id)
            if item is None:
                raise JorbMovedOn(f"the confirmation {interrupt_id} is no longer pending; reload")
            try:
                check_decision(item, decision)
            except AnswerRefused as exc:
                raise JorbError(str(exc)) from None
        self._go(view.row.id, Command(resume=decisions))
        return view

    def answer_step(self, jorb_id: str, interrupt_id: str, step: dict[str, Any] | str) -> JorbView:
        """The human policy: the user's step JSON, checked before the jorb sees it."""
        view = self._parked(jorb_id)
        self._item(view, interrupt_id, ("human_step",))
        import json

        try:
            parse_step(step if isinstance(step, str) else json.dumps(step))
        except ValueError as exc:
            raise JorbError(f"that step cannot be used: {exc}") from None
        self._go(view.row.id, Command(resume={interrupt_id: step_value(step)}))
        return view

    def reply(self, jorb_id: str, text: str, *, party: str | None = None, channel: str = "local",
              is_user: bool = False, reasoning: str = "written in the Jarvis UI") -> JorbView:
        """A message as the counterpart (or as the user, an intervention). It waits in the jorb's queue until the
        jorb next waits for a reply; a jorb waiting right now is woken."""
        if not text.strip():
            raise JorbError("the message is empty")
        view = self.svc.view(jorb_id)
        row = view.row
        if row.status not in OPEN_STATUSES:
            raise JorbError(f"jorb {row.id} is {row.status}; it takes no more messages")
        waiting_on = row.waiting_party if row.waiting_party != "user" else None  # "user": a human-policy step
        sender = "user" if is_user else (party or waiting_on or (row.contacts[0] if row.contacts else "user"))
        self.svc.store.log_message(direction="in", channel=channel, party=sender, text=text, status="pending",
                                   jorb_id=row.id, is_user=is_user, reasoning=reasoning)
        waiting = [p for p in view.pending if p.get("type") == "await_reply"]
        if waiting and not self.working(row.id):
            self._go(row.id, Command(resume={waiting[0]["interrupt_id"]: wake_value()}))
        return view

    def retry(self, jorb_id: str) -> JorbView:
        """Run a failed jorb's interrupted step again, in the background."""
        if self.working(jorb_id):
            raise JorbBusy(f"jorb {jorb_id} is working already")
        row = self.svc.retry_input(jorb_id)
        self._go(row.id, None)
        return self.svc.view(row.id)

    def cancel(self, jorb_id: str) -> JorbView:
        view = self.svc.view(jorb_id)
        if view.row.status not in OPEN_STATUSES:
            raise JorbError(f"jorb {view.row.id} is already {view.row.status}")
        self.svc.store.update(view.row.id, status="cancelled")
        # A jorb that is working sees the status at its next step, or is stopped by _after when it parks.
        if self.working(view.row.id):
            self._cancelling.add(view.row.id)
            running = self.svc.queued(view.row.id)  # started elsewhere (create, an inbound message): follow it too
            if running is not None:
                running.add_done_callback(lambda _f: self._after(view.row.id))
        elif view.pending:
            self._go(view.row.id, Command(resume={p["interrupt_id"]: resume_value(p, "cancel") for p in view.pending}))
        return view
