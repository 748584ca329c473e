"""The ASGI plumbing both apps share: request headers, the request body under a limit, JSON answers."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest

from agentloop._asgi import BodyTooLarge, header, read_body, send_json


def scope_with(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


def receiving(*messages: dict[str, Any]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


def test_a_header_is_found_whatever_its_case_and_the_last_one_wins() -> None:
    scope = scope_with((b"Content-Type", b"text/plain"), (b"x-a", b"1"), (b"X-A", b"2"))
    assert header(scope, b"content-type") == b"text/plain"
    assert header(scope, b"x-a") == b"2"
    assert header(scope, b"authorization") is None
    assert header({"type": "http"}, b"x-a") is None


async def test_the_body_is_joined_from_its_chunks_and_other_messages_are_skipped(anyio_backend: object) -> None:
    receive = receiving(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "something.else"},
        {"type": "http.request", "body": bytearray(b"cd"), "more_body": False},
    )
    assert await read_body(scope_with(), receive, 10) == b"abcd"


async def test_a_client_that_leaves_before_its_body_gives_none(anyio_backend: object) -> None:
    receive = receiving({"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"})
    assert await read_body(scope_with(), receive, 10) is None


async def test_a_body_announced_over_the_limit_is_refused_before_it_is_read(anyio_backend: object) -> None:
    read: list[str] = []

    async def receive() -> dict[str, Any]:
        read.append("read")
        return {"type": "http.request", "body": b"", "more_body": False}

    with pytest.raises(BodyTooLarge, match="over 10 bytes") as caught:
        await read_body(scope_with((b"content-length", b"11")), receive, 10)
    assert caught.value.limit == 10 and read == []


async def test_a_body_sent_over_the_limit_is_refused_once_it_passes_it(anyio_backend: object) -> None:
    receive = receiving(
        {"type": "http.request", "body": b"123456", "more_body": True},
        {"type": "http.request", "body": b"78901", "more_body": False},
    )
    with pytest.raises(BodyTooLarge):  # the header said nothing (or lied): the bytes count
        await read_body(scope_with((b"content-length", b"bogus")), receive, 10)


async def test_a_json_answer_carries_its_length_type_and_extra_headers(anyio_backend: object) -> None:
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await send_json(send, 405, b'{"error":"no"}', [(b"allow", b"POST")])
    assert sent == [
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"14"), (b"allow", b"POST")],
        },
        {"type": "http.response.body", "body": b'{"error":"no"}', "more_body": False},
    ]
