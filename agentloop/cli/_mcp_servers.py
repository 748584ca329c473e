"""The servers `agentloop` starts for a run: the `--mcp` servers' tools, each stdio server's
stderr in a log file of its own, and `StartError` when one (or the embedded model) cannot start."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
import anyio.to_thread

from .._core._util import exception_text
from ._printer import Printer, one_line

if TYPE_CHECKING:
    from .._tools._tool import AgentTool
    from ..mcp import MCPServers

__all__ = ("StartError", "mcp_log", "mcp_tools")


class StartError(Exception):
    """The model or an MCP server could not start: one line for the user, exit code 1."""


@contextlib.asynccontextmanager
async def mcp_tools(servers: MCPServers | None, printer: Printer) -> AsyncIterator[list[AgentTool]]:
    """The tools of the `--mcp` servers, open while the block runs (none without `--mcp`).

    Each server starts in turn, under the spinner; one that cannot start raises `StartError`
    naming it (the ones already started are closed). A stdio server's stderr goes to a log file
    of its own (`mcp_log`), never over the terminal's lines.
    """
    if servers is None:
        yield []
        return
    from ..mcp import MCPServerStdio

    async with contextlib.AsyncExitStack() as stack:
        for name, server in servers.servers.items():
            log = None
            if isinstance(server, MCPServerStdio):
                log = mcp_log(name)
                server.errlog = stack.enter_context(await anyio.to_thread.run_sync(_open_log, log))
            printer.status = f"starting the MCP server {name!r}"
            try:
                await stack.enter_async_context(server)
            except Exception as exc:
                raise StartError(_mcp_failure(name, exc, log)) from exc
        try:
            tools = await servers.list_tools()
        except Exception as exc:
            raise StartError(f"--mcp: listing the servers' tools failed: {one_line(exception_text(exc))}") from exc
        yield tools


def mcp_log(name: str) -> Path:
    """The file a stdio MCP server's stderr goes to, rewritten at each run: in the cache folder
    (`AGENTLOOP_CACHE`), `logs/mcp-NAME.log`."""
    from ._local_model import cache_dir

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return cache_dir() / "logs" / f"mcp-{safe}.log"


def _open_log(path: Path) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", encoding="utf-8")  # closed by the caller's exit stack


def _mcp_failure(name: str, exc: Exception, log: Path | None) -> str:
    """One line: which server, what went wrong, the end of what it wrote to stderr, and where the rest is."""
    text = f"--mcp server {name!r}: {one_line(exception_text(exc))}"
    if log is None:
        return text
    try:
        with open(log, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 4096))
            lines = file.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return f"{text}; its stderr ends: {one_line(last)[:200]} (all of it in {log})" if last else text
