"""Anthropic Messages (`api="anthropic-messages"`): Anthropic and Anthropic-compatible endpoints
(llama.cpp's `/v1/messages`, MiniMax, Kimi, DeepSeek...).

Blocks are routed by their `index` (not by position): a server may keep a thinking block open
while the text block streams (llama.cpp does), so a block's `*_end` comes when its
`content_block_stop` arrives, which may be after the next block started.

Compat flags: `cache_control` (true: mark the system prompt, the last tool and the last user
message cacheable, as `StreamOptions.cache_retention` asks), `supports_long_cache_retention`
(true: `long` retention is the 1-hour cache), `supports_cache_control_on_tools` (true),
`adaptive_thinking` (auto: Opus 4.6 on api.anthropic.com),
`thinking_format` (`llama.cpp`: thinking off is sent as `chat_template_kwargs.enable_thinking:
false`, as that server's templates think by default), `extra_body`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
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
    ToolResultMessage,
)
from .._types._stream_fn import StreamOptions
from ._auth import resolve_api_key
from ._cache import anthropic_cache_control
from ._errors import ProviderError
from ._http import AsyncClient, HTTPOptions, run_stream
from ._json_stream import ToolArguments
from ._parse import SSEParser, as_int, as_str, error_text, is_one_of, stream_object
from ._request import (
    Request,
    base_url,
    check_llm_messages,
    compat,
    native_output,
    request_headers,
    sanitize,
    tool_specs,
)
from ._stream import AssistantMessageEventStream
from ._thinking import thinking_budget, thinking_level
from ._transform import normalize_anthropic_id, transform_messages
from ._usage import make_usage

__all__ = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_VERSION",
    "AnthropicParser",
    "anthropic_base_url",
    "build_anthropic_request",
    "convert_messages",
    "input_schema",
    "map_stop_reason",
    "stream_anthropic",
)

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
_RETRYABLE = frozenset({"overloaded_error", "rate_limit_error", "api_error"})
_REDACTED = "[Reasoning redacted]"


def stream_anthropic(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from an Anthropic Messages endpoint (`{base_url}/v1/messages`).

    Arguments and result as `stream_openai_completions`. A thinking level becomes
    `thinking: {type: "enabled", budget_tokens}` (budgets from `options.thinking_budgets`, else
    1024/2048/8192/16384 for minimal/low/medium/high), with `max_tokens` raised by the budget.
    """
    return run_stream(model, context, options, build_anthropic_request, AnthropicParser, http=http, client=client)


def anthropic_base_url(model: Model) -> str:
    """Where an Anthropic request of `model` goes: its base URL, or Anthropic's
    (`$ANTHROPIC_BASE_URL` when set, also in place of Anthropic's own)."""
    return base_url(model, ANTHROPIC_BASE_URL, "ANTHROPIC_BASE_URL")


def _adaptive(model: Model, url: str) -> bool:
    flag = compat(model, "adaptive_thinking", None)
    if flag is not None:
        return bool(flag)
    model_id = model.id.lower()
    return "api.anthropic.com" in url and ("opus-4-6" in model_id or "opus-4.6" in model_id)


def build_anthropic_request(model: Model, context: Context, options: StreamOptions) -> Request:
    """The `Request` for one response."""
    check_llm_messages(context)
    native_output(model, options, None)  # none on this wire: an output schema fails the call
    key = resolve_api_key(model, options)
    url = anthropic_base_url(model)
    cache = anthropic_cache_control(model, options) if compat(model, "cache_control", True) else None
    max_tokens = options.max_tokens or min(model.max_tokens or 4096, 32000)
    body: dict[str, Any] = {"model": model.id, "messages": convert_messages(model, context, cache), "stream": True}
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": sanitize(context.system_prompt)}
        if cache:
            system["cache_control"] = cache
        body["system"] = [system]
    if context.tools:
        tools = [
            {"name": name, "description": description, "input_schema": input_schema(parameters)}
            for name, description, parameters in tool_specs(context.tools)
        ]
        if cache and compat(model, "supports_cache_control_on_tools", True):
            tools[-1]["cache_control"] = cache
        body["tools"] = tools
    betas = ["fine-grained-tool-streaming-2025-05-14"]
    level = thinking_level(options)
    adaptive = _adaptive(model, url)
    llama = compat(model, "thinking_format", None) == "llama.cpp"
    if llama and level is None:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    if level is not None and (model.reasoning or llama):
        if adaptive:
            body["thinking"] = {"type": "adaptive"}
            body["output_config"] = {"effort": {"minimal": "low", "xhigh": "max"}.get(level, level)}
        else:
            budget = thinking_budget(options, level)
            limit = model.max_tokens or max_tokens + budget
            max_tokens = min(max_tokens + budget, limit)
            if max_tokens <= budget:
                budget = max(0, max_tokens - 1024)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            betas.append("interleaved-thinking-2025-05-14")
    elif options.temperature is not None:
        body["temperature"] = options.temperature
    body["max_tokens"] = max_tokens
    metadata = options.metadata or {}
    if isinstance(metadata.get("user_id"), str):
        body["metadata"] = {"user_id": metadata["user_id"]}
    extra = compat(model, "extra_body", None)
    if extra:
        body.update(extra)
    own = {"anthropic-version": ANTHROPIC_VERSION, "anthropic-beta": ",".join(betas)}
    if key:
        own["x-api-key"] = key
    headers = request_headers(own, model, options)
    return Request(url + "/v1/messages", headers, body, key)


