"""People in the loop: tool calls that wait for a person's approval.

An `Agent(needs_approval=[...])` (or one whose `before_tool_call` returns `NeedsApproval()`)
waits before such a call runs; `agent.pending_approvals` lists the calls waiting (oldest
first), `await agent.approve(tool_call_id, approved, reason, arguments=...)` answers one.
Denied, the model gets an error result with the reason (default "Tool execution was
blocked"), as a `before_tool_call` that blocks the call. With a session attached, the pending
calls are stored: another process can resume the session, answer them and go on. The same
`ApprovalRequest` records and `approve` answers work on `TemporalAgent` and `DBOSAgent`, whose
calls name the run first: `await agent.approve(run, tool_call_id, ...)`,
`await agent.pending_approvals(run)`.
"""

from ._request import ApprovalRequest as ApprovalRequest
from ._request import NeedsApproval as NeedsApproval

__all__ = ("ApprovalRequest", "NeedsApproval")
