"""Reading a Bedrock Converse stream: the AWS event-stream framing (`application/vnd.amazon.eventstream`)
and the Converse events it carries.

The framing is decoded by botocore's `EventStreamBuffer` (prelude and message CRCs, headers): the
reader only peeks at a message's length in its prelude (botocore's `DecodeUtils`) to hand botocore
whole messages, so a large message costs one copy, and to enforce `max_event_size` before its bytes
arrive. Each message becomes one event for the parser: `event` is `"<message type>:<name>"`
(`event:contentBlockDelta`, `exception:throttlingException`, `error:<code>`), `data` its payload
(an `error` message's `:error-message` header).

botocore is imported when the first body is read, never at import time (a stream function imports
it in a worker thread before that, so the event loop does not wait for it).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal

from httpx_sse import ServerSentEvent

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent
from .._types._messages import Model, ToolCall
from ._errors import ProviderError
from ._json_stream import ToolArguments
from ._parse import SSEParser, as_int, as_str, stream_object
from ._sse import body_chunks, unwind
from ._usage import make_usage

if TYPE_CHECKING:
    import httpx

__all__ = (
    "EVENT_STREAM",
    "BedrockParser",
    "bedrock_error_text",
    "http_error_text",
    "map_stop_reason",
    "read_event_stream",
)

EVENT_STREAM = "application/vnd.amazon.eventstream"
_PRELUDE_SIZE = 12  # a message's total length, its headers' length and the prelude's CRC
_REDACTED = "[Reasoning redacted]"
_DATA_RETENTION_DOCS = "https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html"

_ERROR_PREFIXES = {
    "InternalServerException": "Internal server error",
    "ModelStreamErrorException": "Model stream error",
    "ValidationException": "Validation error",
    "ThrottlingException": "Throttling error",
    "ServiceUnavailableException": "Service unavailable",
}
"""Bedrock's error types as error texts begin (the wording pi-ai uses, which retry and context
overflow checks match)."""

_STREAM_EXCEPTIONS = {
    "internalServerException": ("InternalServerException", True),
    "modelStreamErrorException": ("ModelStreamErrorException", True),
    "validationException": ("ValidationException", False),
    "throttlingException": ("ThrottlingException", True),
    "serviceUnavailableException": ("ServiceUnavailableException", True),
}
"""The exceptions a Converse stream may carry: (the error type, whether a retry may succeed)."""


def bedrock_error_text(kind: str, message: str) -> str:
    """The text of a Bedrock error of type `kind` (`ThrottlingException`...): `Throttling error:
    <message>`, with a pointer to the docs when the account's data retention mode is the cause."""
    prefix = _ERROR_PREFIXES.get(kind, kind)
    text = f"{prefix}: {message}" if prefix else message
    if "data retention mode" in message.lower():
        text += f" See {_DATA_RETENTION_DOCS} for supported data retention modes."
    return text


def http_error_text(status: int, headers: httpx.Headers, message: str) -> str:
    """The error text of a non-2xx answer: by the error type AWS names in `x-amzn-errortype`
    (`ValidationException:http://...`), else by the status."""
    kind = headers.get("x-amzn-errortype", "").partition(":")[0].strip()
    if not kind:
        return f"HTTP {status}: {message}"
    return bedrock_error_text(kind, message)


async def read_event_stream(
    response: httpx.Response, *, max_event_size: int, max_body_size: int
) -> AsyncGenerator[ServerSentEvent, None]:
    """The messages of an event-stream body, as events (see the module docstring).

    ProviderError when a message is larger than `max_event_size` bytes (botocore's own limits,
    128 KiB of headers and 24 MiB of payload, also apply), the body larger than `max_body_size`
    bytes, the framing is broken (a CRC mismatch, a malformed header), or the body ends inside a
    message.
    """
    from botocore.eventstream import DecodeUtils, EventStreamBuffer, ParserError

    decoder = EventStreamBuffer()
    pending = bytearray()
    body = 0
    async with aclosing(body_chunks(response)) as chunks:
        async for chunk in chunks:
            body += len(chunk)
            if body > max_body_size:
                await unwind(chunks)
                raise ProviderError(f"The response body is larger than max_body_size ({max_body_size} bytes)")
            pending += chunk
            while len(pending) >= _PRELUDE_SIZE:
                (total, _, _), _ = DecodeUtils.unpack_prelude(bytes(pending[:_PRELUDE_SIZE]))
                if total > max_event_size:
                    await unwind(chunks)
                    raise ProviderError(
                        f"The server sent an event stream message larger than max_event_size ({max_event_size} bytes)"
                    )
                size = max(total, _PRELUDE_SIZE)
                if len(pending) < size:
                    break
                decoder.add_data(bytes(pending[:size]))
                del pending[:size]
                try:
                    messages = list(decoder)
                except ParserError as exc:
                    await unwind(chunks)
                    raise ProviderError(f"Malformed event stream: {type(exc).__name__}: {exc}") from None
                for message in messages:
                    yield _event(message.headers, message.payload)
    if pending:
        raise ProviderError(
            "The event stream ended inside a message: the connection closed early and the response is incomplete."
        )


