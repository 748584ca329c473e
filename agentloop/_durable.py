"""What the durable engines (`agentloop.temporal`, `agentloop.dbos`) share.

An agent's definition is checked the same way (`check_definition`, `approval_names`), its loop
options are `LoopOptions`'s own, limited to those a durable run carries (`durable_options`), and a model
call is recorded the same way: the engine runs it where the keys and the network are (a DBOS
step, a Temporal activity), consumes the provider's stream there (`final_message`) and records
only the message of its terminal event; the loop, in the workflow, then gets that message as a
stream of its own (`replayed`): `start`, then `done` or `error`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from ._core._config import LoopOptions
from ._tools._tool import AgentTool
from ._types._events import AssistantMessageEvent, DoneEvent, ErrorEvent, StartEvent
from ._types._messages import AssistantMessage, Model
from ._types._stream_fn import opened_stream

__all__ = (
    "DURABLE_OPTIONS",
    "IncompleteStream",
    "StreamProgress",
    "approval_names",
    "check_approval_timeout",
    "check_definition",
    "durable_options",
    "final_message",
    "replayed",
    "require_asyncio",
    "workflow_options",
)


def require_asyncio(what: str, engine: str) -> None:
    """Raise RuntimeError if `what` is called on another async library than asyncio, which
    `engine` (saying what runs on asyncio only) needs."""
    import sniffio

    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    if library != "asyncio":
        raise RuntimeError(f"{what} needs asyncio: {engine} on asyncio only, not on {library}")


class IncompleteStream(RuntimeError):
    """A model stream ended without its terminal event (a broken stream function: no retry helps)."""


class StreamProgress:
    """How far a model stream has come: its latest event that carries the message so far."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: Any = None

    @property
    def partial(self) -> AssistantMessage | None:
        """The message so far (None before the stream's first event)."""
        return None if self.last is None else self.last.partial


async def final_message(source: Any, progress: StreamProgress | None = None) -> AssistantMessage:
    """Consume what a stream function returned (an iterator, a context manager, or an awaitable of
    either); the message of its terminal event. `IncompleteStream` if it ends without one.
    `progress`, if given, follows the stream as it goes."""
    async with opened_stream(source) as events:
        async for event in events:
            if isinstance(event, DoneEvent):
                return event.message
            if isinstance(event, ErrorEvent):
                return event.error
            if progress is not None:
                progress.last = event
    raise IncompleteStream("the model stream ended without a done or error event")


async def replayed(final: AssistantMessage) -> AsyncIterator[AssistantMessageEvent]:
    """A recorded final message as the stream the loop reads: `start` (the message's identity,
    no content yet), then `done` for a normal ending or `error` for an error or abort (an
    unknown stop reason is an error that names it)."""
    yield StartEvent(
        AssistantMessage(
            api=final.api,
            provider=final.provider,
            model=final.model,
            response_id=final.response_id,
            timestamp=final.timestamp,
        )
    )
    reason = final.stop_reason
    if reason == "stop" or reason == "length" or reason == "toolUse":
        yield DoneEvent(reason, final)
    elif reason == "error" or reason == "aborted":
        yield ErrorEvent(reason, final)
    else:
        unexpected = replace(final, stop_reason="error", error_message=f"unexpected stop reason {reason!r}")
        yield ErrorEvent("error", unexpected)


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def check_definition(
    kind: str,
    name: object,
    model: object,
    tools: Sequence[AgentTool],
    stream_fn: object,
) -> tuple[AgentTool, ...]:
    """Check what every durable agent is defined with (`kind` names the class in the errors); its tools."""
    if not isinstance(name, str) or not name or not set(name) <= _NAME_CHARS:
        raise ValueError(f"{kind} name must be letters, digits, '_' or '-', got {name!r}")
    if not isinstance(model, Model):
        raise TypeError(f"{kind} model must be an agentloop.Model, got {type(model).__name__}")
    tools = tuple(tools)
    for i, tool in enumerate(tools):
        if not isinstance(tool, AgentTool):
            raise TypeError(f"{kind} tools[{i}] must be an AgentTool, got {type(tool).__name__}")
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"{kind} tools must have distinct names, got {names}")
    if stream_fn is not None and not callable(stream_fn):
        raise TypeError(f"stream_fn must be callable or None, got {stream_fn!r}")
    return tools


_IN_WORKFLOW = (
    "max_turns",
    "tool_execution",
    "max_parallel_tool_calls",
    "tool_abort_grace",
    "temperature",
    "max_tokens",
    "session_id",
)

DURABLE_OPTIONS = ("api_key", "get_api_key", *_IN_WORKFLOW)
"""The loop options (`LoopOptions`) a durable agent takes. The others are callbacks that would run
in the workflow's own code, which must replay the same way after a crash (the hooks,
`convert_to_llm`, `transform_context`...), options the engine sets itself (`wrap_tool_call`,
`propagate`, `clock`), or options its model call does not carry (`headers`, `metadata`,
`thinking_budgets`, `max_retry_delay`, `cache_retention`)."""


def durable_options(kind: str, options: dict[str, Any]) -> LoopOptions:
    """A durable agent's loop options: `LoopOptions`'s names, defaults and checks, limited to
    `DURABLE_OPTIONS` (`kind` names the class in the error)."""
    others = sorted(set(options) - set(DURABLE_OPTIONS))
    if others:
        raise TypeError(f"{kind} does not take {', '.join(others)}; its loop options are {', '.join(DURABLE_OPTIONS)}")
    return LoopOptions(**options)


def workflow_options(options: LoopOptions) -> dict[str, Any]:
    """The durable options the loop in the workflow runs with: all but the keys, which stay where
    the model call runs."""
    return {name: getattr(options, name) for name in _IN_WORKFLOW}


def check_approval_timeout(approval_timeout: object) -> None:
    """`TypeError` unless `approval_timeout` is a timedelta or None; `ValueError` if it is not positive."""
    if approval_timeout is None:
        return
    if not isinstance(approval_timeout, timedelta):
        raise TypeError(f"approval_timeout must be a positive timedelta or None, got {approval_timeout!r}")
    if approval_timeout <= timedelta(0):
        raise ValueError(f"approval_timeout must be a positive timedelta or None, got {approval_timeout!r}")


def approval_names(needs_approval: Collection[str], tools: Sequence[AgentTool]) -> frozenset[str]:
    """The names of the tools whose calls wait for a human's approval: each one of `tools`."""
    if isinstance(needs_approval, str) or callable(needs_approval):
        raise TypeError(f"needs_approval must be a collection of tool names, got {needs_approval!r}")
    names = [tool.name for tool in tools]
    approved = frozenset(needs_approval)
    unknown = sorted(approved - set(names))
    if unknown:
        raise ValueError(f"needs_approval names {unknown}, which are not among the tools {names}")
    return approved
