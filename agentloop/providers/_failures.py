"""What a failed assistant message says: the context overflowed, the failure is transient, or the
model cannot be used at all. pi-ai 1.6.1's `isContextOverflow` and `isRetryableAssistantError`,
with their patterns, plus the forms of agentloop's own error texts (`HTTP 413: ...`)."""

from __future__ import annotations

import re

from .._types._messages import AssistantMessage

__all__ = ("is_context_overflow", "is_retryable_error", "is_unavailable_model")

_OVERFLOW = re.compile(
    "|".join(
        (
            r"prompt (?:is )?too long",  # Anthropic, z.ai
            r"prompt exceeds max length",  # z.ai (CN endpoint)
            r"(?<![a-z0-9_])request_too_large(?![a-z0-9_])",  # Anthropic's byte-size error code
            r"input is too long for requested model",  # Amazon Bedrock
            r"exceeds the context window",  # OpenAI (Chat Completions and Responses)
            r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",  # LiteLLM
            r"context window exceeded",  # LiteLLM's pre-call check
            r"input token count.*exceeds the maximum",  # Google Gemini
            r"maximum prompt length is \d+",  # xAI
            r"reduce the length of the messages",  # Groq
            r"maximum context length is \d+ tokens",  # OpenRouter
            r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",  # OpenRouter (Poolside)
            r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",  # Together AI
            r"exceeds the limit of \d+",  # GitHub Copilot
            r"exceeds the available context size",  # llama.cpp
            r"greater than the context length",  # LM Studio
            r"context window exceeds limit",  # MiniMax
            r"exceeded model token limit",  # Kimi For Coding
            r"too large for model with \d+ maximum context length",  # Mistral
            r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",  # DS4
            r"model_context_window_exceeded",  # z.ai's finish reason as an error text
            r"prompt too long; exceeded (?:max )?context length",  # Ollama
            r"range of input length should be",  # DashScope / Qwen
            r"context[_ ]length[_ ]exceeded",
            r"too many tokens",
            r"token limit exceeded",
            # HTTP 413 is a request too large, whatever the body says: the status at the start of the
            # text (pi-ai's `... API error (413):`, agentloop's `HTTP 413:`), not one the body mentions.
            r"^(?:[\w -]+ API error \(413\):|(?:HTTP )?413(?:\s|:|\Z))",
        )
    ),
    re.IGNORECASE,
)
_CEREBRAS_NO_BODY = re.compile(
    r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)"
    r"|^HTTP 4(?:00|13): (?:Bad Request|Payload Too Large|Request Entity Too Large|no details)\Z",
    re.IGNORECASE,
)
"""Cerebras answers an overflow with a bare 400 or 413 (agentloop shows the status's own phrase)."""
_NOT_OVERFLOW = re.compile(r"^(?:Throttling error|Service unavailable):|rate limit|too many requests", re.IGNORECASE)
"""Throttling that the overflow patterns would otherwise match (`ThrottlingException: Too many tokens`)."""

