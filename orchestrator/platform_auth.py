"""Who may drive the graph when LangGraph's own server serves it (`langgraph dev`, langgraph.json's `auth`).

`langgraph dev` has no authentication of its own, answers every origin (CORS `*`) and any Host: a web page the user
opened, on any site, could list every thread with what it read, approve the confirmation a thread waits for
(`POST /threads/{id}/runs/wait` with a resume), or mark a thread trusted for good (`POST /threads/{id}/state`).
A plain-text POST needs no CORS preflight, so the browser sent them; a DNS name pointed at 127.0.0.1 reached it too.

So a request is answered only when:
- its Host is this machine (`localhost`, `127.0.0.1`, `[::1]`, any port), or one of `JARVIS_PLATFORM_HOSTS`
  (comma-separated: a deployment's own name) - a rebound DNS name is refused;
- it comes from no web page (no Origin: the SDK, curl, a script of the user's), or from LangGraph Studio
  (https://smith.langchain.com) or one of `JARVIS_PLATFORM_ORIGINS` (comma-separated);
- a browser that sent no Origin (an `<img>` or `<script>` GET of some page) does not mark it `Sec-Fetch-Site`
  `cross-site` or `same-site` (a page on another port of this host), as the web UI's guard does.
The handler here sees only the routes the platform protects; orchestrator/platform_http.py applies the same rule
to every path, the platform's own internal routes included.
Studio's own "langsmith" scheme, which `langgraph dev` would otherwise let through unchecked, is switched off in
langgraph.json (`disable_studio_auth`), so every request comes here.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from langgraph_sdk import Auth

from orchestrator.server.security import LOOPBACK_NAMES

STUDIO_ORIGINS = ("https://smith.langchain.com",)
LOCAL_HOSTS = {name.strip("[]") for name in LOOPBACK_NAMES}  # the web UI's own: server/security.py

auth = Auth()


def _listed(variable: str) -> set[str]:
    return {item.strip().lower().rstrip("/") for item in os.environ.get(variable, "").split(",") if item.strip()}


def host_name(host: str) -> str:
    """The name of a Host header without its port (`[::1]:2024` -> `::1`)."""
    try:
        return (urlsplit(f"//{host.strip()}").hostname or "").lower()
    except ValueError:
        return ""


def refusal(host: str | None, origin: str | None, fetch_site: str | None = None) -> str | None:
    """Why a request with these headers (Host, Origin, Sec-Fetch-Site) is not answered, or None."""
    name = host_name(host or "")
    if name not in LOCAL_HOSTS and name not in _listed("JARVIS_PLATFORM_HOSTS"):
        return (f"Host {host!r} is not this machine: Jarvis's graph answers only requests made to localhost (set "
                "JARVIS_PLATFORM_HOSTS to the names a deployment is reached by)")
    if origin is not None and origin.strip().lower().rstrip("/") not in {*STUDIO_ORIGINS, *_listed("JARVIS_PLATFORM_ORIGINS")}:
        return (f"a web page of {origin!r} may not drive Jarvis's graph: only LangGraph Studio and clients that are "
                "not web pages may (set JARVIS_PLATFORM_ORIGINS to allow another)")
    if origin is None and (fetch_site or "").strip().lower() in ("cross-site", "same-site"):
        return "a web page may not drive Jarvis's graph: the browser marked this request as coming from another site"
    return None


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> str:
    def header(name: bytes) -> str | None:
        value = headers.get(name)
        return value.decode("latin-1") if value is not None else None

    why = refusal(header(b"host"), header(b"origin"), header(b"sec-fetch-site"))
    if why is not None:
        raise Auth.exceptions.HTTPException(status_code=403, detail=why)
    return "jarvis-local-user"
