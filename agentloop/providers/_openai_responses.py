"""OpenAI Responses (`api="openai-responses"`): OpenAI's reasoning-first API, also served by
llama.cpp, vLLM and others at `{base_url}/responses`.

Items are keyed by their id (llama.cpp sends no `output_index` and interleaves items). Reasoning
items become thinking blocks whose signature is the item's JSON (replayed verbatim, with its
encrypted content, to the same model); messages become text blocks signed
`{"v":1,"id":...}`; function calls become tool calls with the id `call_id|item_id`.

Compat flags: `supports_store` (true: send `store: false`), `include_encrypted_reasoning`
(official OpenAI), `supports_xhigh`, `thinking_format` (`openai`, or `llama.cpp` for
`thinking_budget_tokens`), `prompt_cache_key_mode` (`auto`, or `disabled`),
`supports_long_cache_retention` (true), `supports_explicit_prompt_cache_mode` (false),
`extra_body`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent
from .._types._messages import (
    AssistantMessage,
    Context,
    Cost,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from .._types._stream_fn import StreamOptions
from .._wire._json_text import encode_json
from ._auth import resolve_api_key
from ._cache import cache_retention, prompt_cache_key
from ._errors import ProviderError
from ._http import AsyncClient, HTTPOptions, run_stream
from ._json_stream import ToolArguments
from ._openai_completions import openai_base_url
from ._parse import SSEParser, as_int, as_str, error_text, is_one_of, stream_object
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
from ._thinking import thinking_budget, thinking_level
from ._transform import normalize_responses_id, short_hash, transform_messages
from ._usage import make_usage

__all__ = (
    "ResponsesParser",
    "build_responses_request",
    "convert_input",
    "stream_openai_responses",
)

_RETRYABLE = frozenset({"server_error", "rate_limit_exceeded", "overloaded", "overloaded_error", "api_error"})
_TIER_PRICE = {"flex": 0.5, "priority": 2.0}


def stream_openai_responses(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from an OpenAI Responses endpoint (`{base_url}/responses`).

    Arguments and result as `stream_openai_completions`. A thinking level asks for
    `reasoning.effort` with an automatic summary (reasoning models only).
    """
    return run_stream(model, context, options, build_responses_request, ResponsesParser, http=http, client=client)


