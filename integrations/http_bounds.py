"""An answer read by `requests` within a size and a time budget.

`requests` reads a body whole, however large, and its `timeout` bounds each read, not the answer: a server (or
anything between) sending without end, or trickling, held the tool and grew its memory. Callers ask with
`stream=True` and hand the response here: it is read chunk by chunk, and past either budget the connection is
closed and a ToolError says which; otherwise the body is kept where requests keeps one it read itself, so
`.content`, `.text` and `.json()` work as usual.
"""

from __future__ import annotations

import time
from typing import Any

from .base import ToolError


def read_bounded(resp: Any, max_bytes: int, timeout_s: float, what: str) -> Any:
    """`resp` (requested with stream=True) with its body read; `what` names the answer in the error."""
    started, body = time.monotonic(), bytearray()
    with resp:
        for chunk in resp.iter_content(64 * 1024):
            body += chunk
            if len(body) > max_bytes:
                raise ToolError(f"{what} was larger than {max_bytes // 1_000_000} MB, so it was not read; try "
                                "again later.")
            if time.monotonic() - started > timeout_s:
                raise ToolError(f"{what} was still arriving after {timeout_s:g} s, so it was stopped; try again "
                                "later.")
    resp._content = bytes(body)  # where requests keeps a body it read itself
    return resp
