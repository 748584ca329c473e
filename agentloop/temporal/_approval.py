"""Human approval of tool calls in a durable run: the workflow waits for a person's decision.

A `TemporalAgent` with `needs_approval` asks before it runs the calls it names: the workflow's
`before_tool_call` marks the call pending and waits (no worker is busy meanwhile, and the wait
survives a worker's death: it is rebuilt from the history) until the caller decides with the
`approve` update. Approved, the call runs (with the edited arguments, if the decision has
them); denied, it is blocked with the caller's reason, as a `before_tool_call` that blocks it in
one process (an error result the model sees). An abort ends the wait (the call is answered
"Operation aborted"); so does `approval_timeout` (the call is blocked, saying so).

The update's validator checks a decision before it is accepted: a call that is not waiting, or
edited arguments that do not fit the tool's parameters, are refused to the caller and never
enter the history; the call keeps waiting. The handler records what the validator accepted and
checks nothing again: a replay runs handlers but not validators, and takes the recorded decisions.

Calls are asked one at a time, in the order the model made them, as the loop prepares them
(the reference's `beforeToolCall` order): the second call of a batch is pending once the first
is decided.
"""

from __future__ import annotations

import asyncio  # noqa: TID251  (Temporal workflows run on asyncio only)
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from temporalio import workflow

from .._core._config import BeforeToolCallContext, BeforeToolCallResult
from .._tools._tool import AgentTool, validate_tool_arguments
from .._types._abort import AbortSignal
from .._types._messages import ToolCall
from ..approvals._request import (
    ApprovalRequest,
    already_decided_text,
    check_decision,
    invalid_edit_text,
    no_tool_text,
    not_pending_text,
    timeout_text,
)

__all__ = ("ApprovalRequest", "PendingApprovals")


@dataclass(frozen=True, slots=True)
class _Decision:
    approved: bool
    reason: str | None
    arguments: dict[str, Any] | None  # the edited arguments, as JSON


class PendingApprovals:
    """The workflow's side: the calls waiting, the decisions taken, and the `before_tool_call` hook.

    Its state is rebuilt by replay like the rest of the workflow: a call's wait starts again at
    the same point of the history, and a recorded decision is delivered at the same point.
    """

    def __init__(
        self,
        needs_approval: Callable[[ToolCall], bool],
        timeout: timedelta | None,
        clock: Callable[[], int],
        tools: Sequence[AgentTool],
    ) -> None:
        self._needs_approval = needs_approval
        self._timeout = timeout
        self._clock = clock
        self._tools = {tool.name: tool for tool in tools}
        self._pending: dict[str, ApprovalRequest] = {}
        self._decisions: dict[str, _Decision] = {}
        self._edits: dict[str, dict[str, Any]] = {}

    def listed(self) -> list[dict[str, Any]]:
        """The requests waiting for a decision, oldest first, as JSON."""
        return [request.to_json() for key, request in self._pending.items() if key not in self._decisions]

    def check(self, tool_call_id: object, approved: object, reason: object, arguments: object = None) -> None:
        """Reject a decision that cannot be taken (the `approve` update's validator)."""
        check_decision(tool_call_id, approved, reason, arguments)
        assert isinstance(tool_call_id, str)
        request = self._pending.get(tool_call_id)
        if request is None:
            raise ValueError(not_pending_text(tool_call_id, self._pending))
        if tool_call_id in self._decisions:
            raise ValueError(already_decided_text(tool_call_id))
        if arguments is not None:
            assert isinstance(arguments, Mapping)
            tool = self._tools.get(request.tool_name)
            if tool is None:
                raise ValueError(no_tool_text(request.tool_name))
            try:
                validate_tool_arguments(tool, ToolCall(tool_call_id, request.tool_name, dict(arguments)))
            except ValueError as exc:
                raise ValueError(invalid_edit_text(tool_call_id, exc)) from None

    def decide(
        self, tool_call_id: str, approved: bool, reason: str | None, arguments: Mapping[str, Any] | None = None
    ) -> None:
        """Record a decision `check` accepted (the `approve` update's handler).

        A replay runs the handler again but not the validator: the handler only records, so the
        history's decisions are taken again whatever a check would answer now (a validation has
        a CPU budget, which a loaded worker could exceed).
        """
        self._decisions[tool_call_id] = _Decision(approved, reason, None if arguments is None else dict(arguments))

    def to_run(self, tool_call: ToolCall) -> ToolCall:
        """The call as its tool runs it: with the arguments a person edited, if any (the
        transcript keeps the model's)."""
        edited = self._edits.pop(tool_call.id, None)
        return tool_call if edited is None else replace(tool_call, arguments=edited)

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
            assert self._timeout is not None
            return BeforeToolCallResult(block=True, reason=timeout_text(self._timeout.total_seconds()))
        if decision is None:
            return None  # aborted, which the loop answers "Operation aborted"
        if not decision.approved:
            return BeforeToolCallResult(block=True, reason=decision.reason)
        if decision.arguments is not None:
            self._edits[call.id] = decision.arguments
        return None
