"""Human approval of tool calls in a durable run: the workflow waits for a person's decision.

A `TemporalAgent` with `needs_approval` asks before it runs the calls it names: the workflow's
`before_tool_call` marks the call pending and waits (no worker is busy meanwhile, and the wait
survives a worker's death: it is rebuilt from the history) until the caller decides with the
`approve` update. Approved, the call runs; denied, it is blocked with the caller's reason, as a
`before_tool_call` that blocks it in one process (an error result the model sees). An abort
ends the wait (the call is answered "Operation aborted"); so does `approval_timeout` (the call
is blocked, saying so).

Calls are asked one at a time, in the order the model made them, as the loop prepares them
(the reference's `beforeToolCall` order): the second call of a batch is pending once the first
is decided.
"""

from __future__ import annotations

import asyncio  # noqa: TID251  (Temporal workflows run on asyncio only)
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow

from .._core._config import BeforeToolCallContext, BeforeToolCallResult
from .._types._abort import AbortSignal
from .._types._messages import ToolCall
from ..approvals._request import ApprovalRequest, check_decision

__all__ = ("ApprovalRequest", "PendingApprovals")


@dataclass(frozen=True, slots=True)
class _Decision:
    approved: bool
    reason: str | None


class PendingApprovals:
    """The workflow's side: the calls waiting, the decisions taken, and the `before_tool_call` hook.

    Its state is rebuilt by replay like the rest of the workflow: a call's wait starts again at
    the same point of the history, and a recorded decision is delivered at the same point.
    """

    def __init__(
        self, needs_approval: Callable[[ToolCall], bool], timeout: timedelta | None, clock: Callable[[], int]
    ) -> None:
        self._needs_approval = needs_approval
        self._timeout = timeout
        self._clock = clock
        self._pending: dict[str, ApprovalRequest] = {}
        self._decisions: dict[str, _Decision] = {}

    def listed(self) -> list[dict[str, Any]]:
        """The pending requests, oldest first, as JSON."""
        return [request.to_json() for request in self._pending.values()]

    def check(self, tool_call_id: object, approved: object, reason: object) -> None:
        """Reject a decision that cannot be taken (the `approve` update's validator)."""
        check_decision(tool_call_id, approved, reason)
        if tool_call_id not in self._pending:
            raise ValueError(
                f"approve: no approval is pending for tool call {tool_call_id!r} (pending: {list(self._pending)})"
            )
        if tool_call_id in self._decisions:
            raise ValueError(f"approve: tool call {tool_call_id!r} was already decided")

    def decide(self, tool_call_id: str, approved: bool, reason: str | None) -> None:
        self.check(tool_call_id, approved, reason)
        self._decisions[tool_call_id] = _Decision(approved, reason)

    async def before_tool_call(self, ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult | None:
        """Wait for the decision on a call that needs one; block the call if it is denied."""
        call = ctx.tool_call
        if not self._needs_approval(call):
            return None
        self._pending[call.id] = ApprovalRequest(
            tool_call_id=call.id, tool_name=call.name, arguments=call.arguments, requested_at=self._clock()
        )
        timed_out = False
        try:
            await workflow.wait_condition(lambda: call.id in self._decisions or signal.aborted, timeout=self._timeout)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            del self._pending[call.id]
            decision = self._decisions.pop(call.id, None)
        if timed_out:
            return BeforeToolCallResult(block=True, reason=f"No decision on this tool call within {self._timeout}")
        if decision is None or decision.approved:
            return None  # approved; or aborted, which the loop answers "Operation aborted"
        return BeforeToolCallResult(block=True, reason=decision.reason)
