"""A caller's side of a durable run's approvals: list the calls waiting, and decide one.

`TemporalAgent.pending_approvals` and `TemporalAgent.approve` call these; a process that holds
a run's handle but not the agent's definition calls them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from .._durable import require_asyncio
from ..approvals._request import ApprovalRequest, check_decision

__all__ = ("ASYNCIO_ONLY", "approve", "pending_approvals")

ASYNCIO_ONLY = "Temporal's Python SDK runs"
"""Why every function of `agentloop.temporal` needs asyncio (`require_asyncio`)."""


async def pending_approvals(run: WorkflowHandle[Any, Any]) -> list[ApprovalRequest]:
    """The tool calls of the run (`start_agent`'s handle) waiting for a person's decision, oldest
    first (a query).

    A call is pending from its `tool_execution_start` event until it is decided: ask after
    seeing that event for a tool the agent's `needs_approval` names.
    """
    require_asyncio("agentloop.temporal.pending_approvals", ASYNCIO_ONLY)
    listed = await run.query("approvals", result_type=list)
    return [ApprovalRequest.from_json(data) for data in listed]


async def approve(
    run: WorkflowHandle[Any, Any],
    tool_call_id: str,
    approved: bool = True,
    reason: str | None = None,
    *,
    arguments: Mapping[str, Any] | None = None,
) -> None:
    """Decide a pending tool call of the run (`start_agent`'s handle), as `Agent.approve` does.

    Approved, the call runs, with `arguments` (JSON) instead of the model's if given; denied
    (`approved=False`), the model gets an error result with `reason` (default "Tool execution
    was blocked"), as a `before_tool_call` that blocks the call in one process.

    Returns once the workflow has recorded the decision (an update: a worker must be running).
    Raises ValueError if that call is not pending (unknown, already decided, or the run is over)
    or if the edited arguments do not fit the tool's parameters: the workflow refuses such a
    decision before it is recorded, and the call keeps waiting.
    """
    require_asyncio("agentloop.temporal.approve", ASYNCIO_ONLY)
    check_decision(tool_call_id, approved, reason, arguments)
    edited = None if arguments is None else dict(arguments)
    try:
        await run.execute_update("approve", args=[tool_call_id, approved, reason, edited])
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise ValueError(getattr(cause, "message", None) or str(cause)) from exc
    except RPCError as exc:
        raise ValueError(f"approve: workflow {run.id!r} takes no decisions: {exc.message}") from exc