def _event(headers: dict[str, Any], payload: bytes) -> ServerSentEvent:
    kind = _header(headers, ":message-type")
    if kind == "exception":
        name = _header(headers, ":exception-type")
    elif kind == "error":
        name = _header(headers, ":error-code")
        return ServerSentEvent(f"error:{name}", _header(headers, ":error-message") or "UnknownError")
    else:
        name = _header(headers, ":event-type")
    return ServerSentEvent(f"{kind}:{name}", payload.decode("utf-8", "replace") or "{}")


def _header(headers: dict[str, Any], name: str) -> str:
    value = headers.get(name)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


# --- the Converse events --------------------------------------------------------------------


def map_stop_reason(reason: Any) -> Literal["stop", "length", "toolUse", "error"]:
    """A Converse `stopReason` as a stop reason, as pi-ai maps it (anything unknown is an error)."""
    if reason in ("end_turn", "stop_sequence"):
        return "stop"
    if reason in ("max_tokens", "model_context_window_exceeded"):
        return "length"
    if reason == "tool_use":
        return "toolUse"
    return "error"


class _Block:
    __slots__ = ("args", "id", "index", "kind", "name", "redacted", "redacted_chunks", "signature")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.signature: list[str] = []
        self.redacted = False
        self.redacted_chunks: list[bytes] = []
        self.args = ToolArguments()
        self.id = ""
        self.name = ""

    def thinking_signature(self) -> str:
        if self.redacted:
            return base64.b64encode(b"".join(self.redacted_chunks)).decode("ascii")
        return "".join(self.signature)