_SCHEMA_KEYWORDS = ("additionalProperties", "$schema", "$defs", "definitions")
"""The top-level schema keywords sent besides `type`, `properties` and `required`."""


def input_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's `input_schema`, as pi-ai sends it: an object with its `properties` and `required`,
    plus its dialect, shared definitions and `additionalProperties`. Other top-level keywords
    (`title`, `description`, a top-level `anyOf`/`oneOf`/`allOf`, which Anthropic answers with a
    400) are left out."""
    properties = parameters.get("properties")
    required = parameters.get("required")
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {} if properties is None else properties,
        "required": [] if required is None else required,
    }
    for keyword in _SCHEMA_KEYWORDS:
        if keyword in parameters:
            schema[keyword] = parameters[keyword]
    return schema


def _image(block: ImageContent) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def convert_messages(model: Model, context: Context, cache: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The transcript as Anthropic messages (consecutive tool results share one user message);
    `cache` marks the last user message's last block."""
    images_ok = "image" in model.input
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush_results() -> None:
        if results:
            out.append({"role": "user", "content": list(results)})
            results.clear()

    for message in transform_messages(context.messages, model, normalize_anthropic_id):
        if isinstance(message, ToolResultMessage):
            results.append(_tool_result(message, images_ok))
            continue
        flush_results()
        if isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif isinstance(message.content, str):
            if message.content.strip():
                out.append({"role": "user", "content": [{"type": "text", "text": sanitize(message.content)}]})
        else:
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, TextContent):
                    if block.text.strip():
                        parts.append({"type": "text", "text": sanitize(block.text)})
                elif isinstance(block, ImageContent) and images_ok:
                    parts.append(_image(block))
            if parts:
                out.append({"role": "user", "content": parts})
    flush_results()
    if cache and out and out[-1]["role"] == "user":
        last = out[-1]["content"][-1]
        out[-1]["content"][-1] = {**last, "cache_control": cache}
    return out


def _tool_result(message: ToolResultMessage, images_ok: bool) -> dict[str, Any]:
    texts = [sanitize(b.text) for b in message.content if isinstance(b, TextContent)]
    images = [b for b in message.content if isinstance(b, ImageContent)] if images_ok else []
    content: Any
    if not images:
        content = "\n".join(texts) if texts else "(no output)"
    else:
        content = [{"type": "text", "text": t} for t in texts] or [{"type": "text", "text": "(see attached image)"}]
        content += [_image(i) for i in images]
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": content}
    if message.is_error:
        result["is_error"] = True
    return result


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": sanitize(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif block.thinking.strip():
                if block.thinking_signature:
                    blocks.append(
                        {
                            "type": "thinking",
                            "thinking": sanitize(block.thinking),
                            "signature": block.thinking_signature,
                        }
                    )
                else:  # unsigned (aborted stream, another server): send it as text
                    blocks.append({"type": "text", "text": sanitize(block.thinking)})
        else:
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.arguments)})
    return blocks


# --- the stream -----------------------------------------------------------------------------


class _Block:
    __slots__ = ("args", "id", "index", "kind", "name", "redacted", "signature")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.signature: list[str] = []
        self.redacted = False
        self.args = ToolArguments()
        self.id = ""
        self.name = ""


def map_stop_reason(reason: Any) -> Literal["stop", "length", "toolUse", "error"]:
    """An Anthropic `stop_reason` as a stop reason; unknown ones count as `stop`."""
    if reason in ("max_tokens", "model_context_window_exceeded"):
        return "length"
    if reason == "tool_use":
        return "toolUse"
    if reason in ("refusal", "sensitive"):
        return "error"
    return "stop"


