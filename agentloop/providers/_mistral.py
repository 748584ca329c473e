"""Mistral (`api="mistral-conversations"`): Mistral's own chat endpoint,
`{base_url}/v1/chat/completions` (`https://api.mistral.ai` by default), as pi-ai speaks it.

The stream is Chat Completions-shaped, with Mistral's own parts: `delta.content` is a string or a
list of chunks (`{"type": "text"}`, `{"type": "thinking", "thinking": [{"type": "text"}]}`),
tool calls come whole (their arguments a string or an object), and `finish_reason` may be
`model_length` or `error`. Text and thinking alternate in one open block at a time; tool calls
stay open until the stream ends, then close in the order they started.

Tool-call ids must be exactly 9 letters and digits: calls of another model replayed to Mistral get
ids derived from theirs (kept when they already are 9 letters and digits, else a hash of them),
distinct within one request, and their results follow.

Thinking: a model with a `thinking_level_map` compat flag (every reasoning model of the registry)
gets `reasoning_effort` (the mapped level, its `off` value when thinking is off); another
reasoning model gets `prompt_mode: "reasoning"` when thinking is on.
`options.session_id` becomes `prompt_cache_key` and the `x-affinity` header (unless the model's or
the call's headers set one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent
from .._types._messages import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)
from .._types._stream_fn import StreamOptions
from ._auth import resolve_api_key
from ._errors import ProviderError
from ._http import AsyncClient, HTTPOptions, run_stream
from ._json_stream import ToolArguments
from ._parse import SSEParser, as_int, as_str, error_text, stream_object
from ._request import (
    Request,
    check_llm_messages,
    compat,
    data_url,
    json_text,
    native_output,
    request_headers,
    sanitize,
    tool_specs,
)
from ._stream import AssistantMessageEventStream
from ._thinking import model_thinking_level
from ._transform import mistral_id, mistral_tool_call_ids, transform_messages
from ._usage import make_usage

__all__ = (
    "MISTRAL_BASE_URL",
    "MistralParser",
    "build_mistral_request",
    "convert_messages",
    "stream_mistral",
)

MISTRAL_BASE_URL = "https://api.mistral.ai"
_NO_IMAGE = "(image omitted: model does not support images)"
_NO_TOOL_IMAGE = "(tool image omitted: model does not support images)"
_CACHED_FIELDS = (
    ("promptTokensDetails", "cachedTokens"),
    ("prompt_tokens_details", "cached_tokens"),
    ("promptTokenDetails", "cachedTokens"),
    ("prompt_token_details", "cached_tokens"),
)
"""Where a usage object may count cached prompt tokens, in the order they are looked up."""
_STOP_REASONS: dict[str, Literal["stop", "length", "toolUse"]] = {
    "stop": "stop",
    "length": "length",
    "model_length": "length",
    "tool_calls": "toolUse",
}


def stream_mistral(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from Mistral's chat endpoint (`{base_url}/v1/chat/completions`).

    Arguments and result as `stream_openai_completions`; the key is `options.api_key`, else
    `$MISTRAL_API_KEY` (for the `mistral` provider).
    """
    return run_stream(model, context, options, build_mistral_request, MistralParser, http=http, client=client)


# --- the request ----------------------------------------------------------------------------


def build_mistral_request(model: Model, context: Context, options: StreamOptions) -> Request:
    """The `Request` for one response."""
    check_llm_messages(context)
    key = resolve_api_key(model, options)
    url = (model.base_url or MISTRAL_BASE_URL).rstrip("/") + "/v1/chat/completions"
    body: dict[str, Any] = {"model": model.id, "stream": True, "messages": convert_messages(model, context)}
    if context.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters, "strict": False},
            }
            for name, description, parameters in tool_specs(context.tools)
        ]
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.max_tokens:
        body["max_tokens"] = options.max_tokens
    _add_thinking(body, model, options)
    response_format = native_output(model, options, "chat")
    if response_format is not None:
        body["response_format"] = response_format
    session = options.session_id
    if session:
        body["prompt_cache_key"] = session
    own = {"authorization": f"Bearer {key}"} if key else {}
    if session and not any(_has_header(headers, "x-affinity") for headers in (model.headers, options.headers)):
        own["x-affinity"] = session
    return Request(url, request_headers(own, model, options), body, key)


