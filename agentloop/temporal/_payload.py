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
from .._wire._codec import encode_json, from_json, to_json

__all__ = ("AgentLoopPayloadConverter", "AgentRun", "data_converter")

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
    state: Mapping[str, Any] | None = field(default=None, repr=False)

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
        elif type(value) is AgentRun:
            data = {
                "kind": "run",
                "agent": value.agent,
                "prompts": [to_json(m) for m in value.prompts],
                "messages": [to_json(m) for m in value.messages],
                "state": value.state,
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
                state=data.get("state"),
            )
        raise ValueError(f"not an agentloop payload: kind {kind!r}")


class AgentLoopPayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, with agentloop's values as `json/agentloop` first."""

    def __init__(self) -> None:
        super().__init__(_AgentLoopJSONConverter(), *DefaultPayloadConverter.default_encoding_payload_converters)


data_converter = DataConverter(payload_converter_class=AgentLoopPayloadConverter)
"""The data converter for clients and workers that run agentloop workflows."""
