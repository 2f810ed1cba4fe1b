"""How a command finds the `jarvis run` serving its data folder, and knows it is that one before trusting it.

`jarvis run` records its address beside its access token, in the data folder (file `server_url`, readable by the
user only) and removes it when it stops. A command that reads it must not send the token to whatever listens on
that port now: the server may have stopped and another program (another user's, another data folder's Jarvis) taken
the port. So the command first sends a fresh random challenge, without the token, to `/identity`; the server answers
with an HMAC of the challenge keyed by its token. Only a server holding this data folder's token can answer it, and
the answer reveals nothing that would let anyone act with the token. The proof also covers the port the server
answers on (its own socket's, which no request can claim otherwise): a program on a stale recorded port that
passes the challenge on to this folder's real Jarvis, serving on another port, gets a proof for that other port,
which the command refuses. Stdlib only: a command on its fast path loads
this and httpx, nothing of Jarvis's graph.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

TOKEN_FILE = "server_token"
SERVER_URL_FILE = "server_url"
IDENTITY_PATH = "/identity"
CHALLENGE_LENGTHS = (16, 128)  # what /identity takes, the full app's and the starting shell's alike
_CONTEXT = b"jarvis run serves this data folder:"


def proof(token: str, challenge: str, port: int) -> str:
    """What the server listening on `port` answers to `challenge`: only the holder of `token` can compute it."""
    return hmac.new(token.encode(), _CONTEXT + f"{port}:{challenge}".encode(), hashlib.sha256).hexdigest()


def proves(token: str, challenge: str, port: int, answer: object) -> bool:
    return isinstance(answer, str) and hmac.compare_digest(answer.encode(), proof(token, challenge, port).encode())


def record_url(data_dir: Path, url: str) -> None:
    """Written by `jarvis run` once its port is bound, owner-only like the token beside it."""
    from orchestrator.core.private_file import write_private

    data_dir.mkdir(parents=True, exist_ok=True)
    write_private(data_dir / SERVER_URL_FILE, url + "\n")


def forget_url(data_dir: Path, url: str) -> None:
    """Removed when `jarvis run` stops, unless another `jarvis run` on the same folder has recorded its own since."""
    path = data_dir / SERVER_URL_FILE
    try:
        if path.read_text(encoding="utf-8").strip() == url:
            path.unlink()
    except OSError:
        pass


def recorded(data_dir: Path) -> tuple[str, str] | None:
    """(url, token) a `jarvis run` recorded in `data_dir`, or None. Unproven: see the module's docstring. Only a
    loopback http:// address is taken: the token never travels off this machine or in clear over a network."""
    try:
        url = (data_dir / SERVER_URL_FILE).read_text(encoding="utf-8").strip()
        token = (data_dir / TOKEN_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not url.startswith(("http://127.0.0.1:", "http://[::1]:", "http://localhost:")) or len(token) < 32:
        return None
    return url.rstrip("/"), token
