"""The backend contract: what a store asks of its storage (plain blocking calls, each run in a
worker thread), and the JSON text of messages as every backend stores them."""

from __future__ import annotations

import abc
import builtins
import re
import uuid
from typing import Any

from .._types._constants import AGENT_MESSAGE_TYPES
from .._types._messages import AgentMessage
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._json_fallback import encode_lenient
from .._wire._json_text import decode_json
from ._model import JSONDict, Meta, SessionCorruptError

__all__ = ("Backend", "Writer", "check_session_id", "decode_message", "encode_message", "new_session_id")

_ID_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


class Backend(abc.ABC):
    """A store's storage: plain blocking methods, each called in a worker thread."""

    @abc.abstractmethod
    def create(self, meta: Meta, messages: builtins.list[str]) -> None:
        """Store a new session (messages as JSON text, and `meta.compactions`); SessionError if
        the id is taken."""

    @abc.abstractmethod
    def list(self) -> tuple[builtins.list[Meta], builtins.list[SessionCorruptError]]:
        """Every readable session's metadata, and an error for each one that cannot be read."""

    @abc.abstractmethod
    def load(self, session_id: str) -> tuple[Meta, builtins.list[Any]]:
        """The metadata (with its compactions) and the messages' JSON forms (dicts or JSON text)."""

    @abc.abstractmethod
    def acquire(self, session_id: str) -> tuple[Writer, Meta, builtins.list[Any]]:
        """Take the session's write lock; SessionLockedError when another writer holds it."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> None:
        """Remove a session; SessionLockedError while a writer holds it."""

    @abc.abstractmethod
    def break_lock(self, session_id: str) -> None:
        """Remove the session's write lock whoever holds it; SessionNotFoundError without one."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the backend holds."""


class Writer(abc.ABC):
    """The holder of one session's write lock."""

    @abc.abstractmethod
    def append(self, start: int, messages: list[str], time: int) -> None:
        """Store `messages` (JSON text) at indices `start`, `start + 1`, ..."""

    @abc.abstractmethod
    def replace(self, messages: list[str], time: int) -> None:
        """Replace the whole transcript, atomically (its compactions go with it)."""

    @abc.abstractmethod
    def compact(self, entry: JSONDict, time: int) -> None:
        """Store a compaction entry (`CompactionState.to_json()`), atomically: after a crash the
        session has it whole or not at all."""

    @abc.abstractmethod
    def update(self, changes: JSONDict, time: int) -> None:
        """Change `title` and/or `settings` (keys of `changes`)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lock up (idempotent)."""


def encode_message(message: AgentMessage) -> str:
    """A message's JSON text as stored: the codec's form, one line.

    Values JSON cannot hold (in tool `details` or custom-message data) are stored in a JSON form
    of their own (`encode_lenient`: anything without one as its `str()`), so an odd detail never
    stops a run from being recorded.
    """
    return encode_lenient(to_json(message))


def decode_message(data: Any, where: str) -> AgentMessage:
    """A stored message back (data is its JSON form, or JSON text); SessionCorruptError if not one."""
    try:
        if isinstance(data, (str, bytes)):
            data = decode_json(data, constants=True)
        message = from_json(data)
    except ValueError as exc:
        raise SessionCorruptError(f"{where}: {exc}") from None
    if not isinstance(message, AGENT_MESSAGE_TYPES):
        raise SessionCorruptError(f"{where}: not a message")
    return message


def check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not _ID_RE.fullmatch(session_id):
        raise ValueError(
            f"session id must be 1-128 letters, digits or '._-' (not starting with '.'), got {session_id!r}"
        )
    return session_id


def new_session_id() -> str:
    return uuid.uuid4().hex
