"""The stdio transport of MCP servers, with what Jarvis keeps of a server's output bounded.

The SDK's `stdio_client` joins stdout chunks until a newline comes: a server writing one line without end (a
bug, or a hostile package) grew Jarvis's memory without limit, and joining the chunks again at every read cost
quadratic time; its stderr went straight to the log file, so a server printing in a loop filled the disk. Here a
line longer than `mcp.max_message_mb` is not kept: the read stream gets an error naming the limit (the manager
marks the server unhealthy with it and restarts it, as for any line that is not JSON-RPC), and reading stops.
Stderr is copied to the log up to `mcp.max_log_mb` per run, then drained unread with one note saying so, and
a log past that size is rotated before the next run.

The rest follows the SDK's transport and uses its parts: the same default environment, JSON-RPC parsing and
shutdown (stdin closed, then the process group terminated), the same memory streams the ClientSession reads.
POSIX only, as Jarvis is.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import StdioServerParameters
from mcp import types as mt
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

_EXIT_WAIT_S = 2.0  # after stdin closes, as the SDK: then the process group is terminated


class LineTooLong(ValueError):
    def __init__(self, limit: int):
        super().__init__(f"a line longer than {limit // (1024 * 1024)} MB without an end (mcp.max_message_mb); "
                         "the rest of its output was not read")


@asynccontextmanager
async def bounded_stdio_client(server: StdioServerParameters, errlog: TextIO, *, max_line_bytes: int,
                               max_log_bytes: int) -> AsyncIterator[tuple[Any, Any]]:
    env = {**get_default_environment(), **server.env} if server.env is not None else get_default_environment()
    process = await anyio.open_process([server.command, *server.args], env=env, cwd=server.cwd,
                                       start_new_session=True)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    scan_from = len(buffer)  # only the new bytes can hold the next newline
                    buffer += chunk
                    start = 0
                    while (end := buffer.find(b"\n", max(start, scan_from))) >= 0:
                        line = bytes(buffer[start:end])
                        start = end + 1
                        if line.strip():
                            await read_writer.send(_parse(line))
                    del buffer[:start]
                    if len(buffer) > max_line_bytes:
                        await read_writer.send(LineTooLong(max_line_bytes))
                        return  # the manager tears the session down; the process is stopped below
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await anyio.lowlevel.checkpoint()

    async def stderr_copier() -> None:
        assert process.stderr is not None
        kept = 0
        decode = codecs.getincrementaldecoder("utf-8")("replace").decode  # a character split between two reads
        async for chunk in process.stderr:
            if kept < max_log_bytes:
                piece = chunk[: max_log_bytes - kept]
                kept += len(piece)
                try:
                    errlog.write(decode(piece))
                    if kept >= max_log_bytes:
                        errlog.write(f"\n[... the rest of this run's stderr was not kept: more than "
                                     f"{max_log_bytes // (1024 * 1024)} MB (mcp.max_log_mb)]\n")
                    errlog.flush()
                except OSError:  # the disk is full: the server's log is not worth stopping the server for
                    kept = max_log_bytes
            # past the limit: read and dropped, so the server never blocks on a full pipe

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send((text + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg, process:
        tg.start_soon(stdout_reader)
        tg.start_soon(stderr_copier)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            try:
                await process.stdin.aclose()  # type: ignore[union-attr]
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            try:
                with anyio.fail_after(_EXIT_WAIT_S):
                    await process.wait()
            except TimeoutError:
                await terminate_posix_process_tree(process)
            except ProcessLookupError:
                pass
            tg.cancel_scope.cancel()  # the readers end with the process; a child keeping a pipe open does not hold us
            for stream in (read_stream, write_stream, read_writer, write_reader):
                await stream.aclose()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mt.JSONRPCMessage.model_validate_json(line))
    except Exception as exc:  # noqa: BLE001 - a line that is not JSON-RPC goes to the session as the SDK sends it
        return exc


def rotate_log(path: Path, max_bytes: int) -> None:
    """A log past max_bytes becomes <name>.log.1 (replacing the one before) before a run appends to it: each run
    writes at most max_bytes, and a server restarting in a loop keeps at most two logs' worth on disk."""
    try:
        if path.stat().st_size > max_bytes:
            path.replace(path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
