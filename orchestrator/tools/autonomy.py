"""The autonomy policy: for one tool call, auto, confirm or deny, and why.

A call takes the strictest mode of its side effects (deny > confirm > auto); effects not configured take
`autonomy.default`. On top of that, a call is escalated from auto to confirm when:
  - the turn has already read untrusted content (a document must never make Jarvis act by itself);
  - the turn's side-effect budget is spent;
  - the tool asks for it (a newly generated tool that has not earned trust yet).
With argument provenance (tools/provenance.py) the first rule is judged per call for tools that name their deciding
arguments: `untrusted_args` empty lets the call keep its mode, non-empty makes it ask whatever the policy.
Some effects ask after untrusted content whatever the settings (ASK_AFTER_CONTENT: `memory_write`): neither
`escalate_after_untrusted: false` nor argument provenance judging the values clean lets them run by themselves,
since what they would keep is the content's say-so itself (a document's "remember that my bank account is X").
A `memory_write` also asks in a chat turn whose user message did not ask to remember or forget anything
(`memory_asked` False, judged by memory/asked.py): a weak model asked "who is my dentist?" must not keep a fact.
A scope (a jorb's approved overrides) may relax or tighten effects for its own calls only.
A browser step (tools/site_grants.py) on a site the user approved for the task (`site_approved`) runs its own
effects by themselves, the taint its pages bring ignored; the budget, a denied effect and a tool's own demand still
hold. A step that would run by itself while the task's browser shows a site the user has not approved
(`unapproved_sites`) asks: its result is that site's text.

This is the only place a call's mode is decided: the executor gathers the facts (effects, taint, provenance,
budget, site grants) and calls `decide` once per call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.core.config import AutonomyConfig, Mode

_RANK: dict[str, int] = {"auto": 0, "confirm": 1, "deny": 2}


def looser(mode: str, than: Mode) -> bool:
    """Whether `mode` lets more happen without the user than `than` does (an unknown mode never does)."""
    return mode in _RANK and _RANK[mode] < _RANK[than]


def strictest(modes: Iterable[Mode]) -> Mode:
    result: Mode = "auto"
    for m in modes:
        if _RANK[m] > _RANK[result]:
            result = m
    return result


@dataclass
class PolicyDecision:
    mode: Mode
    reasons: list[str] = field(default_factory=list)
    escalated: bool = False

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


# Effects that only the user's own config can make automatic: a task's scoped overrides (approved once, for a
# jorb) never do, since starting a program outside the sandbox is not something to grant in passing.
CONFIG_ONLY_AUTO = frozenset({"process_start"})

# Effects that always ask once the thread, jorb or mission has read untrusted content: no setting relaxes it. A
# memory write after outside content would keep what the content said as something Jarvis knows, across threads
# (memory/tools.py), and forgetting would let a document erase what the user told; only the user's yes may do it.
ASK_AFTER_CONTENT = frozenset({"memory_write"})

# Effects that run by themselves in a chat turn only when the user's message asked for them (memory/asked.py): a
# small model calls memory_remember on a plain question and would keep its own invention as the user's fact.
ASK_UNLESS_ASKED = frozenset({"memory_write"})


def mode_for_effect(effect: str, config: AutonomyConfig, overrides: Mapping[str, Mode] | None = None) -> Mode:
    configured = config.effects.get(effect, config.default)
    if overrides and effect in overrides:
        if effect in CONFIG_ONLY_AUTO and overrides[effect] == "auto":
            return configured
        return overrides[effect]
    return configured


def decide(
    side_effects: list[str],
    config: AutonomyConfig,
    *,
    overrides: Mapping[str, Mode] | None = None,
    untrusted_seen: bool = False,
    effects_this_turn: int = 0,
    tool_requires_confirmation: str | None = None,
    sends_out: bool = False,
    untrusted_args: list[str] | None = None,
    site_approved: bool = False,
    unapproved_sites: Sequence[str] = (),
    memory_asked: bool | None = None,
) -> PolicyDecision:
    """sends_out: the call can carry data off the machine (a fetch of a URL, a send): after untrusted content it
    is escalated like a side effect, whatever its hints, since reading a secret then fetching
    `https://evil/?q=SECRET` changes nothing here and still leaks.
    site_approved: a browser step on a site the user approved for this task; unapproved_sites: the sites the task's
    browser showed that the user has not approved, when this step would show one of them. memory_asked: whether the
    turn's user message asked to remember or forget something (None: no user message, a jorb's own step); False
    makes a memory write ask."""
    decision = _decide_effects(side_effects, config, overrides=overrides, untrusted_seen=untrusted_seen,
                               effects_this_turn=effects_this_turn, tool_requires_confirmation=tool_requires_confirmation,
                               sends_out=sends_out, untrusted_args=untrusted_args, site_approved=site_approved,
                               memory_asked=memory_asked)
    if decision.mode == "auto" and unapproved_sites:
        # a step with nothing to ask about by itself (a snapshot) on a site the task's browser showed and the user has
        # not approved: its result is that site's text, withheld until the user approves a step there
        return PolicyDecision("confirm", [f"this task's browser showed {', '.join(unapproved_sites)}, which you have "
                                          "not approved; what it shows reaches the model only once you approve a step "
                                          "there"], escalated=True)
    return decision


def _decide_effects(side_effects: list[str], config: AutonomyConfig, *, overrides: Mapping[str, Mode] | None,
                    untrusted_seen: bool, effects_this_turn: int, tool_requires_confirmation: str | None,
                    sends_out: bool, untrusted_args: list[str] | None, site_approved: bool,
                    memory_asked: bool | None) -> PolicyDecision:
    modes = {e: mode_for_effect(e, config, overrides) for e in side_effects}
    if site_approved and "deny" not in modes.values():
        # the site's own effects no longer ask, and its pages' taint does not count
        modes = {e: mode_for_effect(e, config, {**(overrides or {}), e: "auto"}) for e in side_effects}
        untrusted_seen, sends_out, untrusted_args = False, False, None
    escalates_as_effect = bool(side_effects) or (sends_out and config.escalate_after_untrusted and untrusted_seen)
    if not escalates_as_effect and not tool_requires_confirmation:
        return PolicyDecision("auto")
    mode = strictest(modes.values())
    reasons: list[str] = []
    if mode == "deny":
        denied = [e for e, m in modes.items() if m == "deny"]
        return PolicyDecision("deny", [f"the autonomy policy denies {', '.join(denied)}"])
    if mode == "confirm":
        confirmed = [e for e, m in modes.items() if m == "confirm"]
        reasons.append(f"the autonomy policy asks before {', '.join(confirmed)}")
    escalated = False
    if tool_requires_confirmation:
        if mode == "auto":
            escalated = True
        mode = "confirm"
        reasons.append(tool_requires_confirmation)
    unasked = sorted(e for e in side_effects if e in ASK_UNLESS_ASKED)
    if unasked and memory_asked is False:
        if mode == "auto":
            escalated = True
        mode = "confirm"
        reasons.append(f"your message did not ask to remember or forget anything, so {', '.join(unasked)} asks first: "
                       "the model chose to keep this by itself")
    always = sorted(e for e in side_effects if e in ASK_AFTER_CONTENT)
    if always and untrusted_seen:
        if mode == "auto":
            escalated = True
        mode = "confirm"
        reasons.append(f"escalated: this thread has read content from outside the conversation, and {', '.join(always)} "
                       "after such content always asks (whatever the autonomy settings): what it keeps may be the "
                       "content's words, not yours")
    elif escalates_as_effect and untrusted_args:
        if mode == "auto":
            escalated = True
        mode = "confirm"
        reasons.append("escalated: what this call acts on came from content outside the conversation, not from you: "
                       + ", ".join(untrusted_args))
    elif escalates_as_effect and config.escalate_after_untrusted and untrusted_seen and untrusted_args is None:
        if mode == "auto":
            escalated = True
        mode = "confirm"
        reasons.append(
            "escalated: this thread has read content from outside the conversation (a file, email, web page or "
            "document), which could be trying to make Jarvis act"
            + ("" if side_effects else "; this call can send data off this machine")
        )
    if side_effects and effects_this_turn >= config.max_side_effects_per_turn:
        if mode == "auto":
            escalated = True
        mode = "confirm"
        reasons.append(
            f"this turn has already run {effects_this_turn} side effects "
            f"(autonomy.max_side_effects_per_turn = {config.max_side_effects_per_turn})"
        )
    return PolicyDecision(mode, reasons, escalated)
