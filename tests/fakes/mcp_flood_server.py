"""An MCP server (the real SDK's FastMCP, over stdio) that floods its pipes on request, for the bounds tests.

    python -m tests.fakes.mcp_flood_server [--tools N]   (N more tools, named extra_0 ..., for the tool list's bound)
"""

from __future__ import annotations

import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("jarvis-flood-server", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def endless_line() -> str:
    """Write on stdout one line that never ends (a megabyte at a time, until the client hangs up)."""
    block = b"x" * (1024 * 1024)
    try:
        while True:
            sys.stdout.buffer.write(block)
            sys.stdout.buffer.flush()
    except (BrokenPipeError, OSError):
        return "cut"


@server.tool()
def stderr_flood(mb: int) -> str:
    """Write `mb` megabytes of log lines on stderr, then answer."""
    line = b"DEBUG something happened, and then something else happened again\n"
    for _ in range(mb * 1024 * 1024 // len(line) + 1):
        sys.stderr.buffer.write(line)
    sys.stderr.buffer.flush()
    return "flooded"


def _extra(i: int):
    def extra(text: str) -> str:
        return f"{i}: {text}"

    extra.__name__ = f"extra_{i}"
    extra.__doc__ = f"Extra tool number {i}."
    return extra


if __name__ == "__main__":
    if "--tools" in sys.argv:
        for i in range(int(sys.argv[sys.argv.index("--tools") + 1])):
            server.add_tool(_extra(i))
    server.run()
