"""The loop's configuration and the hook types."""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._tools._tool import AgentTool, ExecutionMode
from .._types._abort import AbortSignal
from .._types._constants import LLM_MESSAGE_TYPES, THINKING_LEVELS
from .._types._events import AgentEvent
from .._types._messages import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    Message,
    Model,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    UserContent,
)
from .._types._stream_fn import MaybeAwaitable

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "LOOP_OPTIONS",
    "AgentLoopConfig",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "Emit",
    "LoopOptions",
    "NextTurn",
    "QueueMode",
    "ToolExecution",
    "ToolInvocation",
    "TurnContext",
    "api_key_for",
    "call",
    "check_options",
    "default_convert_to_llm",
    "notify",
)

T = TypeVar("T")
OptionsT = TypeVar("OptionsT", bound="LoopOptions")

ToolExecution: TypeAlias = ExecutionMode
"""How a batch's calls run: "parallel" (the default) or "sequential" (one at a time)."""
QueueMode: TypeAlias = Literal["all", "one-at-a-time"]
"""How many queued steering or follow-up messages a turn takes: "all" or "one-at-a-time"."""

Emit: TypeAlias = Callable[[AgentEvent], MaybeAwaitable[None]]
"""The event sink of `run_agent_loop`; awaited for every event."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentContext:
    """The agent's view of the conversation, as hooks see it (a snapshot)."""

    system_prompt: str = ""
    messages: Sequence[AgentMessage] = ()
    tools: Sequence[AgentTool] = ()

    def __post_init__(self) -> None:
        # The items are checked where a run starts (`agent_loop`); here only the shape.
        if not isinstance(self.system_prompt, str):
            raise TypeError(f"context.system_prompt must be a str, got {type(self.system_prompt).__name__}")
        if not _is_sequence(self.messages):
            raise TypeError(f"context.messages must be a sequence of messages, got {type(self.messages).__name__}")
        if not _is_sequence(self.tools):
            raise TypeError(f"context.tools must be a sequence of AgentTool, got {type(self.tools).__name__}")


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


@dataclass(frozen=True, slots=True, kw_only=True)
class BeforeToolCallContext:
    """What `before_tool_call` sees: the call, its validated arguments, and the context."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    """The validated arguments: the same object `execute` will receive."""
    context: AgentContext


@dataclass(frozen=True, slots=True, kw_only=True)
class BeforeToolCallResult:
    """Returned by `before_tool_call` to block a call (None or `block=False` allows it)."""

    block: bool = False
    reason: str | None = None
    """The error text the model sees (default "Tool execution was blocked")."""
    terminate: bool | None = None
    """A blocked call that terminates counts towards ending the run after the batch."""

    def __post_init__(self) -> None:
        _check_bool(self.block, "BeforeToolCallResult.block", optional=False)
        if self.reason is not None and not isinstance(self.reason, str):
            raise TypeError(f"BeforeToolCallResult.reason must be a str or None, got {type(self.reason).__name__}")
        _check_bool(self.terminate, "BeforeToolCallResult.terminate")


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterToolCallContext:
    """What `after_tool_call` sees: the call and its result before any override."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult
    is_error: bool
    context: AgentContext


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterToolCallResult:
    """Returned by `after_tool_call`: each field given replaces the result's."""

    content: Sequence[UserContent] | None = None
    details: Any = None
    is_error: bool | None = None
    terminate: bool | None = None

    def __post_init__(self) -> None:
        if self.content is not None and not _is_sequence(self.content):
            raise TypeError(
                "AfterToolCallResult.content must be a sequence of TextContent/ImageContent blocks or None, "
                f"got {type(self.content).__name__}"
            )
        _check_bool(self.is_error, "AfterToolCallResult.is_error")
        _check_bool(self.terminate, "AfterToolCallResult.terminate")


