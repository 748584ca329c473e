"""Values that several modules share, each defined here once.

The names of the wire (thinking levels, stop reasons, message classes) come from the types in
`_messages`, so a tuple checked against at run time cannot drift from the annotation that mypy
checks. Imports go one way: `_messages` takes nothing from here.
"""

from __future__ import annotations

from typing import get_args

from ._messages import AgentMessage, Message, StopReason, ThinkingLevel

__all__ = (
    "ABORTED_TEXT",
    "AGENT_MESSAGE_TYPES",
    "BLOCKED_TEXT",
    "CLEANUP_TIMEOUT",
    "DONE_REASONS",
    "ERROR_REASONS",
    "LLM_MESSAGE_TYPES",
    "REASONING_LEVELS",
    "STOP_REASONS",
    "THINKING_LEVELS",
    "TOOL_ABORTED_TEXT",
)

THINKING_LEVELS: tuple[ThinkingLevel, ...] = get_args(ThinkingLevel)
"""Every thinking level, `off` first."""

REASONING_LEVELS: tuple[ThinkingLevel, ...] = tuple(level for level in THINKING_LEVELS if level != "off")
"""The thinking levels that ask a model to reason (all but `off`)."""

STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
"""Why a response ended, as an assistant message says it."""

DONE_REASONS = ("stop", "length", "toolUse")
"""The stop reasons of a `done` event (a response that ended normally)."""

ERROR_REASONS = ("error", "aborted")
"""The stop reasons of an `error` event."""

AGENT_MESSAGE_TYPES: tuple[type[AgentMessage], ...] = get_args(AgentMessage)
"""The classes of a transcript's messages (for `isinstance`)."""

LLM_MESSAGE_TYPES: tuple[type[Message], ...] = get_args(Message)
"""The classes of the messages a model understands (for `isinstance`)."""

CLEANUP_TIMEOUT = 5.0
"""How long, in seconds, shielded cleanup may take (closing a stream or a response, ending a span)
once its task is cancelled, before it is given up."""

ABORTED_TEXT = "Request was aborted"
"""The error message of a model response cut by an abort (pi-ai's text)."""

TOOL_ABORTED_TEXT = "Operation aborted"
"""The error result of a tool call cut or never started because of an abort (pi-agent-core's text)."""

BLOCKED_TEXT = "Tool execution was blocked"
"""The error result of a tool call a `before_tool_call` (or a person) blocked without a reason
(pi-agent-core's text)."""
