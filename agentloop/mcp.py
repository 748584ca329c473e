"""Tools from MCP servers (the `[mcp]` extra: `pip install 'anyio-agentloop[mcp]'`).

    async with MCPServerStdio("npx", ["-y", "@modelcontextprotocol/server-everything"]) as server:
        context = AgentContext(tools=await server.list_tools())
        config = AgentLoopConfig(model=model, prepare_next_turn=server.prepare_next_turn)
        async with agent_loop([prompt], context, config) as events: ...

A server is an async context manager: entering it starts the transport (a subprocess for
`MCPServerStdio`, an HTTP session for `MCPServerStreamableHTTP`) and initializes the MCP
session; leaving it closes both. Use its tools only inside that block.

What the tools do:

* the tool's `inputSchema` becomes the `AgentTool`'s JSON schema and arguments are coerced and
  validated with agentloop's rules before the request is sent. The schema comes from the server,
  so it is untrusted: a `$ref` to anything outside the schema is never fetched (it is reported as
  unresolvable), and `pattern` / `patternProperties` keywords are left out of the local check
  (no regular expression from a server runs here; the server still checks its own patterns);
* results map to content blocks: text and images as they are, other blocks (audio, resources,
  links) as a line of text; `structuredContent` becomes the result's `details`;
* an `isError` result and a protocol error (an `MCPError`) become error results;
* progress notifications become `on_update` calls (the text is the progress message, the
  details `{"progress", "total", "message"}`);
* an abort of the run cancels the request at once (the SDK then tells the server with
  `notifications/cancelled`), and the call ends with "Operation aborted".

Tool-list changes: when the server sends `notifications/tools/list_changed`, `tools_changed`
becomes true and the next `list_tools()` asks the server again (otherwise it returns the list it
already has). A run reads its tools from its context, so a change reaches the model between
turns: pass `prepare_next_turn=server.prepare_next_turn` (it swaps this server's tools in the
next turn's context), or read `list_tools()` again between runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

from . import AbortSignal, AgentTool, AgentToolResult, ImageContent, NextTurn, TextContent, TurnContext
from ._tools._tool import OnUpdate
from ._types._constants import TOOL_ABORTED_TEXT

if TYPE_CHECKING:
    from typing_extensions import Self

try:
    import mcp
    import mcp.types as mcp_types
    from mcp.client.session import IncomingMessage
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("agentloop.mcp needs the MCP SDK: pip install 'anyio-agentloop[mcp]'") from exc

__all__ = ("MCPServer", "MCPServerStdio", "MCPServerStreamableHTTP", "mcp_result")

_UNCHECKED_KEYWORDS = frozenset({"pattern", "patternProperties"})


class MCPServer:
    """A connection to one MCP server; its tools as `AgentTool`s. Use the subclasses.

    Args:
        tool_prefix: Put before each tool's name (`"fs_"` makes `read` into `fs_read`), for
            agents that talk to several servers whose tool names clash.
        timeout: Seconds to wait for a tool call's answer before it ends as an error result
            (None: no limit; wrap other requests in `anyio.fail_after` to bound them).
    """

    def __init__(self, *, tool_prefix: str = "", timeout: float | None = None) -> None:
        if not isinstance(tool_prefix, str):
            raise TypeError(f"tool_prefix must be a str, got {type(tool_prefix).__name__}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        self.tool_prefix = tool_prefix
        self.timeout = timeout
        self.tools_changed = False
        """Whether the server said its tool list changed since `list_tools()` last asked it."""
        self._session: mcp.ClientSession | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._tools: list[AgentTool] | None = None

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError(f"{self!r} is already open")
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(mcp.ClientSession(read, write, message_handler=self._on_message))
            await session.initialize()
            self._session, self._stack, self.tools_changed = session, stack.pop_all(), False
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        stack, self._stack, self._session, self._tools = self._stack, None, None, None
        if stack is None:
            return None
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The SDK's task groups wrap the exception that left the `async with` body: give it
            # back as it was raised when nothing else went wrong.
            if exc is None or not _only(group, exc):
                raise
        raise exc

    async def _on_message(self, message: IncomingMessage) -> None:
        """The SDK's handler for what the server sends unasked: a tool-list change is noted."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tools_changed = True

    @property
    def session(self) -> mcp.ClientSession:
        """The open MCP session (for what agentloop does not wrap: resources, prompts...)."""
        if self._session is None:
            raise RuntimeError(f"{self!r} is not open: use `async with` around it")
        return self._session

    async def list_tools(self) -> list[AgentTool]:
        """The server's tools as `AgentTool`s; asks the server again after a list change."""
        session = self.session
        if self._tools is None or self.tools_changed:
            self.tools_changed = False
            listed: list[mcp_types.Tool] = []
            cursor: str | None = None
            while True:
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            self._tools = [self._agent_tool(tool) for tool in listed]
        return list(self._tools)

    async def prepare_next_turn(self, turn: TurnContext) -> NextTurn | None:
        """A `prepare_next_turn` hook: after a tool-list change, the next turn gets the new list.

        This server's old tools are replaced in the context's tools; every other tool stays.
        With a hook of your own, call this one from it and merge the contexts.
        """
        if not self.tools_changed or self._session is None:
            return None
        old = {id(tool) for tool in self._tools or ()}
        new = await self.list_tools()
        others = [tool for tool in turn.context.tools if id(tool) not in old]
        return NextTurn(context=dataclasses.replace(turn.context, tools=[*others, *new]))

    def _agent_tool(self, tool: mcp_types.Tool) -> AgentTool:
        server = self

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: OnUpdate) -> AgentToolResult:
            return await server.call_tool(tool.name, params, signal=signal, on_update=on_update)

        return AgentTool(
            name=self.tool_prefix + tool.name,
            label=tool.title or tool.name,
            description=tool.description or "",
            parameters=_local_schema(tool.input_schema),
            execute=execute,
        )

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        signal: AbortSignal | None = None,
        on_update: OnUpdate | None = None,
    ) -> AgentToolResult:
        """Call the server's tool `name` (its own name, without the prefix) and map the result."""
        session = self.session

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if on_update is not None:
                of = f"/{total:g}" if total is not None else ""
                text = message if message is not None else f"{progress:g}{of}"
                details = {"progress": progress, "total": total, "message": message}
                await on_update(AgentToolResult(content=(TextContent(text),), details=details))

        signal = signal if signal is not None else AbortSignal()
        result: mcp_types.CallToolResult | None = None
        with signal.cancel_scope():
            try:
                result = await session.call_tool(
                    name, dict(arguments or {}), read_timeout_seconds=self.timeout, progress_callback=report
                )
            except mcp.MCPError as exc:
                return _error(f"MCP error {exc.error.code}: {exc.error.message}")
        if result is None:  # the abort cancelled the request
            return _error(TOOL_ABORTED_TEXT)
        return mcp_result(result)


