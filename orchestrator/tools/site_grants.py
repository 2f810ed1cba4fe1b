"""Task-scoped approvals of a browser: "control the app at http://127.0.0.1:8080 for this task".

Driving a web app takes dozens of clicks and keystrokes; asking before each one trains the user to approve without
reading. So the first acting step on a site asks (effect `ui_automation`, `confirm` by default), and approving it
grants that *origin* (scheme, host, port) to that *task* (a chat turn of one thread): later steps of the same task
on the same origin run without asking. Anything else still asks:

- a step on another origin (a navigation to another site, or a page that moved there: the origin a step acts on
  is the one of the URL it navigates to, else the page the browser showed after the last step that named one);
- a step whose origin is unknown or not http(s) (a blank page, file:, data:, javascript:), or that goes where no
  argument says (back in the history); a step that may have switched tabs and whose result does not name the
  page leaves it unknown;
- every step of a task whose browser showed a site it has not approved after a step judged on another (a link, a
  redirect, a tab, a page that moved by itself), until the user approves a step on that site: its text reached
  the model without the user's yes, and a step on an approved site could carry it there (`?d=...`). The result of
  the step that landed there, and of any later step there, is withheld from the model (`Seen.withheld`: the
  executor gives it the note instead), and a step there with no effect of its own (a snapshot) asks, so that
  site's text reaches the model only after the user approved a step there. A result whose page cannot be told
  (the page wrote header lines of its own) is withheld the same way, as UNKNOWN_SITE.
- a step with any effect besides the granted ones (`sends` is for the whole browser server's `ui_automation`);
- another task, even of the same thread (a new turn asks again), a jorb, or after `ttl_s`;
- a call the policy denies, or past the turn's side-effect budget (the grant is re-judged by the policy with
  the granted effects set to auto and nothing else changed).

Pages are untrusted content: reading one taints the thread as usual, so effects of *other* tools ask afterwards
(an injected "email this file" gets a confirmation). Only the approved site's own steps are spared the taint
escalation, since they act on that very content by design. The grants live in memory only: a restart asks again.
Each task has its own browser (mcp/browser_pool.py), so the page a step acts on is the one *its task's* browser
shows. When a task ends, each browser it used is closed, told which origins the task approved (the only sites
whose logins it may keep).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 3600.0
GRANTED_EFFECTS = frozenset({"ui_automation"})


BLANK_PAGE = "about:blank"
UNKNOWN_SITE = "a site Jarvis could not tell"  # a result whose page the page itself may have written
RESTARTED_NOTE = ("(Note from Jarvis: the browser closed since the last step and was started again: the page it "
                  "showed, its tabs and anything typed there are gone. Open the page again to go on.)")


@dataclass(frozen=True)
class Seen:
    """What becomes of a browser step's result: `note` is added for the model; when `withheld`, the note replaces
    the result (it showed a site the task has not approved: its text must not reach the model unasked)."""

    note: str | None = None
    withheld: bool = False


@dataclass(frozen=True)
class SiteScope:
    """ToolMeta `site_scope` of a browser's tools: which browser, how a call names its site, how a result
    tells the page the browser shows now, and how to close the browser."""

    browser: str  # the server's name: grants are per browser server, pages per browser server and task
    url_arg: str = "url"  # a call with this argument acts on that URL's origin (navigate, a new tab)
    page_url: Callable[[str], str | None] = lambda _text: None  # None: names no page; "": a page nobody can tell
    # the page a result names after text the page wrote (so maybe the page's own): believed on the judged site only
    claimed_page_url: Callable[[str], str | None] = lambda _text: None
    may_switch_tab: Callable[[Mapping[str, Any], str], bool] = lambda _args, _text: False  # (call's args, result)
    close: Callable[[str, str | None, set[str]], None] | None = None  # (thread id, task, origins it approved)
    effects: frozenset[str] = GRANTED_EFFECTS
    unknown_target: bool = False  # the tool goes where no argument says (back in the history): it always asks
    # a line of a result listing a tab, with the groups n, current, url (and the title between): see hide_tabs
    tab_line: re.Pattern[str] | None = None
    # (result, thread id, task, move) -> the result with the downloads it reports moved into the file root; the
    # executor says move only for a result it keeps while the task's browser showed no site the user has not
    # approved, so such a site puts no file there (its download may be reported by a later step's result)
    collect: Callable[[str, str, str | None, bool], str] | None = None


NO_SITE_SCHEMES = ("about:", "chrome-error:")  # the browser's own pages (a new tab, a failed load): no site's text


def site_of(url: str | None) -> str | None:
    """The site a page URL shows: its origin; None for no page or the browser's own (about:blank, an error page);
    UNKNOWN_SITE for one no approval can name (too long, `blob:`, `data:`, credentials in it): such a page may
    hold any site's text."""
    if not url or url.strip().lower().startswith(NO_SITE_SCHEMES):
        return None
    return origin_of(url) or UNKNOWN_SITE