def _block_key(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class BedrockParser(SSEParser):
    """Converse stream events to assistant-message events, block by `contentBlockIndex`.

    As pi-ai reads them: a text or reasoning block opens with its first delta (Bedrock sends no
    `contentBlockStart` for them), a tool call with its `contentBlockStart`; redacted reasoning
    shows `[Reasoning redacted]` and keeps its bytes, base64, as the signature. The body is read to
    its end (the usage comes after `messageStop`); without a `messageStop` the response is
    incomplete.
    """

    end_marker = "messageStop event"
    complete_at_eof = True

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.blocks: dict[int | None, _Block] = {}
        self.stopped = False
        self.stop_reason: Any = None

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        kind, _, name = event.partition(":")
        if kind == "exception":
            raise self._exception(name, data)
        if kind == "error":
            raise ProviderError(data)
        if kind != "event":
            raise ProviderError(f"Unrecognizable event type: {name}")
        out: list[AssistantMessageEvent] = []
        if name == "contentBlockDelta":
            self._delta(stream_object(data, self.secret), out)
        elif name == "contentBlockStart":
            self._start(stream_object(data, self.secret), out)
        elif name == "contentBlockStop":
            payload = stream_object(data, self.secret)
            block = self.blocks.pop(_block_key(payload.get("contentBlockIndex")), None)
            if block is not None:
                out.append(self._end(block))
        elif name == "messageStart":
            role = stream_object(data, self.secret).get("role")
            if role != "assistant":
                raise ProviderError(f"Unexpected assistant message start but got {role} message start instead")
        elif name == "messageStop":
            self.stopped = True
            self.stop_reason = stream_object(data, self.secret).get("stopReason")
        elif name == "metadata":
            usage = stream_object(data, self.secret).get("usage")
            if isinstance(usage, dict):
                self._usage(usage)
        return out  # events of other names are not Converse's: ignored, as the SDK skips them

    def _exception(self, name: str, data: str) -> ProviderError:
        known = _STREAM_EXCEPTIONS.get(name)
        if known is None:  # not a modelled exception: its payload is the message
            return ProviderError(data)
        kind, retryable = known
        try:
            payload = stream_object(data, self.secret)
        except ProviderError:
            payload = {}
        message = payload.get("message") or payload.get("Message")
        text = message if isinstance(message, str) and message else "Unknown"
        return ProviderError(bedrock_error_text(kind, text), retryable=retryable)

    def _start(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        start = payload.get("start")
        tool = start.get("toolUse") if isinstance(start, dict) else None
        if not isinstance(tool, dict):
            return  # text and reasoning blocks open with their first delta
        block = _Block("tool", 0)
        block.id = as_str(tool.get("toolUseId"))
        block.name = as_str(tool.get("name"))
        event = self.builder.tool_call_start(block.id, block.name)
        block.index = event.content_index
        out.append(event)
        self.has_content = True
        self.blocks[_block_key(payload.get("contentBlockIndex"))] = block

    def _open(self, key: int | None, kind: str, out: list[AssistantMessageEvent]) -> _Block:
        event: Any = self.builder.text_start() if kind == "text" else self.builder.thinking_start()
        out.append(event)
        block = self.blocks[key] = _Block(kind, event.content_index)
        self.has_content = True
        return block

    def _delta(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        key = _block_key(payload.get("contentBlockIndex"))
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            return
        block = self.blocks.get(key)
        builder = self.builder
        tool = delta.get("toolUse")
        reasoning = delta.get("reasoningContent")
        if isinstance(delta.get("text"), str):
            if block is None:
                block = self._open(key, "text", out)
            if block.kind == "text":
                out.append(builder.text_delta(delta["text"], block.index))
        elif tool and block is not None and block.kind == "tool":
            fragment = as_str(tool.get("input")) if isinstance(tool, dict) else ""
            preview = block.args.append(fragment)
            out.append(builder.tool_call_delta(fragment, preview, index=block.index))
        elif isinstance(reasoning, dict) and reasoning:
            if block is None:
                block = self._open(key, "thinking", out)
            if block.kind == "thinking":
                self._reasoning(block, reasoning, out)

    def _reasoning(self, block: _Block, reasoning: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        text = reasoning.get("text")
        if isinstance(text, str) and text:
            out.append(self.builder.thinking_delta(text, block.index))
        signature = reasoning.get("signature")
        if isinstance(signature, str) and signature and not block.redacted:
            block.signature.append(signature)
        redacted = reasoning.get("redactedContent")
        if isinstance(redacted, str) and redacted:
            try:
                chunk = base64.b64decode(redacted, validate=True)
            except (binascii.Error, ValueError):
                raise ProviderError("Malformed stream data: redactedContent is not base64") from None
            if not block.redacted:  # the signature holds the redacted bytes from now on
                block.redacted = True
                out.append(self.builder.thinking_delta(_REDACTED, block.index))
            block.redacted_chunks.append(chunk)

    def _end(self, block: _Block) -> AssistantMessageEvent:
        builder = self.builder
        if block.kind == "text":
            return builder.text_end(block.index)
        if block.kind == "thinking":
            return builder.thinking_end(block.index, signature=block.thinking_signature(), redacted=block.redacted)
        arguments, error = block.args.final()
        return builder.tool_call_end(ToolCall(block.id, block.name, arguments, arguments_error=error), block.index)

    def _usage(self, usage: dict[str, Any]) -> None:
        input_tokens = as_int(usage.get("inputTokens"))
        output_tokens = as_int(usage.get("outputTokens"))
        self.builder.usage = make_usage(
            self.model,
            input=input_tokens,
            output=output_tokens,
            cache_read=as_int(usage.get("cacheReadInputTokens")),
            cache_write=as_int(usage.get("cacheWriteInputTokens")),
            total=as_int(usage.get("totalTokens")) or input_tokens + output_tokens,
        )

    def finish(self) -> list[AssistantMessageEvent]:
        # Blocks the stream left open keep their content without an end event (as pi-ai); their
        # signatures are kept.
        for block in self.blocks.values():
            if block.kind == "thinking":
                self.builder.thinking_end(block.index, signature=block.thinking_signature(), redacted=block.redacted)
        self.blocks.clear()
        builder = self.builder
        if not self.stopped:
            return [
                builder.error(
                    "error",
                    f"The stream ended before its {self.end_marker}: the connection closed early and the "
                    "response is incomplete.",
                )
            ]
        reason = map_stop_reason(self.stop_reason)
        if reason == "error":
            text = f"Provider stopped with: {self.stop_reason}" if self.stop_reason else "An unknown error occurred"
            return [builder.error("error", text)]
        return [builder.done(reason)]