class AnthropicParser(SSEParser):
    """Anthropic Messages events to assistant-message events (blocks routed by `index`)."""

    end_marker = "message_stop event"

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: Any = None
        self.stop_explanation: str | None = None
        self.usage = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        payload = stream_object(data, self.secret)
        kind = payload.get("type") or event
        out: list[AssistantMessageEvent] = []
        if kind == "content_block_delta":
            self._delta(payload, out)
        elif kind == "content_block_start":
            self._start(payload, out)
        elif kind == "content_block_stop":
            index = payload.get("index")
            block = self.blocks.pop(index, None) if isinstance(index, int) else None
            if block is not None:
                out.append(self._end(block))
        elif kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                if isinstance(message.get("id"), str):
                    self.builder.response_id = message["id"]
                answered = message.get("model")
                if isinstance(answered, str) and answered != self.model.id:
                    self.builder.response_model = answered  # a fallback model answered
                if isinstance(message.get("usage"), dict):
                    self._usage(message["usage"])
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
                details = delta.get("stop_details")
                explanation = details.get("explanation") if isinstance(details, dict) else None
                self.stop_explanation = explanation if isinstance(explanation, str) and explanation else None
            if isinstance(payload.get("usage"), dict):
                self._usage(payload["usage"])
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            error = payload.get("error")
            retryable = isinstance(error, dict) and is_one_of(error.get("type"), _RETRYABLE)
            raise ProviderError(error_text(payload, self.secret) or "The server reported an error", retryable=retryable)
        return out  # ping and unknown events are ignored

    def _start(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        index = payload.get("index")
        block = payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return
        builder = self.builder
        kind = block.get("type")
        if kind == "text":
            start: Any = builder.text_start()
            state = _Block("text", start.content_index)
            out.append(start)
            if isinstance(block.get("text"), str) and block["text"]:
                out.append(builder.text_delta(block["text"], state.index))
        elif kind in ("thinking", "redacted_thinking"):
            start = builder.thinking_start()
            state = _Block("thinking", start.content_index)
            out.append(start)
            if kind == "redacted_thinking":
                state.redacted = True
                state.signature.append(block.get("data") or "")
                out.append(builder.thinking_delta(_REDACTED, state.index))
            else:
                if isinstance(block.get("signature"), str):
                    state.signature.append(block["signature"])
                if isinstance(block.get("thinking"), str) and block["thinking"]:
                    out.append(builder.thinking_delta(block["thinking"], state.index))
        elif kind == "tool_use":
            state = _Block("tool", 0)
            state.id = as_str(block.get("id"))
            state.name = as_str(block.get("name"))
            start = builder.tool_call_start(state.id, state.name)
            state.index = start.content_index
            out.append(start)
            initial = block.get("input")
            if isinstance(initial, dict) and initial:
                state.args.replace(json.dumps(initial))
        else:
            return  # server tools, web search results...: not content blocks of ours
        self.has_content = True
        self.blocks[index] = state

    def _delta(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        index = payload.get("index")
        delta = payload.get("delta")
        block = self.blocks.get(index) if isinstance(index, int) else None
        if block is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text":
            text = delta.get("text")
            if isinstance(text, str):  # an empty delta too, as pi-ai
                out.append(self.builder.text_delta(text, block.index))
        elif kind == "thinking_delta" and block.kind == "thinking":
            text = delta.get("thinking")
            if isinstance(text, str):  # an empty delta too, as pi-ai
                out.append(self.builder.thinking_delta(text, block.index))
        elif kind == "signature_delta" and block.kind == "thinking":
            signature = delta.get("signature")
            if isinstance(signature, str):
                block.signature.append(signature)
        elif kind == "input_json_delta" and block.kind == "tool":
            fragment = delta.get("partial_json")
            if isinstance(fragment, str):  # an empty delta too, as pi-ai
                preview = block.args.append(fragment)
                out.append(self.builder.tool_call_delta(fragment, preview, index=block.index))

    def _end(self, block: _Block) -> AssistantMessageEvent:
        builder = self.builder
        if block.kind == "text":
            return builder.text_end(block.index)
        if block.kind == "thinking":
            # Always a string, "" when the server sent none (as pi-ai); replay skips an empty one.
            signature = "".join(block.signature)
            return builder.thinking_end(block.index, signature=signature, redacted=block.redacted)
        arguments, error = block.args.final()
        return builder.tool_call_end(ToolCall(block.id, block.name, arguments, arguments_error=error), block.index)

    def _usage(self, usage: dict[str, Any]) -> None:
        # message_delta repeats only what changed; proxies omit input_tokens there.
        for key, field in (
            ("input_tokens", "input"),
            ("output_tokens", "output"),
            ("cache_read_input_tokens", "cache_read"),
            ("cache_creation_input_tokens", "cache_write"),
        ):
            if usage.get(key) is not None:
                self.usage[field] = as_int(usage[key])
        u = self.usage
        self.builder.usage = make_usage(
            self.model, input=u["input"], output=u["output"], cache_read=u["cache_read"], cache_write=u["cache_write"]
        )

    def _refusal_message(self) -> str:
        """The error text of a refusal, as pi-ai writes it: the API's own explanation when it gives one."""
        if self.stop_reason == "refusal":
            return self.stop_explanation or "The model refused to complete the request"
        return f"Provider stopped with: {self.stop_reason}"

    def finish(self) -> list[AssistantMessageEvent]:
        out = [self._end(block) for block in self.blocks.values()]
        self.blocks.clear()
        reason = map_stop_reason(self.stop_reason)
        if reason == "error":
            out.append(self.builder.error("error", self._refusal_message()))
        else:
            out.append(self.builder.done(reason))
        return out
