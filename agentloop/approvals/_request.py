"""The records of approvals: a pending request, and the answer a `before_tool_call` gives to ask."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core._config import BeforeToolCallResult

__all__ = ("NEEDS_APPROVAL_TEXT", "ApprovalRequest", "NeedsApproval")

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
