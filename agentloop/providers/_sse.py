"""Server-sent events read from an httpx response, as the providers' official SDKs read them,
within size limits.

The event stream format of the HTML standard, with one difference that matters for real
servers: an event still pending when the body ends (its last line not followed by a blank
line) is dispatched, as the OpenAI and Anthropic SDK decoders (and so pi-ai) do, instead of being
dropped as httpx-sse's `EventSource` drops it. Lines end at `\\r\\n`, `\\r` or `\\n` (never at
the other Unicode line breaks `str.splitlines` knows); the stream is UTF-8, as the standard
says, and bytes that are not UTF-8 read as U+FFFD.

Nothing a server sends can grow without bound: a line, and an event with all its lines, hold at
most `max_event_size` bytes, and the whole body at most `max_body_size` bytes (counted after
content decoding). Going over ends the reading with a `ProviderError` that names the limit.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, cast

import anyio
from httpx_sse import ServerSentEvent

from ._errors import ProviderError

if TYPE_CHECKING:
    import httpx

__all__ = ("aiter_sse", "body_chunks", "unwind")


class _Lines:
    """Splits byte chunks into lines; a line may span chunks, a `\\r\\n` may be cut between two."""

    __slots__ = ("_pending", "pending_size")

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # the start of a line not ended yet
        self.pending_size = 0
        """The bytes of the line not ended yet."""

    def feed(self, chunk: bytes) -> list[bytes]:
        pending = self._pending
        if b"\n" not in chunk and b"\r" not in chunk[:-1] and not (pending and pending[-1].endswith(b"\r")):
            pending.append(chunk)  # no line ends here (a last `\r` may start a `\r\n`)
            self.pending_size += len(chunk)
            return []
        if pending:
            chunk = b"".join(pending) + chunk
            self._pending = []
        held = chunk.endswith(b"\r")
        if held:
            chunk = chunk[:-1]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if rest or held:
            self._pending.append(rest + b"\r" if held else rest)
        self.pending_size = len(rest)
        return lines

    def flush(self) -> list[bytes]:
        """The last line, when the body did not end with a line break."""
        rest = b"".join(self._pending)
        self._pending = []
        self.pending_size = 0
        if rest.endswith(b"\r"):
            rest = rest[:-1]
        return [rest] if rest else []


class _Events:
    """Builds events from lines (fields `event`, `data`, `id`, `retry`; `:` comments)."""

    __slots__ = ("_data", "_event", "_id", "_retry", "size")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None
        self.size = 0
        """The bytes of the event's lines so far."""

    def line(self, raw: bytes) -> ServerSentEvent | None:
        if not raw:
            return self.dispatch()
        if raw[:1] == b":":
            return None
        self.size += len(raw)
        name, _, value = raw.decode("utf-8", "replace").partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def dispatch(self) -> ServerSentEvent | None:
        """The pending event (a blank line, or the end of the body, ends it), if it has data."""
        self.size = 0
        if not self._data:
            self._event = ""
            return None
        sse = ServerSentEvent(self._event, "\n".join(self._data), self._id, self._retry)
        self._event = ""
        self._data = []
        self._retry = None
        return sse


async def aiter_sse(
    response: httpx.Response, *, max_event_size: int, max_body_size: int
) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a `text/event-stream` response body (the last one even without its blank
    line); ProviderError when a line or an event exceeds `max_event_size` bytes, or the body
    `max_body_size` bytes."""
    lines = _Lines()
    events = _Events()
    body = 0
    async with aclosing(body_chunks(response)) as chunks:
        async for chunk in chunks:
            body += len(chunk)
            if body > max_body_size:
                await unwind(chunks)
                raise ProviderError(f"The response body is larger than max_body_size ({max_body_size} bytes)")
            for line in lines.feed(chunk):
                sse = events.line(line)
                if sse is not None:
                    yield sse
                if events.size > max_event_size:
                    break
            if events.size + lines.pending_size > max_event_size:
                await unwind(chunks)
                raise ProviderError(
                    f"The server sent an event stream line or event larger than max_event_size ({max_event_size} bytes)"
                )
    for line in lines.flush():
        sse = events.line(line)
        if sse is not None:
            yield sse
    sse = events.dispatch()
    if sse is not None:
        yield sse


def body_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The chunks of a response body after content decoding (httpx's `aiter_bytes`, which is an
    async generator, so that `unwind` can finish it)."""
    return cast(AsyncGenerator[bytes, None], response.aiter_bytes())


async def unwind(chain: AsyncGenerator[object, None]) -> None:
    """Finish a body's chain of reading generators, left suspended part way.

    httpx reads a body through a chain of async generators; closing only the outermost one
    leaves the inner ones suspended, to be finalized by the garbage collector, which trio
    reports as a ResourceWarning. Resuming the outermost one in a cancelled scope makes every
    layer end at its next wait, so none is left behind.
    """
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            while True:
                await chain.__anext__()
        except Exception:  # StopAsyncIteration, or a read error
            pass
