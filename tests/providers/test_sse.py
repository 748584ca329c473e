"""The SSE reader: the same events as httpx-sse wherever it is right, and the last event of a body
that ends without its blank line (as the SDK decoders give it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from httpx_sse import EventSource

from agentloop.providers._sse import aiter_sse

BODY = (
    ": comment\n\n"
    'event: delta\ndata: {"a": 1}\nid: 7\nretry: 300\n\n'
    "data:no space\r\ndata: two lines\r\n\r\n"
    "id: bad\0id\nevent: lone\n\n"
    "data: \u00e9t\u00e9 \u2028 not a line break\r\r"
    "data:\n\n"
    "unknown: field\ndata: last\n\n"
)


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def _response(body: bytes, size: int) -> httpx.Response:
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(chunks))


async def _ours(body: bytes, size: int) -> list[tuple[str, str, str, int | None]]:
    # An event whose data is "" is dispatched (the drivers skip it, as httpx-sse's no-data events).
    return [
        (e.event, e.data, e.id, e.retry)
        async for e in aiter_sse(_response(body, size), max_event_size=1 << 20, max_body_size=1 << 20)
        if e.data
    ]


async def _httpx_sse(body: bytes) -> list[tuple[str, str, str, int | None]]:
    events = EventSource(_response(body, len(body))).aiter_sse()
    return [(e.event, e.data, e.id, e.retry) async for e in events if e.data]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 1000])
async def test_the_same_events_as_httpx_sse_for_a_well_ended_body(anyio_backend: object, size: int) -> None:
    body = BODY.encode()
    expected = await _httpx_sse(body)
    assert await _ours(body, size) == expected
    assert [e[1] for e in expected] == [
        '{"a": 1}',
        "no space\ntwo lines",
        "\u00e9t\u00e9 \u2028 not a line break",
        "last",
    ]


@pytest.mark.parametrize("ending", ["", "\n", "\r", "\r\n"])
@pytest.mark.parametrize("size", [1, 4, 1000])
async def test_the_last_event_without_its_blank_line_is_dispatched(
    anyio_backend: object, ending: str, size: int
) -> None:
    body = (BODY + "event: end\ndata: tail" + ending).encode()
    got = await _ours(body, size)
    assert got[-1] == ("end", "tail", "7", None)
    assert got[:-1] == await _httpx_sse(BODY.encode())
    assert await _httpx_sse(body) == got[:-1]  # httpx-sse drops it


async def test_a_body_of_comments_or_nothing_has_no_events(anyio_backend: object) -> None:
    assert await _ours(b"", 10) == []
    assert await _ours(b": ping\n\n: ping", 3) == []
    assert await _ours(b"event: only\n", 3) == []
