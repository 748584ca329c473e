"""OpenAI Chat Completions (`api="openai-completions"`): OpenAI and every OpenAI-compatible server
(llama.cpp, vLLM, Ollama, LM Studio, OpenRouter, Groq...).

Compat flags (`Model.compat`, snake_case or the reference's camelCase), auto-detected from the
base URL when absent:

* `supports_store` (official OpenAI): send `store: false`.
* `supports_developer_role` (official OpenAI): the system prompt of a reasoning model goes in a
  `developer` message.
* `supports_reasoning_effort` (not xAI), `reasoning_effort_map` ({level: value}),
  `supports_xhigh`: how a thinking level becomes `reasoning_effort`.
* `thinking_format`: `openai` (`reasoning_effort`), `qwen`/`zai` (`enable_thinking`),
  `qwen-chat-template` (`chat_template_kwargs.enable_thinking`), `llama.cpp`
  (`chat_template_kwargs.enable_thinking` and `thinking_budget_tokens`).
* `max_tokens_field`: `max_completion_tokens` (official OpenAI) or `max_tokens` (others).
* `supports_usage_in_streaming` (true): ask for the usage chunk.
* `supports_strict_mode` (official OpenAI): `strict: false` in tool definitions.
* `requires_tool_result_name`, `requires_thinking_as_text`, `requires_mistral_tool_ids`
  (Mistral), `requires_assistant_after_tool_result`, `requires_tools_with_tool_history`.
* `add_reasoning_tokens` (false): count `reasoning_tokens` on top of `completion_tokens` (for
  servers that leave them out, as Groq does; OpenAI already includes them).
* `prompt_cache_key_mode` (`auto`: the session id is sent as `prompt_cache_key` to OpenAI, and to
  other servers for a `long` retention; `enabled`; `disabled`), `supports_long_cache_retention`
  (false for Together, Cloudflare and NVIDIA), `cache_control_format` (`anthropic` for
  OpenRouter's `anthropic/` models: cache marks as Anthropic's).
* `extra_body`: a mapping merged into the request body last.
"""

from __future__ import annotations

