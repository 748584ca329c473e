"""What the three wire protocols share, without the HTTP stack: errors, keys, usage and cost,
thinking levels, compat flags, the parser base class and the stream object users iterate.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal

from .._types._builder import AssistantMessageBuilder
from .._types._constants import LLM_MESSAGE_TYPES
from .._types._events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .._types._messages import AssistantMessage, Context, Cost, ImageContent, Model, Usage
from .._types._stream_fn import StreamOptions
from .._wire._json_text import decode_json

__all__ = (
    "AssistantMessageEventStream",
    "ENV_API_KEYS",
    "Level",
    "MAX_ERROR_BODY",
    "ProviderError",
    "SSEParser",
    "as_int",
    "as_str",
    "base_url",
    "calculate_cost",
    "check_arguments",
    "check_llm_messages",
    "compat",
    "data_url",
    "env_api_key",
    "error_text",
    "is_one_of",
    "json_text",
    "make_usage",
    "redact",
    "request_headers",
    "resolve_api_key",
    "sanitize",
    "stream_object",
    "thinking_budget",
    "thinking_level",
    "tool_specs",
)

MAX_ERROR_BODY = 64 * 1024
"""The most bytes of an error response read (and shown, cut further) from a server."""

ENV_API_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
}
"""Where a provider's key is looked up when `StreamOptions.api_key` is not given. Models of any
other provider (local servers: llama.cpp, Ollama, vLLM...) are called without a key."""


class ProviderError(Exception):
    """A failure inside a provider; the stream turns it into its terminal `error` event.

    `retryable` errors are retried while no content has streamed (rate limits, overload,
    server errors). Never raised out of a stream function.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def check_arguments(model: object, context: object, options: object) -> None:
    """Raise TypeError for arguments of the wrong type (a programming error, not a model failure)."""
    if not isinstance(model, Model):
        raise TypeError(f"model must be an agentloop.Model, got {type(model).__name__}")
    if not isinstance(context, Context):
        raise TypeError(f"context must be an agentloop.Context, got {type(context).__name__}")
    if not isinstance(options, StreamOptions):
        raise TypeError(f"options must be an agentloop.StreamOptions, got {type(options).__name__}")


def check_llm_messages(context: Context) -> None:
    """ProviderError when the context holds a message no model understands (a custom message that
    `convert_to_llm` left in), naming it, instead of failing somewhere in the conversion."""
    for i, message in enumerate(context.messages):
        if not isinstance(message, LLM_MESSAGE_TYPES):
            role = getattr(message, "role", None)
            raise ProviderError(
                f"context.messages[{i}] is a {type(message).__name__} (role {role!r}), which no model understands: "
                "convert_to_llm must turn custom messages into user, assistant or toolResult messages, or drop them"
            )


# --- keys ----------------------------------------------------------------------------------


def env_api_key(provider: str) -> str | None:
    """The key of `provider` from its usual environment variable, if set."""
    for name in ENV_API_KEYS.get(provider, ()):
        value = os.environ.get(name)
        if value:
            return value
    return None


def resolve_api_key(model: Model, options: StreamOptions) -> str | None:
    """`options.api_key`, else the provider's environment variable; ProviderError when a known
    provider has neither."""
    if options.api_key:
        return options.api_key
    key = env_api_key(model.provider)
    if key is None and model.provider in ENV_API_KEYS:
        names = " or ".join(ENV_API_KEYS[model.provider])
        raise ProviderError(
            f"No API key for provider {model.provider!r}: set {names}, or pass api_key "
            "(AgentLoopConfig.api_key / get_api_key)."
        )
    return key


def base_url(model: Model, default: str, env: str) -> str:
    """The model's base URL; an empty one, or the official one (`default`), is replaced by
    `$env` if set."""
    url = model.base_url or default
    if url == default:
        url = os.environ.get(env) or default
    return url.rstrip("/")


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced by `***`, also where JSON escapes spell
    any of its characters (`\\u0073k-...`, `\\/`, with the backslashes doubled or not, as raw
    bodies and `repr` show them): a text about to be decoded or cut is redacted first, so no
    part of the key survives the decoding or the cut."""
    if not secret or len(secret) < 4:
        return text
    if secret in text:
        text = text.replace(secret, "***")
    if "\\" in text:
        text = _escaped(secret).sub("***", text)
    return text


def _escaped(secret: str) -> re.Pattern[str]:
    """`secret` with each character as itself or as a JSON escape (one or more backslashes)."""
    parts = []
    for char in secret:
        spellings = [re.escape(char)]
        code = ord(char)
        if code <= 0xFFFF:
            spellings.append(r"\\+u" + "".join(f"[{d.lower()}{d.upper()}]" for d in f"{code:04x}"))
        if char in '"\\/':
            spellings.append(r"\\+" + re.escape(char))
        parts.append("(?:" + "|".join(spellings) + ")")
    return re.compile("".join(parts))


# --- text ----------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def request_headers(own: Mapping[str, str], model: Model, options: StreamOptions) -> dict[str, str]:
    """A request's headers: the provider's own (the key, the API version), then the model's, then
    the call's, each overriding the one before. `content-type` is set by the driver when none is."""
    return {**own, **(model.headers or {}), **(options.headers or {})}


