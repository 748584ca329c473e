"""Reading a response: the parser base class each protocol subclasses, and the readers of the
JSON that server-sent events carry (objects, fields, error objects)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent
from .._types._messages import Model
from .._wire._json_text import decode_json
from ._auth import redact
from ._errors import ProviderError

__all__ = ("SSEParser", "as_int", "as_str", "error_text", "is_one_of", "stream_object")


class SSEParser:
    """Turns one response's server-sent events into assistant-message events.

    Subclasses implement `feed` (one SSE event in, the events it causes out; raise
    ProviderError for an error the server reported) and `finish` (the closing events and the
    terminal event, once the protocol's end marker was seen). The driver in `_http.py` does the I/O, retries, abort and
    timeouts.
    """

    end_marker = "end marker"
    """What the protocol ends with, for the error when a stream stops before it."""
    complete_at_eof = False
    """True when the body may end without the end marker (`finish` then decides, as the official
    SDK does for Chat Completions); otherwise such a stream ends in an "incomplete" error."""

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        self.model = model
        self.builder = builder
        self.finished = False
        """True once the end marker arrived; the driver stops reading."""
        self.has_content = False
        """True once a content block started: from then on the request is never retried."""
        self.secret: str | None = None
        """The request's API key (the driver sets it): error texts redact it before any cut."""

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        raise NotImplementedError

    def finish(self) -> list[AssistantMessageEvent]:
        """The events that end the response (blocks still open, then `done` or `error`)."""
        raise NotImplementedError


def stream_object(data: str, secret: str | None = None) -> dict[str, Any]:
    """The JSON object one server-sent event carries; ProviderError, quoting its start (`secret`
    redacted before the cut), if it is not one."""
    try:
        value = decode_json(data, constants=True)
    except ValueError:
        raise ProviderError(f"Malformed stream data (not JSON): {redact(data, secret)[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProviderError(f"Malformed stream data (not an object): {redact(data, secret)[:200]!r}")
    return value


def as_str(value: Any) -> str:
    """A string field from JSON (anything else counts as empty)."""
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int:
    """A token count from JSON (missing, null or junk count as 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def is_one_of(value: Any, names: frozenset[str]) -> bool:
    """`value in names` for any JSON value (a list or an object is in no set of names)."""
    return isinstance(value, str) and value in names


def error_text(data: Any, secret: str | None = None) -> str | None:
    """The message of an error object as OpenAI, Anthropic, llama.cpp, OpenRouter... send it.

    OpenRouter's `metadata.raw` (the upstream's own answer, which may echo the request) is shown
    cut at 300 characters, after `secret` is redacted from it.
    """
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, str):
            return error
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            kind = error.get("type")
            if not kind or kind == "error":
                kind = error.get("code")
            metadata = error.get("metadata")
            if isinstance(message, str) and message:
                extra = ""
                if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
                    extra = f" ({redact(metadata['raw'], secret)[:300]})"
                return f"{message} ({kind}){extra}" if isinstance(kind, str) and kind else message + extra
            if isinstance(kind, str) and kind:
                return kind
        detail = data.get("detail") or data.get("message")
        if isinstance(detail, str) and detail:
            return detail
    return None
