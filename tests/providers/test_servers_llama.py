"""End-to-end against llama.cpp's own server (the `xllamacpp` wheel) running SmolLM2-135M: a real
model streaming real thinking and text on each of the three APIs, with few tokens.

Run with `pytest -m servers` after `python tests/providers/servers.py start`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.providers import AssistantMessageEventStream, HTTPOptions, stream_simple
from agentloop.testing import check_events

from ..support import as_assistant
from .conftest import SERVED_APIS
from .helpers import collect, types

pytestmark = pytest.mark.servers

HTTP = HTTPOptions(max_retries=1, backoff=0.05, idle_timeout=60)


def llama_model(url: str, api: str) -> al.Model:
    return al.Model(
        id="smollm2",
        api=api,
        provider="llama.cpp",
        base_url=url if api == "anthropic-messages" else url + "/v1",
        context_window=2048,
        max_tokens=256,
        # the test template thinks unless told not to; budgets make it stop thinking and answer
        compat={"thinking_format": "llama.cpp", "cache_control": False},
    )


def few_tokens(max_tokens: int) -> Any:
    """A stream function that caps the output (the Agent has no max_tokens option)."""

    def stream(model: al.Model, context: al.Context, options: al.StreamOptions) -> AssistantMessageEventStream:
        return stream_simple(
            model, context, dataclasses.replace(options, max_tokens=max_tokens, temperature=0.0), http=HTTP
        )

    return stream


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_an_agent_run_with_thinking(llama_url: str, api: str) -> None:
    # With thinking on, the Anthropic API takes no temperature, so llama.cpp samples: now and then
    # the model ends right after thinking. Every attempt must be a well-formed run; one of a few
    # must show both blocks.
    for _attempt in range(6):
        events: list[Any] = []
        agent = al.Agent(
            model=llama_model(llama_url, api),
            system_prompt="You are a terse assistant.",
            thinking_level="low",
            thinking_budgets={"low": 4},
            stream_fn=few_tokens(12),
        )

        def record(event: al.AgentEvent, signal: al.AbortSignal, events: list[Any] = events) -> None:
            events.append(event)

        agent.subscribe(record)
        with anyio.fail_after(60):
            await agent.prompt("hello")
        check_events(events)
        assert [m.role for m in agent.state.messages] == ["user", "assistant"]
        answer = as_assistant(agent.state.messages[-1])
        assert answer.stop_reason in ("stop", "length"), answer.error_message
        kinds = [type(block) for block in answer.content]
        assert kinds[:1] == [al.ThinkingContent] and answer.content[0].thinking.strip()  # type: ignore[union-attr]
        if kinds == [al.ThinkingContent, al.TextContent] and answer.text.strip():
            break
    else:
        raise AssertionError("six answers in a row without text after the thinking")
    assert answer.usage.output > 0 and answer.usage.input + answer.usage.cache_read > 0
    updates = [e.assistant_message_event.type for e in events if e.type == "message_update"]
    assert "thinking_delta" in updates and "text_delta" in updates
    # a second turn replays the first (thinking included) to the same server
    with anyio.fail_after(60):
        await agent.prompt("and again")
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "user", "assistant"]
    assert as_assistant(agent.state.messages[-1]).stop_reason in ("stop", "length")


# llama.cpp's Responses stream ends a truncated answer with status "completed" (OpenAI sends
# response.incomplete), so the stop reason there is `stop`.
LENGTH = {"openai-completions": "length", "openai-responses": "stop", "anthropic-messages": "length"}


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_text_without_thinking_stops_at_max_tokens(llama_url: str, api: str) -> None:
    ctx = al.Context(
        system_prompt="You are a storyteller.",
        messages=[al.UserMessage(content="Tell me a long story about a dragon.")],
    )
    options = al.StreamOptions(signal=al.AbortSignal(), max_tokens=5, temperature=0.0)
    with anyio.fail_after(60):
        events, final = await collect(stream_simple(llama_model(llama_url, api), ctx, options, http=HTTP))
    assert final.stop_reason == LENGTH[api], final.error_message
    assert [type(b) for b in final.content] == [al.TextContent] and final.text
    assert final.usage.output == 5
    assert "thinking_start" not in types(events)


@pytest.mark.parametrize("api", SERVED_APIS)
async def test_abort_mid_generation(llama_url: str, api: str) -> None:
    signal = al.AbortSignal()
    ctx = al.Context(messages=[al.UserMessage(content="Count from one to one hundred in words.")])
    options = al.StreamOptions(signal=signal, max_tokens=200, temperature=0.0)
    seen: list[Any] = []
    with anyio.fail_after(60):
        async with stream_simple(llama_model(llama_url, api), ctx, options, http=HTTP) as stream:
            async for event in stream:
                seen.append(event)
                if types(seen).count("text_delta") == 3:
                    signal.abort()
    assert seen[-1].type == "error" and seen[-1].reason == "aborted"
    assert seen[-1].error.text and seen[-1].error.stop_reason == "aborted"
    # the server is free again at once (it stopped generating when we closed the connection)
    with anyio.fail_after(30):
        _, final = await collect(
            stream_simple(
                llama_model(llama_url, api),
                al.Context(messages=[al.UserMessage(content="hi")]),
                al.StreamOptions(signal=al.AbortSignal(), max_tokens=3),
                http=HTTP,
            )
        )
    assert final.stop_reason in ("stop", "length")


async def test_a_context_overflow_is_reported_with_the_server_message(llama_url: str) -> None:
    ctx = al.Context(messages=[al.UserMessage(content="word " * 3000)])
    options = al.StreamOptions(signal=al.AbortSignal(), max_tokens=3)
    with anyio.fail_after(60):
        events, final = await collect(
            stream_simple(llama_model(llama_url, "openai-completions"), ctx, options, http=HTTP)
        )
    assert types(events) == ["error"]
    assert final.error_message is not None
    assert final.error_message.startswith("HTTP 400: ")
    assert "context" in final.error_message
