"""A server's `sampling/createMessage` requests, answered by an agentloop model.

The server sends messages and a system prompt; they become a `Context` for one call of the
stream function, and the model's answer goes back as text, with the name of the model that
answered (the provider's, when it says another than the one asked for). The server's tools in
the request (`tools`, `toolChoice`) are not offered to the model: the answer is text only.

A server chooses how often it asks, and each request is a model call paid by the client: a
connection answers at most `max_calls` of them, each capped at `max_tokens` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp.types as mcp_types

from .._core._loop import resolve_stream_fn
from .._types._abort import AbortSignal
from .._types._messages import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    TextContent,
    UserMessage,
)
from .._types._stream_fn import StreamFn, StreamOptions, opened_stream

__all__ = ("DEFAULT_MAX_SAMPLING_CALLS", "DEFAULT_MAX_SAMPLING_TOKENS", "Sampling", "sample")

DEFAULT_MAX_SAMPLING_CALLS = 50
"""How many sampling requests one connection to a server gets answered, by default."""
DEFAULT_MAX_SAMPLING_TOKENS = 4096
"""The cap on the tokens of one sampling answer, by default."""

_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "toolUse": "toolUse"}


@dataclass(frozen=True, slots=True)
class Sampling:
    """How a server's sampling requests are answered: `model` through `stream_fn`.

    Args:
        model: The model that answers.
        stream_fn: The stream function (None: the default one, chosen by `model.api`).
        api_key: Passed to the stream function.
        max_tokens: A cap on the tokens the server asks for in one answer (default 4096; None:
            the server's `maxTokens` as it is).
        max_calls: How many sampling requests one connection to the server gets answered
            (default 50; None: no limit). Past it, each request is answered with an error, and
            no model is called; opening the server again starts a new count.
    """

    model: Model
    stream_fn: StreamFn | None = None
    api_key: str | None = None
    max_tokens: int | None = DEFAULT_MAX_SAMPLING_TOKENS
    max_calls: int | None = DEFAULT_MAX_SAMPLING_CALLS

    def __post_init__(self) -> None:
        if not isinstance(self.model, Model):
            raise TypeError(f"model must be an agentloop.Model, got {type(self.model).__name__}")
        resolve_stream_fn(self.stream_fn)  # a stream_fn that is not callable fails here
        for name, value in (("max_tokens", self.max_tokens), ("max_calls", self.max_calls)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")


async def sample(
    sampling: Sampling, params: mcp_types.CreateMessageRequestParams
) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
    """Answer one sampling request (a model error is answered as an MCP error)."""
    model = sampling.model
    messages: list[Message] = [_message(item, model) for item in params.messages]
    max_tokens = params.max_tokens
    if sampling.max_tokens is not None:
        max_tokens = min(max_tokens, sampling.max_tokens)
    options = StreamOptions(
        signal=AbortSignal(), api_key=sampling.api_key, temperature=params.temperature, max_tokens=max_tokens
    )
    context = Context(system_prompt=params.system_prompt or "", messages=messages)
    answer: AssistantMessage | None = None
    source = resolve_stream_fn(sampling.stream_fn)(model, context, options)
    async with opened_stream(source) as events:
        async for event in events:
            if event.type == "done":
                answer = event.message
                break
            if event.type == "error":
                text = event.error.error_message or "the model failed"
                return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=text)
    if answer is None:
        return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message="the model ended without an answer")
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text=answer.text),
        model=_answered_by(answer) or model.id,
        stop_reason=_STOP_REASONS.get(answer.stop_reason, "endTurn"),
    )


def _answered_by(answer: AssistantMessage) -> str:
    """The model that answered: the provider's name for it when it gave one (`responseModel`,
    such as a dated version of the model asked for), else the model asked for."""
    answered = (answer.extra or {}).get("responseModel")
    return answered if isinstance(answered, str) and answered else answer.model


def _message(item: mcp_types.SamplingMessage, model: Model) -> Message:
    blocks = item.content if isinstance(item.content, list) else [item.content]
    if item.role == "assistant":
        text = [TextContent(_text(block)) for block in blocks]
        return AssistantMessage(content=tuple(text), api=model.api, provider=model.provider, model=model.id)
    content: list[TextContent | ImageContent] = []
    for block in blocks:
        if isinstance(block, mcp_types.ImageContent):
            content.append(ImageContent(data=block.data, mime_type=block.mime_type))
        else:
            content.append(TextContent(_text(block)))
    return UserMessage(content=tuple(content))


def _text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    return f"[{getattr(block, 'type', type(block).__name__)}]"
