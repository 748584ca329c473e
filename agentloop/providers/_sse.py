"""Server-sent events read from an httpx response, as the providers' official SDKs read them.

The event stream format of the HTML standard, with one difference that matters for real
servers: an event still pending when the body ends (its last line not followed by a blank
line) is dispatched, as the OpenAI and Anthropic SDK decoders (and so pi-ai) do, instead of being
dropped as httpx-sse's `EventSource` drops it. Lines end at `\\r\\n`, `\\r` or `\\n` (never at
the other Unicode line breaks `str.splitlines` knows).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, cast

from httpx_sse import ServerSentEvent

if TYPE_CHECKING:
    import httpx

__all__ = ("aiter_sse",)


class _Lines:
    """Splits text chunks into lines; a line may span chunks, a `\\r\\n` may be cut between two."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[str] = []  # the start of a line not ended yet

    def feed(self, text: str) -> list[str]:
        pending = self._pending
        if "\n" not in text and "\r" not in text[:-1] and not (pending and pending[-1].endswith("\r")):
            pending.append(text)  # no line ends here (a last `\r` may start a `\r\n`)
            return []
        if self._pending:
            text = "".join(self._pending) + text
            self._pending = []
        held = text.endswith("\r")
        if held:
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()
        if rest or held:
            self._pending.append(rest + "\r" if held else rest)
        return lines

    def flush(self) -> list[str]:
        """The last line, when the body did not end with a line break."""
        rest = "".join(self._pending)
        self._pending = []
        if not rest:
            return []
        if rest.endswith("\r"):
            rest = rest[:-1]
        return [rest]


class _Events:
    """Builds events from lines (fields `event`, `data`, `id`, `retry`; `:` comments)."""

    __slots__ = ("_data", "_event", "_id", "_retry")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None

    def line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self.dispatch()
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
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
        if not self._data:
            self._event = ""
            return None
        sse = ServerSentEvent(self._event, "\n".join(self._data), self._id, self._retry)
        self._event = ""
        self._data = []
        self._retry = None
        return sse


async def aiter_sse(response: httpx.Response) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a `text/event-stream` response body (the last one even without its blank line)."""
    lines = _Lines()
    events = _Events()
    async with aclosing(cast(AsyncGenerator[str, None], response.aiter_text())) as chunks:  # it is one
        async for chunk in chunks:
            for line in lines.feed(chunk):
                sse = events.line(line)
                if sse is not None:
                    yield sse
    for line in lines.flush():
        sse = events.line(line)
        if sse is not None:
            yield sse
    sse = events.dispatch()
    if sse is not None:
        yield sse
