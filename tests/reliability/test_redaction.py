"""The API key is redacted before an error text is cut, wherever the key sits in the text.

Error bodies and malformed stream data are shown cut short (500 and 200 characters); a key that
straddles the cut must not reach the error message in part either. Each test puts the key at
every offset around the cut and checks that no 8 characters of it in a row survive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

import agentloop as al
from agentloop.providers import HTTPOptions, stream_anthropic, stream_openai_completions, stream_openai_responses

KEY = "sk-cut-0123456789abcdef0123456789abcdef"  # 39 characters
HTTP = HTTPOptions(max_retries=0)
STREAMS: dict[str, tuple[str, str, Callable[..., Any]]] = {
    "completions": ("openai-completions", "openai", stream_openai_completions),
    "responses": ("openai-responses", "openai", stream_openai_responses),
    "anthropic": ("anthropic-messages", "anthropic", stream_anthropic),
}


def fragments_of(text: str, secret: str, size: int = 8) -> list[str]:
    """The pieces of `secret`, `size` characters long, that show in `text`."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1) if secret[i : i + size] in text]


async def error_message(name: str, respond: Callable[[], httpx.Response]) -> str:
    api, provider, stream_fn = STREAMS[name]
    model = al.Model(id="m", api=api, provider=provider, base_url="http://mock/v1")
    options = al.StreamOptions(signal=al.AbortSignal(), api_key=KEY)
    transport = httpx.MockTransport(lambda request: respond())
    async with httpx.AsyncClient(transport=transport) as client:
        stream = stream_fn(
            model, al.Context(messages=(al.UserMessage(content="hi"),)), options, http=HTTP, client=client
        )
        async with stream:
            events = [event async for event in stream]
    last = events[-1]
    assert last.type == "error"
    return last.error.error_message or ""


@pytest.mark.parametrize("status", [401, 200])
async def test_a_key_at_any_offset_around_the_cut_of_an_error_body_is_redacted(
    anyio_backend: object, status: int
) -> None:
    """A 401 with a text body, and a 200 that is not an event stream: both are cut at 500."""
    checked = 0
    with anyio.fail_after(30):
        for offset in range(500 - len(KEY) - 2, 503):
            text = "x" * offset + KEY + "y" * 50

            def respond(text: str = text) -> httpx.Response:
                return httpx.Response(status, text=text, headers={"content-type": "text/plain"})

            message = await error_message("completions", respond)
            assert fragments_of(message, KEY) == [], (offset, message[-80:])
            checked += 1
    assert checked == len(KEY) + 5


@pytest.mark.parametrize("name", sorted(STREAMS))
async def test_a_key_at_any_offset_around_the_cut_of_malformed_stream_data_is_redacted(
    anyio_backend: object, name: str
) -> None:
    """Data that is not JSON is shown as its first 200 characters."""
    with anyio.fail_after(30):
        for offset in range(200 - len(KEY) - 2, 203):
            data = "{not json " + "x" * (offset - 10) + KEY + "y" * 50
            assert data.index(KEY) == offset

            def respond(data: str = data) -> httpx.Response:
                body = f"event: message_start\ndata: {data}\n\n".encode()
                return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

            message = await error_message(name, respond)
            assert "not JSON" in message
            assert fragments_of(message, KEY) == [], (offset, message[-80:])