def _check_bool(value: object, name: str, optional: bool = True) -> None:
    if not isinstance(value, bool) and not (optional and value is None):
        raise TypeError(f"{name} must be a bool{' or None' if optional else ''}, got {type(value).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnContext:
    """What `should_stop_after_turn` and `prepare_next_turn` see after a turn."""

    message: AssistantMessage
    tool_results: Sequence[ToolResultMessage]
    context: AgentContext
    new_messages: Sequence[AgentMessage]


@dataclass(frozen=True, slots=True, kw_only=True)
class NextTurn:
    """Returned by `prepare_next_turn` to change what the next turn uses (None keeps a value)."""

    context: AgentContext | None = None
    """Replaces the system prompt, the transcript and the tools (for example after compaction)."""
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None
    messages: Sequence[AgentMessage] = ()
    """Messages injected at the start of the next turn, before queued steering."""


def default_convert_to_llm(messages: Sequence[AgentMessage]) -> list[Message]:
    """Keep the messages an LLM understands (user, assistant, toolResult); drop custom roles."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a sequence of messages, got {type(messages).__name__}")
    return [m for m in messages if isinstance(m, LLM_MESSAGE_TYPES)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation:
    """One tool execution, as `wrap_tool_call` sees it: the call after preflight.

    `tool_call.id` is a stable key for the call (a durable engine's idempotency key).
    """

    tool: AgentTool
    tool_call: ToolCall
    args: Any
    """The validated arguments `tool.execute` gets."""
    signal: AbortSignal
    on_update: Callable[[AgentToolResult], object]


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopOptions:
    """The options of a run, defined once: `AgentLoopConfig` adds the model and the queues to them,
    and `Agent`, `TemporalAgent` and `DBOSAgent` hold theirs as one (`agent.options`: same names,
    defaults and meanings). Every callback may be a plain or an `async` function. Bad values raise
    at construction, naming the option. Frozen: `replace(...)` makes a changed copy, checked the
    same way.

    Attributes:
        convert_to_llm: `(messages) -> messages` run before every LLM call, after
            `transform_context`; turns custom messages into LLM messages or drops them. The
            default keeps user, assistant and toolResult messages.
        transform_context: `(messages, signal) -> messages` run before every LLM call (pruning,
            compaction, injecting context).
        get_api_key: `(provider) -> key | None`, called before every LLM call (expiring tokens);
            a falsy answer falls back to `api_key`.
        api_key: The key passed to the stream function (kept out of `repr`).
        tool_execution: `"parallel"` (default) or `"sequential"`.
        before_tool_call: `(ctx, signal) -> BeforeToolCallResult | None`; may block a call.
        after_tool_call: `(ctx, signal) -> AfterToolCallResult | None`; may override a result.
        should_stop_after_turn: `(ctx) -> bool`, after each completed turn's `turn_end`.
        prepare_next_turn: `(ctx) -> NextTurn | None`, after each completed turn's `turn_end`,
            before `should_stop_after_turn`.
        max_turns: End the run after this many turns (None: unlimited).
        tool_abort_grace: Seconds a running tool may take to honour an abort before it is
            cancelled and answered with "Operation aborted".
        session_id: Passed to the stream function in its `StreamOptions`.
        temperature: Passed to the stream function in its `StreamOptions`.
        max_tokens: Passed to the stream function in its `StreamOptions`.
        thinking_budgets: Passed to the stream function in its `StreamOptions`.
        headers: Passed to the stream function in its `StreamOptions`.
        metadata: Passed to the stream function in its `StreamOptions`.
        max_retry_delay: Passed to the stream function in its `StreamOptions`.
        cache_retention: `"none"`, `"short"` or `"long"` (prompt caching, where the provider has
            it): passed to the stream function in its `StreamOptions`.
        max_parallel_tool_calls: At most this many calls of a parallel batch execute at once
            (None: all); the others wait their turn, in source order.
        wrap_tool_call: `(invocation, proceed) -> result` around every tool execution (after
            preflight, within the abort's cut): `await proceed()` runs the tool within its
            timeout (past it, `proceed` raises `ToolTimeoutError`); a durable engine runs it
            elsewhere instead (and applies the timeout there: `within_timeout`), a tracer times
            it. What it returns (or raises) is the tool's outcome.
        propagate: Exception classes that are never turned into a tool's error result: raised by
            a tool, a hook or `wrap_tool_call`, they end the run and come out of it (a durable
            engine's own control-flow exceptions; several raised at once by parallel calls come
            out as an ExceptionGroup).
        clock: `() -> milliseconds since the epoch` for the timestamps of the messages the loop
            makes (tool results, aborted or failed endings); default the wall clock.
        observe: `(event) -> None`, a plain function called with every event in the loop's own
            task, before the event is delivered (for tracing: run and turn boundaries). In a
            bare `async for`, a tool batch's events are observed when the batch has ended.
    """

    convert_to_llm: Callable[[Sequence[AgentMessage]], MaybeAwaitable[Sequence[Message]]] = default_convert_to_llm
    transform_context: (
        Callable[[Sequence[AgentMessage], AbortSignal], MaybeAwaitable[Sequence[AgentMessage]]] | None
    ) = None
    get_api_key: Callable[[str], MaybeAwaitable[str | None]] | None = None
    api_key: str | None = field(default=None, repr=False)
    tool_execution: ToolExecution = "parallel"
    before_tool_call: (
        Callable[[BeforeToolCallContext, AbortSignal], MaybeAwaitable[BeforeToolCallResult | None]] | None
    ) = None
    after_tool_call: (
        Callable[[AfterToolCallContext, AbortSignal], MaybeAwaitable[AfterToolCallResult | None]] | None
    ) = None
    should_stop_after_turn: Callable[[TurnContext], MaybeAwaitable[bool]] | None = None
    prepare_next_turn: Callable[[TurnContext], MaybeAwaitable[NextTurn | None]] | None = None
    max_turns: int | None = None
    tool_abort_grace: float = 2.0
    session_id: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    thinking_budgets: Mapping[str, int] | None = None
    headers: Mapping[str, str] | None = None
    metadata: Mapping[str, Any] | None = None
    max_retry_delay: float | None = None
    cache_retention: Literal["none", "short", "long"] | None = None
    max_parallel_tool_calls: int | None = None
    wrap_tool_call: Callable[[ToolInvocation, Callable[[], Awaitable[object]]], MaybeAwaitable[object]] | None = None
    propagate: tuple[type[BaseException], ...] = ()
    clock: Callable[[], int] | None = None
    observe: Callable[[AgentEvent], None] | None = None

    def __post_init__(self) -> None:
        check_options(self, "")

    def replace(self: OptionsT, **changes: Any) -> OptionsT:
        """A copy with `changes` (option names as keywords), checked as at construction.

        Example:
            ```python
            agent.options = agent.options.replace(max_turns=5, before_tool_call=check)
            ```
        """
        return dataclasses.replace(self, **changes)

    def loop_options(self) -> dict[str, Any]:
        """The options as keyword arguments (for another `LoopOptions`, `AgentLoopConfig` or `Agent`)."""
        return {name: getattr(self, name) for name in LOOP_OPTIONS}


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentLoopConfig(LoopOptions):
    """How a run behaves: the model, the reasoning level and the queue callbacks, and the loop's
    options (`LoopOptions`, whose attributes it has).

    Attributes:
        model: The model passed to the stream function.
        reasoning: The thinking level passed to the stream function (None: reasoning off).
        get_steering_messages: `() -> messages` polled before the first call and after each
            turn; messages are injected before the next LLM call.
        get_follow_up_messages: `() -> messages` polled when the agent would otherwise stop.
    """

    model: Model
    reasoning: ThinkingLevel | None = None
    get_steering_messages: Callable[[], MaybeAwaitable[Sequence[AgentMessage]]] | None = None
    get_follow_up_messages: Callable[[], MaybeAwaitable[Sequence[AgentMessage]]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, Model):
            raise TypeError(f"config.model must be an agentloop.Model, got {type(self.model).__name__}")
        if self.reasoning is not None and self.reasoning not in THINKING_LEVELS:
            raise ValueError(f"config.reasoning must be one of {THINKING_LEVELS} or None, got {self.reasoning!r}")
        for name in ("get_steering_messages", "get_follow_up_messages"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"config.{name} must be callable or None, got {value!r}")
        check_options(self, "config.")


LOOP_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(LoopOptions))
"""The names of the loop's options, in their order of definition."""

_CALLBACKS = (
    "wrap_tool_call",
    "clock",
    "observe",
    "transform_context",
    "get_api_key",
    "before_tool_call",
    "after_tool_call",
    "should_stop_after_turn",
    "prepare_next_turn",
)


def check_options(options: LoopOptions, prefix: str) -> None:
    """Check a run's options, naming the bad one: the one checker of `LoopOptions`.

    Raises TypeError for a wrong type, ValueError for a value out of range; the message is
    `{prefix}{name} must be ..., got ...`.
    """
    convert = options.convert_to_llm
    if not callable(convert):
        raise TypeError(f"{prefix}convert_to_llm must be callable, got {convert!r}")
    for name in _CALLBACKS:
        value = getattr(options, name)
        if value is not None and not callable(value):
            raise TypeError(f"{prefix}{name} must be callable or None, got {value!r}")
    for name in ("api_key", "session_id"):
        value = getattr(options, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{prefix}{name} must be a str or None, got {type(value).__name__}")
    execution = options.tool_execution
    if execution not in ("parallel", "sequential"):
        raise ValueError(f"{prefix}tool_execution must be 'parallel' or 'sequential', got {execution!r}")
    turns = options.max_turns
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise ValueError(f"{prefix}max_turns must be a positive int or None, got {turns!r}")
    grace = options.tool_abort_grace
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace >= 0 or math.isnan(grace):
        raise ValueError(f"{prefix}tool_abort_grace must be a number of seconds >= 0, got {grace!r}")
    temperature = options.temperature
    if temperature is not None and not _is_finite_number(temperature):
        raise TypeError(f"{prefix}temperature must be a finite number or None, got {temperature!r}")
    max_tokens = options.max_tokens
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"{prefix}max_tokens must be a positive int or None, got {max_tokens!r}")
        if max_tokens < 1:
            raise ValueError(f"{prefix}max_tokens must be a positive int or None, got {max_tokens!r}")
    delay = options.max_retry_delay
    if delay is not None:
        if not _is_finite_number(delay):
            raise TypeError(f"{prefix}max_retry_delay must be a finite number of seconds >= 0 or None, got {delay!r}")
        if delay < 0:
            raise ValueError(f"{prefix}max_retry_delay must be a finite number of seconds >= 0 or None, got {delay!r}")
    retention = options.cache_retention
    if retention not in (None, "none", "short", "long"):
        raise ValueError(f"{prefix}cache_retention must be 'none', 'short', 'long' or None, got {retention!r}")
    budgets = options.thinking_budgets
    if budgets is not None:
        if not isinstance(budgets, Mapping):
            raise TypeError(
                f"{prefix}thinking_budgets must be a mapping of thinking level to a token count, "
                f"or None, got {type(budgets).__name__}"
            )
        for level, tokens in budgets.items():
            if level not in THINKING_LEVELS:
                raise ValueError(f"{prefix}thinking_budgets keys must be in {THINKING_LEVELS}, got {level!r}")
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                raise ValueError(f"{prefix}thinking_budgets[{level!r}] must be an int >= 0, got {tokens!r}")
    headers = options.headers
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise TypeError(f"{prefix}headers must be a mapping of str to str or None, got {type(headers).__name__}")
        for key, value in headers.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"{prefix}headers must map str to str, got {key!r}: {value!r}")
    metadata = options.metadata
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"{prefix}metadata must be a mapping or None, got {type(metadata).__name__}")
    limit = options.max_parallel_tool_calls
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"{prefix}max_parallel_tool_calls must be a positive int or None, got {limit!r}")
    propagate = options.propagate
    if not isinstance(propagate, tuple) or not all(
        isinstance(cls, type) and issubclass(cls, BaseException) for cls in propagate
    ):
        raise TypeError(f"{prefix}propagate must be a tuple of exception classes, got {propagate!r}")


def _is_finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


async def api_key_for(options: LoopOptions, provider: str) -> str | None:
    """The key a model call to `provider` uses: what `get_api_key(provider)` gives, else `api_key`."""
    key = None
    if options.get_api_key is not None:
        key = await call(options.get_api_key, provider)
    return key or options.api_key


async def call(fn: Callable[..., MaybeAwaitable[T]], *args: Any) -> T:
    """Call a plain or async callback and return its result (awaited when it is awaitable)."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result


async def notify(fn: Callable[..., MaybeAwaitable[None]], what: str, *args: Any) -> None:
    """Call a plain or async sink or listener: it must return None or an awaitable, which is awaited."""
    result = fn(*args)
    if result is not None:
        if not inspect.isawaitable(result):
            raise TypeError(f"{what} must return None or an awaitable, got {type(result).__name__}")
        await result