class MCPServerStdio(MCPServer):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    Args:
        command: The program (looked up on PATH).
        args: Its arguments.
        env: Extra environment variables (over the SDK's safe defaults, not the whole environment).
        cwd: Its working directory.
        errlog: Where its stderr goes (default: ours).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: TextIO | None = None,
        tool_prefix: str = "",
        timeout: float | None = None,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ValueError(f"command must be a non-empty str, got {command!r}")
        if isinstance(args, str) or not all(isinstance(arg, str) for arg in args):
            raise TypeError(f"args must be a sequence of str, got {args!r}")
        super().__init__(tool_prefix=tool_prefix, timeout=timeout)
        self.params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        self.errlog = errlog

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return stdio_client(self.params, errlog=self.errlog if self.errlog is not None else sys.stderr)

    def __repr__(self) -> str:
        return f"MCPServerStdio({self.params.command!r}, {self.params.args!r})"


class MCPServerStreamableHTTP(MCPServer):
    """An MCP server at a URL, over the streamable HTTP transport.

    Args:
        url: The server's MCP endpoint (for example `http://127.0.0.1:3001/mcp`).
    """

    def __init__(self, url: str, *, tool_prefix: str = "", timeout: float | None = None) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        super().__init__(tool_prefix=tool_prefix, timeout=timeout)
        self.url = url

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return streamable_http_client(self.url)

    def __repr__(self) -> str:
        return f"MCPServerStreamableHTTP({self.url!r})"


def mcp_result(result: mcp_types.CallToolResult) -> AgentToolResult:
    """An MCP `CallToolResult` as an `AgentToolResult`."""
    content: list[TextContent | ImageContent] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            content.append(TextContent(block.text))
        elif isinstance(block, mcp_types.ImageContent):
            content.append(ImageContent(data=block.data, mime_type=block.mime_type))
        else:
            content.append(TextContent(_describe(block)))
    return AgentToolResult(
        content=tuple(content), details=result.structured_content, is_error=True if result.is_error else None
    )


def _only(group: BaseExceptionGroup[BaseException], exc: BaseException) -> bool:
    """Whether every exception in `group` (nested groups included) is `exc` itself."""
    return all(
        _only(inner, exc) if isinstance(inner, BaseExceptionGroup) else inner is exc for inner in group.exceptions
    )


def _describe(block: Any) -> str:
    """A content block agentloop has no type for (audio, a resource, a link), as a line of text."""
    kind = getattr(block, "type", type(block).__name__)
    resource = getattr(block, "resource", None)
    if resource is not None and isinstance(getattr(resource, "text", None), str):
        return str(resource.text)
    uri = getattr(block, "uri", None) or getattr(resource, "uri", None)
    return f"[{kind}{': ' + str(uri) if uri else ''}]"


def _error(text: str) -> AgentToolResult:
    return AgentToolResult(content=(TextContent(text),), is_error=True)


def _local_schema(schema: Any) -> dict[str, Any]:
    """The server's input schema without the keywords that would run its regular expressions."""
    local = _without_patterns(schema)
    return local if isinstance(local, dict) else {"type": "object"}


_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})


def _without_patterns(value: Any, names: bool = False) -> Any:
    """A copy of a schema node; `names` says its keys are property names, not keywords."""
    if isinstance(value, Mapping):
        return {
            str(key): _without_patterns(item, not names and key in _NAMED_SCHEMAS)
            for key, item in value.items()
            if names or key not in _UNCHECKED_KEYWORDS
        }
    if isinstance(value, list):
        return [_without_patterns(item) for item in value]
    return value