def sanitize(text: str) -> str:
    """Drop lone UTF-16 surrogates, which servers reject in JSON bodies."""
    return _SURROGATE.sub("", text) if _SURROGATE.search(text) else text


def _server_safe(value: Any) -> Any:
    """`value` with lone surrogates dropped from strings and non-finite numbers as null."""
    if isinstance(value, str):
        return sanitize(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {sanitize(k) if isinstance(k, str) else k: _server_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_server_safe(v) for v in value]
    return value


def json_text(value: Any, *, compact: bool = False) -> str:
    """JSON text a server accepts, whatever a model put in `value`.

    Lone surrogates (which UTF-8 cannot carry) are dropped, and NaN and the infinities become
    null, as JavaScript's `JSON.stringify` writes them: a model's odd output (tool arguments with
    `\\ud800` or `1e999`) must not make every later request of the conversation fail.
    """
    separators = (",", ":") if compact else None
    try:
        text = json.dumps(value, ensure_ascii=False, separators=separators, allow_nan=False)
        text.encode("utf-8")
    except ValueError:  # UnicodeEncodeError is a ValueError too
        text = json.dumps(_server_safe(value), ensure_ascii=False, separators=separators, allow_nan=False)
    return text


def is_one_of(value: Any, names: frozenset[str]) -> bool:
    """`value in names` for any JSON value (a list or an object is in no set of names)."""
    return isinstance(value, str) and value in names


def data_url(image: ImageContent) -> str:
    """An image as a `data:` URL."""
    return f"data:{image.mime_type};base64,{image.data}"


def tool_specs(tools: Sequence[Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(name, description, JSON schema) of each tool of a context."""
    specs = []
    for tool in tools:
        parameters = getattr(tool, "parameters", None)
        if not isinstance(parameters, Mapping):
            parameters = {"type": "object", "properties": {}}
        specs.append((str(tool.name), str(getattr(tool, "description", "") or ""), parameters))
    return specs


# --- compat flags --------------------------------------------------------------------------


def compat(model: Model, name: str, default: Any) -> Any:
    """A per-model compat flag, by its snake_case name or the reference's camelCase name."""
    flags = model.compat
    if not flags:
        return default
    if name in flags:
        return flags[name]
    head, *rest = name.split("_")
    camel = head + "".join(part.capitalize() for part in rest)
    return flags.get(camel, default)


# --- thinking levels -----------------------------------------------------------------------

Level = Literal["minimal", "low", "medium", "high", "xhigh"]
_DEFAULT_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}


def thinking_level(options: StreamOptions, *, xhigh: bool = False) -> Level | None:
    """The requested level, None for off; `max`/`xhigh` become `xhigh` when the model has it,
    else `high`."""
    level = options.reasoning
    if level is None or level == "off":
        return None
    if level == "xhigh" or level == "max":
        return "xhigh" if xhigh else "high"
    return level


def thinking_budget(options: StreamOptions, level: Level) -> int:
    """Thinking tokens for a level: `options.thinking_budgets` over the reference defaults."""
    budgets = dict(_DEFAULT_BUDGETS)
    if options.thinking_budgets:
        budgets.update(options.thinking_budgets)
    key = "high" if level == "xhigh" and "xhigh" not in budgets else level
    return int(budgets[key])


# --- usage ---------------------------------------------------------------------------------


def calculate_cost(model: Model, usage: Usage) -> Usage:
    """`usage` with its cost in dollars, from the model's prices per million tokens."""
    prices = model.cost
    cost_input = prices.input * usage.input / 1e6
    cost_output = prices.output * usage.output / 1e6
    cost_read = prices.cache_read * usage.cache_read / 1e6
    cost_write = prices.cache_write * usage.cache_write / 1e6
    return Usage(
        input=usage.input,
        output=usage.output,
        cache_read=usage.cache_read,
        cache_write=usage.cache_write,
        total_tokens=usage.total_tokens,
        cost=Cost(
            input=cost_input,
            output=cost_output,
            cache_read=cost_read,
            cache_write=cost_write,
            total=cost_input + cost_output + cost_read + cost_write,
        ),
    )


def make_usage(
    model: Model, *, input: int, output: int, cache_read: int = 0, cache_write: int = 0, total: int | None = None
) -> Usage:
    """A `Usage` with its cost; `total` defaults to the sum of the four counts."""
    if total is None:
        total = input + output + cache_read + cache_write
    return calculate_cost(
        model,
        Usage(input=input, output=output, cache_read=cache_read, cache_write=cache_write, total_tokens=total),
    )


def as_str(value: Any) -> str:
    """A string field from JSON (anything else counts as empty)."""
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int:
    """A token count from JSON (missing, null or junk count as 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def error_text(data: Any, secret: str | None = None) -> str | None:
    """The message of an error object as OpenAI, Anthropic, llama.cpp, OpenRouter... send it.

    OpenRouter's `metadata.raw` (the upstream's own answer, which may echo the request) is shown
    cut at 300 characters, after `secret` is redacted from it.
    """
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, str):
            return error
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            kind = error.get("type")
            if not kind or kind == "error":
                kind = error.get("code")
            metadata = error.get("metadata")
            if isinstance(message, str) and message:
                extra = ""
                if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
                    extra = f" ({redact(metadata['raw'], secret)[:300]})"
                return f"{message} ({kind}){extra}" if isinstance(kind, str) and kind else message + extra
            if isinstance(kind, str) and kind:
                return kind
        detail = data.get("detail") or data.get("message")
        if isinstance(detail, str) and detail:
            return detail
    return None


# --- parsing -------------------------------------------------------------------------------


class SSEParser:
    """Turns one response's server-sent events into assistant-message events.

    Subclasses implement `feed` (one SSE event in, the events it causes out; raise
    ProviderError for an error the server reported) and `finish` (the closing events and the
    terminal event, once the protocol's end marker was seen). The driver in `_http.py` does the I/O, retries, abort and
    timeouts.
    """

    end_marker = "end marker"
    """What the protocol ends with, for the error when a stream stops before it."""
    complete_at_eof = False
    """True when the body may end without the end marker (`finish` then decides, as the official
    SDK does for Chat Completions); otherwise such a stream ends in an "incomplete" error."""

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        self.model = model
        self.builder = builder
        self.finished = False
        """True once the end marker arrived; the driver stops reading."""
        self.has_content = False
        """True once a content block started: from then on the request is never retried."""
        self.secret: str | None = None
        """The request's API key (the driver sets it): error texts redact it before any cut."""

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        raise NotImplementedError

    def finish(self) -> list[AssistantMessageEvent]:
        """The events that end the response (blocks still open, then `done` or `error`)."""
        raise NotImplementedError


def stream_object(data: str, secret: str | None = None) -> dict[str, Any]:
    """The JSON object one server-sent event carries; ProviderError, quoting its start (`secret`
    redacted before the cut), if it is not one."""
    try:
        value = decode_json(data, constants=True)
    except ValueError:
        raise ProviderError(f"Malformed stream data (not JSON): {redact(data, secret)[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProviderError(f"Malformed stream data (not an object): {redact(data, secret)[:200]!r}")
    return value


# --- the stream object ---------------------------------------------------------------------


class AssistantMessageEventStream:
    """The events of one model response: an async iterator and an async context manager.

    `async with stream_simple(model, context, options) as events: async for event in events`
    closes the HTTP response when the block exits, even on `break`; iterating without `async
    with` works too (call `aclose()` when stopping early). `await stream.result()` consumes the
    rest and returns the final message. There is always exactly one terminal event (`done` or
    `error`); the stream never raises for a model, HTTP or protocol failure.

    Cancellation and early exit: an outer cancellation (a cancel scope, a timeout) propagates
    as a cancellation and closes the response; an abort of `options.signal` ends the stream with
    an `error` event whose reason is `aborted`, partial content kept.
    """

    __slots__ = ("_events", "_message")

    def __init__(self, events: AsyncGenerator[AssistantMessageEvent, None]) -> None:
        if not isinstance(events, AsyncIterator) or not callable(getattr(events, "aclose", None)):
            raise TypeError(f"events must be an async generator of AssistantMessageEvent, got {type(events).__name__}")
        self._events = events
        self._message: AssistantMessage | None = None

    def __aiter__(self) -> AssistantMessageEventStream:
        return self

    async def __anext__(self) -> AssistantMessageEvent:
        event = await self._events.__anext__()
        if isinstance(event, DoneEvent):
            self._message = event.message
        elif isinstance(event, ErrorEvent):
            self._message = event.error
        return event

    async def aclose(self) -> None:
        """Stop the response and release its connection."""
        await self._events.aclose()

    async def __aenter__(self) -> AssistantMessageEventStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def result(self) -> AssistantMessage:
        """Consume the remaining events and return the final message."""
        try:
            async for _ in self:
                pass
        finally:
            await self.aclose()
        assert self._message is not None, "a provider stream ended without a terminal event"
        return self._message

    def __repr__(self) -> str:
        return f"<AssistantMessageEventStream done={self._message is not None}>"
