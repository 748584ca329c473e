"""The records of approvals: a pending request, and the answer a `before_tool_call` gives to ask."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core._config import BeforeToolCallResult
from .._types._messages import ToolCall

__all__ = ("NEEDS_APPROVAL_TEXT", "ApprovalRequest", "NeedsApproval", "check_decision", "needs_approval_of")

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


def check_decision(tool_call_id: object, approved: object, reason: object) -> None:
    """`TypeError` unless a decision is a call id (str), a bool and a reason (str or None): the
    arguments of every `approve`."""
    if not isinstance(tool_call_id, str):
        raise TypeError(f"approve: tool_call_id must be a str, got {type(tool_call_id).__name__}")
    if type(approved) is not bool:
        raise TypeError(f"approve: approved must be a bool, got {type(approved).__name__}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"approve: reason must be a str or None, got {type(reason).__name__}")
