"""The request side of `AgentSSEApp`: errors as answers, access checks, bodies, query values."""

from __future__ import annotations

import hmac
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .._asgi import BodyTooLarge, Receive, Scope, Send, header, read_body, send_json
from .._types._constants import AGENT_MESSAGE_TYPES
from .._types._messages import AgentMessage, UserMessage
from .._wire._decode import from_json
from .._wire._json_fallback import encode_lenient

__all__ = (
    "Disconnected",
    "HTTPError",
    "check_access",
    "is_loopback",
    "last_event_id",
    "messages_of",
    "query_value",
    "read_json",
    "send_json_answer",
)

_JSON = b"application/json"


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


class Disconnected(Exception):
    pass


def check_access(
    scope: Scope,
    token: bytes | None,
    allowed_hosts: frozenset[str] | None,
    allowed_origins: frozenset[str],
    events: bool = False,
) -> None:
    """401 without the token (when one is set), 403 for a page of an origin not allowed.

    `events` says the request is for an event stream (`GET /sessions/{id}/events`, as the route
    reads it): there, and only there, `?ticket=` stands for the token (the app spends it) and
    `?token=` is accepted."""
    headers = {bytes(name).lower(): bytes(value) for name, value in scope.get("headers") or []}
    host = headers.get(b"host", b"").decode("latin-1").lower()
    if allowed_hosts is not None:
        if host not in allowed_hosts:
            raise HTTPError(400, f"this app does not serve the host {host!r} (see allowed_hosts)")
    elif token is None and host and not is_loopback(host):  # browsers always send a Host
        raise HTTPError(400, f"without a token this app serves loopback hosts only, not {host!r} (see allowed_hosts)")
    if token is not None:
        scheme, _, credentials = headers.get(b"authorization", b"").strip().partition(b" ")
        if credentials or not events or query_value(scope, "ticket") is None:  # a ticket is spent by _events
            if not credentials and events:
                credentials = (query_value(scope, "token") or "").encode("latin-1")
                scheme = b"bearer"
            # Compared in constant time whatever was sent (also when nothing was).
            if not hmac.compare_digest(credentials.strip(), token) or scheme.lower() != b"bearer":
                raise HTTPError(
                    401, "Unauthorized: send Authorization: Bearer <token>", [(b"www-authenticate", b"Bearer")]
                )
    origin = headers.get(b"origin")
    if origin is None or "*" in allowed_origins:
        return
    text = origin.decode("latin-1").rstrip("/").lower()
    if text in allowed_origins:
        return
    if host and urlsplit(text).netloc == host:
        return  # the app's own page
    raise HTTPError(403, f"requests from the origin {text!r} are not allowed (see allowed_origins)")


async def read_json(scope: Scope, receive: Receive, max_body_size: int) -> dict[str, Any]:
    """The request's JSON object body ({} when empty); 4xx `HTTPError`s for anything else."""
    try:
        body = await read_body(scope, receive, max_body_size)
    except BodyTooLarge:
        raise HTTPError(413, f"the body is over {max_body_size} bytes") from None
    if body is None:
        raise Disconnected
    if not body.strip():
        return {}
    content_type = (header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
    if content_type != _JSON:
        raise HTTPError(415, "send the body as JSON (content-type: application/json)")
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise HTTPError(400, f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise HTTPError(400, "the body nests too deeply") from None
    if not isinstance(data, dict):
        raise HTTPError(400, f"the body must be a JSON object, got {type(data).__name__}")
    return data


def messages_of(body: dict[str, Any]) -> list[AgentMessage]:
    given = [key for key in ("text", "message", "messages") if key in body]
    if len(given) != 1:
        raise HTTPError(400, "send one of 'text' (a string), 'message' (a message) or 'messages' (a list)")
    key = given[0]
    value = body[key]
    if key == "text":
        if not isinstance(value, str):
            raise HTTPError(400, f"'text' must be a string, got {type(value).__name__}")
        return [UserMessage(content=value)]
    items = [value] if key == "message" else value
    if not isinstance(items, list) or not items:
        raise HTTPError(400, "'messages' must be a non-empty list of messages")
    messages = []
    for i, item in enumerate(items):
        try:
            message = from_json(item)
        except (ValueError, TypeError) as exc:
            raise HTTPError(400, f"{key} {i}: {exc}") from None
        except RecursionError:
            raise HTTPError(400, f"{key} {i}: the message nests too deeply") from None
        if not isinstance(message, AGENT_MESSAGE_TYPES):
            raise HTTPError(400, f"{key} {i}: not a message (it needs a 'role')")
        messages.append(message)
    return messages


_EVENT_ID = re.compile(r"(?:[0-9a-f]{1,32}-)?[0-9]{1,19}")
_LOOPBACK = re.compile(r"(?:localhost|[a-z0-9.-]*\.localhost|127(?:\.[0-9]{1,3}){3}|\[::1\])(?::[0-9]{1,5})?")


def is_loopback(host: str) -> bool:
    """Whether a `Host` header names this machine's loopback interface (any port)."""
    return _LOOPBACK.fullmatch(host.rstrip(".")) is not None


def query_value(scope: Scope, name: str) -> str | None:
    """The last value of the query parameter `name` (latin-1 both ways: bytes come back unchanged)."""
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"), encoding="latin-1")
    values = query.get(name)
    return values[-1] if values else None


def last_event_id(scope: Scope) -> str | None:
    """The id the client saw last (`Last-Event-ID`, else `?lastEventId=`); 400 when not an id."""
    sent = header(scope, b"last-event-id")
    raw = None if sent is None else sent.decode("latin-1")
    if raw is None:
        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        if "lastEventId" in query:
            raw = query["lastEventId"][-1]
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    if not _EVENT_ID.fullmatch(raw):
        raise HTTPError(400, f"Last-Event-ID must be an event id this app sent ('<epoch>-<number>'), got {raw!r}")
    return raw


async def send_json_answer(
    send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send_json(send, status, encode_lenient(data).encode(), headers)  # messages may hold odd tool details