def _has_header(headers: Mapping[str, str] | None, name: str) -> bool:
    return headers is not None and any(key.lower() == name for key in headers)


def _add_thinking(body: dict[str, Any], model: Model, options: StreamOptions) -> None:
    level = model_thinking_level(model, options)
    efforts = compat(model, "thinking_level_map", None) if model.reasoning else None
    if efforts is not None:
        effort = (efforts.get(level) or "high") if level is not None else efforts.get("off")
        if effort:
            body["reasoning_effort"] = effort
    elif model.reasoning and level is not None:
        body["prompt_mode"] = "reasoning"


def _without_images(blocks: Sequence[Any], placeholder: str) -> list[Any]:
    """`blocks` with each run of images replaced by one `placeholder` text (a model without
    image input is told an image was there)."""
    out: list[Any] = []
    after_placeholder = False
    for block in blocks:
        if isinstance(block, ImageContent):
            if not after_placeholder:
                out.append(TextContent(placeholder))
            after_placeholder = True
            continue
        out.append(block)
        after_placeholder = isinstance(block, TextContent) and block.text == placeholder
    return out


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": data_url(block)}


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The transcript as Mistral chat messages (tool-call ids made Mistral's)."""
    images_ok = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": sanitize(context.system_prompt)})
    for message in transform_messages(context.messages, model, mistral_tool_call_ids()):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                out.append({"role": "user", "content": sanitize(message.content)})
                continue
            blocks = message.content if images_ok else _without_images(message.content, _NO_IMAGE)
            parts = [
                {"type": "text", "text": sanitize(b.text)} if isinstance(b, TextContent) else _image_part(b)
                for b in blocks
                if isinstance(b, (TextContent, ImageContent))
            ]
            if parts:
                out.append({"role": "user", "content": parts})
        elif isinstance(message, AssistantMessage):
            assistant = _assistant(message)
            if assistant is not None:
                out.append(assistant)
        else:
            blocks = message.content if images_ok else _without_images(message.content, _NO_TOOL_IMAGE)
            text = "\n".join(sanitize(b.text) for b in blocks if isinstance(b, TextContent))
            images = [b for b in blocks if isinstance(b, ImageContent)]
            content = [{"type": "text", "text": _tool_result_text(text, bool(images), message.is_error)}]
            content += [_image_part(image) for image in images]
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "name": message.tool_name, "content": content}
            )
    return out


