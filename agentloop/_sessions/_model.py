"""Session values: the errors, what a session holds besides its messages, and `Meta`, the
metadata as a backend keeps it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._core._agent import Agent
from .._types._constants import THINKING_LEVELS
from .._types._errors import AgentLoopError
from .._types._messages import AgentMessage, Model, ThinkingLevel
from .._wire._model_json import model_from_json, model_to_json
from ..context._compaction import CompactionState

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "JSONDict",
    "Meta",
    "SessionCorruptError",
    "SessionData",
    "SessionError",
    "SessionInfo",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionSettings",
    "check_title",
)

JSONDict: TypeAlias = dict[str, Any]


# --- errors ----------------------------------------------------------------------------------


class SessionError(AgentLoopError):
    """Base class of the session errors (a session store's own failures)."""


class SessionNotFoundError(SessionError, LookupError):
    """No session has this id (never created, or deleted)."""


class SessionLockedError(SessionError):
    """The session is open for writing by another `Session` (in this process or another)."""


class SessionCorruptError(SessionError):
    """A stored record cannot be read (not a torn last record, which is ignored)."""


# --- values ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """What an Agent needs besides its transcript to resume a session.

    `model` keeps the model's description without its `headers` (they may hold credentials);
    `tool_names` says which tools the session used (tools are code: the resuming program passes
    them to the Agent).
    """

    system_prompt: str = ""
    model: Model | None = None
    thinking_level: ThinkingLevel = "off"
    tool_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.system_prompt, str):
            raise TypeError(f"system_prompt must be a str, got {type(self.system_prompt).__name__}")
        if self.model is not None and not isinstance(self.model, Model):
            raise TypeError(f"model must be an agentloop.Model or None, got {type(self.model).__name__}")
        if self.thinking_level not in THINKING_LEVELS:
            raise ValueError(f"thinking_level must be one of {THINKING_LEVELS}, got {self.thinking_level!r}")
        if isinstance(self.tool_names, str) or not all(isinstance(n, str) for n in self.tool_names):
            raise TypeError(f"tool_names must be a sequence of str, got {self.tool_names!r}")
        object.__setattr__(self, "tool_names", tuple(self.tool_names))
        if self.model is not None and self.model.headers is not None:
            object.__setattr__(self, "model", dataclasses.replace(self.model, headers=None))

    @classmethod
    def of(cls, agent: Agent) -> SessionSettings:
        """The settings of `agent` now."""
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        state = agent.state
        return cls(
            system_prompt=state.system_prompt,
            model=state.model,
            thinking_level=state.thinking_level,
            tool_names=tuple(t.name for t in state.tools),
        )

    def to_json(self) -> JSONDict:
        """The JSON form (camelCase, as stored)."""
        return {
            "systemPrompt": self.system_prompt,
            "model": None if self.model is None else model_to_json(self.model, headers=False),
            "thinkingLevel": self.thinking_level,
            "toolNames": list(self.tool_names),
        }

    @classmethod
    def from_json(cls, data: Any) -> SessionSettings:
        """The settings of a JSON form made by `to_json`; ValueError when it is not one."""
        if not isinstance(data, Mapping):
            raise ValueError(f"session settings must be an object, got {type(data).__name__}")
        try:
            model = data.get("model")
            return cls(
                system_prompt=data.get("systemPrompt", ""),
                model=None if model is None else model_from_json(model),
                thinking_level=data.get("thinkingLevel", "off"),
                tool_names=tuple(data.get("toolNames", ())),
            )
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise ValueError(f"bad session settings: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """What a store knows about a session besides its messages. Times are epoch milliseconds."""

    id: str
    created: int
    updated: int
    """When a message or a setting was last written."""
    title: str | None = None
    parent_id: str | None = None
    """The session this one was forked from."""
    fork_index: int | None = None
    """How many of the parent's messages the fork started with."""
    message_count: int = 0
    settings: SessionSettings = field(default_factory=SessionSettings)


@dataclass(frozen=True, slots=True)
class SessionData:
    """A session as `load()` returns it: its info, its transcript (the whole history) and its
    compactions, oldest first."""

    info: SessionInfo
    messages: tuple[AgentMessage, ...]
    compactions: tuple[CompactionState, ...] = ()

    @property
    def compaction(self) -> CompactionState | None:
        """The latest compaction (None when the session was never compacted)."""
        return self.compactions[-1] if self.compactions else None

    def context(self) -> list[AgentMessage]:
        """What the model sees: the latest compaction's summary and the messages from its first
        kept one on (the whole transcript when the session was never compacted)."""
        state = self.compaction
        return list(self.messages) if state is None else state.context(self.messages)


@dataclass(slots=True, kw_only=True)
class Meta:
    """A session's metadata as a backend keeps it (settings in their JSON form)."""

    id: str
    created: int
    updated: int
    title: str | None = None
    parent_id: str | None = None
    fork_index: int | None = None
    settings: JSONDict = field(default_factory=dict)
    message_count: int = 0
    compactions: list[JSONDict] = field(default_factory=list)
    """The compaction entries' JSON forms, oldest first (`CompactionState.to_json()`)."""

    def compaction_states(self, count: int) -> tuple[CompactionState, ...]:
        """The compactions, checked against a transcript of `count` messages."""
        states = []
        for i, data in enumerate(self.compactions):
            try:
                state = CompactionState.from_json(data)
            except ValueError as exc:
                raise SessionCorruptError(f"session {self.id!r} compaction {i}: {exc}") from None
            if not 0 < state.first_kept_index < count or state.fresh_from_index > count:
                raise SessionCorruptError(
                    f"session {self.id!r} compaction {i}: keeps messages from {state.first_kept_index} "
                    f"of a transcript of {count}"
                )
            states.append(state)
        return tuple(states)

    def info(self) -> SessionInfo:
        try:
            settings = SessionSettings.from_json(self.settings)
        except ValueError as exc:
            raise SessionCorruptError(f"session {self.id!r}: {exc}") from None
        return SessionInfo(
            id=self.id,
            created=self.created,
            updated=self.updated,
            title=self.title,
            parent_id=self.parent_id,
            fork_index=self.fork_index,
            message_count=self.message_count,
            settings=settings,
        )


def check_title(title: object) -> None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__}")