def build_responses_request(model: Model, context: Context, options: StreamOptions) -> Request:
    """The `Request` for one response."""
    check_llm_messages(context)
    key = resolve_api_key(model, options)
    url = openai_base_url(model)
    official = "api.openai.com" in url
    body: dict[str, Any] = {"model": model.id, "input": convert_input(model, context), "stream": True}
    if compat(model, "supports_store", True):
        body["store"] = False
    if options.max_tokens:
        body["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    _add_prompt_cache(body, model, options)
    if context.tools:
        body["tools"] = [
            {"type": "function", "name": name, "description": description, "parameters": parameters, "strict": False}
            for name, description, parameters in tool_specs(context.tools)
        ]
    level = thinking_level(options, xhigh=bool(compat(model, "supports_xhigh", False)))
    style = compat(model, "thinking_format", "openai")
    if style == "llama.cpp":
        body["chat_template_kwargs"] = {"enable_thinking": level is not None}
        if level is not None:
            body["thinking_budget_tokens"] = thinking_budget(options, level)
    elif level is not None and model.reasoning:
        body["reasoning"] = {"effort": level, "summary": "auto"}
        if compat(model, "include_encrypted_reasoning", official):
            body["include"] = ["reasoning.encrypted_content"]
    text_format = native_output(model, options, "responses")
    if text_format is not None:
        body["text"] = {"format": text_format}
    extra = compat(model, "extra_body", None)
    if extra:
        body.update(extra)
    headers = request_headers({"authorization": f"Bearer {key}"} if key else {}, model, options)
    return Request(url + "/responses", headers, body, key)


def _add_prompt_cache(body: dict[str, Any], model: Model, options: StreamOptions) -> None:
    """The session id as `prompt_cache_key` (unless the retention is `none` or the compat flag
    `prompt_cache_key_mode` is `disabled`), and `long` as a 24-hour `prompt_cache_retention`. A
    model with `supports_explicit_prompt_cache_mode` gets `prompt_cache_options` instead:
    `{"mode": "explicit"}` for `none`, a 30-minute TTL for `long`."""
    retention = cache_retention(options)
    key = prompt_cache_key(options)
    if key and retention != "none" and compat(model, "prompt_cache_key_mode", "auto") != "disabled":
        body["prompt_cache_key"] = key
    long_ok = retention == "long" and bool(compat(model, "supports_long_cache_retention", True))
    if compat(model, "supports_explicit_prompt_cache_mode", False):
        if retention == "none":
            body["prompt_cache_options"] = {"mode": "explicit"}
        elif long_ok:
            body["prompt_cache_options"] = {"ttl": "30m"}
    elif long_ok:
        body["prompt_cache_retention"] = "24h"


def _text_signature(signature: str | None) -> tuple[str | None, str | None]:
    """(message id, phase) from a text block's signature (`{"v":1,...}` or a bare id)."""
    if not signature:
        return None, None
    if signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except ValueError:
            return signature, None
        if isinstance(parsed, dict) and parsed.get("v") == 1 and isinstance(parsed.get("id"), str):
            phase = parsed.get("phase")
            return parsed["id"], phase if phase in ("commentary", "final_answer") else None
    return signature, None


def convert_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """The transcript as Responses input items."""
    images_ok = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "developer" if model.reasoning else "system", "content": sanitize(context.system_prompt)})
    for position, message in enumerate(transform_messages(context.messages, model, normalize_responses_id)):
        if message.role == "user":
            if isinstance(message.content, str):
                out.append({"role": "user", "content": [{"type": "input_text", "text": sanitize(message.content)}]})
                continue
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, TextContent):
                    parts.append({"type": "input_text", "text": sanitize(block.text)})
                elif isinstance(block, ImageContent) and images_ok:
                    parts.append({"type": "input_image", "detail": "auto", "image_url": data_url(block)})
            if parts:
                out.append({"role": "user", "content": parts})
        elif message.role == "assistant":
            out.extend(_assistant_items(message, model, position))
        else:
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            images = [b for b in message.content if isinstance(b, ImageContent)]
            text = "\n".join(texts) if texts else "(see attached image)"
            call_id = message.tool_call_id.split("|", 1)[0]
            out.append({"type": "function_call_output", "call_id": call_id, "output": sanitize(text)})
            if images and images_ok:
                content = [{"type": "input_text", "text": "Attached image(s) from tool result:"}]
                content += [{"type": "input_image", "detail": "auto", "image_url": data_url(i)} for i in images]
                out.append({"role": "user", "content": content})
    return out


def _assistant_items(message: AssistantMessage, model: Model, position: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    other_model = message.model != model.id and message.provider == model.provider and message.api == model.api
    skipped_thinking = False
    for block in message.content:
        if isinstance(block, ThinkingContent):
            item = _reasoning_item(block.thinking_signature)
            if item is None:
                skipped_thinking = True
            else:
                items.append(item)
        elif isinstance(block, TextContent):
            msg_id, phase = _text_signature(block.text_signature)
            if not msg_id:
                msg_id = f"msg_{position}"
            elif len(msg_id) > 64:
                msg_id = f"msg_{short_hash(msg_id)}"
            item = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": sanitize(block.text), "annotations": []}],
                "status": "completed",
                "id": msg_id,
            }
            if phase:
                item["phase"] = phase
            items.append(item)
        else:
            call_id, _, item_id = block.id.partition("|")
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                # As OpenAI returns it: a replayed history then matches what OpenAI keeps.
                "status": "completed",
                "arguments": json_text(dict(block.arguments)),
            }
            # OpenAI checks that fc_ items pair with their reasoning items: leave the id out when
            # the reasoning is not replayed (another model, or unsigned thinking).
            if item_id and not ((other_model or skipped_thinking) and item_id.startswith("fc_")):
                call["id"] = item_id
            items.append(call)
    return items


def _reasoning_item(signature: str | None) -> dict[str, Any] | None:
    if not signature or not signature.startswith("{"):
        return None
    try:
        item = json.loads(signature)
    except ValueError:
        return None
    return item if isinstance(item, dict) and item.get("type") == "reasoning" else None


# --- the stream -----------------------------------------------------------------------------


class _Item:
    __slots__ = ("args", "call_id", "index", "kind", "name", "streamed", "summary_parts")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.streamed = False
        self.summary_parts = 0
        self.args = ToolArguments()
        self.call_id = ""
        self.name = ""


