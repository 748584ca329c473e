"""The records of approvals: a pending request, and the answer a `before_tool_call` gives to ask."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core._config import BeforeToolCallResult
from .._types._messages import ToolCall

__all__ = (
    "NEEDS_APPROVAL_TEXT",
    "ApprovalRequest",
    "NeedsApproval",
    "check_decision",
    "already_decided_text",
    "decided_text",
    "invalid_edit_text",
    "no_tool_text",
    "needs_approval_of",
    "not_pending_text",
    "timeout_text",
)

NEEDS_APPROVAL_TEXT = "This tool call needs a person's approval, and nobody can be asked here"
"""The error result of a `NeedsApproval` seen by a loop that cannot ask (`agent_loop` without an `Agent`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A tool call waiting for a person's decision (`pending_approvals` lists them)."""

    tool_call_id: str
    """The id to pass to `approve`."""
    tool_name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The arguments the model gave, as JSON."""
    requested_at: int = 0
    """When the run started waiting, in ms since the epoch."""

    def to_json(self) -> dict[str, Any]:
        return {
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "arguments": dict(self.arguments),
            "requestedAt": self.requested_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        return cls(
            tool_call_id=data["toolCallId"],
            tool_name=data["toolName"],
            arguments=data["arguments"],
            requested_at=data["requestedAt"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NeedsApproval(BeforeToolCallResult):
    """Returned by an `Agent`'s `before_tool_call`: ask a person before this call runs.

    The agent lists the call in `pending_approvals` and waits for `approve`. A loop that cannot
    ask (`agent_loop` with no `Agent`) sees a blocked call, so the tool never runs unasked.
    """

    block: bool = True
    reason: str | None = NEEDS_APPROVAL_TEXT


def needs_approval_of(needs_approval: Collection[str] | Callable[[ToolCall], bool], tool_call: ToolCall) -> bool:
    """Whether `tool_call` waits for a person: its tool is named in `needs_approval`, or the
    function `needs_approval` says so (it must return a bool)."""
    if not callable(needs_approval):
        return tool_call.name in needs_approval
    answer = needs_approval(tool_call)
    if type(answer) is not bool:
        raise TypeError(f"needs_approval must return a bool, got {type(answer).__name__}")
    return answer


def check_decision(tool_call_id: object, approved: object, reason: object, arguments: object = None) -> None:
    """`TypeError` unless a decision is a call id (str), a bool, a reason (str or None) and edited
    arguments (a mapping or None); `ValueError` for edited arguments of a denied call: the
    arguments of every `approve`."""
    if not isinstance(tool_call_id, str):
        raise TypeError(f"approve: tool_call_id must be a str, got {type(tool_call_id).__name__}")
    if type(approved) is not bool:
        raise TypeError(f"approve: approved must be a bool, got {type(approved).__name__}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"approve: reason must be a str or None, got {type(reason).__name__}")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise TypeError(f"approve: arguments must be a mapping or None, got {type(arguments).__name__}")
    if arguments is not None and not approved:
        raise ValueError("approve: edited arguments are for an approved call, not a denied one")


def not_pending_text(tool_call_id: str, pending: Collection[str]) -> str:
    """The `ValueError` of `approve` for a call that is not waiting."""
    return f"approve: no approval is pending for tool call {tool_call_id!r} (pending: {list(pending)})"


def decided_text(tool_call_id: str) -> str:
    """The `ValueError` of `approve` for a call decided (or ended) while the decision was on its way."""
    return f"approve: tool call {tool_call_id!r} was decided or ended meanwhile"


def already_decided_text(tool_call_id: str) -> str:
    """The `ValueError` of `approve` for a call whose decision is recorded but not yet taken up."""
    return f"approve: tool call {tool_call_id!r} was already decided"


def no_tool_text(tool_name: str) -> str:
    """The `ValueError` of `approve` for edited arguments of a call to a tool the agent does not have."""
    return f"approve: the agent has no tool {tool_name!r} to check the edited arguments"


def invalid_edit_text(tool_call_id: str, error: object) -> str:
    """The `ValueError` of `approve` for edited arguments that do not fit the tool's parameters."""
    return f"approve: the edited arguments of tool call {tool_call_id!r} are invalid: {error}"


def timeout_text(seconds: float) -> str:
    """The error result of a call not decided within `approval_timeout`."""
    return f"No decision on this tool call within {seconds:g} s"