from collections.abc import Iterable
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
from ._cache import anthropic_cache_control, cache_retention, prompt_cache_key
from ._errors import ProviderError
from ._http import AsyncClient, HTTPOptions, run_stream
from ._json_stream import ToolArguments
from ._parse import SSEParser, as_int, as_str, error_text, is_one_of, stream_object
from ._request import (
    Request,
    base_url,
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
from ._transform import mistral_tool_call_ids, normalize_completions_id, transform_messages
from ._usage import make_usage

__all__ = (
    "CompletionsParser",
    "OPENAI_BASE_URL",
    "build_completions_request",
    "convert_messages",
    "is_openrouter",
    "map_finish_reason",
    "openai_base_url",
    "stream_openai_completions",
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_SHORT_CACHE_HOSTS = ("api.together.", "api.cloudflare.com", "gateway.ai.cloudflare.com", "integrate.api.nvidia.com")
"""Hosts without OpenAI's 24-hour prompt cache retention."""
_CLEAN_NATIVE_STOPS = frozenset(
    {"stop", "end_turn", "stop_sequence", "eos", "complete", "completed", "pause_turn", "compaction", "end_of_stream"}
)
"""OpenRouter `native_finish_reason`s of a clean stop (lower case)."""
_RETRYABLE_ERRORS = frozenset(
    {"server_error", "rate_limit_exceeded", "rate_limit_error", "overloaded_error", "api_error", "overloaded"}
)
_IMAGES_FROM_TOOL = "Attached image(s) from tool result:"


def stream_openai_completions(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from an OpenAI Chat Completions endpoint (`{base_url}/chat/completions`).

    Args:
        model: The model; `base_url` defaults to OpenAI (or `$OPENAI_BASE_URL`).
        context: The system prompt, the messages (from any provider) and the tools.
        options: The key (else the provider's usual environment variable), the thinking level,
            the abort signal, `max_tokens`, `temperature`, headers.
        http: An `HTTPOptions` (retries, timeouts).
        client: An `httpx.AsyncClient` to send with (not closed); by default one per response.

    Returns:
        The response's events (see `AssistantMessageEventStream`). Failures end it with one
            `error` event; it never raises once returned.
    """
    return run_stream(model, context, options, build_completions_request, CompletionsParser, http=http, client=client)


def openai_base_url(model: Model) -> str:
    """Where an OpenAI request (Chat Completions or Responses) of `model` goes: its base URL, or
    OpenAI's (`$OPENAI_BASE_URL` when set, also in place of OpenAI's own)."""
    return base_url(model, OPENAI_BASE_URL, "OPENAI_BASE_URL")


def _flags(model: Model, url: str) -> dict[str, Any]:
    official = "api.openai.com" in url
    mistral = "mistral.ai" in url
    openrouter = is_openrouter(model, url)
    short_cache_only = any(host in url for host in _SHORT_CACHE_HOSTS)
    return {
        "supports_store": compat(model, "supports_store", official),
        "supports_developer_role": compat(model, "supports_developer_role", official),
        "supports_reasoning_effort": compat(model, "supports_reasoning_effort", "api.x.ai" not in url),
        "reasoning_effort_map": compat(model, "reasoning_effort_map", None) or {},
        "supports_xhigh": compat(model, "supports_xhigh", False),
        "thinking_format": compat(model, "thinking_format", "openai"),
        "max_tokens_field": compat(model, "max_tokens_field", "max_completion_tokens" if official else "max_tokens"),
        "supports_usage_in_streaming": compat(model, "supports_usage_in_streaming", True),
        "supports_strict_mode": compat(model, "supports_strict_mode", official),
        "requires_tool_result_name": compat(model, "requires_tool_result_name", mistral),
        "requires_thinking_as_text": compat(model, "requires_thinking_as_text", mistral),
        "requires_mistral_tool_ids": compat(model, "requires_mistral_tool_ids", mistral),
        "requires_assistant_after_tool_result": compat(model, "requires_assistant_after_tool_result", False),
        "requires_tools_with_tool_history": compat(model, "requires_tools_with_tool_history", False),
        "prompt_cache_key_mode": compat(model, "prompt_cache_key_mode", "auto"),
        "supports_long_cache_retention": compat(model, "supports_long_cache_retention", not short_cache_only),
        "cache_control_format": compat(
            model, "cache_control_format", "anthropic" if openrouter and model.id.startswith("anthropic/") else None
        ),
    }


def is_openrouter(model: Model, url: str) -> bool:
    """True for a model served by OpenRouter (its provider name or its URL)."""
    return model.provider == "openrouter" or "openrouter.ai" in url


def build_completions_request(model: Model, context: Context, options: StreamOptions) -> Request:
    """The `Request` for one response (the key is resolved here, lazily)."""
    check_llm_messages(context)
    key = resolve_api_key(model, options)
    url = openai_base_url(model)
    flags = _flags(model, url)
    body: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(model, context, flags),
        "stream": True,
    }
    _add_prompt_cache(body, model, options, flags, url)
    if flags["supports_usage_in_streaming"]:
        body["stream_options"] = {"include_usage": True}
    if flags["supports_store"]:
        body["store"] = False
    if options.max_tokens:
        body[flags["max_tokens_field"]] = options.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    strict = flags["supports_strict_mode"]
    if context.tools:
        tools = []
        for name, description, parameters in tool_specs(context.tools):
            function: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
            if strict:
                function["strict"] = False
            tools.append({"type": "function", "function": function})
        body["tools"] = tools
    elif flags["requires_tools_with_tool_history"] and _has_tool_history(context):
        body["tools"] = []
    _add_thinking(body, model, options, flags)
    response_format = native_output(model, options, "chat")
    if response_format is not None:
        body["response_format"] = response_format
    cache = anthropic_cache_control(model, options) if flags["cache_control_format"] == "anthropic" else None
    if cache is not None:
        _mark_cacheable(body, cache)
    extra = compat(model, "extra_body", None)
    if extra:
        body.update(extra)
    headers = request_headers({"authorization": f"Bearer {key}"} if key else {}, model, options)
    return Request(url + "/chat/completions", headers, body, key)


def _add_prompt_cache(
    body: dict[str, Any], model: Model, options: StreamOptions, flags: dict[str, Any], url: str
) -> None:
    """`prompt_cache_key` (OpenAI's own API, a `long` retention, or the compat flag
    `prompt_cache_key_mode: "enabled"`) and the 24-hour `prompt_cache_retention` for `long`."""
    retention = cache_retention(options)
    mode = flags["prompt_cache_key_mode"]
    long_ok = retention == "long" and bool(flags["supports_long_cache_retention"])
    key = prompt_cache_key(options)
    if key and retention != "none" and (mode == "enabled" or (mode == "auto" and ("api.openai.com" in url or long_ok))):
        body["prompt_cache_key"] = key
    if long_ok:
        body["prompt_cache_retention"] = "24h"


def _mark_cacheable(body: dict[str, Any], cache: dict[str, Any]) -> None:
    """Anthropic-style cache marks through an OpenAI-compatible gateway (OpenRouter's `anthropic/`
    models): the system prompt's text, the last tool, the last message with text."""
    messages: list[dict[str, Any]] = body["messages"]
    for message in messages:
        if message["role"] in ("system", "developer"):
            _mark_text(message, cache)
            break
    tools = body.get("tools")
    if tools:
        tools[-1]["cache_control"] = cache
    for message in reversed(messages):
        if message["role"] in ("user", "assistant", "tool") and _mark_text(message, cache):
            break


def _mark_text(message: dict[str, Any], cache: dict[str, Any]) -> bool:
    """Mark a message's last text part (a string content becomes one text part); False if none."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": cache}]
        return True
    if isinstance(content, list):
        for i in range(len(content) - 1, -1, -1):
            if content[i].get("type") == "text":
                content[i] = {**content[i], "cache_control": cache}
                return True
    return False


def _has_tool_history(context: Context) -> bool:
    return any(
        isinstance(m, ToolResultMessage) or (isinstance(m, AssistantMessage) and m.tool_calls) for m in context.messages
    )


def _add_thinking(body: dict[str, Any], model: Model, options: StreamOptions, flags: dict[str, Any]) -> None:
    level = thinking_level(options, xhigh=bool(flags["supports_xhigh"]))
    style = flags["thinking_format"]
    if style == "openai":
        if level is not None and model.reasoning and flags["supports_reasoning_effort"]:
            body["reasoning_effort"] = flags["reasoning_effort_map"].get(level, level)
    elif style in ("qwen", "zai"):
        if model.reasoning:
            body["enable_thinking"] = level is not None
    elif style in ("qwen-chat-template", "llama.cpp"):
        body["chat_template_kwargs"] = {"enable_thinking": level is not None}
        if style == "llama.cpp" and level is not None:
            body["thinking_budget_tokens"] = thinking_budget(options, level)


def convert_messages(model: Model, context: Context, flags: dict[str, Any]) -> list[dict[str, Any]]:
    """The transcript as Chat Completions messages."""
    mistral_ids = mistral_tool_call_ids() if flags["requires_mistral_tool_ids"] else None

    def tool_id(value: str) -> str:
        return mistral_ids(value) if mistral_ids is not None else value

    images_ok = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        role = "developer" if model.reasoning and flags["supports_developer_role"] else "system"
        out.append({"role": role, "content": sanitize(context.system_prompt)})
    pending_images: list[dict[str, Any]] = []
    last_role = ""
    for message in transform_messages(context.messages, model, normalize_completions_id):
        if message.role != "toolResult" and pending_images:
            out.append({"role": "user", "content": [{"type": "text", "text": _IMAGES_FROM_TOOL}, *pending_images]})
            pending_images = []
        if flags["requires_assistant_after_tool_result"] and last_role == "toolResult" and message.role == "user":
            out.append({"role": "assistant", "content": "I have processed the tool results."})
        if message.role == "user":
            if isinstance(message.content, str):
                out.append({"role": "user", "content": sanitize(message.content)})
            else:
                parts: list[dict[str, Any]] = []
                for block in message.content:
                    if isinstance(block, TextContent):
                        parts.append({"type": "text", "text": sanitize(block.text)})
                    elif isinstance(block, ImageContent) and images_ok:
                        parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
                if parts:
                    out.append({"role": "user", "content": parts})
        elif message.role == "assistant":
            converted = _assistant(message, flags, tool_id)
            if converted is None:
                continue
            out.append(converted)
        else:
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            images = [b for b in message.content if isinstance(b, ImageContent)]
            text = "\n".join(texts) if texts else ("(see attached image)" if images else "")
            result: dict[str, Any] = {
                "role": "tool",
                "content": sanitize(text),
                "tool_call_id": tool_id(message.tool_call_id),
            }
            if flags["requires_tool_result_name"] and message.tool_name:
                result["name"] = message.tool_name
            out.append(result)
            if images and images_ok:
                pending_images.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in images)
        last_role = message.role
    if pending_images:
        out.append({"role": "user", "content": [{"type": "text", "text": _IMAGES_FROM_TOOL}, *pending_images]})
    return out


def _assistant(message: AssistantMessage, flags: dict[str, Any], tool_id: Any) -> dict[str, Any] | None:
    texts = [sanitize(b.text) for b in message.content if isinstance(b, TextContent) and b.text.strip()]
    thinking = [b for b in message.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    result: dict[str, Any] = {"role": "assistant", "content": None}
    if thinking:
        if flags["requires_thinking_as_text"]:
            texts.insert(0, "\n".join(f"<thinking>\n{sanitize(b.thinking)}\n</thinking>" for b in thinking))
        else:
            field = thinking[0].thinking_signature
            if field in _REASONING_FIELDS:
                result[field] = "\n".join(sanitize(b.thinking) for b in thinking)
    if texts:
        result["content"] = "".join(texts)
    elif flags["requires_assistant_after_tool_result"]:
        result["content"] = ""
    if calls:
        result["tool_calls"] = [
            {
                "id": tool_id(call.id),
                "type": "function",
                "function": {"name": call.name, "arguments": json_text(dict(call.arguments))},
            }
            for call in calls
        ]
    if not texts and not calls:
        return None
    return result


# --- the stream -----------------------------------------------------------------------------


class _Tool:
    __slots__ = ("args", "id", "index", "name")

    def __init__(self, index: int, tool_id: str, name: str) -> None:
        self.index = index
        self.id = tool_id
        self.name = name
        self.args = ToolArguments()


def map_finish_reason(reason: Any) -> Literal["stop", "length", "toolUse", "error"]:
    """A Chat Completions `finish_reason` as a stop reason; unknown ones count as `stop`."""
    if reason in ("length", "max_tokens"):
        return "length"
    if reason in ("tool_calls", "function_call"):
        return "toolUse"
    if reason in ("content_filter", "error", "network_error"):
        return "error"
    return "stop"


class CompletionsParser(SSEParser):
    """Chat Completions chunks to assistant-message events, in pi-ai's order.

    A response has at most one thinking block (reasoning from `reasoning_content`, `reasoning` or
    `reasoning_text`; the first field seen is its signature, so replay puts it back there) and one
    text block (content and refusals), each opened where its first delta arrives, and one block
    per tool call, keyed by the call's `index`. No block ends before the stream does: then every
    block ends, in content order (parallel tool calls stay open together, as in pi-ai). Every
    tool-call chunk gives a `toolcall_delta`, with `""` when it carries no argument text.

    One difference from pi-ai, kept on purpose: a new `id` at a known `index` starts a new call
    (servers that number every parallel call 0 would otherwise have their calls merged).

    From OpenRouter, the upstream's `native_finish_reason` is read too: an error's text names it,
    and a `stop` with no text and no tool call whose native reason is not a clean stop is the
    error "OpenRouter returned an empty response (native_finish_reason: ...)", as pi-ai reads it.
    """

    end_marker = "[DONE] marker"
    complete_at_eof = True  # as the OpenAI SDK (and pi-ai): the finish_reason decides, not [DONE]

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.text = -1  # the text block's index, once opened
        self.thinking = -1  # the thinking block's index, once opened
        self.reasoning_field = ""
        self.tools: dict[int, _Tool] = {}  # by the call's `index` in the stream
        self.open_tools: list[_Tool] = []
        self.finish_reason: Any = None
        self.add_reasoning = bool(compat(model, "add_reasoning_tokens", False))
        self.openrouter = is_openrouter(model, model.base_url)
        self.native_finish_reason: str | None = None
        self.visible = False  # some text that is not blank, or a tool call, has streamed

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        if data.strip() == "[DONE]":
            self.finished = True
            return ()
        chunk = stream_object(data, self.secret)
        error = chunk.get("error")
        if error is not None and not chunk.get("choices"):
            raise ProviderError(
                error_text(chunk, self.secret) or "The server reported an error", retryable=_retryable(error)
            )
        out: list[AssistantMessageEvent] = []
        builder = self.builder
        if builder.response_id is None and isinstance(chunk.get("id"), str):
            builder.response_id = chunk["id"]
        answered = chunk.get("model")
        if builder.response_model is None and isinstance(answered, str) and answered and answered != self.model.id:
            builder.response_model = answered
        choices = chunk.get("choices")
        usage = chunk.get("usage")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if usage is None and isinstance(choice.get("usage"), dict):
                usage = choice["usage"]  # Moonshot puts it here
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, out)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            native = choice.get("native_finish_reason")
            if self.openrouter and isinstance(native, str) and native:
                self.native_finish_reason = native  # kept: a later chunk may repeat finish_reason alone
        if isinstance(usage, dict):
            self._usage(usage)
        return out

    def _delta(self, delta: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        builder = self.builder
        for field in _REASONING_FIELDS:
            value = delta.get(field)
            if isinstance(value, str) and value:
                if self.thinking < 0:
                    start = builder.thinking_start()
                    out.append(start)
                    self.thinking, self.reasoning_field, self.has_content = start.content_index, field, True
                out.append(builder.thinking_delta(value, self.thinking))
                break
        for field in ("content", "refusal"):
            value = delta.get(field)
            if isinstance(value, str) and value:
                if self.text < 0:
                    text_start = builder.text_start()
                    out.append(text_start)
                    self.text, self.has_content = text_start.content_index, True
                self.visible = self.visible or not value.isspace()
                out.append(builder.text_delta(value, self.text))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._tool_delta(call, out)

    def _tool_delta(self, call: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        builder = self.builder
        position = call.get("index", 0)
        if not isinstance(position, int):
            position = 0
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        call_id = as_str(call.get("id"))
        name = as_str(function.get("name"))
        tool = self.tools.get(position)
        if tool is None or (call_id and tool.id and call_id != tool.id):
            start = builder.tool_call_start(call_id, name)
            out.append(start)
            self.has_content = True
            tool = _Tool(start.content_index, call_id, name)
            self.visible = True
            self.tools[position] = tool
            self.open_tools.append(tool)
        else:
            if call_id:
                tool.id = call_id  # some servers repeat the id and the name on every delta: set, not append
            if name:
                tool.name = name
        fragment = function.get("arguments")
        if not isinstance(fragment, str):
            fragment = ""
        out.append(builder.tool_call_delta(fragment, tool.args.append(fragment), index=tool.index))

    def _close(self, out: list[AssistantMessageEvent]) -> None:
        """End every block, in content order."""
        builder = self.builder
        ends: list[tuple[int, Any]] = [(tool.index, tool) for tool in self.open_tools]
        if self.text >= 0:
            ends.append((self.text, "text"))
        if self.thinking >= 0:
            ends.append((self.thinking, "thinking"))
        for index, what in sorted(ends, key=lambda end: end[0]):
            if what == "text":
                out.append(builder.text_end(index))
            elif what == "thinking":
                out.append(builder.thinking_end(index, signature=self.reasoning_field))
            else:
                arguments, error = what.args.final()
                out.append(builder.tool_call_end(ToolCall(what.id, what.name, arguments, arguments_error=error), index))
        self.open_tools = []
        self.text = self.thinking = -1

    def _usage(self, usage: dict[str, Any]) -> None:
        prompt = as_int(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        output = as_int(usage.get("completion_tokens"))
        if self.add_reasoning:
            completion_details = usage.get("completion_tokens_details")
            if isinstance(completion_details, dict):
                output += as_int(completion_details.get("reasoning_tokens"))
        input_tokens = max(0, prompt - cached)
        self.builder.usage = make_usage(self.model, input=input_tokens, output=output, cache_read=cached)

    def finish(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        self._close(out)
        if not self.finished and not self.finish_reason:
            out.append(
                self.builder.error(
                    "error",
                    "The stream ended before its finish_reason: the connection closed early and the response is "
                    "incomplete.",
                )
            )
            return out
        reason = map_finish_reason(self.finish_reason)
        native = self.native_finish_reason
        if reason == "error":
            text = f"Provider finish_reason: {self.finish_reason}"
            if native and native != self.finish_reason:
                text += f" (native_finish_reason: {native})"
            out.append(self.builder.error("error", text))
        elif reason == "stop" and native and native.lower() not in _CLEAN_NATIVE_STOPS and not self.visible:
            out.append(
                self.builder.error("error", f"OpenRouter returned an empty response (native_finish_reason: {native})")
            )
        else:
            if reason == "stop" and self.tools:
                reason = "toolUse"
            out.append(self.builder.done(reason))
        return out


def _retryable(error: Any) -> bool:
    if isinstance(error, dict):
        code = error.get("code")
        kind = error.get("type")
        if isinstance(code, int) and (code == 429 or code >= 500):
            return True
        return is_one_of(kind, _RETRYABLE_ERRORS) or is_one_of(code, _RETRYABLE_ERRORS)
    return False
