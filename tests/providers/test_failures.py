"""Reading failed messages: `is_context_overflow` (each provider pattern pi-ai 1.6.1 lists, and
the silent overflows), `is_retryable_error` and `is_unavailable_model`, checked against pi-ai's
own functions on the same messages."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop import AssistantMessage, Usage
from agentloop.providers import is_context_overflow, is_retryable_error, is_unavailable_model
from agentloop.wire import to_json

from .conftest import PI_AI

ORACLE = Path(__file__).parent / "pi_wire" / "pi_failures.mjs"

OVERFLOWS = [
    "prompt is too long: 213462 tokens > 200000 maximum",  # Anthropic
    "Prompt too long",  # z.ai
    "Prompt exceeds max length",  # z.ai (CN)
    '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',  # Anthropic
    "Input is too long for requested model.",  # Bedrock
    "Your input exceeds the context window of this model",  # OpenAI
    "Requested token count exceeds the model's maximum context length of 131072 tokens",  # LiteLLM
    "Input length (265330) exceeds model's maximum context length (262144).",  # OpenAI-compatible
    "litellm.ContextWindowExceededError: Context Window exceeded for given call.",  # LiteLLM pre-call
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",  # Gemini
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens",  # xAI
    "Please reduce the length of the messages or completion",  # Groq
    "This endpoint's maximum context length is 200000 tokens. However, you requested about 250000 tokens",
    "Input length 300000 exceeds the maximum allowed input length of 262144 tokens.",  # OpenRouter/Poolside
    "The input (300000 tokens) is longer than the model's context length (262144 tokens).",  # Together AI
    "prompt token count of 140000 exceeds the limit of 128000",  # GitHub Copilot
    "the request exceeds the available context size, try increasing it",  # llama.cpp
    "tokens to keep from the initial prompt is greater than the context length",  # LM Studio
    "invalid params, context window exceeds limit",  # MiniMax
    "Your request exceeded model token limit: 262144 (requested: 300000)",  # Kimi For Coding
    "Prompt contains 300000 tokens and 0 draft tokens, too large for model with 262144 maximum context length",
    "Prompt has 300,000 tokens, but the configured context size is 262,144 tokens",  # DS4
    "model_context_window_exceeded",  # z.ai
    "prompt too long; exceeded max context length by 1200 tokens",  # Ollama
    "Range of input length should be [1, 129024]",  # DashScope / Qwen
    "context_length_exceeded",
    "Too many tokens in the request",
    "token limit exceeded",
]
STATUS_413 = [
    'github-copilot API error (413): {"message":"failed to parse request","code":""}',  # GitHub Copilot
    "413 status code (no body)",
]
"""HTTP 413 overflows: the status starts the text."""
NOT_OVERFLOWS = [
    "Throttling error: Too many tokens, please wait before trying again.",
    "Rate limit reached: too many tokens per minute",
    "Too many requests: too many tokens",
    "HTTP 400: Unsupported parameter: 'temperature'",
    "The body mentions 413 somewhere",
    "request_too_large_value is not an error code",
]
RETRYABLE = [
    "HTTP 429: Rate limit reached for requests (rate_limit_error) (after 2 retries)",
    "HTTP 529: Overloaded (overloaded_error)",
    "HTTP 503: Service Unavailable",
    '{"type":"error","error":{"type":"api_error","message":"Unable to complete this request right now."}}',
    "Provider finish_reason: error (native_finish_reason: upstream_failure)",
    "OpenRouter returned an empty response (native_finish_reason: MALFORMED_RESPONSE)",
    "The provider is temporarily unavailable. Retry shortly.",
    "The provider ended the response before it was complete.",
    "read ECONNRESET",
    "Cloudflare 525 handshake failed",
    "Unable to process request. Repeat the request later.",
    "Rate increased too quickly",
]
NOT_RETRYABLE = [
    "HTTP 429: You exceeded your current quota (insufficient_quota)",
    "HTTP 429: Monthly usage limit reached",
    "HTTP 400: Unsupported parameter: 'temperature'",
    "request id req_4291 failed validation",
    "Provider finish_reason: content_filter",
]


def failed(text: str, provider: str = "test") -> AssistantMessage:
    return AssistantMessage(stop_reason="error", error_message=text, provider=provider)


def answered(stop: str, input: int, output: int = 10, cache_read: int = 0) -> AssistantMessage:
    return AssistantMessage(
        stop_reason=stop,  # type: ignore[arg-type]
        usage=Usage(input=input, output=output, cache_read=cache_read, total_tokens=input + output + cache_read),
    )


@pytest.mark.parametrize("text", OVERFLOWS)
def test_each_provider_pattern_is_an_overflow(text: str) -> None:
    assert is_context_overflow(failed(text))
    assert is_context_overflow(failed(f"HTTP 400: {text} (invalid_request_error)"))  # as agentloop words it
    assert not is_context_overflow(AssistantMessage(stop_reason="stop", error_message=text))


@pytest.mark.parametrize("text", NOT_OVERFLOWS)
def test_throttling_and_other_errors_are_not_overflows(text: str) -> None:
    assert not is_context_overflow(failed(text))


def test_a_request_too_large_for_http_is_an_overflow() -> None:
    assert is_context_overflow(failed("HTTP 413: Request Entity Too Large"))
    for text in STATUS_413:
        assert is_context_overflow(failed(text))
        assert not is_context_overflow(failed(f"HTTP 400: {text}"))  # a 413 the body mentions
    # Cerebras answers with a bare 400 or 413.
    assert is_context_overflow(failed("HTTP 400: Bad Request", provider="cerebras"))
    assert is_context_overflow(failed("400 status code (no body)", provider="cerebras"))
    assert not is_context_overflow(failed("HTTP 400: Bad Request", provider="openai"))


def test_silent_overflows_need_the_context_window() -> None:
    over = answered("stop", 120_000)
    assert is_context_overflow(over, 100_000) and not is_context_overflow(over)
    assert is_context_overflow(answered("stop", 60_000, cache_read=50_000), 100_000)  # cache reads count
    assert not is_context_overflow(answered("stop", 90_000), 100_000)
    # A `length` stop with no room left to answer (the input cut to fill the window).
    assert is_context_overflow(answered("length", 99_500, output=0), 100_000)
    assert not is_context_overflow(answered("length", 99_500, output=5), 100_000)
    assert not is_context_overflow(answered("length", 50_000, output=0), 100_000)
    assert not is_context_overflow(answered("toolUse", 120_000), 100_000)


@pytest.mark.parametrize("text", RETRYABLE)
def test_transient_failures_are_retryable(text: str) -> None:
    assert is_retryable_error(failed(text))


@pytest.mark.parametrize("text", NOT_RETRYABLE + OVERFLOWS[:3])
def test_lasting_failures_are_not_retryable(text: str) -> None:
    assert not is_retryable_error(failed(text))


def test_agentloops_own_transport_texts_are_retryable() -> None:
    for text in (
        "Could not connect to the server: All connection attempts failed",
        "The server sent nothing for too long (idle timeout): ReadTimeout",
        "The connection closed before the response was complete: peer closed connection",
        "The stream ended before its message_stop event: the connection closed early and the response is incomplete.",
        "The server sent no event for 1800 s (event_timeout; keep-alive comments and pings do not count)",
        "The request timed out after 30 s (total_timeout)",
    ):
        assert is_retryable_error(failed(text)), text
    assert not is_retryable_error(AssistantMessage(stop_reason="aborted", error_message="Request was aborted"))
    assert not is_retryable_error(AssistantMessage(stop_reason="stop"))


def test_unavailable_models() -> None:
    for text in (
        "HTTP 404: The model `gpt-9` does not exist or you do not have access to it. (model_not_found)",
        "HTTP 404: model: claude-9 (not_found_error)",
        "HTTP 401: Incorrect API key provided (invalid_api_key)",
        "HTTP 403: Forbidden",
        "No API key for provider 'openai': set OPENAI_API_KEY, or pass api_key",
        "No API provider registered for api: gemini (built in: anthropic-messages)",
    ):
        assert is_unavailable_model(failed(text)), text
    assert not is_unavailable_model(failed("HTTP 400: Unsupported parameter: 'temperature'"))
    assert not is_unavailable_model(AssistantMessage(stop_reason="stop"))


def test_wrong_arguments_are_refused() -> None:
    for check in (is_context_overflow, is_retryable_error, is_unavailable_model):
        with pytest.raises(TypeError, match="AssistantMessage"):
            check("prompt is too long")  # type: ignore[arg-type]


async def test_pi_ai_reads_the_same_messages_the_same_way(anyio_backend: object, pi_node_modules: Path) -> None:
    texts = OVERFLOWS + STATUS_413 + NOT_OVERFLOWS + RETRYABLE + NOT_RETRYABLE
    cases: list[tuple[AssistantMessage, int | None]] = [(failed(text), None) for text in texts]
    cases.append((failed("400 status code (no body)", provider="cerebras"), None))
    for message in (
        answered("stop", 120_000),
        answered("stop", 60_000, cache_read=50_000),
        answered("stop", 90_000),
        answered("length", 99_500, output=0),
        answered("length", 99_500, output=5),
    ):
        cases += [(message, 100_000), (message, None)]
    payload: list[dict[str, Any]] = [{"message": to_json(m), "contextWindow": w} for m, w in cases]
    with anyio.fail_after(60):
        done = await anyio.run_process(
            ["node", str(ORACLE)],
            input=json.dumps(payload).encode(),
            env={**os.environ, "NODE_PATH": str(pi_node_modules), "PI_AI": PI_AI},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    theirs = json.loads(done.stdout)
    ours = [[is_context_overflow(m, w), is_retryable_error(m)] for m, w in cases]
    assert ours == theirs
    assert sum(overflow for overflow, _ in ours) >= len(OVERFLOWS) + len(STATUS_413) + 4
