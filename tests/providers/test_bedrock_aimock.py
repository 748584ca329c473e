"""Bedrock's Converse Stream against aimock (`@copilotkit/aimock`, a mock server written by others
that answers `/model/{id}/converse-stream` with an AWS event stream; fixtures in
`aimock-fixtures.json`): text, thinking, parallel tool calls, a whole agent turn, SigV4-signed and
bearer requests, and each fault (429, 529, 500, a disconnect, an abort).

Run with `pytest -m servers` after `python tests/providers/servers.py start`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import anyio
import pytest
from botocore.credentials import Credentials

from agentloop import AbortSignal, Context, Model, StreamOptions, ThinkingContent, UserMessage
from agentloop.providers import get_model, stream_bedrock

from .conftest import AIMOCK_HTTP, Weather, aimock_weather_turn
from .helpers import aborted_at_first_text, collect, types

pytestmark = pytest.mark.servers

FAST = AIMOCK_HTTP


def aimock_model(url: str) -> Model:
    """The registry's Claude Sonnet 4.5 (US) on Bedrock, served by aimock."""
    model = get_model("amazon-bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    return dataclasses.replace(model, base_url=url, max_tokens=4096)


async def ask(url: str, text: str, *, tools: list[Any] | None = None, **kwargs: Any) -> tuple[list[Any], Any]:
    kwargs.setdefault("signal", AbortSignal())
    kwargs.setdefault("api_key", "aimock-bearer")
    credentials = kwargs.pop("credentials", None)
    ctx = Context(system_prompt="You are terse.", messages=[UserMessage(content=text)], tools=tools or [])
    stream = stream_bedrock(aimock_model(url), ctx, StreamOptions(**kwargs), http=FAST, credentials=credentials)
    with anyio.fail_after(20):
        return await collect(stream)


async def test_thinking_then_text(aimock_url: str) -> None:
    events, final = await ask(aimock_url, "hello")
    assert final.stop_reason == "stop", final.error_message
    thinking, text = final.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "A greeting. Reply briefly."
    assert text.text == "Hello! How can I help you today? \u00e9\u00e8 \U0001f600"
    assert types(events)[:2] == ["start", "thinking_start"] and types(events)[-1] == "done"
    assert types(events).count("text_delta") > 1  # really streamed
    assert (final.usage.input, final.usage.output, final.usage.total_tokens) == (12, 9, 21)


async def test_a_sigv4_signed_request_is_answered_too(aimock_url: str) -> None:
    _, final = await ask(aimock_url, "hello", api_key=None, credentials=Credentials("AKIDAIMOCK", "secret"))
    assert final.stop_reason == "stop" and final.text.startswith("Hello!")


async def test_parallel_tool_calls(aimock_url: str) -> None:
    events, final = await ask(aimock_url, "What is the weather in Paris?", tools=[Weather()])
    assert final.stop_reason == "toolUse", final.error_message
    assert [(c.name, dict(c.arguments)) for c in final.tool_calls] == [
        ("get_weather", {"location": "Paris", "unit": "celsius"}),
        ("get_weather", {"location": "Paris, Texas", "unit": "fahrenheit"}),
    ]
    assert len({c.id for c in final.tool_calls}) == 2
    assert types(events).count("toolcall_end") == 2


async def test_an_agent_turn_with_tool_calls(aimock_url: str) -> None:
    await aimock_weather_turn(aimock_model(aimock_url), functools.partial(stream_bedrock, http=FAST), "aimock-bearer")


async def test_length_stop(aimock_url: str) -> None:
    _, final = await ask(aimock_url, "truncate-me")
    assert (final.stop_reason, final.text) == ("length", "This answer is cut off by max tokens")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rate-limit-me", "HTTP 429: Rate limit reached (rate_limit_error)"),
        ("overload-me", "HTTP 529: Overloaded (overloaded_error)"),
        ("server-error-me", "HTTP 500: Internal server error (api_error)"),
    ],
)
async def test_rate_limits_overload_and_server_errors_are_retried_then_reported(
    aimock_url: str, text: str, expected: str
) -> None:
    events, final = await ask(aimock_url, text)
    assert types(events) == ["error"]
    assert final.error_message == f"{expected} (after 2 retries)"


async def test_a_disconnect_mid_stream(aimock_url: str) -> None:
    events, final = await ask(aimock_url, "drop-me")
    assert final.stop_reason == "error"
    assert final.error_message.startswith("The connection closed before the response was complete")
    assert final.text and "This stream is dropped".startswith(final.text[:20])
    assert "done" not in types(events)


async def test_abort_mid_stream(aimock_url: str) -> None:
    signal = AbortSignal()
    ctx = Context(messages=[UserMessage(content="slow-story")])
    options = StreamOptions(signal=signal, api_key="aimock-bearer")
    with anyio.fail_after(20):
        final = await aborted_at_first_text(stream_bedrock(aimock_model(aimock_url), ctx, options, http=FAST), signal)
    assert final.stop_reason == "aborted" and final.text and len(final.text) < 30
