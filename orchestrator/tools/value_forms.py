"""How values are written, for argument provenance (tools/provenance.py): numbers with separators inside, and
the addresses a text names. A check that compares text as written is evaded by writing it another way.

- Numbers: "2,500", "2 500", "2_500", "2.500", "2'500" are 2500, and neither 2 nor 500: `grouped_numbers_joined`
  writes every such number without its separators, in the value and in the texts alike, so a part of a longer
  number is no longer a whole token. A decimal point with other than three digits after it is left alone.
- Digit runs (`digit_runs`): a passport or card number written with any separators, or split in two, is found by
  its digits (5 or more) wherever they are.
- Addresses (`addresses_in`): any host name (any top-level domain, international ones too), email address, URL,
  IBAN, and IP address in any form a resolver takes: IPv6, dotted IPv4, and IPv4 written in octal, hex or as one
  number ("0177.0.0.1", "0x7f000001", "2130706433/admin", "127.1:80"). Read after `plain()`: the dots and at
  signs a reader (or a model) puts back are put back first ("evil[.]example", "mark (at) evil [dot] example",
  fullwidth "ｅｖｉｌ．ｅｘａｍｐｌｅ", the ideographic full stop IDNA takes for a dot).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from collections.abc import Iterator

_SEPARATORS = ",_ '.\u00a0\u202f\u2009"
_GROUPED_RE = re.compile(rf"(?<![\w.,])\d{{1,3}}(?P<sep>[{_SEPARATORS}])\d{{3}}(?:(?P=sep)\d{{3}})*(?!\d|[.,]\d{{3}})")


def grouped_numbers_joined(text: str) -> str:
    """`text` with every number written in groups of three ("1,000,000", "2 500") written without separators."""
    return _GROUPED_RE.sub(lambda m: re.sub(rf"[{_SEPARATORS}]", "", m.group(0)), text)


# A group that holds a digit ("4237", "HGK137803"), groups joined by one separator each.
_RUN_RE = re.compile(r"(?<![A-Z0-9])[A-Z]*\d[A-Z0-9]*(?:[\s,._'/-][A-Z]*\d[A-Z0-9]*)*", re.I)


def digit_runs(text: str, at_least: int = 5) -> Iterator[tuple[str, str]]:
    """(as written, its digits) for each run of digit groups with at least `at_least` digits."""
    for m in _RUN_RE.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if len(digits) >= at_least:
            yield m.group(0), digits


_TAIL = r"(?::\d{1,5})?(?:/[^\s'\"<>)]*)?"  # a port, a path
_NUM = r"(?:0x[0-9a-f]+|\d+)"
_ADDRESS_RE = re.compile(
    r"(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
    r"|(?P<url>(?:[a-z][a-z0-9+.-]{1,15}://|www\.)[^\s'\"<>)]+)"
    r"|\[(?P<v6b>[0-9a-f:.]+(?:%\w+)?)\]" + _TAIL +
    r"|(?<![\w:.])(?P<v6>(?:[0-9a-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]{1,4})?)(?![\w:]|\.\w)"
    rf"|(?<![\w.])(?P<v4>{_NUM}(?:\.{_NUM}){{3}}){_TAIL}(?![\w.]|\.\w)"
    rf"|(?<![\w.])(?P<v4short>{_NUM}(?:\.{_NUM}){{0,2}})(?::\d{{1,5}}|(?=/))(?:/[^\s'\"<>)]*)?(?![\w.]|\.\w)"
    r"|(?<![\w.])(?P<hex>0x[0-9a-f]{1,8})(?![\w.])"
    r"|(?<![\w@.-])(?P<host>(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+(?:[^\W\d_]{2,63}|xn--[a-z0-9-]{1,59}))" + _TAIL +
    r"(?![\w-])"
    r"|\b(?P<iban>[A-Z]{2}\d{2}[A-Z0-9]{10,30})\b",
    re.I,
)


def _ipv4_form(text: str, short: bool) -> bool:
    """Whether a resolver reads `text` as an IPv4 address. A short form ("127.1", "2130706433") only when it is
    clearly not a small number or a time: two parts or more, or a single number of 7+ digits or hex."""
    if short and "." not in text and not (text.lower().startswith("0x") or len(text) >= 7):
        return False
    try:
        socket.inet_aton(text)
    except OSError:
        return False
    return True


def _ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text.split("%")[0])
    except ValueError:
        return False
    return True


def addresses_in(text: str) -> Iterator[str]:
    """Every address `text` names, as written (with its port and path)."""
    for m in _ADDRESS_RE.finditer(text):
        kind = m.lastgroup
        if kind in ("v6", "v6b") and not _ipv6(m.group(kind)):
            continue
        if kind in ("v4", "v4short", "hex") and not _ipv4_form(m.group(kind), short=kind != "v4"):
            continue
        yield m.group(0).rstrip(".,;:!?")


_DOT_RE = re.compile(r"\s*[\[({]\s*(?:\.|dot)\s*[\])}]\s*", re.I)
_AT_RE = re.compile(r"\s*[\[({]\s*(?:@|at)\s*[\])}]\s*", re.I)


def plain(text: str) -> str:
    """`text` with the usual disguises of a dot or an at sign undone, compatibility characters (fullwidth) folded."""
    text = unicodedata.normalize("NFKC", text).replace("\u3002", ".").replace("\uff61", ".")
    return _AT_RE.sub("@", _DOT_RE.sub(".", text))
