"""The API key is redacted before an error text is cut, wherever the key sits in the text.

Error bodies and malformed stream data are shown cut short (500 and 200 characters); a key that
straddles the cut must not reach the error message in part either. Each test puts the key at
every offset around the cut and checks that no 8 characters of it in a row survive.

A key that JSON escapes spell (`\\u0073k-...`, as OpenRouter's `error.metadata.raw` may echo a
request) is found too, before the text is decoded or cut (300 characters of `raw`): in an error
body, in an error event mid-stream, and through the proxy, not 4 characters of it in a row
survive.
"""

from __future__ import annotations

import json
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


# --- a key that JSON escapes spell (OpenRouter's `error.metadata.raw` echoing the request) ---------

ESCAPES: dict[str, Callable[[str], str]] = {
    "first": lambda key: f"\\u{ord(key[0]):04x}" + key[1:],
    "every": lambda key: "".join(f"\\u{ord(c):04X}" for c in key),
    "every-third": lambda key: "".join(f"\\u{ord(c):04x}" if i % 3 == 0 else c for i, c in enumerate(key)),
}
CUT = 300  # the characters of `metadata.raw` an error message shows


def openrouter_error(offset: int, spelled: str) -> str:
    """An OpenRouter error object (JSON text) whose `metadata.raw` holds the key at `offset`."""
    raw = "x" * offset + spelled + "y" * 50
    return (
        '{"error": {"message": "Provider returned error", "code": 400, '
        f'"metadata": {{"raw": "{raw}", "provider_name": "Upstream"}}}}}}'
    )


def offsets() -> range:
    return range(CUT - len(KEY) - 2, CUT + 3)


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_redact_finds_the_key_whatever_json_escapes_spell_it(escape: str) -> None:
    from agentloop.providers._auth import redact

    spelled = ESCAPES[escape](KEY)
    assert redact(f"a {spelled} b", KEY) == "a *** b"
    assert redact(repr(f"a {spelled} b"), KEY) == repr("a *** b").replace("\\\\", "\\")  # doubled backslashes
    assert redact(json.dumps({"raw": KEY.replace("-", "\\-")}), KEY).count("***") == 0  # not a JSON escape
    assert redact("no key here \\n", KEY) == "no key here \\n"


@pytest.mark.parametrize("escape", sorted(ESCAPES))
async def test_an_escaped_key_in_an_error_body_leaks_no_fragment(anyio_backend: object, escape: str) -> None:
    with anyio.fail_after(30):
        for offset in offsets():
            text = openrouter_error(offset, ESCAPES[escape](KEY))

            def respond(text: str = text) -> httpx.Response:
                return httpx.Response(400, text=text, headers={"content-type": "application/json"})

            message = await error_message("completions", respond)
            assert message.startswith("HTTP 400: Provider returned error (xxx"), message[:60]
            assert fragments_of(message, KEY, 4) == [], (offset, message[-80:])


def inner(error: str) -> str:
    """The error object inside `{"error": ...}`, as JSON text."""
    assert error.startswith('{"error": ') and error.endswith("}")
    return error[len('{"error": ') : -1]


MID_STREAM: dict[str, Callable[[str], bytes]] = {
    "completions": lambda error: f"data: {error}\n\n".encode(),
    "responses": lambda error: f'data: {{"type": "error", "error": {inner(error)}}}\n\n'.encode(),
    "anthropic": lambda error: f'event: error\ndata: {{"type": "error", "error": {inner(error)}}}\n\n'.encode(),
}


@pytest.mark.parametrize("name", sorted(STREAMS))
async def test_an_escaped_key_in_an_error_event_mid_stream_leaks_no_fragment(anyio_backend: object, name: str) -> None:
    with anyio.fail_after(30):
        for offset in offsets():
            body = MID_STREAM[name](openrouter_error(offset, ESCAPES["first"](KEY)))

            def respond(body: bytes = body) -> httpx.Response:
                return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

            message = await error_message(name, respond)
            assert message.startswith("Provider returned error (xxx"), message[:60]
            assert fragments_of(message, KEY, 4) == [], (offset, message[-80:])


async def test_an_escaped_key_leaks_no_fragment_through_the_proxy(anyio_backend: object) -> None:
    from agentloop.providers import proxy_app, stream_proxy

    token = "proxy-token-0123456789"
    model = al.Model(id="m", api="openai-completions", provider="openai", base_url="http://mock/v1")
    with anyio.fail_after(30):
        for offset in offsets():
            text = openrouter_error(offset, ESCAPES["every-third"](KEY))
            upstream = httpx.MockTransport(lambda request, text=text: httpx.Response(400, text=text))
            async with httpx.AsyncClient(transport=upstream) as out:

                def served(model: al.Model, context: al.Context, options: al.StreamOptions, out: Any = out) -> Any:
                    return stream_openai_completions(model, context, options, http=HTTP, client=out)

                app = proxy_app(
                    served,
                    token=token,
                    get_api_key=lambda provider: KEY,
                    allowed_base_urls=["http://mock"],
                    key_base_urls={"openai": ["http://mock"]},
                )
                async with httpx.AsyncClient(transport=httpx.ASGITransport(app)) as client:
                    proxied = stream_proxy("http://proxy.test", token, client=client)
                    options = al.StreamOptions(signal=al.AbortSignal())
                    async with proxied(model, al.Context(), options) as events:
                        last = [event async for event in events][-1]
            assert last.type == "error"
            message = last.error.error_message or ""
            assert message.startswith("HTTP 400: Provider returned error (xxx"), message[:60]
            assert fragments_of(message, KEY, 4) == [], (offset, message[-80:])
