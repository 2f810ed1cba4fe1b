"""Drive Jarvis's MCP server with the MCP Python SDK's own client (ClientSession), in whichever Python runs this:
the tests run it with the SDK 2.x of .cache/mcp-venvs/sdk-client (scripts/fetch_pypi_servers.py), whose client
nobody here wrote. Nothing of Jarvis is imported: only the SDK and the standard library.

    python mcp_sdk_client.py '<transport JSON>' '<steps JSON>'
transport: {"url": ..., "token": ..., "origin": optional} (streamable HTTP) or {"command": [...], "env": {...}} (stdio)
steps: [["list_tools"], ["call", name, args], ["list_resources"], ["read", uri], ["touch", path],
        ["wait_for", path, seconds]] (the last two: a handshake with the test, which acts between two steps)
Prints one JSON line: {"sdk": version, "results": [...]}, each call as {"error": bool, "text": ...}.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager
from importlib.metadata import version

import anyio
from mcp import ClientSession

try:  # the SDK 2.x speaks HTTP through httpx2, the 1.x through httpx
    import httpx2 as httpx
except ImportError:
    import httpx


def field(obj: object, *names: str) -> object:
    """A result's field under the SDK 2.x's name or the 1.x's (input_schema / inputSchema)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(names[0])


@asynccontextmanager
async def http_streams(spec: dict):
    headers = {"Authorization": f"Bearer {spec['token']}"}
    if spec.get("origin"):
        headers["Origin"] = spec["origin"]
    import mcp.client.streamable_http as transport

    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(120.0)) as http:
        opener = getattr(transport, "streamable_http_client", None)
        if opener is not None:
            async with opener(spec["url"], http_client=http) as streams:
                yield streams[0], streams[1]
        else:  # an SDK before the rename
            async with transport.streamablehttp_client(spec["url"], headers=headers) as streams:
                yield streams[0], streams[1]


@asynccontextmanager
async def stdio_streams(spec: dict):
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=spec["command"][0], args=spec["command"][1:],
                                   env={**os.environ, **spec.get("env", {})})
    async with stdio_client(params) as streams:
        yield streams[0], streams[1]


async def run(spec: dict, steps: list) -> list:
    results: list = []
    opener = http_streams if "url" in spec else stdio_streams
    async with opener(spec) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for step in steps:
                if step[0] == "list_tools":
                    listed = await session.list_tools()
                    results.append([{"name": t.name, "schema": field(t, "input_schema", "inputSchema")}
                                    for t in listed.tools])
                elif step[0] == "call":
                    got = await session.call_tool(step[1], step[2])
                    text = "".join(getattr(c, "text", "") for c in got.content)
                    results.append({"error": bool(field(got, "is_error", "isError")), "text": text})
                elif step[0] == "list_resources":
                    listed = await session.list_resources()
                    results.append([{"uri": str(r.uri), "name": r.name} for r in listed.resources])
                elif step[0] == "touch":  # tell the test this point is reached
                    open(step[1], "w").close()
                elif step[0] == "wait_for":  # until the test did its part (a file it makes), at most step[2] s
                    with anyio.fail_after(step[2]):
                        while not os.path.exists(step[1]):
                            await anyio.sleep(0.05)
                elif step[0] == "read":
                    try:
                        got = await session.read_resource(step[1])
                        results.append({"error": False, "text": "".join(getattr(c, "text", "") for c in got.contents)})
                    except Exception as exc:  # noqa: BLE001 - the server's refusal, reported
                        results.append({"error": True, "text": str(exc)})
    return results


def main() -> None:
    spec, steps = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    try:
        results = anyio.run(run, spec, steps)
    except BaseException as exc:  # noqa: BLE001 - the failure is the result (a refused connection)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        print(json.dumps({"sdk": version("mcp"), "failed": f"{type(exc).__name__}: {exc}"}))
        return
    print(json.dumps({"sdk": version("mcp"), "results": results}))


if __name__ == "__main__":
    main()
