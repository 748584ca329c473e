"""Several servers from an `mcpServers` JSON file, the shape desktop clients use:

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    }}

An entry with `command` (and `args`, `env`, `cwd`) is a stdio server; one with `url` (and
`headers`) a streamable HTTP server. `${NAME}` in a string is the environment variable NAME (an
error when it is not set), `${NAME:-default}` the default when it is not. `"disabled": true`
leaves an entry out; other keys (a `type`, a `description`...) are not read, except a `type`
naming a transport agentloop does not speak (`sse`), which is an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._core._config import NextTurn, TurnContext
from .._tools._tool import AgentTool
from ._server import MCPServer
from ._transports import MCPServerStdio, MCPServerStreamableHTTP

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ("MCPServers", "load_servers")

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_STDIO_KEYS: dict[str, type] = {"command": str, "args": list, "env": dict, "cwd": str}
_HTTP_KEYS: dict[str, type] = {"url": str, "headers": dict}


class MCPServers:
    """Several MCP servers opened and closed together, their tools as one list.

    `async with` opens them in order (and closes those already open when one fails).
    `servers` maps each name to its server.
    """

    def __init__(self, servers: Mapping[str, MCPServer]) -> None:
        if not isinstance(servers, Mapping) or not all(
            isinstance(name, str) and isinstance(server, MCPServer) for name, server in servers.items()
        ):
            raise TypeError(f"servers must map names to MCPServer instances, got {servers!r}")
        self.servers = dict(servers)
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError(f"{self!r} is already open")
        async with contextlib.AsyncExitStack() as stack:
            for server in self.servers.values():
                await stack.enter_async_context(server)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        stack, self._stack = self._stack, None
        if stack is None:
            return None
        return await stack.__aexit__(exc_type, exc, tb)

    async def list_tools(self) -> list[AgentTool]:
        """The tools of every server, in the order of the servers."""
        return [tool for server in self.servers.values() for tool in await server.list_tools()]

    async def prepare_next_turn(self, turn: TurnContext) -> NextTurn | None:
        """A `prepare_next_turn` hook: each server whose tools changed swaps its tools in."""
        changed: NextTurn | None = None
        for server in self.servers.values():
            current = turn if changed is None else _with_context(turn, changed)
            update = await server.prepare_next_turn(current)
            if update is not None:
                changed = update
        return changed

    def instructions(self) -> str:
        """The servers' instructions, each under a heading with its name, for the system prompt."""
        parts = [
            f"## {name}\n\n{server.instructions.strip()}"
            for name, server in self.servers.items()
            if server.instructions and server.instructions.strip()
        ]
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        return f"MCPServers({list(self.servers)!r})"


def _with_context(turn: TurnContext, update: NextTurn) -> TurnContext:
    return turn if update.context is None else dataclasses.replace(turn, context=update.context)


def load_servers(path: str | os.PathLike[str], *, prefix_tools: bool = True, **options: Any) -> MCPServers:
    """The servers of an `mcpServers` JSON file (see this module's docstring for its shape).

    Args:
        path: The file.
        prefix_tools: Name each tool `{server}_{tool}`, so that servers' names do not clash.
        options: Given to every server (`timeout=`, `sampling=`, `log_level=`...).
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{file} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ValueError(f'{file} must hold a JSON object with an "mcpServers" object')
    servers: dict[str, MCPServer] = {}
    for name, entry in data["mcpServers"].items():
        where = f"{file}: mcpServers.{name}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object")
        if entry.get("disabled") is True:
            continue
        entry = _expand(entry, where)
        prefix = f"{name}_" if prefix_tools else ""
        if entry.get("type") not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
            raise ValueError(f"{where}: transport {entry['type']!r} is not supported (stdio or streamable HTTP)")
        if "command" in entry:
            _check(entry, _STDIO_KEYS, where)
            servers[name] = MCPServerStdio(
                entry["command"],
                entry.get("args", []),
                env=entry.get("env"),
                cwd=entry.get("cwd"),
                tool_prefix=prefix,
                **options,
            )
        elif "url" in entry:
            _check(entry, _HTTP_KEYS, where)
            servers[name] = MCPServerStreamableHTTP(
                entry["url"], headers=entry.get("headers"), tool_prefix=prefix, **options
            )
        else:
            raise ValueError(f'{where} needs a "command" (stdio) or a "url" (streamable HTTP)')
    return MCPServers(servers)


def _check(entry: Mapping[str, Any], keys: Mapping[str, type], where: str) -> None:
    for key, kind in keys.items():
        if key in entry and not isinstance(entry[key], kind):
            raise ValueError(f"{where}.{key} must be a JSON {_JSON_NAMES[kind]}, got {entry[key]!r}")


_JSON_NAMES: dict[type, str] = {str: "string", list: "array", dict: "object"}


def _expand(value: Any, where: str) -> Any:
    """`value` with `${NAME}` and `${NAME:-default}` replaced in every string."""
    if isinstance(value, str):

        def variable(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = os.environ.get(name)
            if found is not None:
                return found
            if default is not None:
                return default
            raise ValueError(f"{where}: the environment variable {name} is not set (write ${{{name}:-default}})")

        return _VARIABLE.sub(variable, value)
    if isinstance(value, dict):
        return {key: _expand(item, where) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item, where) for item in value]
    return value