class ResponsesParser(SSEParser):
    """Responses API events to assistant-message events (items keyed by id)."""

    end_marker = "response.completed event"

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.items: dict[str, _Item] = {}
        self.by_position: dict[int, str] = {}
        self.open: list[tuple[str, _Item]] = []
        self.status = "completed"
        self.incomplete_reason: Any = None
        self.saw_tools = False

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        payload = stream_object(data, self.secret)
        kind = payload.get("type") or event
        out: list[AssistantMessageEvent] = []
        builder = self.builder
        if kind in ("response.created", "response.in_progress", "response.queued"):
            response = payload.get("response")
            if isinstance(response, dict) and isinstance(response.get("id"), str) and builder.response_id is None:
                builder.response_id = response["id"]
        elif kind == "response.output_item.added":
            item = payload.get("item")
            if isinstance(item, dict):
                self._added(item, payload.get("output_index"), out)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            state = self._find(payload, "reasoning")
            delta = payload.get("delta")
            if state is not None and isinstance(delta, str):  # an empty delta too, as pi-ai
                state.streamed = state.streamed or bool(delta)
                out.append(builder.thinking_delta(delta, state.index))
        elif kind == "response.reasoning_summary_part.added":
            state = self._find(payload, "reasoning")
            if state is not None:
                if state.summary_parts and state.streamed:
                    out.append(builder.thinking_delta("\n\n", state.index))
                state.summary_parts += 1
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            state = self._find(payload, "message")
            delta = payload.get("delta")
            if state is not None and isinstance(delta, str):  # an empty delta too, as pi-ai
                state.streamed = state.streamed or bool(delta)
                out.append(builder.text_delta(delta, state.index))
        elif kind == "response.function_call_arguments.delta":
            state = self._find(payload, "function_call")
            delta = payload.get("delta")
            if state is not None and isinstance(delta, str):
                preview = state.args.append(delta)
                out.append(builder.tool_call_delta(delta, preview, index=state.index))
        elif kind == "response.function_call_arguments.done":
            state = self._find(payload, "function_call")
            if state is not None and isinstance(payload.get("arguments"), str):
                state.args.replace(payload["arguments"])
        elif kind == "response.output_item.done":
            item = payload.get("item")
            if isinstance(item, dict):
                self._done(item, payload.get("output_index"), out)
        elif kind in ("response.completed", "response.incomplete", "response.done"):
            response = payload.get("response")
            if isinstance(response, dict):
                self._completed(response, "incomplete" if kind == "response.incomplete" else "completed")
            self.finished = True
        elif kind == "response.failed":
            response = payload.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            message = error_text({"error": error}, self.secret) if error else None
            if isinstance(response, dict) and isinstance(response.get("usage"), dict):
                self._usage(response)
            raise ProviderError(message or "The response failed", retryable=_retryable(error))
        elif kind == "error":
            error = payload.get("error", payload)
            raise ProviderError(
                error_text({"error": error}, self.secret) or "The server reported an error", retryable=_retryable(error)
            )
        return out

    def _find(self, payload: dict[str, Any], kind: str) -> _Item | None:
        item_id = payload.get("item_id")
        if not isinstance(item_id, str):
            position = payload.get("output_index")
            item_id = self.by_position.get(position) if isinstance(position, int) else None
        state = self.items.get(item_id) if item_id is not None else None
        if state is None:  # no id: the latest open item of that kind
            state = next((s for _, s in reversed(self.open) if s.kind == kind), None)
        return state if state is not None and state.kind == kind else None

    def _added(self, item: dict[str, Any], position: Any, out: list[AssistantMessageEvent]) -> _Item | None:
        builder = self.builder
        kind = item.get("type")
        item_id = as_str(item.get("id")) or f"item_{len(self.items)}"
        if kind == "reasoning":
            start: Any = builder.thinking_start()
        elif kind == "message":
            start = builder.text_start()
        elif kind == "function_call":
            call_id = as_str(item.get("call_id"))
            name = as_str(item.get("name"))
            start = builder.tool_call_start(f"{call_id}|{item_id}", name)
            self.saw_tools = True
        else:
            return None  # built-in tools (web search...) are not content blocks
        out.append(start)
        self.has_content = True
        state = _Item(kind, start.content_index)
        if kind == "function_call":
            state.call_id, state.name = call_id, name
            if isinstance(item.get("arguments"), str) and item["arguments"]:
                state.args.replace(item["arguments"])
        self.items[item_id] = state
        self.open.append((item_id, state))
        if isinstance(position, int):
            self.by_position[position] = item_id
        return state

    def _done(self, item: dict[str, Any], position: Any, out: list[AssistantMessageEvent]) -> None:
        builder = self.builder
        item_id = item.get("id")
        state = self.items.get(item_id) if isinstance(item_id, str) else None
        if state is None:
            state = self._added(item, position, out)
            if state is None:
                return
        self.open = [(i, s) for i, s in self.open if s is not state]
        kind = state.kind
        if kind == "reasoning":
            summary = [p.get("text", "") for p in _parts(item, "summary")]
            raw = [p.get("text", "") for p in _parts(item, "content")]
            text = "\n\n".join(t for t in summary if isinstance(t, str)) or "".join(
                t for t in raw if isinstance(t, str)
            )
            if not state.streamed and text:
                out.append(builder.thinking_delta(text, state.index))
            # The item is the signature (replayed to the same model), as pi-ai keeps it.
            out.append(builder.thinking_end(state.index, signature=encode_json(item)))
        elif kind == "message":
            text = "".join(_part_text(p) for p in _parts(item, "content"))
            if not state.streamed and text:
                out.append(builder.text_delta(text, state.index))
            signature: dict[str, Any] = {"v": 1, "id": item_id}
            if item.get("phase") in ("commentary", "final_answer"):
                signature["phase"] = item["phase"]
            out.append(builder.text_end(state.index, signature=encode_json(signature)))
        else:
            if isinstance(item.get("call_id"), str):
                state.call_id = item["call_id"]
            if isinstance(item.get("name"), str) and item["name"]:
                state.name = item["name"]
            if not state.args.text and isinstance(item.get("arguments"), str):
                state.args.replace(item["arguments"])
            out.append(self._end_call(item_id, state))

    def _end_call(self, item_id: Any, state: _Item) -> AssistantMessageEvent:
        arguments, error = state.args.final()
        call = ToolCall(f"{state.call_id}|{item_id}", state.name, arguments, arguments_error=error)
        return self.builder.tool_call_end(call, state.index)

    def _completed(self, response: dict[str, Any], status: str) -> None:
        self.status = response.get("status") or status
        details = response.get("incomplete_details")
        if isinstance(details, dict):
            self.incomplete_reason = details.get("reason")
        if isinstance(response.get("usage"), dict):
            self._usage(response)

    def _usage(self, response: dict[str, Any]) -> None:
        usage = response["usage"]
        details = usage.get("input_tokens_details")
        cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        input_tokens = max(0, as_int(usage.get("input_tokens")) - cached)
        output = as_int(usage.get("output_tokens"))
        total = as_int(usage.get("total_tokens")) or input_tokens + output + cached
        result = make_usage(self.model, input=input_tokens, output=output, cache_read=cached, total=total)
        tier = response.get("service_tier")
        factor = _TIER_PRICE.get(tier, 1.0) if isinstance(tier, str) else 1.0
        if factor != 1.0:
            c = result.cost
            result = Usage(
                input=result.input,
                output=result.output,
                cache_read=result.cache_read,
                cache_write=result.cache_write,
                total_tokens=result.total_tokens,
                cost=Cost(
                    c.input * factor, c.output * factor, c.cache_read * factor, c.cache_write * factor, c.total * factor
                ),
            )
        self.builder.usage = result

    def finish(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        builder = self.builder
        for item_id, state in self.open:  # items the server never closed
            if state.kind == "reasoning":
                out.append(builder.thinking_end(state.index))
            elif state.kind == "message":
                out.append(builder.text_end(state.index))
            else:
                out.append(self._end_call(item_id, state))
        self.open = []
        status = self.status
        if status == "incomplete":
            reason = self.incomplete_reason
            if reason == "max_output_tokens":
                out.append(builder.done("length"))
            else:  # pi-ai's texts
                text = f"Response incomplete: {reason}" if reason else "Response incomplete without a provider reason"
                out.append(builder.error("error", text))
        elif status in ("failed", "cancelled"):
            out.append(builder.error("error", f"The response ended with status {status!r}"))
        else:
            out.append(builder.done("toolUse" if self.saw_tools else "stop"))
        return out


def _parts(item: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The objects of an item's list field (a missing or malformed list has none)."""
    parts = item.get(key)
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _part_text(part: dict[str, Any]) -> str:
    for key in ("text", "refusal"):
        value = part.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _retryable(error: Any) -> bool:
    if isinstance(error, dict):
        code = error.get("code")
        kind = error.get("type")
        if isinstance(code, int) and (code == 429 or code >= 500):
            return True
        return is_one_of(code, _RETRYABLE) or is_one_of(kind, _RETRYABLE)
    return False
