"""`opened_stream`: every shape a stream function may return, read and always closed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop._types._stream_fn import opened_stream

MODEL = al.Model(id="m", api="scripted", provider="test")


def _events(closed: list[str]) -> AsyncIterator[al.AssistantMessageEvent]:
    async def events() -> AsyncIterator[al.AssistantMessageEvent]:
        builder = al.AssistantMessageBuilder(api=MODEL.api, provider=MODEL.provider, model=MODEL.id)
        try:
            yield builder.start()
            yield builder.text_start()
            yield builder.text_delta("hi")
            yield builder.text_end()
            yield builder.done("stop")
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # a close that must wait, as an HTTP response's does
            closed.append("events")

    return events()


def _source(shape: str, closed: list[str]) -> Any:
    """What a stream function of that shape returns."""

    async def awaited() -> AsyncIterator[al.AssistantMessageEvent]:
        return _events(closed)

    @contextlib.asynccontextmanager
    async def managed() -> AsyncIterator[AsyncIterator[al.AssistantMessageEvent]]:
        try:
            yield _events(closed)
        finally:
            closed.append("manager")

    if shape == "awaitable":
        return awaited()
    return managed() if shape == "async context manager" else _events(closed)


@pytest.mark.parametrize("shape", ["iterator", "awaitable", "async context manager"])
async def test_every_shape_is_read_and_closed_when_the_block_is_left_early(anyio_backend: object, shape: str) -> None:
    closed: list[str] = []
    async with opened_stream(_source(shape, closed)) as events:
        first = await events.__anext__()
        assert first.type == "start"
        assert closed == []
    assert closed == (["events", "manager"] if shape == "async context manager" else ["events"])


@pytest.mark.parametrize("shape", ["iterator", "awaitable", "async context manager"])
async def test_the_stream_is_closed_when_the_reader_is_cancelled(anyio_backend: object, shape: str) -> None:
    closed: list[str] = []
    with anyio.CancelScope() as scope:
        async with opened_stream(_source(shape, closed)) as events:
            await events.__anext__()
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert "events" in closed


async def test_a_result_that_does_not_iterate_is_a_type_error_naming_it(anyio_backend: object) -> None:
    async def awaited_number() -> int:
        return 42

    for source in (42, awaited_number()):
        with pytest.raises(TypeError, match=r"must return an async iterator of AssistantMessageEvent .* got int"):
            async with opened_stream(source):
                pass  # pragma: no cover - never entered
