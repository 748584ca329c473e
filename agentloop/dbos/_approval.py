"""Human approval of tool calls in a DBOS run: the run's side (`RunApprovals`).

A call of a tool named in `needs_approval` is listed in the run's `APPROVALS_EVENT` (a DBOS
event: `[ApprovalRequest JSON]`, `[]` when none waits) as its `tool_execution_start` is emitted,
before any reader can see that event. With parallel tool execution the calls of a batch are
listed together (the loop starts and prepares them all before any runs); with sequential
execution each is listed when its turn comes. A call that ends without waiting (its arguments
do not fit the tool, an abort answered it) leaves the list. When its turn comes a call waits for
a decision on `APPROVAL_TOPIC` (recorded `recv`s); a decision for another listed call is taken
meanwhile and kept for that call's turn.

Each decision carries a nonce, and the run answers it in the event `ANSWER_EVENT_PREFIX + nonce`
(`{"error": None}` taken, then the call leaves the list; or the text of the `ValueError` its
sender raises: a call not listed, edited arguments that do not fit the tool), so the sender
learns the outcome; a refused decision leaves the call waiting. Edited arguments are checked in
the workflow, where the tool is known, so a sender needs no agent definition: in a
`<agent>.check` step, since a validation has a CPU budget and a replay must read the outcome
rather than decide again. The tool's step validates them again before the tool runs with them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, cast

from dbos import DBOS

from .._core._config import ToolInvocation
from .._tools._tool import AgentTool, OnUpdate, validated_arguments, within_timeout
from .._types._abort import AbortSignal
from .._types._constants import BLOCKED_TEXT, TOOL_ABORTED_TEXT
from .._types._messages import ToolCall, now_ms
from ..approvals._request import ApprovalRequest, invalid_edit_text, not_pending_text, timeout_text
from ._decisions import ANSWER_EVENT_PREFIX, APPROVAL_TOPIC, APPROVALS_EVENT

__all__ = ("RunApprovals", "Taken", "with_arguments")

_APPROVAL_WAIT = 7 * 24 * 3600.0
"""The longest one `recv` of a decision waits (seconds) without `approval_timeout`; then another."""


@dataclass(frozen=True, slots=True)
class Taken:
    """A decision the run took: the call's error result if it does not run (denied, aborted, not
    decided in time), else the edited arguments it runs with, as JSON (None: the model's)."""

    blocked: str | None = None
    arguments: dict[str, Any] | None = None


class RunApprovals:
    """The calls of one run listed for a decision, the decisions taken before their call's turn,
    and the wait for a decision (DBOS operations of the workflow, at points that do not depend
    on timing: a call waits alone, its tool being a barrier)."""

    def __init__(
        self,
        agent_name: str,
        tools: Sequence[AgentTool],
        timeout: timedelta | None,
        signal: AbortSignal,
        clock: Callable[[], int],
    ) -> None:
        self._agent_name = agent_name
        self._tools = {tool.name: tool for tool in tools}
        self._timeout = timeout
        self._signal = signal
        self._clock = clock
        self.listed: dict[str, ApprovalRequest] = {}  # the calls waiting for a decision (APPROVALS_EVENT)
        self.decided: dict[str, Taken] = {}  # decisions taken before their call's turn

    async def started(self, tool_call_id: str, tool_name: str, arguments: dict[str, Any]) -> None:
        """List a call as its `tool_execution_start` is emitted."""
        self.listed[tool_call_id] = ApprovalRequest(
            tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments, requested_at=self._clock()
        )
        await self._relist()

    async def ended(self, tool_call_id: str) -> None:
        """As a call's `tool_execution_end` is emitted: if it is still listed, it ended without
        waiting, and no decision on it can be taken any more."""
        if tool_call_id in self.listed:
            del self.listed[tool_call_id]
            await self._relist()

    async def unlist(self) -> None:
        """Forget the calls still listed, and the decisions kept for them (the batch is over)."""
        self.decided.clear()
        if self.listed:
            self.listed.clear()
            await self._relist()

    async def decision(self, call_id: str, publish: Callable[[], Awaitable[None]]) -> Taken:
        """The decision on this call: taken already, or waited for (`publish`, a step, first
        lets the caller see the events so far)."""
        taken = self.decided.pop(call_id, None)
        if taken is not None:
            return taken
        await DBOS.run_step_async({"name": f"{self._agent_name}.publish"}, publish)  # the caller sees the call
        return await self._wait_for(call_id)

    async def _relist(self) -> None:
        """Write the calls waiting for a decision to `APPROVALS_EVENT` (a recorded operation)."""
        await DBOS.set_event_async(APPROVALS_EVENT, [request.to_json() for request in self.listed.values()])

    async def _wait_for(self, call_id: str) -> Taken:
        """Receive decisions (recorded `recv`s) until this call's is taken; answer each. A
        decision for another listed call of the batch is taken too, and kept for its turn.

        An abort sent meanwhile denies the call and aborts the run (the loop answers the other
        calls). A call not decided within `approval_timeout` of its listing is blocked: the time
        left is counted from that one deadline, whatever arrives meanwhile.
        """
        timeout = self._timeout
        request = self.listed[call_id]
        deadline = None if timeout is None else request.requested_at + int(timeout.total_seconds() * 1000)
        now = self._clock()
        while True:
            wait = _APPROVAL_WAIT if deadline is None else max(deadline - now, 0) / 1000
            data = await DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=wait)
            if data is None:
                if timeout is None:
                    continue
                del self.listed[call_id]
                await self._relist()
                return Taken(blocked=timeout_text(timeout.total_seconds()))
            if isinstance(data, dict):
                if data.get("kind") == "abort":
                    self._signal.abort()
                    await self.unlist()
                    return Taken(blocked=TOOL_ABORTED_TEXT)
                await self._answer(data)
                if call_id in self.decided:
                    return self.decided.pop(call_id)
            if deadline is not None:
                now = await self._recorded_now()

    async def _answer(self, data: dict[str, Any]) -> None:
        """Take or refuse a decision received, and tell its sender (`ANSWER_EVENT_PREFIX + nonce`)."""
        decided = data.get("toolCallId")
        listed = self.listed.get(decided) if isinstance(decided, str) else None
        taken = None
        if listed is None:
            error: str | None = not_pending_text(str(decided), self.listed)
        else:
            error, taken = await self._checked(data, listed)
        nonce = data.get("nonce")
        if isinstance(nonce, str):
            await DBOS.set_event_async(ANSWER_EVENT_PREFIX + nonce, {"error": error})
        if listed is not None and taken is not None:  # its sender returns once the list says so
            self.decided[listed.tool_call_id] = taken
            del self.listed[listed.tool_call_id]
            await self._relist()

    async def _recorded_now(self) -> int:
        """The time, recorded (the `<agent>.clock` step): how long is left of a wait with a deadline."""
        return await DBOS.run_step_async({"name": f"{self._agent_name}.clock"}, now_ms)

    async def _checked(self, data: dict[str, Any], request: ApprovalRequest) -> tuple[str | None, Taken | None]:
        """A decision received for the listed call `request`: `(None, taken)` if the run takes it,
        `(error, None)` if it is refused (the text of the `ValueError` its sender raises)."""
        if data.get("approved") is not True:
            return None, Taken(blocked=data.get("reason") or BLOCKED_TEXT)
        arguments = data.get("arguments")
        if arguments is None:
            return None, Taken()
        call_id = request.tool_call_id
        if not isinstance(arguments, dict):
            return invalid_edit_text(call_id, "they are not a JSON object"), None
        tool = self._tools[request.tool_name]  # needs_approval names tools
        edited = ToolCall(call_id, request.tool_name, arguments)
        out = await DBOS.run_step_async({"name": f"{self._agent_name}.check"}, _edit_check, tool, edited)
        error = out["error"]
        return (error, None) if error is not None else (None, Taken(arguments=arguments))


async def _edit_check(tool: AgentTool, tool_call: ToolCall) -> dict[str, str | None]:
    """The check step of edited arguments: `{"error": None}` if they fit the tool's parameters,
    else `{"error": text}` (the `ValueError` its sender raises)."""
    try:
        await validated_arguments(tool, tool_call)
    except ValueError as exc:
        return {"error": invalid_edit_text(tool_call.id, exc)}
    return {"error": None}


def with_arguments(invocation: ToolInvocation, arguments: dict[str, Any]) -> Callable[[], Awaitable[object]]:
    """`proceed` for a call approved with edited arguments (JSON): in the tool's step, the
    arguments validated, then the tool run with them, within its timeout."""

    async def proceed() -> object:
        tool = invocation.tool
        edited = replace(invocation.tool_call, arguments=arguments)
        args = await validated_arguments(tool, edited)
        execution = tool.execute(edited.id, args, invocation.signal, cast("OnUpdate", invocation.on_update))
        return await within_timeout(tool, execution)

    return proceed
