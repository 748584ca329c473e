"""The pi proxy protocol on the wire, shared by the client (`stream_proxy`) and the server (`proxy_app`).

Request: `POST {proxy_url}/api/stream` with `Authorization: Bearer <token>` and the JSON body
`{"model": ..., "context": ..., "options": ...}` in pi-ai's camelCase (the API key is never sent).
The context is `{systemPrompt?, messages, tools?}` from pi-agent-core 0.73 (and `stream_proxy`),
or `{messages}` led by a `system` message from 1.x; the server reads both (`_SystemState`).

Response: lines `data: <event JSON>`, one bandwidth-saving event per line (the uniform assistant
events without `partial`), which the client turns back into full events with an
`AssistantMessageBuilder`:

    {"type": "start"}
    {"type": "text_start", "contentIndex": i}          also thinking_start
    {"type": "text_delta", "contentIndex": i, "delta": s}   also thinking_delta, toolcall_delta
    {"type": "text_end", "contentIndex": i, "contentSignature"?: s}   thinking_end also "redacted"?
    {"type": "toolcall_start", "contentIndex": i, "id": s, "toolName": s}
    {"type": "toolcall_end", "contentIndex": i, "toolCall": {...}}
    {"type": "done", "reason": "stop"|"length"|"toolUse", "usage": {...}}
    {"type": "error", "reason": "error"|"aborted", "errorMessage"?: s, "usage": {...}}

Extensions beyond the TypeScript protocol (TypeScript clients ignore unknown keys):
`thinking_end.redacted`, and on `done`/`error` `responseId` and `content` (the final blocks, sent
only when they differ from what the deltas built, so the client's final message is exact).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..._types._builder import AssistantMessageBuilder
from ..._types._constants import DONE_REASONS, ERROR_REASONS, LLM_MESSAGE_TYPES, REASONING_LEVELS
from ..._types._events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
)
from ..._types._messages import (
    Context,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from ..._types._stream_fn import StreamOptions
from ..._wire._decode import from_json
from ..._wire._decode import usage_from_json as _usage_from
from ..._wire._encode import to_json
from ..._wire._encode import usage_json as _usage
from ..._wire._json_text import decode_json, encode_json
from ..._wire._model_json import get_field as _get
from ..._wire._model_json import kind_of as _kind
from ..._wire._model_json import model_from_json, model_to_json
from ..._wire._model_json import str_map as _str_map

__all__ = (
    "PROXY_PATH",
    "ProxyProtocolError",
    "ProxyTool",
    "WireDecoder",
    "WireEncoder",
    "decode_request",
    "dumps_bytes",
    "encode_request",
)

PROXY_PATH = "/api/stream"


class ProxyProtocolError(ValueError):
    """The other side sent something the proxy protocol does not allow."""


def dumps_bytes(value: Any) -> bytes:
    """The codec's compact, strict JSON (`encode_json`) as UTF-8: NaN and the infinities become null
    and lone surrogates `\\u` escapes, as JavaScript writes them (the other side may be one)."""
    return encode_json(value).encode("utf-8")


# --- the request body -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProxyTool:
    """A tool declaration as the server receives it (what a model needs: name, description, schema)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)


def _context_json(context: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if context.system_prompt:
        out["systemPrompt"] = context.system_prompt
    out["messages"] = [to_json(m) for m in context.messages]
    if context.tools:
        out["tools"] = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)} for t in context.tools
        ]
    return out


