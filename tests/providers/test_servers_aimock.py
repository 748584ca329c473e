"""The three stream functions against aimock, a mock LLM server written by others
(`@copilotkit/aimock`, fixtures in `aimock-fixtures.json`): text, thinking, parallel tool calls, a
whole agent turn, and each fault (429 with Retry-After, 529, 500, a disconnect, an abort).

Run with `pytest -m servers` after `python tests/providers/servers.py start`.
"""

from __future__ import annotations

import functools
import json
import time
import urllib.request
import uuid
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.providers import HTTPOptions, stream_simple
from agentloop.testing import check_events

from ..support import as_assistant
from .conftest import AIMOCK_HTTP, SERVED_APIS, Weather, aimock_weather_turn
from .helpers import aborted_at_first_text, collect, types

pytestmark = pytest.mark.servers

FAST = AIMOCK_HTTP


def aimock_model(url: str, api: str) -> al.Model:
    base = url if api == "anthropic-messages" else url + "/v1"
    return al.Model(id="test-model", api=api, provider="aimock", base_url=base)


def opts(**kwargs: Any) -> al.StreamOptions:
    kwargs.setdefault("signal", al.AbortSignal())
    kwargs.setdefault("api_key", "sk-aimock")
    return al.StreamOptions(**kwargs)


async def ask(
    url: str, api: str, text: str, *, http: HTTPOptions = FAST, tools: list[Any] | None = None, **kwargs: Any
) -> tuple[list[Any], Any]:
    ctx = al.Context(system_prompt="You are terse.", messages=[al.UserMessage(content=text)], tools=tools or [])
    with anyio.fail_after(20):
        return await collect(stream_simple(aimock_model(url, api), ctx, opts(**kwargs), http=http))


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_thinking_then_text(aimock_url: str, api: str) -> None:
    events, final = await ask(aimock_url, api, "hello")
    assert final.stop_reason == "stop", final.error_message
    thinking, _ = final.content
    assert isinstance(thinking, al.ThinkingContent) and thinking.thinking == "A greeting. Reply briefly."
    assert final.text == "Hello! How can I help you today? \u00e9\u00e8 \U0001f600"
    assert types(events)[:2] == ["start", "thinking_start"] and types(events)[-1] == "done"
    assert types(events).count("text_delta") > 1  # really streamed
    if api == "anthropic-messages":
        assert thinking.thinking_signature == "aimock-placeholder-signature"
    elif api == "openai-completions":
        assert thinking.thinking_signature == "reasoning_content"
    assert final.usage.input + final.usage.cache_read > 0 and final.usage.output > 0


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_parallel_tool_calls(aimock_url: str, api: str) -> None:
    events, final = await ask(aimock_url, api, "What is the weather in Paris?", tools=[Weather()])
    assert final.stop_reason == "toolUse", final.error_message
    calls = final.tool_calls
    assert [(c.name, dict(c.arguments)) for c in calls] == [
        ("get_weather", {"location": "Paris", "unit": "celsius"}),
        ("get_weather", {"location": "Paris, Texas", "unit": "fahrenheit"}),
    ]
    assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)
    assert types(events).count("toolcall_end") == 2
    previews = [e.partial.content[e.content_index].arguments for e in events if e.type == "toolcall_delta" and e.delta]
    assert {} not in previews[1:]  # partial arguments grow while streaming (empty deltas, as pi-ai's, aside)


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_an_agent_turn_with_tool_calls(aimock_url: str, api: str) -> None:
    await aimock_weather_turn(aimock_model(aimock_url, api), functools.partial(stream_simple, http=FAST), "sk-aimock")


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_length_stop(aimock_url: str, api: str) -> None:
    _, final = await ask(aimock_url, api, "truncate-me")
    assert final.text == "This answer is cut off by max tokens"
    if api == "openai-responses":
        # aimock sends `incomplete` without `incomplete_details`: pi-ai reads that as an error.
        assert (final.stop_reason, final.error_message) == ("error", "Response incomplete without a provider reason")
    else:
        assert final.stop_reason == "length"


