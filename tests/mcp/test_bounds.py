"""What a server can make the client spend is bounded: sampling requests per connection and
tokens per answer, and the length of a message read from a stdio server."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from typing import TextIO

import pytest

import agentloop as al

pytest.importorskip("mcp", reason="agentloop.mcp needs the [mcp] extra (the MCP SDK)")

from agentloop.mcp import MCPServerStdio, Sampling

from .conftest import SDK_READERS_LEFT_OPEN, SMALL_SERVER

MODEL = al.Model(id="asked-for", api="scripted")

pytestmark = SDK_READERS_LEFT_OPEN


def texts(result: al.AgentToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, al.TextContent)]


class DatedModel:
    """A stream function whose provider names the model that answered (`responseModel`)."""

    def __init__(self) -> None:
        self.max_tokens: list[int | None] = []

    async def __call__(
        self, model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        self.max_tokens.append(options.max_tokens)
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        builder.response_model = "asked-for-2026-01-01"
        yield builder.start()
        yield builder.text_start()
        yield builder.text_delta("hi")
        yield builder.text_end()
        yield builder.done("stop")


async def test_sampling_names_the_model_that_answered_and_stops_at_max_calls(devnull: TextIO) -> None:
    model = DatedModel()
    sampling = Sampling(MODEL, model, max_calls=3)
    async with MCPServerStdio(sys.executable, [str(SMALL_SERVER)], errlog=devnull, sampling=sampling) as server:
        result = await server.call_tool("sample", {"times": 5})
        report = json.loads(texts(result)[0])
        assert report["answered"] == ["asked-for-2026-01-01"] * 3
        assert len(report["refused"]) == 2
        assert "at most 3 sampling requests per connection (Sampling.max_calls)" in report["refused"][0]
        again = json.loads(texts(await server.call_tool("sample", {"times": 1}))[0])
        assert again["answered"] == [] and len(again["refused"]) == 1  # per connection, not per call
    assert model.max_tokens == [4096] * 3  # the server asked for a million
    async with MCPServerStdio(sys.executable, [str(SMALL_SERVER)], errlog=devnull, sampling=sampling) as server:
        fresh = json.loads(texts(await server.call_tool("sample", {"times": 1}))[0])
        assert fresh["answered"] == ["asked-for-2026-01-01"]  # a new connection, a new count


def test_sampling_limits_are_checked() -> None:
    assert Sampling(MODEL).max_calls == 50 and Sampling(MODEL).max_tokens == 4096
    assert Sampling(MODEL, max_calls=None, max_tokens=None).max_calls is None
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_calls must be a positive int or None"):
            Sampling(MODEL, max_calls=bad)  # type: ignore[arg-type]


async def test_a_stdio_answer_over_max_message_bytes_is_an_error_result(devnull: TextIO) -> None:
    """The SDK's reader joins each chunk of a line to all before it, in the event loop's thread:
    time quadratic in the length of the answer, and no limit on it."""
    server = MCPServerStdio(sys.executable, [str(SMALL_SERVER)], errlog=devnull, max_message_bytes=1 << 20)
    async with server:
        started = time.process_time()
        result = await server.call_tool("huge", {"megabytes": 8})
        assert result.is_error is True
        assert texts(result) == ["the MCP server sent a message of more than 1048576 bytes (see max_message_bytes)"]
        assert time.process_time() - started < 2.0
        after = await server.call_tool("add", {"a": 1, "b": 2})  # the connection goes on
        assert after.is_error is None and after.details == {"total": 3, "terms": [1, 2]}
        within = await server.call_tool("huge", {"megabytes": 0})
        assert within.is_error is None


async def test_a_long_answer_within_the_limit_is_read_whole(devnull: TextIO) -> None:
    async with MCPServerStdio(sys.executable, [str(SMALL_SERVER)], errlog=devnull) as server:
        started = time.process_time()
        result = await server.call_tool("huge", {"megabytes": 5})  # 10 MiB of JSON (text and structured)
        assert texts(result) == ["x" * (5 << 20)]
        assert time.process_time() - started < 3.0


def test_max_message_bytes_is_checked() -> None:
    for bad in (0, -5, True, "1"):
        with pytest.raises(ValueError, match="max_message_bytes must be a positive int"):
            MCPServerStdio("x", max_message_bytes=bad)  # type: ignore[arg-type]