def _assistant(message: AssistantMessage) -> dict[str, Any] | None:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                parts.append({"type": "text", "text": sanitize(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.thinking.strip():
                parts.append({"type": "thinking", "thinking": [{"type": "text", "text": sanitize(block.thinking)}]})
        else:
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": json_text(dict(block.arguments), compact=True)},
                    "index": 0,
                }
            )
    if not parts and not calls:
        return None
    assistant: dict[str, Any] = {"role": "assistant", "prefix": False}
    if parts:
        assistant["content"] = parts
    if calls:
        assistant["tool_calls"] = calls
    return assistant


def _tool_result_text(text: str, has_images: bool, is_error: bool) -> str:
    trimmed = text.strip()
    prefix = "[tool error] " if is_error else ""
    if trimmed:
        return prefix + trimmed
    return prefix + ("(see attached image)" if has_images else "(no tool output)")


# --- the stream -----------------------------------------------------------------------------


class _Call:
    __slots__ = ("args", "id", "index", "name")

    def __init__(self, call_id: str, name: str, index: int) -> None:
        self.id = call_id
        self.name = name
        self.index = index
        self.args = ToolArguments()


class MistralParser(SSEParser):
    """Mistral's chat chunks to assistant-message events."""

    end_marker = "finish reason"
    complete_at_eof = True  # `data: [DONE]` or the body's end, as pi-ai reads it

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.open_kind: str | None = None  # the open text or thinking block
        self.calls: dict[Any, _Call] = {}
        self.stop: Literal["stop", "length", "toolUse"] | None = None
        self.stop_error: str | None = None
        """The text of a finish reason that is an error (`error`, or one unknown)."""

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        data = data.strip()
        if not data:
            return ()
        if data == "[DONE]":
            self.finished = True
            return ()
        chunk = stream_object(data, self.secret)
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            detail = error_text(chunk, self.secret)
            raise ProviderError("Invalid Mistral streaming event" + (f": {detail}" if detail else ""))
        builder = self.builder
        if builder.response_id is None and isinstance(chunk.get("id"), str) and chunk["id"]:
            builder.response_id = chunk["id"]
        if isinstance(chunk.get("usage"), dict):
            self._usage(chunk["usage"])
        choice = choices[0] if choices else None
        if not isinstance(choice, dict):
            return ()
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.stop = _STOP_REASONS.get(reason, "stop")
            self.stop_error = None if reason in _STOP_REASONS else f"Provider stopped with: {reason}"
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return ()
        out: list[AssistantMessageEvent] = []
        content = delta.get("content")
        for item in [content] if isinstance(content, str) else content if isinstance(content, list) else ():
            if isinstance(item, str):
                self._delta("text", item, out)
            elif isinstance(item, dict) and item.get("type") == "thinking":
                parts = item.get("thinking")
                texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
                self._delta("thinking", "".join(t for t in texts if isinstance(t, str)), out)
            elif isinstance(item, dict) and item.get("type") == "text":
                self._delta("text", as_str(item.get("text")), out)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                self._tool_call(call, out)
        return out

    def _close_block(self, out: list[AssistantMessageEvent]) -> None:
        if self.open_kind == "text":
            out.append(self.builder.text_end())
        elif self.open_kind == "thinking":
            out.append(self.builder.thinking_end())
        self.open_kind = None

    def _delta(self, kind: str, text: str, out: list[AssistantMessageEvent]) -> None:
        text = sanitize(text)
        if not text:  # empty deltas (GLM's, around thinking and calls) open no block
            return
        builder = self.builder
        if self.open_kind != kind:
            self._close_block(out)
            out.append(builder.text_start() if kind == "text" else builder.thinking_start())
            self.open_kind = kind
            self.has_content = True
        out.append(builder.text_delta(text) if kind == "text" else builder.thinking_delta(text))

    def _tool_call(self, call: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        self._close_block(out)
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        position = call.get("index")
        position = position if isinstance(position, int) and not isinstance(position, bool) else None
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id or call_id == "null":
            call_id = mistral_id(f"toolcall:{position or 0}")
        key: Any = position if position is not None else call_id
        state = self.calls.get(key)
        if state is None:
            start = self.builder.tool_call_start(call_id, as_str(function.get("name")))
            out.append(start)
            state = self.calls[key] = _Call(call_id, as_str(function.get("name")), start.content_index)
            self.has_content = True
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # an object (or nothing: `{}`), as JSON text
            arguments = json_text(arguments if arguments or isinstance(arguments, (dict, list)) else {}, compact=True)
        delta = arguments
        out.append(self.builder.tool_call_delta(delta, state.args.append(delta), index=state.index))

    def _usage(self, usage: dict[str, Any]) -> None:
        prompt = as_int(usage.get("prompt_tokens"))
        found = [
            details.get(field) for holder, field in _CACHED_FIELDS if isinstance(details := usage.get(holder), dict)
        ]
        found += [usage.get("numCachedTokens"), usage.get("num_cached_tokens")]
        cached = min(prompt, as_int(next((n for n in found if n is not None), 0)))
        output = as_int(usage.get("completion_tokens"))
        total = as_int(usage.get("total_tokens")) or None
        self.builder.usage = make_usage(
            self.model, input=prompt - cached, output=output, cache_read=cached, total=total
        )

    def finish(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        self._close_block(out)
        for state in self.calls.values():
            arguments, error = state.args.final()
            call = ToolCall(state.id, state.name, arguments, arguments_error=error)
            out.append(self.builder.tool_call_end(call, state.index))
        self.calls = {}
        if self.stop is None:
            out.append(self.builder.error("error", "Mistral stream ended without a finish reason"))
        elif self.stop_error is not None:
            out.append(self.builder.error("error", self.stop_error))
        else:
            out.append(self.builder.done(self.stop))
        return out