def _add_fixtures(url: str, fixtures: list[dict[str, Any]]) -> None:
    request = urllib.request.Request(
        url + "/__aimock/fixtures",
        data=json.dumps({"fixtures": fixtures}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_429_is_retried_after_retry_after(aimock_url: str, api: str) -> None:
    marker = f"retry-{uuid.uuid4().hex}"
    _add_fixtures(
        aimock_url,
        [
            {
                "match": {"userMessage": marker, "sequenceIndex": 0},
                "response": {
                    "error": {"message": "Rate limit reached", "type": "rate_limit_error"},
                    "status": 429,
                    "retryAfter": 0.4,
                },
            },
            {"match": {"userMessage": marker}, "response": {"content": "after the retry"}},
        ],
    )
    started = time.monotonic()
    events, final = await ask(aimock_url, api, marker)
    assert time.monotonic() - started >= 0.4  # the server's delay, not our 10 ms backoff
    assert final.stop_reason == "stop" and final.text == "after the retry"
    assert types(events).count("start") == 1


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_429_with_a_retry_after_beyond_the_cap(aimock_url: str, api: str) -> None:
    started = time.monotonic()
    events, final = await ask(aimock_url, api, "rate-limit-me", max_retry_delay=0.5)
    assert time.monotonic() - started < 3  # no 1 s wait, no retries
    assert types(events) == ["error"]
    assert final.error_message.startswith("HTTP 429: Rate limit reached")
    assert final.error_message.endswith("(the server asked to retry after 1 s, more than max_retry_delay=0.5 s)")


@pytest.mark.parametrize("api", SERVED_APIS)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("overload-me", "HTTP 529: Overloaded (overloaded_error)"),
        ("server-error-me", "HTTP 500: Internal server error (api_error)"),
    ],
)
async def test_overloaded_and_server_errors_are_retried_then_reported(
    aimock_url: str, api: str, text: str, expected: str
) -> None:
    events, final = await ask(aimock_url, api, text)
    assert types(events) == ["error"]
    assert final.error_message == f"{expected} (after 2 retries)"


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_a_disconnect_mid_stream(aimock_url: str, api: str) -> None:
    events, final = await ask(aimock_url, api, "drop-me")
    assert final.stop_reason == "error"
    assert final.error_message.startswith("The connection closed before the response was complete")
    assert final.text and "This stream is dropped".startswith(final.text[:20])  # partial content kept
    assert "done" not in types(events)


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_abort_mid_stream(aimock_url: str, api: str) -> None:
    signal = al.AbortSignal()
    ctx = al.Context(messages=[al.UserMessage(content="slow-story")])
    with anyio.fail_after(20):
        stream = stream_simple(aimock_model(aimock_url, api), ctx, opts(signal=signal), http=FAST)
        final = await aborted_at_first_text(stream, signal)
    assert final.stop_reason == "aborted" and final.text and len(final.text) < 30


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_breaking_out_early_over_a_real_connection(aimock_url: str, api: str) -> None:
    ctx = al.Context(messages=[al.UserMessage(content="slow-story")])
    with anyio.fail_after(20):
        async with stream_simple(aimock_model(aimock_url, api), ctx, opts(), http=FAST) as stream:
            async for event in stream:
                if event.type == "text_delta":
                    break
    with anyio.fail_after(20):  # an outer timeout is a plain cancellation
        with anyio.move_on_after(0.3) as scope:
            await stream_simple(aimock_model(aimock_url, api), ctx, opts(), http=FAST).result()
    assert scope.cancelled_caught


async def test_handoff_between_apis(aimock_url: str) -> None:
    # An Anthropic transcript with thinking and tool calls, sent on to the two OpenAI APIs.
    first = await ask(aimock_url, "anthropic-messages", "What is the weather in Paris?", tools=[Weather()])
    message = first[1]
    call = message.tool_calls[0]
    # the second call stays unanswered: the handoff answers it with "No result provided"
    results = [al.ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=(al.TextContent("sunny"),))]
    for api in ("openai-completions", "openai-responses"):
        ctx = al.Context(
            messages=[al.UserMessage(content="What is the weather in Paris?"), message, *results], tools=[Weather()]
        )
        with anyio.fail_after(20):
            _, final = await collect(stream_simple(aimock_model(aimock_url, api), ctx, opts(), http=FAST))
        assert final.stop_reason == "stop", final.error_message
        assert final.text == "It is sunny in both places."


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_an_idle_stream_times_out(aimock_url: str, api: str) -> None:
    # slow-story sends a chunk every 100 ms: an idle timeout of 30 ms fails every attempt
    http = HTTPOptions(max_retries=1, backoff=0.01, idle_timeout=0.03)
    _, final = await ask(aimock_url, api, "slow-story", http=http)
    assert final.stop_reason == "error"
    assert "idle timeout" in final.error_message


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_an_agent_aborted_while_streaming(aimock_url: str, api: str) -> None:
    agent = al.Agent(
        model=aimock_model(aimock_url, api),
        stream_fn=functools.partial(stream_simple, http=FAST),
        get_api_key=lambda provider: "sk-aimock",
    )
    events: list[Any] = []

    def listener(event: Any, signal: Any) -> None:
        events.append(event)
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            agent.abort()

    agent.subscribe(listener)
    started = time.monotonic()
    with anyio.fail_after(20):
        await agent.prompt("slow-story")
    assert time.monotonic() - started < 3  # the story takes 2 s to stream in full
    check_events(events)
    last = as_assistant(agent.state.messages[-1])
    assert last.role == "assistant" and last.stop_reason == "aborted"
    assert last.text