def _options_json(options: StreamOptions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if options.temperature is not None:
        out["temperature"] = options.temperature
    if options.max_tokens is not None:
        out["maxTokens"] = options.max_tokens
    if options.reasoning is not None and options.reasoning != "off":
        out["reasoning"] = options.reasoning  # pi-ai has no "off": an absent level means off
    if options.session_id is not None:
        out["sessionId"] = options.session_id
    if options.headers is not None:
        out["headers"] = dict(options.headers)
    if options.metadata is not None:
        out["metadata"] = dict(options.metadata)
    if options.thinking_budgets is not None:
        out["thinkingBudgets"] = dict(options.thinking_budgets)
    if options.max_retry_delay is not None:
        out["maxRetryDelayMs"] = round(options.max_retry_delay * 1000)
    if options.cache_retention is not None:
        out["cacheRetention"] = options.cache_retention
    return out  # options.api_key is never sent


def encode_request(model: Model, context: Context, options: StreamOptions) -> bytes:
    """The JSON body of a proxy request (no API key in it)."""
    return dumps_bytes(
        {"model": model_to_json(model), "context": _context_json(context), "options": _options_json(options)}
    )


def _decode_tool(raw: Any, where: str) -> ProxyTool:
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object, got {_kind(raw)}")
    name = _get(raw, "name", str, where)
    if not name:
        raise ValueError(f"{where}.name must be a non-empty string")
    return ProxyTool(name, _get(raw, "description", str, where, ""), _get(raw, "parameters", dict, where, {}))


class _SystemState:
    """The system prompt and tools of a request, replayed from its system messages in order.

    pi-agent-core 1.x sends no `systemPrompt`/`tools`: `normalizeContext` folds them into a
    leading `{role: "system", content, toolsAdded?}` message, and later system messages may add
    text, patch named `sections` (null removes one) and add or remove tools. A `Context` has one
    prompt and one tool set, so every system message is folded into them as pi-ai's
    `collapseSystemMessages` does for APIs without mid-conversation system messages: the texts
    joined by a blank line, then the sections; tools by name, a removal before the additions of
    the same message.
    """

    __slots__ = ("sections", "texts", "tools")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.sections: dict[str, str] = {}
        self.tools: dict[str, ProxyTool] = {}

    def add(self, text: str, tools: list[ProxyTool]) -> None:
        if text:
            self.texts.append(text)
        for tool in tools:
            self.tools[tool.name] = tool

    def fold(self, raw: dict[str, Any], where: str) -> None:
        content = raw.get("content", "")
        if isinstance(content, list):
            parts = []
            for i, block in enumerate(content):
                if not isinstance(block, dict):
                    raise ValueError(f"{where}.content[{i}] must be a content block, got {_kind(block)}")
                if block.get("type") == "text":  # other blocks are not prompt text (as pi-ai's contentText)
                    parts.append(_get(block, "text", str, f"{where}.content[{i}]", ""))
            content = "\n".join(parts)
        elif not isinstance(content, str):
            raise ValueError(f"{where}.content must be a string or an array of text blocks, got {_kind(content)}")
        sections = _get(raw, "sections", dict, where, {})
        for name, value in sections.items():
            if value is None:
                self.sections.pop(name, None)
            elif isinstance(value, str):
                self.sections[name] = value
            else:
                raise ValueError(f"{where}.sections.{name} must be a string or null, got {_kind(value)}")
        for i, removed in enumerate(_get(raw, "toolsRemoved", list, where, [])):
            if not isinstance(removed, dict) or not isinstance(removed.get("name"), str):
                raise ValueError(f"{where}.toolsRemoved[{i}] must be an object with a name")
            self.tools.pop(removed["name"], None)
        added = _get(raw, "toolsAdded", list, where, [])
        self.add(content, [_decode_tool(t, f"{where}.toolsAdded[{i}]") for i, t in enumerate(added)])

    def prompt(self) -> str:
        parts = ["\n\n".join(self.texts), *self.sections.values()]
        return "\n\n".join(p for p in parts if p)


def _decode_context(data: Any) -> Context:
    """A `Context` from a request of either client generation.

    pi-agent-core 0.73 sends `systemPrompt` and `tools`; 1.x sends system messages in
    `messages` instead (see `_SystemState`). Both may appear: the top-level fields come first,
    as pi-ai's `normalizeContext` puts them.
    """
    if not isinstance(data, dict):
        raise ValueError(f"context must be an object, got {_kind(data)}")
    if "messages" not in data:
        raise ValueError("context.messages is missing")
    raw_messages = _get(data, "messages", list, "context")
    if raw_messages is None:
        raise ValueError("context.messages must be an array, got null")
    system = _SystemState()
    system.add(
        _get(data, "systemPrompt", str, "context", ""),
        [_decode_tool(t, f"context.tools[{i}]") for i, t in enumerate(_get(data, "tools", list, "context", []))],
    )
    messages: list[Message] = []
    for i, raw in enumerate(raw_messages):
        where = f"context.messages[{i}]"
        if isinstance(raw, dict) and raw.get("role") == "system":
            system.fold(raw, where)
            continue
        try:
            message = from_json(raw)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not isinstance(message, LLM_MESSAGE_TYPES):
            role = raw.get("role") if isinstance(raw, dict) else None
            raise ValueError(f"{where}: expected a user, assistant or toolResult message, got role {role!r}")
        messages.append(message)
    return Context(system_prompt=system.prompt(), messages=tuple(messages), tools=tuple(system.tools.values()))


def _decode_options(data: Any) -> dict[str, Any]:
    """The `StreamOptions` keyword arguments (all but `signal` and `api_key`); unknown keys are ignored."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"options must be an object, got {_kind(data)}")
    number = (int, float)
    out: dict[str, Any] = {}
    out["temperature"] = _get(data, "temperature", number, "options")
    max_tokens = _get(data, "maxTokens", int, "options")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"options.maxTokens must be a positive integer, got {max_tokens}")
    out["max_tokens"] = max_tokens
    reasoning = _get(data, "reasoning", str, "options")
    if reasoning is not None and reasoning != "off" and reasoning not in REASONING_LEVELS:
        raise ValueError(f"options.reasoning must be one of {', '.join(REASONING_LEVELS)}, got {reasoning!r}")
    out["reasoning"] = None if reasoning == "off" else reasoning
    out["session_id"] = _get(data, "sessionId", str, "options")
    out["headers"] = _str_map(data, "headers", "options")
    out["metadata"] = _get(data, "metadata", dict, "options")
    budgets = _get(data, "thinkingBudgets", dict, "options")
    if budgets is not None and not all(isinstance(v, int) and not isinstance(v, bool) for v in budgets.values()):
        raise ValueError("options.thinkingBudgets must map levels to integers")
    out["thinking_budgets"] = budgets
    delay = _get(data, "maxRetryDelayMs", number, "options")
    if delay is not None and delay < 0:
        raise ValueError(f"options.maxRetryDelayMs must be >= 0, got {delay}")
    out["max_retry_delay"] = None if delay is None else delay / 1000
    retention = _get(data, "cacheRetention", str, "options")
    if retention is not None and retention not in ("none", "short", "long"):
        raise ValueError(f"options.cacheRetention must be none, short or long, got {retention!r}")
    out["cache_retention"] = retention
    return out


def decode_request(body: bytes) -> tuple[Model, Context, dict[str, Any]]:
    """Model, context and `StreamOptions` keywords from a request body; ValueError says what is wrong."""
    try:
        data = decode_json(body, constants=True)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"the body must be a JSON object, got {_kind(data)}")
    if "model" not in data:
        raise ValueError("model is missing")
    if "context" not in data:
        raise ValueError("context is missing")
    return model_from_json(data["model"]), _decode_context(data["context"]), _decode_options(data.get("options"))


# --- the events -----------------------------------------------------------------------------


def _tool_arguments() -> Any:
    """A tool call's argument reader, as the providers preview arguments (`ToolArguments`)."""
    from .._json_stream import ToolArguments  # lazy: `import agentloop` stays light

    return ToolArguments()


def _final_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """The arguments of a finished tool call, and an error when the text is not a JSON object."""
    if not text.strip():
        return {}, None
    try:
        value = decode_json(text)
    except ValueError as exc:
        return {}, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {_kind(value)}"
    return value, None


_COUNTS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_COSTS = ("input", "output", "cacheRead", "cacheWrite", "total")


def _check_usage(usage: Any, event: str) -> None:
    """Token counts are integers >= 0 and costs finite numbers (an absent one counts as 0)."""
    cost = usage.get("cost") if isinstance(usage, Mapping) else None
    if not isinstance(usage, Mapping) or (cost is not None and not isinstance(cost, Mapping)):
        raise ProxyProtocolError(f"Malformed proxy event {event}: usage must be an object")
    for key in _COUNTS:
        value = usage.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ProxyProtocolError(f"Malformed proxy event {event}: usage.{key} must be an integer >= 0")
    costs: Mapping[str, Any] = cost if cost is not None else {}
    for key in _COSTS:
        value = costs.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ProxyProtocolError(f"Malformed proxy event {event}: usage.cost.{key} must be a number")


class WireDecoder:
    """Turns proxy wire events back into full `AssistantMessageEvent`s (the client side).

    `feed` raises `ProxyProtocolError` for an event that breaks the protocol, and returns None
    for an event type it does not know (ignored, as the reference does).
    """

    __slots__ = ("_arguments", "_builder", "_ended", "_kinds", "_started")

    def __init__(self, model: Model) -> None:
        self._builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        self._kinds: list[str] = []  # the block type at each content index
        self._ended: set[int] = set()  # the content indexes whose block ended
        self._started = False
        self._arguments: dict[int, Any] = {}  # each open tool call's `ToolArguments`, by content index

    def error(self, reason: Literal["error", "aborted"], message: str) -> ErrorEvent:
        """A terminal error event that keeps what was built so far."""
        return self._builder.error(reason, message)

    def feed_line(self, line: str) -> AssistantMessageEvent | None:
        """One line of the response body: `data: <json>` lines are events, other lines are ignored."""
        if not line.startswith("data:"):
            return None
        data = line[5:].strip()
        if not data:
            return None
        try:
            value = decode_json(data)
        except ValueError as exc:
            raise ProxyProtocolError(f"The proxy server sent malformed JSON: {exc}") from None
        return self.feed(value)

    def _index(self, data: Mapping[str, Any], kind: str, event: str, *, new: bool = False, end: bool = False) -> int:
        if not self._started:
            raise ProxyProtocolError(f"Received {event} before start")
        index = data.get("contentIndex")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProxyProtocolError(f"Malformed proxy event {event}: contentIndex must be an integer")
        if new:
            if index != len(self._kinds):
                raise ProxyProtocolError(
                    f"Received {event} for content index {index}; the next block is {len(self._kinds)}"
                )
            self._kinds.append(kind)
        elif not 0 <= index < len(self._kinds) or self._kinds[index] != kind:
            what = {"text": "text", "thinking": "thinking", "toolCall": "toolCall"}[kind]
            raise ProxyProtocolError(f"Received {event} for non-{what} content")
        elif index in self._ended:
            raise ProxyProtocolError(f"Received {event} for content index {index}, whose block already ended")
        if end:
            self._ended.add(index)
        return index

    @staticmethod
    def _str(data: Mapping[str, Any], key: str, event: str) -> str:
        value = data.get(key)
        if not isinstance(value, str):
            raise ProxyProtocolError(f"Malformed proxy event {event}: {key} must be a string")
        return value

    def _terminal(self, data: Mapping[str, Any]) -> None:
        builder = self._builder
        usage = data.get("usage")
        if usage is not None:
            _check_usage(usage, data["type"])
            builder.usage = _usage_from(usage)
        response_id = data.get("responseId")
        if isinstance(response_id, str):
            builder.response_id = response_id
        content = data.get("content")
        if content is not None:
            try:
                blocks = tuple(from_json(b) for b in content)
            except (ValueError, TypeError) as exc:
                raise ProxyProtocolError(f"Malformed proxy event {data['type']}: {exc}") from None
            if not all(isinstance(b, (TextContent, ThinkingContent, ToolCall)) for b in blocks):
                raise ProxyProtocolError(f"Malformed proxy event {data['type']}: content holds a non-assistant block")
            builder.set_content(blocks)

    def feed(self, data: Any) -> AssistantMessageEvent | None:
        """One decoded wire event (a JSON object)."""
        if not isinstance(data, dict):
            raise ProxyProtocolError(f"Malformed proxy event: expected a JSON object, got {_kind(data)}")
        kind = data.get("type")
        b = self._builder
        if kind == "start":
            if self._started:
                raise ProxyProtocolError("Received a second start event")
            self._started = True
            return b.start()
        if kind == "text_start":
            self._index(data, "text", kind, new=True)
            return b.text_start()
        if kind == "text_delta":
            return b.text_delta(self._str(data, "delta", kind), self._index(data, "text", kind))
        if kind == "text_end":
            index = self._index(data, "text", kind, end=True)
            signature = data.get("contentSignature")
            return b.text_end(index, signature=signature if isinstance(signature, str) else None)
        if kind == "thinking_start":
            self._index(data, "thinking", kind, new=True)
            return b.thinking_start()
        if kind == "thinking_delta":
            return b.thinking_delta(self._str(data, "delta", kind), self._index(data, "thinking", kind))
        if kind == "thinking_end":
            index = self._index(data, "thinking", kind, end=True)
            signature = data.get("contentSignature")
            return b.thinking_end(
                index,
                signature=signature if isinstance(signature, str) else None,
                redacted=data.get("redacted") is True,
            )
        if kind == "toolcall_start":
            call_id, name = self._str(data, "id", kind), self._str(data, "toolName", kind)
            self._arguments[self._index(data, "toolCall", kind, new=True)] = _tool_arguments()
            return b.tool_call_start(call_id, name)
        if kind == "toolcall_delta":
            delta = self._str(data, "delta", kind)
            index = self._index(data, "toolCall", kind)
            return b.tool_call_delta(delta, self._arguments[index].append(delta), index)
        if kind == "toolcall_end":
            return self._tool_call_end(data)
        if kind == "done":
            reason = data.get("reason")
            if reason not in DONE_REASONS:
                raise ProxyProtocolError(f"Malformed proxy event done: unknown reason {reason!r}")
            self._terminal(data)
            return b.done(reason)
        if kind == "error":
            reason = data.get("reason")
            message = data.get("errorMessage")
            self._terminal(data)
            return b.error(
                reason if reason in ERROR_REASONS else "error",
                message
                if isinstance(message, str) and message
                else "The proxy server reported an error without a message",
            )
        return None  # an event type this client does not know: ignored, as the reference does

    def _tool_call_end(self, data: Mapping[str, Any]) -> AssistantMessageEvent:
        b = self._builder
        index = self._index(data, "toolCall", "toolcall_end", end=True)
        self._arguments.pop(index, None)
        text = b.tool_call_text(index)
        sent = data.get("toolCall")
        if sent is not None:
            # The final call as the server's stream function made it (pi-agent-core >= 1.6 sends it).
            try:
                final = from_json(sent)
            except ValueError as exc:
                raise ProxyProtocolError(f"Malformed proxy event toolcall_end: {exc}") from None
            if not isinstance(final, ToolCall):
                raise ProxyProtocolError("Malformed proxy event toolcall_end: toolCall is not a toolCall block")
            return b.tool_call_end(final, index)
        start = b.snapshot().content[index]
        assert isinstance(start, ToolCall)
        arguments, error = _final_arguments(text)
        return b.tool_call_end(ToolCall(start.id, start.name, arguments, arguments_error=error), index)


class WireEncoder:
    """Turns a stream function's events into wire events (the server side).

    It mirrors the client's reconstruction, so it can check that the stream is well formed
    (`ProxyProtocolError` otherwise) and add the final `content` to `done`/`error` when the
    events alone would not rebuild the final message exactly.
    """

    __slots__ = ("_mirror",)

    def __init__(self, model: Model) -> None:
        self._mirror = WireDecoder(model)

    def encode(self, event: AssistantMessageEvent) -> dict[str, Any]:
        """The wire form of `event`; raises for an event that breaks the protocol."""
        wire = _strip(event)
        rebuilt = self._mirror.feed(wire)
        if isinstance(event, (DoneEvent, ErrorEvent)):
            final = event.message if isinstance(event, DoneEvent) else event.error
            assert isinstance(rebuilt, (DoneEvent, ErrorEvent))
            got = rebuilt.message if isinstance(rebuilt, DoneEvent) else rebuilt.error
            if got.content != final.content:
                wire["content"] = [to_json(b) for b in final.content]
            if final.response_id is not None:
                wire["responseId"] = final.response_id
        return wire

    @staticmethod
    def failure(reason: Literal["error", "aborted"], message: str) -> dict[str, Any]:
        """A terminal `error` wire event for a stream that failed outside the protocol."""
        return {"type": "error", "reason": reason, "errorMessage": message, "usage": _usage(Usage())}


def _strip(event: AssistantMessageEvent) -> dict[str, Any]:
    """The event without its `partial` (what the reference's server sends)."""
    kind = event.type
    if isinstance(event, DoneEvent):
        return {"type": "done", "reason": event.reason, "usage": _usage(event.message.usage)}
    if isinstance(event, ErrorEvent):
        out: dict[str, Any] = {"type": "error", "reason": event.reason}
        if event.error.error_message is not None:
            out["errorMessage"] = event.error.error_message
        out["usage"] = _usage(event.error.usage)
        return out
    if isinstance(event, StartEvent):
        return {"type": "start"}
    index = event.content_index
    out = {"type": kind, "contentIndex": index}
    if isinstance(event, (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent)):
        out["delta"] = event.delta
    elif kind == "text_end":
        block = event.partial.content[index]
        if isinstance(block, TextContent) and block.text_signature is not None:
            out["contentSignature"] = block.text_signature
    elif kind == "thinking_end":
        block = event.partial.content[index]
        if isinstance(block, ThinkingContent):
            if block.thinking_signature is not None:
                out["contentSignature"] = block.thinking_signature
            if block.redacted:
                out["redacted"] = True
    elif kind == "toolcall_start":
        block = event.partial.content[index]
        if not isinstance(block, ToolCall):
            raise ProxyProtocolError(f"toolcall_start at content index {index} is not a tool call")
        out["id"] = block.id
        out["toolName"] = block.name
    elif isinstance(event, ToolCallEndEvent):
        out["toolCall"] = to_json(event.tool_call)
    elif kind not in ("text_start", "thinking_start"):
        raise TypeError(f"not an assistant message event: {event!r}")
    return out
