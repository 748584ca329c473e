"""The Gemini API and Vertex AI stream functions against aimock (`@copilotkit/aimock`, the
fixtures of `aimock-fixtures.json`) on loopback: thinking and text, parallel calls, a whole agent
turn (the calls' results replayed as function responses), a length stop, a rate limit retried,
a server error.

Run with `pytest -m servers` after `python tests/providers/servers.py start`.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio
import pytest

from agentloop import AbortSignal, Context, Model, StreamOptions, ThinkingContent, UserMessage
from agentloop.providers import stream_google, stream_google_vertex

from .conftest import AIMOCK_HTTP, Weather, aimock_weather_turn
from .helpers import collect, types

pytestmark = pytest.mark.servers

APIS = ["google-generative-ai", "google-vertex"]
FAST = AIMOCK_HTTP


def aimock_model(url: str, api: str) -> Model:
    base = url + ("/v1beta" if api == "google-generative-ai" else "/v1/projects/demo/locations/us-central1")
    return Model(id="gemini-2.5-flash", api=api, provider="aimock", base_url=base, reasoning=True)


def stream_fn(api: str) -> Any:
    if api == "google-generative-ai":
        return functools.partial(stream_google, http=FAST)
    return functools.partial(stream_google_vertex, http=FAST, token="ya29.aimock")


async def ask(url: str, api: str, text: str, **kwargs: Any) -> tuple[list[Any], Any]:
    tools = kwargs.pop("tools", [])
    ctx = Context(system_prompt="You are terse.", messages=[UserMessage(content=text)], tools=tools)
    opts = StreamOptions(signal=AbortSignal(), api_key="k-aimock", **kwargs)
    with anyio.fail_after(20):
        return await collect(stream_fn(api)(aimock_model(url, api), ctx, opts))


@pytest.mark.parametrize("api", APIS)
async def test_thinking_then_text(aimock_url: str, api: str) -> None:
    events, final = await ask(aimock_url, api, "hello", reasoning="low")
    assert final.stop_reason == "stop", final.error_message
    thinking, _ = final.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "A greeting. Reply briefly."
    assert final.text == "Hello! How can I help you today? \u00e9\u00e8 \U0001f600"
    assert types(events).count("text_delta") > 1
    assert (final.usage.input, final.usage.output, final.usage.total_tokens) == (12, 9, 21)


@pytest.mark.parametrize("api", APIS)
async def test_parallel_tool_calls(aimock_url: str, api: str) -> None:
    _, final = await ask(aimock_url, api, "What is the weather in Paris?", tools=[Weather()])
    assert final.stop_reason == "toolUse", final.error_message
    assert [(c.name, dict(c.arguments)) for c in final.tool_calls] == [
        ("get_weather", {"location": "Paris", "unit": "celsius"}),
        ("get_weather", {"location": "Paris, Texas", "unit": "fahrenheit"}),
    ]
    assert len({c.id for c in final.tool_calls}) == 2


@pytest.mark.parametrize("api", APIS)
async def test_an_agent_turn_with_tool_calls(aimock_url: str, api: str) -> None:
    await aimock_weather_turn(aimock_model(aimock_url, api), stream_fn(api), "k-aimock")


@pytest.mark.parametrize("api", APIS)
async def test_length_stop_rate_limit_and_server_error(aimock_url: str, api: str) -> None:
    _, final = await ask(aimock_url, api, "truncate-me")
    assert (final.stop_reason, final.text) == ("length", "This answer is cut off by max tokens")
    _, limited = await ask(aimock_url, api, "rate-limit-me")
    assert limited.stop_reason == "error"
    assert limited.error_message == "HTTP 429: Rate limit reached (after 2 retries)"
    _, broken = await ask(aimock_url, api, "server-error-me")
    assert broken.error_message == "HTTP 500: Internal server error (after 2 retries)"
