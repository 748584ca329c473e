"""Temporal payloads for agentloop values: the camelCase JSON codec, as a payload converter.

Messages, events, content blocks and tool results (and lists of them), and a run's input
(`AgentRun`) travel as `json/agentloop` payloads: `{"kind": ..., ...}` with the codec's JSON
forms inside, so a payload decodes to the same value whatever type hint the receiver gives.
Everything else goes to Temporal's default converters. A model travels as a plain JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
)
from temporalio.exceptions import ApplicationError

from .._types._constants import AGENT_MESSAGE_TYPES
from .._types._events import (
    AgentEnd,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from .._types._messages import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._json_text import encode_json
from ..context._compaction import CompactionState

__all__ = (
    "PAYLOAD_LIMIT",
    "TOO_LARGE",
    "AgentLoopPayloadConverter",
    "AgentRun",
    "CarriedState",
    "PayloadTooLarge",
    "UndecodableRun",
    "check_fits",
    "data_converter",
    "json_size",
)

PAYLOAD_LIMIT = 2 * 1024 * 1024 - 64 * 1024
"""The most JSON bytes a run puts in one Temporal payload without a store: a tool's result, a
model call's context, a run's result or the transcript carried into a new history. Temporal
refuses a payload over 2 MiB (its default blob size limit); the 64 KiB left over are for what
wraps the value. With a `context_store` a payload of 256 KiB or more is kept in the store (by
reference) and there is no such limit."""

TOO_LARGE = "AgentLoopPayloadTooLarge"
"""The type of the (non-retryable) error that fails a run whose payload cannot fit."""

_ENCODING = b"json/agentloop"
_CODEC_TYPES = frozenset(
    {
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        CustomMessage,
        TextContent,
        ThinkingContent,
        ImageContent,
        ToolCall,
        AgentToolResult,
        AgentStart,
        AgentEnd,
        TurnStart,
        TurnEnd,
        MessageStart,
        MessageUpdate,
        MessageEnd,
        ToolExecutionStart,
        ToolExecutionUpdate,
        ToolExecutionEnd,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CarriedState:
    """What a run carries into its next history when its workflow continues as new.

    Attributes:
        run_id: The run's id in its events' envelopes (the first history's workflow id).
        seq: The `seq` of the next event.
        turn: The turns begun so far.
        turns: The turns the loop ran in the earlier histories (counted against `max_turns`).
        run_messages: The messages the run added in the earlier histories.
        steering: Steering messages not taken yet.
        follow_ups: Follow-up messages not taken yet.
        aborted: Whether the run was aborted.
        context_key: With a context store, the key of the last model call's context (None:
            the next call sends the whole context).
        context_length: How many LLM messages that context had.
        compaction: With the agent's `compaction`, where it stands in the carried transcript
            (which starts at the first kept message), or None before a compaction.
    """

    run_id: str
    seq: int = 0
    turn: int = 0
    turns: int = 0
    run_messages: tuple[AgentMessage, ...] = ()
    steering: tuple[AgentMessage, ...] = ()
    follow_ups: tuple[AgentMessage, ...] = ()
    aborted: bool = False
    context_key: str | None = None
    context_length: int = 0
    compaction: CompactionState | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "seq": self.seq,
            "turn": self.turn,
            "turns": self.turns,
            "runMessages": [to_json(m) for m in self.run_messages],
            "steering": [to_json(m) for m in self.steering],
            "followUps": [to_json(m) for m in self.follow_ups],
            "aborted": self.aborted,
            "contextKey": self.context_key,
            "contextLength": self.context_length,
            "compaction": None if self.compaction is None else self.compaction.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CarriedState:
        return cls(
            run_id=data["runId"],
            seq=int(data.get("seq", 0)),
            turn=int(data.get("turn", 0)),
            turns=int(data.get("turns", 0)),
            run_messages=tuple(from_json(m) for m in data.get("runMessages", ())),
            steering=tuple(from_json(m) for m in data.get("steering", ())),
            follow_ups=tuple(from_json(m) for m in data.get("followUps", ())),
            aborted=bool(data.get("aborted")),
            context_key=data.get("contextKey"),
            context_length=int(data.get("contextLength") or 0),
            compaction=None if data.get("compaction") is None else CompactionState.from_json(data["compaction"]),
        )


@dataclass(frozen=True, kw_only=True)
class AgentRun:
    """The input of `AgentWorkflow`: which agent, the transcript so far, and the new prompts.

    `prompts` empty continues from `messages` (whose last message must not be an assistant
    message). `state` is the workflow's own: what a run carries into its next history
    (continue-as-new); leave it None.
    """

    agent: str
    prompts: Sequence[AgentMessage] = ()
    messages: Sequence[AgentMessage] = ()
    state: CarriedState | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not self.agent:
            raise TypeError(f"AgentRun.agent must be the name of a TemporalAgent, got {self.agent!r}")
        for name in ("prompts", "messages"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise TypeError(f"AgentRun.{name} must be a sequence of messages, got {type(value).__name__}")
            for i, message in enumerate(value):
                if not isinstance(message, AGENT_MESSAGE_TYPES):
                    raise TypeError(f"AgentRun.{name}[{i}] must be an agentloop message, got {type(message).__name__}")
        if self.state is not None and not isinstance(self.state, CarriedState):
            raise TypeError(f"AgentRun.state is the workflow's own: leave it None, got {type(self.state).__name__}")


def json_size(data: Any) -> int:
    """The size in bytes of the JSON text of `data` (plain JSON values)."""
    text = encode_json(data)
    return len(text) if text.isascii() else len(text.encode())


class PayloadTooLarge(ApplicationError):
    """A value too large for one Temporal payload, with no store to keep it by reference.

    Raised in the workflow, it fails the run (not retried): `result()` and `stream_events`
    raise Temporal's `WorkflowFailureError` with it as the cause.
    """

    def __init__(self, what: str, size: int) -> None:
        super().__init__(
            f"{what} is {size} bytes of JSON, over the {PAYLOAD_LIMIT} bytes a Temporal payload carries: "
            "give the TemporalAgent a context_store to keep large values by reference",
            type=TOO_LARGE,
            non_retryable=True,
        )


def check_fits(what: str, data: Any) -> None:
    """Raise `PayloadTooLarge` if the JSON of `data` is over `PAYLOAD_LIMIT`."""
    size = json_size(data)
    if size > PAYLOAD_LIMIT:
        raise PayloadTooLarge(what, size)


def _is_codec_value(value: Any) -> bool:
    return type(value) in _CODEC_TYPES


class _AgentLoopJSONConverter(EncodingPayloadConverter):
    """The `json/agentloop` encoding: agentloop values through the camelCase codec."""

    @property
    def encoding(self) -> str:
        return _ENCODING.decode()

    def to_payload(self, value: Any) -> Payload | None:
        if _is_codec_value(value):
            data: dict[str, Any] = {"kind": "value", "value": to_json(value)}
        elif isinstance(value, (list, tuple)) and value and all(_is_codec_value(v) for v in value):
            data = {"kind": "list", "items": [to_json(v) for v in value]}
        elif isinstance(value, AgentRun):
            data = {
                "kind": "run",
                "agent": value.agent,
                "prompts": [to_json(m) for m in value.prompts],
                "messages": [to_json(m) for m in value.messages],
                "state": None if value.state is None else value.state.to_json(),
            }
        else:
            return None
        return Payload(metadata={"encoding": _ENCODING}, data=encode_json(data).encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        import json

        data = json.loads(payload.data)
        kind = data.get("kind")
        if kind == "value":
            return from_json(data["value"])
        if kind == "list":
            return [from_json(item) for item in data["items"]]
        if kind == "run":
            return AgentRun(
                agent=data["agent"],
                prompts=[from_json(m) for m in data["prompts"]],
                messages=[from_json(m) for m in data["messages"]],
                state=None if data.get("state") is None else CarriedState.from_json(data["state"]),
            )
        raise ValueError(f"not an agentloop payload: kind {kind!r}")


class UndecodableRun:
    """A run's input (`AgentRun`) that this process could not decode, and why.

    The workflow fails with the reason at once: a failure to decode the input would otherwise
    fail the workflow task, which Temporal retries without end while the run looks alive.
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class AgentLoopPayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, with agentloop's values as `json/agentloop` first."""

    def __init__(self) -> None:
        super().__init__(_AgentLoopJSONConverter(), *DefaultPayloadConverter.default_encoding_payload_converters)

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[Any]:
        """The values of `payloads`; a run's input that cannot be decoded is an `UndecodableRun`."""
        try:
            return super().from_payloads(payloads, type_hints)
        except Exception as exc:
            if type_hints != [AgentRun]:
                raise
            cause = exc.__cause__ or exc
            return [UndecodableRun(f"{type(cause).__name__}: {cause}")]


data_converter = DataConverter(payload_converter_class=AgentLoopPayloadConverter)
"""The data converter for clients and workers that run agentloop workflows."""