_LIMIT = re.compile(
    "|".join(
        (
            r"GoUsageLimitError",
            r"FreeUsageLimitError",
            r"Monthly usage limit reached",
            r"available balance",
            r"insufficient_quota",
            r"out of budget",
            r"quota exceeded",
            r"billing",
            r"subscription_sharing_usage_limit_exceeded",
            r"subscription_sharing_workplace_individual_usage_limit_exceeded",
            r'"code"\s*:\s*"?1308(?![0-9])',
        )
    ),
    re.IGNORECASE,
)
"""Quota, budget and billing limits: they last hours, not seconds, so they are not retried."""
_TRANSIENT = re.compile(
    "|".join(
        (
            r"overloaded",
            r"server_busy",
            r"servers are currently busy",
            r"currently experiencing high demand",
            r"model is at capacity",
            r"admission ceiling",
            r"rate.?limit",
            r"too many requests",
            r"rate increased too quickly",
            r"(?<![a-z0-9])(?:429|500|502|503|504|520|524|525)(?![a-z0-9])",
            r"service.?(?:is.?)?(?:temporarily.?)?unavailable",
            r"provider.?(?:is.?)?temporarily.?unavailable",
            r"server.?error",
            r"internal.?error",
            r"provider.?returned.?(?:an.?)?error",
            r'"type"\s*:\s*"api_error"',
            r"exceeded request buffer limit while retrying upstream",
            r"unable to forward upstream",
            r"upstream.?request.?failed",
            r"upstream_stream_read_error",
            r"stream was interrupted",
            r"http/?2 stream failed",
            r"network.?error",
            r"connection.?error",
            r"connection.?refused",
            r"connection.?lost",
            r"connection.?closed",
            r"other side closed",
            r"fetch failed",
            r"request to \S+ failed, reason:",
            r"getaddrinfo",
            r"(?<![a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?![a-z0-9_])",
            r"connection reset by peer",
            r"ENOTFOUND",
            r"EAI_AGAIN",
            r"upstream.?connect",
            r"reset before headers",
            r"socket hang up",
            r"socket connection was closed",
            r"timed? out",
            r"timeout",
            r"terminated",
            r"websocket.?closed",
            r"websocket.?error",
            r"websocket.?connection.?limit.?reached",
            r"ended without",
            r"stream ended before message_stop",
            r"stream ended before a terminal response event",
            r"http2 request did not get a response",
            r"provider finish_reason: error",
            r"provider stopped with: error",
            r"returned an empty response",
            r"stopped before completing the response",
            r"stream disconnected before completion",
            r"cut short after the reply had begun",
            r"ended the response before it was complete",
            r"connection to the provider was reset",
            r"reported a failure while generating the response",
            r"pending stream has been canceled",
            r"retry delay",
            r"you can retry your request",
            r"try your request again",
            r"please retry your request",
            r"repeat the request later",
            r"ResourceExhausted",
            r"subscription_sharing_usage_unavailable",
            r"subscription_sharing_user_unavailable",
            # agentloop's own texts for a connection that failed, a stream cut short or stuck.
            r"could not connect to the server",
            r"HTTP transport error",
            r"the stream ended before its",
            r"sent no event for",
        )
    ),
    re.IGNORECASE,
)
_UNAVAILABLE = re.compile(
    "|".join(
        (
            r"^HTTP (?:401|403|404):",
            r"model_not_found",
            r"not_found_error",
            r"model\b.*\b(?:does not exist|not found|is not available|is not supported)",
            r"(?:no such|unknown) model",
            r"invalid_api_key",
            r"authentication_error",
            r"permission_error",
            r"^No API key for provider",
            r"^No API provider registered",
        )
    ),
    re.IGNORECASE,
)


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """True when `message` says the request did not fit the model's context window (pi-ai's
    `isContextOverflow`).

    Three cases:

    1. An error whose text is a provider's way of saying so ("prompt is too long: 213462 tokens >
       200000 maximum" from Anthropic, "Your input exceeds the context window of this model" from
       OpenAI, "the request exceeds the available context size" from llama.cpp, an HTTP 413, and the
       rest of pi-ai's list), unless it is a rate limit.
    2. A silent overflow: a `stop` whose input tokens (cache reads included) exceed `context_window`
       (z.ai accepts such requests).
    3. A `length` stop with no output whose input fills 99 % of `context_window` (Xiaomi MiMo cuts
       the input to fit, leaving no room to answer).

    Args:
        message: A final assistant message.
        context_window: The model's context window in tokens (usually `model.context_window`);
            without it only the first case is checked.

    Example:
        ```python
        if is_context_overflow(message, model.context_window):
            ...  # compact the conversation, then continue
        ```
    """
    if not isinstance(message, AssistantMessage):
        raise TypeError(f"message must be an agentloop.AssistantMessage, got {type(message).__name__}")
    text = message.error_message
    if message.stop_reason == "error" and text and not _NOT_OVERFLOW.search(text):
        if _OVERFLOW.search(text):
            return True
        if message.provider == "cerebras" and _CEREBRAS_NO_BODY.search(text):
            return True
    if context_window:
        tokens = message.usage.input + message.usage.cache_read
        if message.stop_reason == "stop" and tokens > context_window:
            return True
        if message.stop_reason == "length" and message.usage.output == 0 and tokens >= context_window * 0.99:
            return True
    return False


def is_retryable_error(message: AssistantMessage) -> bool:
    """True when `message` failed in a way that is likely transient (pi-ai's
    `isRetryableAssistantError`): overload, rate limits, 429/5xx, connections dropped or timed out,
    a stream cut short. Quota, budget and billing limits are not, nor a context overflow (check
    `is_context_overflow` first: it needs a smaller request, not another try)."""
    if not isinstance(message, AssistantMessage):
        raise TypeError(f"message must be an agentloop.AssistantMessage, got {type(message).__name__}")
    text = message.error_message
    if message.stop_reason != "error" or not text or _LIMIT.search(text):
        return False
    return _TRANSIENT.search(text) is not None


def is_unavailable_model(message: AssistantMessage) -> bool:
    """True when `message` says the model cannot be used at all: unknown to the server (HTTP 404,
    `model_not_found`), a key refused or missing (HTTP 401/403, no key for the provider), an API
    with no stream function."""
    if not isinstance(message, AssistantMessage):
        raise TypeError(f"message must be an agentloop.AssistantMessage, got {type(message).__name__}")
    text = message.error_message
    return message.stop_reason == "error" and bool(text) and _UNAVAILABLE.search(text or "") is not None
