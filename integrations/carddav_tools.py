"""contacts_search over any CardDAV account (iCloud, Fastmail, Nextcloud...): the address books are found from the
account's URL (current-user-principal, then addressbook-home-set), their vCards read with one addressbook-query
REPORT each and matched here, in name, nickname, organisation, email and phone.

Bounded against a vCard bomb: the answer is read up to dav_account.MAX_RESPONSE_BYTES, at most MAX_CARDS cards are
parsed (vobject) and a card larger than MAX_CARD_BYTES is skipped, each limit said in the result. A card that does
not parse is counted, not fatal. What a card says is outside content (untrusted): anyone can send a vCard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool
from .dav_account import DavAccount, dav_client, dav_error

MAX_CARDS = 5000
MAX_CARD_BYTES = 64 * 1024
_NS = {"D": "DAV:", "C": "urn:ietf:params:xml:ns:carddav"}
_PROPS = """<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:carddav"><D:prop>
<D:resourcetype/><D:current-user-principal/><C:addressbook-home-set/></D:prop></D:propfind>"""
_QUERY = """<?xml version="1.0" encoding="utf-8"?>
<C:addressbook-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:carddav">
<D:prop><D:getetag/><C:address-data/></D:prop></C:addressbook-query>"""


class SearchArgs(BaseModel):
    query: str = Field(description="a name, part of one, an organisation, an email address or a phone number")
    account: str | None = Field(None, description="the contacts account's name; default: the first")
    max_results: int = Field(20, ge=1, le=200)


def _responses(answer: Any) -> list[tuple[str, Any]]:
    return [(str(r.findtext("D:href", namespaces=_NS) or ""), r) for r in answer.tree.findall("D:response", _NS)] \
        if answer.tree is not None else []


def addressbooks(client: Any, url: str) -> list[str]:
    """The address book URLs under the account's URL: itself, its children, or its principal's home's children."""
    def books(at: str, depth: int) -> tuple[list[str], Any]:
        found, first = [], None
        for href, response in _responses(client.propfind(at, _PROPS, depth)):
            first = first if first is not None else response
            if response.find(".//D:resourcetype/C:addressbook", _NS) is not None:
                found.append(urljoin(at, href))
        return found, first

    here, me = books(url, 1)
    if here:
        return here
    principal = me.findtext(".//D:current-user-principal/D:href", namespaces=_NS) if me is not None else None
    if principal:
        _, who = books(urljoin(url, principal), 0)
        home = who.findtext(".//C:addressbook-home-set/D:href", namespaces=_NS) if who is not None else None
        if home:
            return books(urljoin(url, home), 1)[0]
    return []


def _card_out(card: Any) -> dict[str, Any]:
    def values(key: str) -> list[str]:
        return [(", ".join(map(str, c.value)) if isinstance(c.value, list) else str(c.value))[:200]
                for c in card.contents.get(key, [])][:10]

    org, nickname = values("org"), values("nickname")
    return {"name": (values("fn") or [""])[0], "nickname": nickname[0] if nickname else None,
            "organization": org[0] if org else None, "emails": values("email"), "phones": values("tel")}


def build_carddav_tools(accounts: dict[str, DavAccount],
                        connect: Callable[[DavAccount], Any] = dav_client) -> list[BaseTool]:
    def account_of(name: str | None) -> DavAccount:
        if not accounts:
            raise ToolError("No contacts account is set up: run `jarvis accounts add NAME --kind carddav`.")
        if not name:
            return next(iter(accounts.values()))
        if name not in accounts:
            raise ToolError(f"No contacts account named {name!r}; the contacts accounts are: {', '.join(accounts)}.")
        return accounts[name]

    def contacts_search(query: str, account: str | None = None, max_results: int = 20) -> dict:
        """Search a contacts account's address books by name, nickname, organisation, email or phone: each match's
        name, emails, phones and organisation."""
        import vobject

        needle = " ".join(query.lower().split())
        if not needle:
            raise ToolError("Give something to search for: a name, an email address or a phone number.")
        acct = account_of(account)
        matches: list[dict] = []
        notes: list[str] = []
        seen = unreadable = 0
        try:
            with connect(acct) as client:
                books = addressbooks(client, acct.url)
                if not books:
                    raise ToolError(f"Account {acct.name!r} has no address book at {acct.url}.")
                for book in books:
                    for _, response in _responses(client.report(book, _QUERY, 1)):
                        text = response.findtext(".//C:address-data", namespaces=_NS) or ""
                        if not text.strip():
                            continue
                        if seen >= MAX_CARDS:
                            notes.append(f"more than {MAX_CARDS} cards: only the first {MAX_CARDS} were searched")
                            break
                        seen += 1
                        if len(text) > MAX_CARD_BYTES:
                            notes.append(f"a card of {len(text)} characters was skipped (more than {MAX_CARD_BYTES})")
                            continue
                        try:
                            card = _card_out(vobject.readOne(text))
                        except Exception:  # noqa: BLE001 - a broken card is counted, the others still searched
                            unreadable += 1
                            continue
                        haystack = " ".join(str(v) for v in card.values() if v).lower()
                        digits = "".join(ch for ch in needle if ch.isdigit())
                        if needle in haystack or (len(digits) >= 6 and any(
                                digits in "".join(ch for ch in p if ch.isdigit()) for p in card["phones"])):
                            matches.append(card)
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of the exchange becomes one clear sentence
            raise dav_error(acct, exc) from None
        out: dict[str, Any] = {"account": acct.name, "searched": seen, "contacts": matches[:max_results]}
        if len(matches) > max_results:
            notes.append(f"{len(matches) - max_results} more matches: search for something more precise")
        if unreadable:
            notes.append(f"{unreadable} card(s) could not be read")
        if notes:
            out["notes"] = sorted(set(notes))
        return out

    return [make_tool(contacts_search, args_schema=SearchArgs)]  # cards are outside content: no trusted_output
