"""Test helpers for code built on agentloop: a scripted model and an event-order checker.

`ScriptedModel` is a stream function that plays scripted responses, one per LLM call, the way
`httpx.MockTransport` plays responses: no network, deterministic, abort-aware, pull-based (each
event is produced when the loop asks for it). `check_events` asserts that a run's events obey the
agent event grammar.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import anyio

from ._types._builder import AssistantMessageBuilder
from ._types._constants import ABORTED_TEXT
from ._types._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AssistantMessageEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from ._types._messages import AssistantMessage, Context, Model, ToolCall, Usage
from ._types._stream_fn import StreamOptions
from ._wire._json_text import decode_json

__all__ = (
    "EventOrderError",
    "Response",
    "ScriptedBlock",
    "ScriptedModel",
    "ScriptedText",
    "ScriptedThinking",
    "ScriptedToolCall",
    "check_events",
)


@dataclass(frozen=True, slots=True)
class ScriptedText:
    """A text block, streamed as these chunks."""

    chunks: str | Sequence[str]


@dataclass(frozen=True, slots=True)
class ScriptedThinking:
    """A thinking block, streamed as these chunks."""

    chunks: str | Sequence[str]


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A tool call. Arguments stream as `args_chunks` (default: their compact JSON in one chunk)."""

    id: str
    name: str
    arguments: Mapping[str, Any] | None = None
    args_chunks: Sequence[str] | None = None
    arguments_error: str | None = None

    def final(self) -> ToolCall:
        arguments = self.arguments
        if arguments is None:
            arguments = json.loads("".join(self.args_chunks)) if self.args_chunks else {}
        return ToolCall(self.id, self.name, arguments, arguments_error=self.arguments_error)