def origin_of(url: Any) -> str | None:
    """scheme://host[:port] of an http(s) URL, lower-case, default ports left out; None for anything else (no
    approval can cover a file:, data: or javascript: URL, or a string that is not a URL)."""
    if not isinstance(url, str) or any(c in url for c in "\r\n\t\\") or len(url) > 4096:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host or parts.username is not None or parts.password is not None:
        return None
    if port is None or (scheme, port) in (("http", 80), ("https", 443)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


@dataclass
class _Task:
    origins: dict[str, set[str]] = field(default_factory=dict)  # browser -> granted origins
    browsers: dict[str, SiteScope] = field(default_factory=dict)  # the browsers this task used
    unapproved: set[tuple[str, str]] = field(default_factory=set)  # (browser, origin) shown to it, never approved
    touched: float = field(default_factory=time.monotonic)


class SiteGrants:
    """The grants and page origins of one executor (thread-safe). Keys: (thread_id, task)."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, str | None], _Task] = {}  # a jorb's task is None: it holds browsers, no grants
        # (browser, thread id, task) -> origin of the page the task's browser showed after its last call
        self._pages: dict[tuple[str, str, str | None], str | None] = {}

    def _live(self, key: tuple[str, str | None]) -> _Task | None:
        task = self._tasks.get(key)
        if task is not None and self.clock() - task.touched > self.ttl_s:
            self._tasks.pop(key, None)
            for page in [p for p in self._pages if p[1:] == key]:
                del self._pages[page]
            return None
        return task

    def target(self, scope: SiteScope, args: Mapping[str, Any], thread_id: str, task: str | None) -> str | None:
        """The origin a call acts on: the URL it navigates to, else the page its task's browser shows."""
        with self._lock:
            return self._judged_on(scope, args, self._pages.get((scope.browser, thread_id, task)))

    @staticmethod
    def _judged_on(scope: SiteScope, args: Mapping[str, Any], page: str | None) -> str | None:
        if scope.unknown_target:
            return None
        if scope.url_arg in args and args[scope.url_arg] not in (None, ""):
            return origin_of(args[scope.url_arg])
        return page

    def allows(self, scope: SiteScope, thread_id: str, task: str | None, origin: str | None,
               effects: list[str]) -> bool:
        if task is None or origin is None or not set(effects) <= scope.effects:
            return False
        with self._lock:
            found = self._live((thread_id, task))
            if found is None or origin not in found.origins.get(scope.browser, set()) or found.unapproved:
                return False
            found.touched = self.clock()
            return True

    def unapproved(self, scope: SiteScope, thread_id: str, task: str | None) -> list[str]:
        """The sites this task's browser showed that the user has not approved (each makes every step ask)."""
        with self._lock:
            found = self._live((thread_id, task))
            return sorted(origin for browser, origin in (found.unapproved if found else ()) if browser == scope.browser)

    def grant(self, scope: SiteScope, thread_id: str, task: str | None, origin: str | None) -> None:
        if task is None or origin is None:
            return
        with self._lock:
            found = self._live((thread_id, task)) or self._tasks.setdefault((thread_id, task), _Task())
            found.origins.setdefault(scope.browser, set()).add(origin)
            found.unapproved.discard((scope.browser, origin))
            # the user approved a step after a question naming the site that could not be told: it asked once
            found.unapproved.discard((scope.browser, UNKNOWN_SITE))
            found.touched = self.clock()

    def hide_tabs(self, scope: SiteScope, thread_id: str, task: str | None, text: str) -> str:
        """A result's tab lines (a tab list, "### Open tabs") keep, for a site the task has not approved, their
        number and site but not their title and address, which that site wrote: a page of the approved site opens
        another site in a tab the browser does not switch to, and its title came with every later result. A line
        the page wrote in that form is rewritten too, which hides nothing of the server's."""
        if scope.tab_line is None or task is None:
            return text
        with self._lock:
            found = self._live((thread_id, task))
            approved = set(found.origins.get(scope.browser, set())) if found else set()

        def line(m: re.Match[str]) -> str:
            site = site_of(m.group("url"))
            if site is None or site in approved:
                return m.group(0)
            shown = site if site != UNKNOWN_SITE else ""
            return (f"- {m.group('n')}:{m.group('current') or ''} [a tab of {site}, not approved for this task: its "
                    f"title is withheld]({shown})")

        return scope.tab_line.sub(line, text)

    def shows_unapproved(self, scope: SiteScope, thread_id: str, task: str | None, origin: str | None) -> bool:
        """Whether a step on `origin` (None: an unknown page) would show the model a site this task's browser
        showed and the user has not approved: such a step asks even when it has no effect (a snapshot), since
        its result is that site's text, which is withheld until then."""
        marks = set(self.unapproved(scope, thread_id, task))
        return (origin in marks) if origin is not None else bool(marks)

    def saw(self, scope: SiteScope, thread_id: str, task: str | None, result_text: str, ok: bool,
            args: Mapping[str, Any] | None = None) -> Seen:
        """After a call of the browser: the page it shows now, as its result says, and that this task uses the
        browser. A result that names no page leaves it as it was (typing into a field) unless the call may have
        switched tabs; a Page section after text the page wrote counts only on the site the step was judged on; a
        failed call makes the page unknown. Unknown, the next step asks.
        When the step led to a site the task has not approved, its result is withheld and the model told why
        (from then on every step asks, see the module's docstring). When the browser shows a blank page after a
        step that went nowhere while it showed a site, its Chromium died and the server started another
        (Playwright MCP does so on the next call when it has seen the old one go): the model is told the page is
        gone."""
        args = args or {}
        # read from a failed call too: an error result can hold the page's text and name its page
        url = scope.page_url(result_text)
        claimed = scope.claimed_page_url(result_text) if url == "" else None
        key = (scope.browser, thread_id, task)
        with self._lock:
            before = self._pages.get(key)
            judged = self._judged_on(scope, args, before)
            shown = site_of(url or claimed)  # the site whose text the result may hold
            # a result whose page cannot be told: the page wrote header lines, or named another site than the one
            # judged after text of its own (its claim is not believed)
            untold = url == "" and (shown is None or shown != judged)  # no page believed: not even "no site"
            if not ok:
                self._pages[key] = None
            elif url:
                self._pages[key] = origin_of(url)
            elif claimed is not None:
                self._pages[key] = judged if shown == judged else None
            elif url == "" or scope.may_switch_tab(args, result_text):
                self._pages[key] = None
            # the browsers a task uses, a jorb's (task None: it never holds grants) too, so its end closes them
            found = self._live((thread_id, task)) or self._tasks.setdefault((thread_id, task), _Task())
            found.browsers[scope.browser] = scope
            found.touched = self.clock()
            withheld = None
            if task is not None:
                approved = found.origins.get(scope.browser, set())
                if untold:
                    withheld = UNKNOWN_SITE
                elif shown is not None and shown not in approved and (shown != judged or
                                                                        (scope.browser, shown) in found.unapproved):
                    withheld = shown  # led there by a step judged elsewhere, or read there before any approval
                if withheld is not None:
                    found.unapproved.add((scope.browser, withheld))
        went_somewhere = bool(args.get(scope.url_arg))
        if withheld is not None:
            return Seen(f"(Note from Jarvis: the browser now shows {withheld}, which the user has not approved for "
                        "this task, so what this step returned is withheld. A browser step there (a snapshot) asks the "
                        "user first; until they approve one, every browser step of this task asks them.)",
                        withheld=True)
        if url == BLANK_PAGE and before is not None and not went_somewhere:
            return Seen(RESTARTED_NOTE)
        return Seen()

    def end_task(self, thread_id: str, task: str | None = None) -> list[str]:
        """The task ended (the turn answered, stopped or failed: chat/graph.py, chat/turns.py): its grants go, and
        each browser it used (its own) is closed.
        `task=None` ends every task of the thread. Returns the browsers closed."""
        with self._lock:
            ended = [(k, self._tasks.pop(k)) for k in list(self._tasks)
                     if k[0] == thread_id and (task is None or k[1] == task)]
            for key in list(self._tasks):
                self._live(key)  # drop expired tasks of other threads
            for page in [p for p in self._pages if p[1] == thread_id and (task is None or p[2] == task)]:
                del self._pages[page]
        closed = []
        for (_thread, name), found in ended:
            for scope in found.browsers.values():
                if scope.close is None:
                    continue
                try:
                    scope.close(thread_id, name, set(found.origins.get(scope.browser, set())))
                    closed.append(scope.browser)
                except Exception as exc:  # noqa: BLE001 - a browser already gone is closed enough
                    log.info("closing the browser %s at the end of a task: %s", scope.browser, exc)
        return closed


def grant_note(origin: str, unapproved: Iterable[str] = ()) -> str:
    """What approving a step on `origin` grants; `unapproved`: the sites the task's browser showed that are not
    approved (SiteGrants.unapproved), whose mark makes every step ask whatever is approved."""
    others = sorted(set(unapproved) - {origin})
    if others:
        return (f"approving lets Jarvis take this step on {origin}; its later steps still ask, since this task's browser "
                f"showed {', '.join(others)}, which you have not approved (approve a step there to end that)")
    return (f"approving lets Jarvis control {origin} for the rest of this task without asking again "
            "(another site, or another task, asks again)")
