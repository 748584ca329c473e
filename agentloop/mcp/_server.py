"""`MCPServer`: one connection to an MCP server, its tools as `AgentTool`s.

The transport and the SDK's session run in a task of the server's own, started by `async with`
and stopped at its end. What goes wrong in them (a server that dies, an HTTP stream cut) ends
that task, not the caller's: the calls in flight and those made later become error results
that say the connection was lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import logging
import math
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import mcp
import mcp.types as mcp_types
import pydantic
from mcp.client.session import ClientRequestContext, IncomingMessage

from .._core._config import NextTurn, TurnContext
from .._core._util import exception_text, single_exception
from .._tools._tool import AgentTool, OnUpdate
from .._types._abort import AbortSignal
from .._types._constants import TOOL_ABORTED_TEXT
from .._types._messages import AgentToolResult, ImageContent, TextContent
from ._results import error_result, local_schema, mcp_result, prompt_messages, resource_contents
from ._sampling import Sampling, sample
from ._stdio import MessageTooLarge

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from typing import TypeAlias

    from typing_extensions import Self

__all__ = (
    "DEFAULT_INIT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "Elicitation",
    "LogLevel",
    "MCPCall",
    "MCPServer",
    "Roots",
    "WrapCall",
)

DEFAULT_INIT_TIMEOUT = 30.0
"""Seconds to start a server and initialize the session (a stdio server fetched by `npx -y` or
`uvx` on first use needs more than a few)."""
DEFAULT_TIMEOUT = 300.0
"""Seconds to wait for the answer to a request (a tool call, a listing...), as pydantic-ai's."""

LOGGER = logging.getLogger("agentloop.mcp")
"""Where the servers' log messages go (`notifications/message`), at the matching level."""

LogLevel: TypeAlias = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

Roots: TypeAlias = "Sequence[str | os.PathLike[str]] | Callable[[], Awaitable[Sequence[str | os.PathLike[str]]]]"
Elicitation: TypeAlias = Callable[[mcp_types.ElicitRequestParams], Awaitable[mcp_types.ElicitResult]]


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPCall:
    """One call of a server's tool, as a `wrap_call` hook sees it (`dataclasses.replace` it)."""

    name: str
    """The tool's name on the server (without the prefix)."""
    arguments: Mapping[str, Any]
    meta: Mapping[str, Any] | None = None
    """Sent as the request's `_meta` (a trace context, a user id...)."""
    tool_call_id: str | None = None
    """The model's id of the call, when the call comes from a run."""


WrapCall: TypeAlias = Callable[[MCPCall, Callable[[MCPCall], Awaitable[AgentToolResult]]], Awaitable[AgentToolResult]]
"""`async (call, proceed) -> result`: runs around each tool call; `await proceed(call)` sends it."""


