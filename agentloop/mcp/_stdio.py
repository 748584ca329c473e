"""The stdio transport: the SDK's, with a reader of the server's stdout that takes time linear in
what the server writes and refuses a message longer than a limit.

The SDK's reader joins each chunk of a line to everything before it and splits the whole again,
in time quadratic in the line's length, and takes a line of any length. This reader keeps the
bytes in one buffer and looks for the end of the line only in what is new; a line longer than
`max_message_bytes` is dropped as it arrives (its bytes are not kept) and given to the session
as a `MessageTooLarge` error. Starting and stopping the process (its own process group, stdin
closed, then the kill escalation) are the SDK's, as its `stdio_client` does them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import anyio.lowlevel
from mcp.client import stdio as sdk_stdio
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.message import SessionMessage

__all__ = ("MessageTooLarge", "stdio_transport")

LOGGER = logging.getLogger("agentloop.mcp")


class MessageTooLarge(Exception):
    """The server wrote a message longer than the transport takes; it was dropped."""


@contextlib.asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters, errlog: TextIO, max_message_bytes: int
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_client`, reading with `_read_lines`."""
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # No awaits from the spawn to the task group: a cancellation there would leak the process.
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    shutting_down = False
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        try:
            async with read_stream_writer:
                try:
                    await _read_lines(process, server, max_message_bytes, read_stream_writer.send)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session is gone; only the drain below remains
                finally:
                    await sdk_stdio._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the stdout stream under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                LOGGER.exception("Reading from the MCP server's stdout failed mid-session")

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (json + "\n").encode(encoding=server.encoding, errors=server.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()  # the session sees the connection end
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()  # the reader goes on to drain, so a server stuck writing can exit
        write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        for stream in (read_stream, write_stream, read_stream_writer, write_stream_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()


async def _read_lines(process: Any, server: StdioServerParameters, limit: int, deliver: Any) -> None:
    """Deliver each line the process writes (parsed by the SDK), in time linear in the bytes; a
    line longer than `limit` bytes is skipped as it comes and delivered as `MessageTooLarge`."""
    stdout = process.stdout
    assert stdout is not None
    buffer = bytearray()
    searched = 0  # the buffer holds no newline before this offset
    skipping = False  # inside a line already found too long
    while True:
        try:
            chunk = await stdout.receive()
        except anyio.EndOfStream:
            return
        buffer += chunk
        while True:
            end = buffer.find(b"\n", searched)
            if end < 0:
                if len(buffer) > limit:
                    if not skipping:
                        skipping = True
                        await deliver(_too_large(limit))
                    buffer.clear()
                searched = len(buffer)
                break
            line = bytes(buffer[:end])
            del buffer[: end + 1]  # cheap at the front of a bytearray
            searched = 0
            if skipping:
                skipping = False  # the end of the line that was too long
                continue
            if len(line) > limit:
                await deliver(_too_large(limit))
                continue
            try:
                text = line.decode(server.encoding, server.encoding_error_handler)
            except UnicodeDecodeError as exc:
                await deliver(exc)
                continue
            if text.strip():
                await deliver(sdk_stdio._parse_line(text))


def _too_large(limit: int) -> MessageTooLarge:
    return MessageTooLarge(f"the MCP server sent a message of more than {limit} bytes (see max_message_bytes)")
