"""A caller's side of a durable run's approvals: list the calls waiting, and decide one.

`DBOSAgent.pending_approvals` and `DBOSAgent.approve` call these; a process that does not define
the agent (a `DBOSClient`) calls them directly.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import anyio
from dbos import DBOS, DBOSClient

from .._durable import require_asyncio
from ..approvals._request import ApprovalRequest, check_decision, decided_text, not_pending_text

__all__ = (
    "ANSWER_EVENT_PREFIX",
    "APPROVALS_EVENT",
    "APPROVAL_TOPIC",
    "ASYNCIO_ONLY",
    "approve",
    "check_call",
    "pending_approvals",
)

APPROVAL_TOPIC = "agentloop.approval"
"""The DBOS topic of decisions (`{"toolCallId", "approved", "reason", "arguments", "nonce"}`), and
of aborts (`{"kind": "abort"}`)."""
APPROVALS_EVENT = "agentloop.approvals"
"""The DBOS event that lists a run's calls waiting for a decision (`ApprovalRequest` JSON, oldest first)."""
ANSWER_EVENT_PREFIX = "agentloop.approval."
"""The prefix of the DBOS event (`ANSWER_EVENT_PREFIX + nonce`) in which a run answers a decision:
`{"error": None}` taken, or `{"error": text}` refused."""


ASYNCIO_ONLY = "DBOS runs async workflows"
"""Why every function of `agentloop.dbos` needs asyncio (`require_asyncio`)."""

_ACTIVE = frozenset({"PENDING", "ENQUEUED", "DELAYED"})
"""The statuses of a workflow that has not ended."""
_ANSWER_POLL = 1.0
"""Seconds `approve` waits for the run's answer before it looks whether the call still waits."""
_LIST_POLL = 0.05
"""Seconds between two looks of `approve` at the run's list once its decision is taken."""


def check_call(workflow_id: str, client: DBOSClient | None, name: str = "workflow_id") -> None:
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValueError(f"{name} must be a non-empty str (the run's workflow id), got {workflow_id!r}")
    if client is not None and not isinstance(client, DBOSClient):
        raise TypeError(f"client must be a dbos.DBOSClient or None, got {type(client).__name__}")


async def _listed(workflow_id: str, client: DBOSClient | None) -> list[dict[str, Any]]:
    """The run's calls waiting for a decision, as JSON (none once the run has ended, or if there is no such run)."""
    reader = client if client is not None else DBOS
    found = await reader.list_workflows_async(workflow_ids=[workflow_id], load_input=False, load_output=False)
    if not found or found[0].status not in _ACTIVE:
        return []
    listed = await reader.get_event_async(workflow_id, APPROVALS_EVENT, timeout_seconds=0)
    return list(listed) if isinstance(listed, list) else []


async def pending_approvals(workflow_id: str, *, client: DBOSClient | None = None) -> list[ApprovalRequest]:
    """The tool calls of the run (`start_agent`'s workflow id) waiting for a person's decision,
    oldest first.

    A call is listed from its `tool_execution_start` event (a reader who sees the event finds the
    call listed) until it is decided or ends without waiting; with parallel tool execution the
    calls of a batch are listed together, and may be decided in any order.
    """
    require_asyncio("agentloop.dbos.pending_approvals", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    return [ApprovalRequest.from_json(data) for data in await _listed(workflow_id, client)]


async def approve(
    workflow_id: str,
    tool_call_id: str,
    approved: bool = True,
    reason: str | None = None,
    *,
    arguments: Mapping[str, Any] | None = None,
    client: DBOSClient | None = None,
) -> None:
    """Decide a pending tool call of the run (`start_agent`'s workflow id), as `Agent.approve` does.

    Approved, the call runs, with `arguments` (JSON) instead of the model's if given; denied
    (`approved=False`), the model gets an error result with `reason` (default "Tool execution
    was blocked"), as a `before_tool_call` that blocks the call in one process; its tool does
    not run.

    Returns once the run has taken the decision (a process must be running it). Raises
    ValueError if that call is not pending (unknown, already decided, or the run is over) or if
    the edited arguments do not fit the tool's parameters (the run checks them, and the call
    keeps waiting).
    """
    require_asyncio("agentloop.dbos.approve", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    check_decision(tool_call_id, approved, reason, arguments)

    def waiting(listed: list[dict[str, Any]]) -> bool:
        return any(data.get("toolCallId") == tool_call_id for data in listed)

    listed = await _listed(workflow_id, client)
    if not waiting(listed):
        raise ValueError(not_pending_text(tool_call_id, [str(data.get("toolCallId")) for data in listed]))
    nonce = uuid.uuid4().hex
    decision = {
        "toolCallId": tool_call_id,
        "approved": approved,
        "reason": reason,
        "arguments": None if arguments is None else dict(arguments),
        "nonce": nonce,
    }
    peer = client if client is not None else DBOS
    await peer.send_async(workflow_id, decision, APPROVAL_TOPIC)
    while True:
        answer = await peer.get_event_async(workflow_id, ANSWER_EVENT_PREFIX + nonce, timeout_seconds=_ANSWER_POLL)
        if answer is None and not waiting(await _listed(workflow_id, client)):
            # The run answers before it moves on: no answer now means another decision was
            # taken first, or the run ended.
            answer = await peer.get_event_async(workflow_id, ANSWER_EVENT_PREFIX + nonce, timeout_seconds=0)
            if answer is None:
                raise ValueError(decided_text(tool_call_id))
        if answer is not None:
            error = answer.get("error") if isinstance(answer, dict) else None
            if error is not None:
                raise ValueError(error)
            # Taken: the run takes the call off its list next; return once it has, so that
            # what `pending_approvals` says now follows from this decision.
            while waiting(await _listed(workflow_id, client)):  # noqa: ASYNC110 (a DBOS event tells no change)
                await anyio.sleep(_LIST_POLL)
            return