class MCPServer:
    """A connection to one MCP server; its tools as `AgentTool`s. Use the subclasses.

    Args:
        tool_prefix: Put before each tool's name (`"fs_"` makes `read` into `fs_read`), for
            agents that talk to several servers whose tool names clash.
        timeout: Seconds to wait for the answer to a request (a tool call, a listing) before a
            tool call ends as an error result and other requests raise TimeoutError (default
            300; None: no limit).
        init_timeout: Seconds to start the server and initialize the session before
            `async with` raises TimeoutError (default 30; None: no limit).
        tool_filter: `(tool) -> bool` on the SDK's `mcp.types.Tool` (name, annotations...):
            only the tools it keeps are offered.
        wrap_call: `async (call, proceed) -> AgentToolResult` around each tool call; it may
            change the `MCPCall` (its `meta` is sent as the request's `_meta`) or the result.
        sampling: A `Sampling` (an agentloop model and stream function) that answers the
            server's `sampling/createMessage` requests, at most `Sampling.max_calls` of them per
            connection (50 by default); None: the client offers no sampling.
        elicitation: `async (params) -> mcp.types.ElicitResult`, asked when the server wants
            something from the user (`elicitation/create`); None: not offered.
        roots: The directories (paths or `file://` URIs) the server may work in, or an async
            function that returns them when asked; None: not offered.
        log_level: Ask the server to send log messages from this level up (`logging/setLevel`).
            The messages a server sends go to the `agentloop.mcp` logger either way.
    """

    def __init__(
        self,
        *,
        tool_prefix: str = "",
        timeout: float | None = DEFAULT_TIMEOUT,
        init_timeout: float | None = DEFAULT_INIT_TIMEOUT,
        tool_filter: Callable[[mcp_types.Tool], bool] | None = None,
        wrap_call: WrapCall | None = None,
        sampling: Sampling | None = None,
        elicitation: Elicitation | None = None,
        roots: Roots | None = None,
        log_level: LogLevel | None = None,
    ) -> None:
        if not isinstance(tool_prefix, str):
            raise TypeError(f"tool_prefix must be a str, got {type(tool_prefix).__name__}")
        for name, value in (("timeout", timeout), ("init_timeout", init_timeout)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
        for name, hook in (("tool_filter", tool_filter), ("wrap_call", wrap_call), ("elicitation", elicitation)):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be callable or None, got {hook!r}")
        if sampling is not None and not isinstance(sampling, Sampling):
            raise TypeError(f"sampling must be an agentloop.mcp.Sampling or None, got {type(sampling).__name__}")
        if roots is not None and not callable(roots) and (isinstance(roots, (str, bytes)) or not _is_sequence(roots)):
            raise TypeError(f"roots must be a sequence of paths or URIs, or an async function, got {roots!r}")
        if log_level is not None and log_level not in _PY_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(_PY_LEVELS)} or None, got {log_level!r}")
        self.tool_prefix = tool_prefix
        self.timeout = timeout
        self.init_timeout = init_timeout
        self.tool_filter = tool_filter
        self.wrap_call = wrap_call
        self.sampling = sampling
        self.elicitation = elicitation
        self.roots = roots
        self.log_level = log_level
        self.tools_changed = False
        """Whether the server said its tool list changed since `list_tools()` last asked it."""
        self._session: mcp.ClientSession | None = None
        self._initialized: mcp_types.InitializeResult | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._tools: list[AgentTool] | None = None
        self._lost: str | None = None
        self._in_flight: dict[anyio.CancelScope, str | None] = {}
        self._sampled = 0  # sampling requests answered on this connection

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    # --- the connection ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError(f"{self!r} is already open")
        self.tools_changed, self._lost, self._sampled = False, None, 0
        async with contextlib.AsyncExitStack() as stack:
            self._session = await stack.enter_async_context(self._connected())
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        stack, self._stack, self._session, self._tools, self._initialized = self._stack, None, None, None, None
        if stack is None:
            return None
        return await stack.__aexit__(exc_type, exc, tb)

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[mcp.ClientSession]:
        """The session, served by a task of its own until the block ends."""
        closing = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                started: mcp.ClientSession | Exception = await tg.start(self._serve, closing)
                if isinstance(started, Exception):
                    raise started  # from this task: a failed start is not a task group's failure
                try:
                    yield started
                finally:
                    closing.set()
        except BaseExceptionGroup as group:
            # The task never fails: the group wraps what this task raised (in the body of the
            # caller's `async with`, or the failed start). Give it back as it was raised.
            failure = single_exception(group)
            if failure is group:
                raise
        else:
            return
        raise failure

    async def _serve(
        self, closing: anyio.Event, *, task_status: anyio.abc.TaskStatus[mcp.ClientSession | Exception]
    ) -> None:
        """Run the transport and the session until `closing`. A failure to start is handed to
        the starter; one after the start ends this task only (the calls see a lost connection)."""
        started = False
        try:
            with anyio.CancelScope() as starting:
                if self.init_timeout is not None:
                    starting.deadline = anyio.current_time() + self.init_timeout
                async with self._transport() as (read, write), self._client_session(read, write) as session:
                    self._initialized = await session.initialize()
                    starting.deadline = math.inf
                    if self.log_level is not None and self._initialized.capabilities.logging is not None:
                        level = mcp_types.SetLevelRequest(params=mcp_types.SetLevelRequestParams(level=self.log_level))
                        await session.send_request(level, mcp_types.EmptyResult, self.init_timeout)
                    started = True
                    task_status.started(session)
                    await closing.wait()
                    if self._lost is None:
                        self._lost = "the MCP session is closed"
            if not started:
                seconds = f"{self.init_timeout:g}" if self.init_timeout is not None else "?"
                task_status.started(TimeoutError(f"{self!r} did not start and initialize within {seconds} s"))
        except Exception as exc:
            failure = single_exception(exc) if isinstance(exc, BaseExceptionGroup) else exc
            text = exception_text(failure)
            if not started:
                error = ConnectionError(f"{self!r} could not start: {text}")
                error.__cause__ = failure
                task_status.started(error)
            else:
                self._lose(f"the connection to the MCP server was lost ({text})")
        finally:
            if started:
                self._lose("the connection to the MCP server was lost")

    def _lose(self, reason: str) -> None:
        """Note the connection is gone and end the calls in flight with `reason`."""
        if self._lost is None:
            self._lost = reason
        self._cut(self._lost)

    def _cut(self, reason: str) -> None:
        for scope, cut in self._in_flight.items():
            if cut is None:
                self._in_flight[scope] = reason
                scope.cancel()

    def _client_session(self, read: Any, write: Any) -> mcp.ClientSession:
        return mcp.ClientSession(
            read,
            write,
            sampling_callback=self._on_sampling if self.sampling is not None else None,
            elicitation_callback=self._on_elicitation if self.elicitation is not None else None,
            list_roots_callback=self._on_list_roots if self.roots is not None else None,
            logging_callback=self._on_log,
            message_handler=self._on_message,
        )

    async def _on_message(self, message: IncomingMessage) -> None:
        """What the server sends unasked: a tool-list change is noted; an answer the SDK could
        not parse (it drops it) ends the calls in flight, one of which it was meant for."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tools_changed = True
        elif isinstance(message, MessageTooLarge):
            self._cut(str(message))
        elif isinstance(message, Exception) and _is_answer(message):
            self._cut(f"the MCP server sent an answer that is not valid JSON-RPC ({_first_line(message)})")

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        source = f" [{params.logger}]" if params.logger else ""
        LOGGER.log(_PY_LEVELS.get(params.level, logging.INFO), "%r%s: %s", self, source, data)

    async def _on_sampling(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        assert self.sampling is not None
        limit = self.sampling.max_calls
        if limit is not None and self._sampled >= limit:
            message = f"this client answers at most {limit} sampling requests per connection (Sampling.max_calls)"
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message)
        self._sampled += 1  # counted when asked, so that requests at the same time count too
        try:
            return await sample(self.sampling, params)
        except Exception as exc:
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"sampling failed: {exception_text(exc)}")

    async def _on_elicitation(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        assert self.elicitation is not None
        try:
            answer = await self.elicitation(params)
        except Exception as exc:
            text = f"elicitation failed: {exception_text(exc)}"
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=text)
        if not isinstance(answer, mcp_types.ElicitResult):
            message = f"the elicitation callback must return mcp.types.ElicitResult, got {type(answer).__name__}"
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message)
        return answer

    async def _on_list_roots(self, context: ClientRequestContext) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        roots = self.roots
        try:
            listed = await roots() if callable(roots) else roots
            uris = [pydantic.FileUrl(_file_uri(root)) for root in listed or ()]
            return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=uri) for uri in uris])
        except Exception as exc:
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"roots failed: {exception_text(exc)}")

    @property
    def session(self) -> mcp.ClientSession:
        """The open MCP session (for what agentloop does not wrap: completions, subscriptions...)."""
        if self._session is None:
            raise RuntimeError(f"{self!r} is not open: use `async with` around it")
        return self._session

    @property
    def instructions(self) -> str | None:
        """What the server says about using it (`initialize`'s `instructions`), for the system prompt."""
        return self._initialize_result.instructions

    @property
    def server_info(self) -> mcp_types.Implementation:
        """The server's name, version and title, as it gave them at `initialize`."""
        return self._initialize_result.server_info

    @property
    def _initialize_result(self) -> mcp_types.InitializeResult:
        self.session  # noqa: B018 - raises when not open
        assert self._initialized is not None
        return self._initialized

    # --- tools ----------------------------------------------------------------------------

    async def list_tools(self) -> list[AgentTool]:
        """The server's tools as `AgentTool`s; asks the server again after a list change.

        Left out: the tools `tool_filter` refuses, and those the server runs only as tasks
        (`execution.taskSupport` "required": agentloop does not call tools as tasks).
        """
        if self._tools is None or self.tools_changed:
            self.tools_changed = False
            listed = await _all_pages(self.session.list_tools, lambda page: page.tools, self.timeout)
            keep = self.tool_filter
            self._tools = [
                self._agent_tool(tool) for tool in listed if not _needs_a_task(tool) and (keep is None or keep(tool))
            ]
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
            return await server.call_tool(
                tool.name, params, signal=signal, on_update=on_update, tool_call_id=tool_call_id
            )

        return AgentTool(
            name=self.tool_prefix + tool.name,
            label=tool.title or tool.name,
            description=tool.description or "",
            parameters=local_schema(tool.input_schema),
            execute=execute,
        )

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        signal: AbortSignal | None = None,
        on_update: OnUpdate | None = None,
        meta: Mapping[str, Any] | None = None,
        tool_call_id: str | None = None,
    ) -> AgentToolResult:
        """Call the server's tool `name` (its own name, without the prefix) and map the result.

        Every failure is an error result: an error the tool reports, a protocol error, a
        timeout, an answer that cannot be read, a lost connection, an abort of `signal`.
        """
        self.session  # noqa: B018 - raises when not open
        call = MCPCall(name=name, arguments=dict(arguments or {}), meta=meta, tool_call_id=tool_call_id)

        async def proceed(call: MCPCall) -> AgentToolResult:
            if not isinstance(call, MCPCall):
                raise TypeError(f"proceed takes an agentloop.mcp.MCPCall, got {type(call).__name__}")
            return await self._send_call(call, signal if signal is not None else AbortSignal(), on_update)

        if self.wrap_call is None:
            return await proceed(call)
        result = self.wrap_call(call, proceed)
        return await result if inspect.isawaitable(result) else result

    async def _send_call(self, call: MCPCall, signal: AbortSignal, on_update: OnUpdate | None) -> AgentToolResult:
        session = self.session
        if self._lost is not None:
            return error_result(self._lost)

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if on_update is not None:
                of = f"/{total:g}" if total is not None else ""
                text = message if message is not None else f"{progress:g}{of}"
                details = {"progress": progress, "total": total, "message": message}
                await on_update(AgentToolResult(content=(TextContent(text),), details=details))

        meta = mcp_types.RequestParamsMeta(**call.meta) if call.meta is not None else None  # type: ignore[typeddict-item]
        params = mcp_types.CallToolRequestParams(name=call.name, arguments=dict(call.arguments), _meta=meta)
        request = mcp_types.CallToolRequest(params=params)
        result: mcp_types.CallToolResult | None = None
        with signal.cancel_scope(), anyio.CancelScope() as scope:
            self._in_flight[scope] = None
            try:
                # Not `session.call_tool`: it checks `structuredContent` against the tool's
                # `outputSchema` with `re`, in this thread, running the server's patterns.
                result = await session.send_request(
                    request,
                    mcp_types.CallToolResult,
                    request_read_timeout_seconds=self.timeout,
                    progress_callback=report,
                )
            except mcp.MCPError as exc:
                return error_result(self._lost or f"MCP error {exc.error.code}: {exc.error.message}")
            except pydantic.ValidationError as exc:
                return error_result(f"the MCP server's answer is not a tool result ({_first_line(exc)})")
            finally:
                cut = self._in_flight.pop(scope, None)
        if result is not None:
            return mcp_result(result)
        return error_result(cut if cut is not None else TOOL_ABORTED_TEXT)

    # --- resources and prompts -----------------------------------------------------------

    async def list_resources(self) -> list[mcp_types.Resource]:
        """The server's resources (every page)."""
        return await _all_pages(self.session.list_resources, lambda page: page.resources, self.timeout)

    async def read_resource(self, uri: str) -> list[TextContent | ImageContent]:
        """A resource's contents as content blocks (a tool may return them, a message hold them)."""
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"uri must be a non-empty str, got {uri!r}")
        with anyio.fail_after(self.timeout):
            return resource_contents(await self.session.read_resource(uri))

    async def list_prompts(self) -> list[mcp_types.Prompt]:
        """The server's prompts (every page)."""
        return await _all_pages(self.session.list_prompts, lambda page: page.prompts, self.timeout)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[tuple[str, TextContent | ImageContent]]:
        """A prompt filled in with `arguments`: its messages as `(role, block)` pairs."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, got {name!r}")
        with anyio.fail_after(self.timeout):
            return prompt_messages(await self.session.get_prompt(name, dict(arguments or {})))


async def _all_pages(
    ask: Callable[..., Awaitable[Any]], items: Callable[[Any], list[Any]], seconds: float | None
) -> list[Any]:
    """Every page of a listing, each page within `seconds` (TimeoutError after it)."""
    listed: list[Any] = []
    cursor: str | None = None
    while True:
        with anyio.fail_after(seconds):
            page = await ask(params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        listed.extend(items(page))
        cursor = page.next_cursor
        if not cursor:
            return listed


def _needs_a_task(tool: mcp_types.Tool) -> bool:
    return tool.execution is not None and tool.execution.task_support == "required"


def _is_answer(exc: Exception) -> bool:
    """Whether a message the SDK could not parse was an answer (it has an id and no method)."""
    if not isinstance(exc, pydantic.ValidationError):
        return False
    for error in exc.errors():
        value = error.get("input")
        if isinstance(value, Mapping) and "jsonrpc" in value:
            return "id" in value and "method" not in value
    return False


def _first_line(exc: BaseException) -> str:
    return exception_text(exc).splitlines()[0]


def _file_uri(root: str | os.PathLike[str]) -> str:
    text = os.fspath(root)
    return text if text.startswith("file://") else Path(text).resolve().as_uri()


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence)