ScriptedBlock = ScriptedText | ScriptedThinking | ScriptedToolCall


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One scripted model response.

    Attributes:
        content: The blocks, in order (a plain `str` is one text block).
        stop_reason: Default `toolUse` when there is a tool call, else `stop`.
        error_message: Default "Scripted error" for `error`, "Request was aborted" for `aborted`.
        delay: Seconds before `start`. chunk_delay: seconds before each delta.
        fail_before_start: Only the terminal event, no `start`.
        raise_on_call: The stream function raises this when called (a contract violation, for
            testing the "raises anyway" path). raise_after: the iterator raises it after this
            many events instead.
        usage: Usage reported on the final message.
    """

    content: Sequence[ScriptedBlock | str] = ()
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] | None = None
    error_message: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    fail_before_start: bool = False
    raise_on_call: BaseException | None = None
    raise_after: int | None = None
    usage: Usage = field(default_factory=Usage)


class ScriptedModel:
    """A stream function that answers the n-th call with the n-th `Response`.

    Calls beyond the script end with an `error` event ("No more scripted responses"). `calls`
    records the context of every call.
    """

    def __init__(self, responses: Iterable[Response | str], *, model: Model | None = None) -> None:
        self.responses = [Response(content=(r,)) if isinstance(r, str) else r for r in responses]
        for i, r in enumerate(self.responses):
            if not isinstance(r, Response):
                raise TypeError(f"responses[{i}] must be a Response or a str, got {type(r).__name__}")
        self.calls: list[Context] = []

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        index = len(self.calls)
        self.calls.append(context)
        response = self.responses[index] if index < len(self.responses) else None
        if response is not None and response.raise_on_call is not None and response.raise_after is None:
            raise response.raise_on_call
        return _play(response, model, options)


def _blocks(response: Response) -> list[ScriptedBlock]:
    return [ScriptedText(b) if isinstance(b, str) else b for b in response.content]


def _chunks(value: str | Sequence[str]) -> Sequence[str]:
    return [value] if isinstance(value, str) else value


async def _play(
    response: Response | None, model: Model, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    signal = options.signal
    builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
    if response is None:
        yield builder.error("error", "No more scripted responses")
        return
    if response.delay:
        await anyio.sleep(response.delay)
    blocks = _blocks(response)
    finals = [b.final() if isinstance(b, ScriptedToolCall) else None for b in blocks]
    stop = response.stop_reason or ("toolUse" if any(finals) else "stop")
    if signal.aborted:
        yield builder.error("aborted", ABORTED_TEXT)
        return
    produced = 0

    def check() -> None:
        if response.raise_after is not None and response.raise_on_call is not None and produced >= response.raise_after:
            raise response.raise_on_call

    if not response.fail_before_start:
        check()
        produced += 1
        yield builder.start()
        for block, final in zip(blocks, finals, strict=True):
            steps = list(_steps(builder, block, final))
            for is_delta, step in steps:
                if is_delta and response.chunk_delay:
                    await anyio.sleep(response.chunk_delay)
                if signal.aborted:
                    yield builder.error("aborted", ABORTED_TEXT)
                    return
                check()
                produced += 1
                yield step()
        if signal.aborted:
            yield builder.error("aborted", ABORTED_TEXT)
            return
        check()
    builder.usage = response.usage
    builder.set_content(tuple(_final_content(blocks, finals)))
    if stop == "error" or stop == "aborted":
        default = "Scripted error" if stop == "error" else ABORTED_TEXT
        yield builder.error(stop, response.error_message if response.error_message is not None else default)
    else:
        yield builder.done(stop)


def _final_content(blocks: Sequence[ScriptedBlock], finals: Sequence[ToolCall | None]) -> list[Any]:
    from ._types._messages import TextContent, ThinkingContent

    out: list[Any] = []
    for block, final in zip(blocks, finals, strict=True):
        if final is not None:
            out.append(final)
        elif isinstance(block, ScriptedText):
            out.append(TextContent("".join(_chunks(block.chunks))))
        else:
            assert isinstance(block, ScriptedThinking)
            out.append(ThinkingContent("".join(_chunks(block.chunks))))
    return out


def _steps(
    builder: AssistantMessageBuilder, block: ScriptedBlock, final: ToolCall | None
) -> Iterable[tuple[bool, Any]]:
    if isinstance(block, ScriptedText):
        yield False, builder.text_start
        for chunk in _chunks(block.chunks):
            yield True, lambda chunk=chunk: builder.text_delta(chunk)
        yield False, builder.text_end
    elif isinstance(block, ScriptedThinking):
        yield False, builder.thinking_start
        for chunk in _chunks(block.chunks):
            yield True, lambda chunk=chunk: builder.thinking_delta(chunk)
        yield False, builder.thinking_end
    else:
        assert final is not None
        chunks = block.args_chunks if block.args_chunks is not None else [_compact(final.arguments)]
        yield False, lambda: builder.tool_call_start(final.id, final.name)
        for chunk in chunks:
            yield (
                True,
                lambda chunk=chunk: builder.tool_call_delta(chunk, _parse_object(builder.tool_call_text() + chunk)),
            )
        yield False, lambda: builder.tool_call_end(final)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _parse_object(text: str) -> dict[str, Any] | None:
    try:
        value = decode_json(text, constants=True)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- the event grammar ----------------------------------------------------------------------


class EventOrderError(AssertionError):
    """Raised by `check_events` with the index and the rule an event broke."""


def check_events(events: Sequence[AgentEvent]) -> None:
    """Assert that `events` (one complete run) obey the agent event grammar.

    Checks: `agent_start` first and `agent_end` last, once each; turns do not nest; every
    `message_start` is closed by its `message_end` before another message starts, with
    `message_update` only inside an assistant message; tool events lie inside a turn, after its
    assistant message, each call started once and ended once; every tool call of a turn's
    assistant message has exactly one tool result, in source order (none for error/aborted
    responses); `agent_end.messages` are the messages of the run's `message_end` events.
    """

    def fail(i: int, rule: str) -> NoReturn:
        raise EventOrderError(f"event {i} ({events[i].type if i < len(events) else 'end'}): {rule}")

    if not events or not isinstance(events[0], AgentStart):
        fail(0, "a run starts with agent_start")
    in_turn = False
    open_message: Any = None
    assistant: AssistantMessage | None = None
    started: set[str] = set()
    ended: set[str] = set()
    ended_messages: list[Any] = []
    for i, event in enumerate(events):
        kind = type(event)
        if i and kind is AgentStart:
            fail(i, "agent_start appears once")
        if isinstance(event, AgentEnd):
            if i != len(events) - 1:
                fail(i, "agent_end is the last event")
            if in_turn or open_message is not None:
                fail(i, "agent_end inside a turn or a message")
            if list(event.messages) != ended_messages:
                fail(i, "agent_end.messages must be the messages of the run's message_end events")
        elif kind is TurnStart:
            if in_turn:
                fail(i, "turn_start inside a turn")
            in_turn, assistant, started, ended = True, None, set(), set()
        elif isinstance(event, TurnEnd):
            if not in_turn or open_message is not None:
                fail(i, "turn_end outside a turn or inside a message")
            message = event.message
            if assistant is None or message != assistant:
                fail(i, "turn_end.message is the turn's assistant message")
            expected = [] if assistant.stop_reason in ("error", "aborted") else [c.id for c in assistant.tool_calls]
            got = [r.tool_call_id for r in event.tool_results]
            if got != expected:
                fail(i, f"tool results {got} must answer the tool calls {expected} in source order")
            if started != ended:
                fail(i, f"tool calls started but not ended: {sorted(started - ended)}")
            in_turn = False
        elif isinstance(event, MessageStart):
            if not in_turn or open_message is not None:
                fail(i, "message_start outside a turn or inside another message")
            open_message = event.message
        elif kind is MessageUpdate:
            if open_message is None or open_message.role != "assistant":
                fail(i, "message_update outside an assistant message")
        elif isinstance(event, MessageEnd):
            if open_message is None or open_message.role != event.message.role:
                fail(i, "message_end without its message_start")
            open_message = None
            ended_messages.append(event.message)
            if isinstance(event.message, AssistantMessage):
                assistant = event.message
        elif isinstance(event, (ToolExecutionStart, ToolExecutionUpdate, ToolExecutionEnd)):
            call_id = event.tool_call_id
            if not in_turn or assistant is None:
                fail(i, "tool events come inside a turn, after its assistant message")
            assert assistant is not None
            if call_id not in {c.id for c in assistant.tool_calls}:
                fail(i, f"tool call {call_id!r} is not in the turn's assistant message")
            if kind is ToolExecutionStart:
                if call_id in started:
                    fail(i, f"tool call {call_id!r} started twice")
                started.add(call_id)
            elif call_id not in started or call_id in ended:
                fail(i, f"tool call {call_id!r} updated or ended outside its execution")
            elif kind is ToolExecutionEnd:
                ended.add(call_id)
        elif kind is not AgentStart:
            fail(i, f"unknown event {event!r}")
    if not isinstance(events[-1], AgentEnd):
        fail(len(events), "a run ends with agent_end")
