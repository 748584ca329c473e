"""An Agent's approvals: the calls waiting for a person, their answers, and the hooks that wait.

A call that needs approval waits in `before_tool_call` (it sees the committed transcript) on an
`anyio.Event` of its own, until `approve` answers it, the run is aborted (the loop answers the
call "Operation aborted"), or `approval_timeout` passes (the call is blocked, saying so).
Approved with edited arguments, the call runs with them: `wrap_tool_call` hands the tool the
arguments validated when the person gave them.

A recorder (a session) is told every change of the calls waiting or answered, before the
caller of `approve` or the waiting call goes on, so that what is stored is never behind. Calls
loaded from a session wait with no run (parked): `approve` answers them, and the agent's next
run first runs them (`resolve_parked`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import anyio

from .._core._config import BeforeToolCallContext, BeforeToolCallResult, ToolInvocation, call
from .._core._util import exception_text
from .._tools._tool import AgentTool, OnUpdate, validate_tool_arguments, validated_arguments, within_timeout
from .._types._abort import AbortSignal
from .._types._constants import BLOCKED_TEXT
from .._types._messages import (
    AgentToolResult,
    TextContent,
    ToolCall,
    ToolResultMessage,
    error_result,
    now_ms,
)
from ._request import (
    ApprovalRequest,
    NeedsApproval,
    check_decision,
    decided_text,
    invalid_edit_text,
    needs_approval_of,
    not_pending_text,
    timeout_text,
)

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ("Approvals", "NeedsApprovalOption", "Recorder")

NeedsApprovalOption: TypeAlias = Collection[str] | Callable[[ToolCall], bool]
Recorder: TypeAlias = Callable[[list[dict[str, Any]]], Awaitable[None]]
"""Told the JSON records of the calls waiting or answered but not yet run, oldest first."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Decision:
    approved: bool
    reason: str | None
    arguments: Mapping[str, Any] | None  # the edited arguments, as JSON
    args: Any  # the edited arguments, validated

    def to_json(self) -> dict[str, Any]:
        arguments = None if self.arguments is None else dict(self.arguments)
        return {"approved": self.approved, "reason": self.reason, "arguments": arguments}


class _Pending:
    """One call waiting: its request, and its answer once given."""

    __slots__ = ("answered", "decision", "parked", "request", "tool")

    def __init__(self, request: ApprovalRequest, tool: AgentTool | None, parked: bool) -> None:
        self.request = request
        self.tool = tool
        self.parked = parked
        self.decision: _Decision | None = None
        self.answered = anyio.Event()

    def to_json(self) -> dict[str, Any]:
        decision = None if self.decision is None else self.decision.to_json()
        return {**self.request.to_json(), "decision": decision}


class Approvals:
    """The approvals of one Agent (`needs_approval`, `approval_timeout`, the calls waiting).

    An Agent's are `agent.approvals`. What a store of them uses: `recorder` (told the JSON
    records of the calls waiting or answered but not yet run, at every change, before anyone
    goes on), `restore(records, tools)` (loads stored records as parked calls, which the
    agent's next run first runs) and `parked` (whether such calls wait to run). People list
    and answer calls with `Agent.pending_approvals` and `Agent.approve`.
    """

    __slots__ = ("_edits", "_pending", "needs_approval", "on_request", "recorder", "timeout")

    def __init__(
        self,
        needs_approval: NeedsApprovalOption,
        timeout: float | timedelta | None,
        on_request: Callable[[ApprovalRequest], object] | None = None,
    ) -> None:
        if isinstance(needs_approval, str):
            raise TypeError(f"needs_approval must be a collection of tool names or a callable, got {needs_approval!r}")
        if not callable(needs_approval):
            names = frozenset(needs_approval)
            if not all(isinstance(name, str) for name in names):
                raise TypeError(f"needs_approval must hold tool names (str), got {sorted(map(repr, names))}")
            needs_approval = names
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf
        ):
            raise ValueError(
                f"approval_timeout must be a positive number of seconds, a timedelta or None, got {timeout!r}"
            )
        if on_request is not None and not callable(on_request):
            raise TypeError(f"on_approval_request must be callable or None, got {on_request!r}")
        self.on_request = on_request
        self.needs_approval = needs_approval
        self.timeout: float | None = timeout
        self.recorder: Recorder | None = None
        self._pending: dict[str, _Pending] = {}
        self._edits: dict[str, Any] = {}

    @property
    def asks(self) -> bool:
        """Whether a call may need approval without a `before_tool_call` asking for it."""
        return callable(self.needs_approval) or bool(self.needs_approval)

    def _named(self, tool_call: ToolCall) -> bool:
        return needs_approval_of(self.needs_approval, tool_call)

    # --- what a person sees and does ----------------------------------------------------------
    def listed(self) -> list[ApprovalRequest]:
        """The calls waiting for an answer, oldest first."""
        return [pending.request for pending in self._pending.values() if pending.decision is None]

    @property
    def parked(self) -> bool:
        """Whether calls loaded from a session wait (the next run must first run them)."""
        return any(pending.parked for pending in self._pending.values())

    async def approve(
        self, tool_call_id: str, approved: bool, reason: str | None, arguments: Mapping[str, Any] | None
    ) -> None:
        pending = self._checked(tool_call_id, approved, reason, arguments)
        args = None
        if arguments is not None:
            tool, edited = self._edited(pending, arguments)
            try:
                args = await validated_arguments(tool, edited)
            except ValueError as exc:
                raise self._invalid(pending, exc) from None
        if pending.decision is not None or self._pending.get(tool_call_id) is not pending:
            raise ValueError(decided_text(tool_call_id))
        pending.decision = _Decision(approved, reason, None if arguments is None else dict(arguments), args)
        try:
            await self.record()
        except BaseException:
            pending.decision = None  # not stored: the call still waits
            raise
        pending.answered.set()

    def decide(
        self, tool_call_id: str, approved: bool, reason: str | None, arguments: Mapping[str, Any] | None
    ) -> None:
        """`approve` where nothing can be awaited (a plain callback on the run's event loop).

        It raises what `approve` raises (edited arguments are validated in the calling thread)
        and takes the decision at once, so that a second one raises too. The waiting call goes
        on at its next turn and tells the recorder then, before it runs; a call loaded from a
        session, which no run waits on, stays stored as waiting until the next run runs it.
        """
        pending = self._checked(tool_call_id, approved, reason, arguments)
        args = None
        if arguments is not None:
            tool, edited = self._edited(pending, arguments)
            try:
                args = validate_tool_arguments(tool, edited)
            except ValueError as exc:
                raise self._invalid(pending, exc) from None
        pending.decision = _Decision(approved, reason, None if arguments is None else dict(arguments), args)
        pending.answered.set()

    def _checked(
        self, tool_call_id: str, approved: bool, reason: str | None, arguments: Mapping[str, Any] | None
    ) -> _Pending:
        check_decision(tool_call_id, approved, reason, arguments)
        pending = self._pending.get(tool_call_id)
        if pending is None:
            raise ValueError(not_pending_text(tool_call_id, self._pending))
        if pending.decision is not None:
            raise ValueError(f"approve: tool call {tool_call_id!r} was already decided")
        return pending

    @staticmethod
    def _edited(pending: _Pending, arguments: Mapping[str, Any]) -> tuple[AgentTool, ToolCall]:
        request = pending.request
        if pending.tool is None:
            raise ValueError(f"approve: the agent has no tool {request.tool_name!r} to check the edited arguments")
        return pending.tool, ToolCall(request.tool_call_id, request.tool_name, dict(arguments))

    @staticmethod
    def _invalid(pending: _Pending, exc: ValueError) -> ValueError:
        return ValueError(invalid_edit_text(pending.request.tool_call_id, exc))

    async def record(self) -> None:
        """Tell the recorder the calls waiting or answered now."""
        if self.recorder is not None:
            with anyio.CancelScope(shield=True):  # what is stored is never behind what was decided
                await self.recorder([pending.to_json() for pending in self._pending.values()])

    # --- the run's side -----------------------------------------------------------------------
    def before_tool_call(
        self, hook: Callable[..., Any] | None
    ) -> Callable[[BeforeToolCallContext, AbortSignal], Awaitable[BeforeToolCallResult | None]]:
        """The run's `before_tool_call`: `hook` first (it may block, or ask with `NeedsApproval`),
        then the wait for the calls that need approval."""

        async def before_tool_call(ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult | None:
            decision: BeforeToolCallResult | None = None if hook is None else await call(hook, ctx, signal)
            if isinstance(decision, NeedsApproval):
                pass
            elif decision is not None and (not isinstance(decision, BeforeToolCallResult) or decision.block):
                return decision  # blocked by the hook (or not a result: the loop says so)
            elif not self._named(ctx.tool_call):
                return decision
            return await self._wait(ctx, signal)

        return before_tool_call

    async def _wait(self, ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult | None:
        tool_call = ctx.tool_call
        tool = next((t for t in ctx.context.tools if t.name == tool_call.name), None)
        request = ApprovalRequest(
            tool_call_id=tool_call.id, tool_name=tool_call.name, arguments=tool_call.arguments, requested_at=now_ms()
        )
        pending = self._pending[tool_call.id] = _Pending(request, tool, parked=False)
        try:
            await self.record()
            with anyio.move_on_after(math.inf if self.timeout is None else self.timeout), signal.cancel_scope():
                if self.on_request is not None:
                    await call(self.on_request, request)
                await pending.answered.wait()
        except BaseException:
            # Cancelled (the caller of the run went away): the call stays stored as pending, so
            # that a process resuming the session can answer it.
            del self._pending[tool_call.id]
            raise
        del self._pending[tool_call.id]
        await self.record()
        decision = pending.decision
        if decision is None:
            if signal.aborted:
                return None  # the loop answers an aborted call "Operation aborted"
            assert self.timeout is not None  # nothing else ends the wait undecided
            return BeforeToolCallResult(block=True, reason=timeout_text(self.timeout))
        if not decision.approved:
            return BeforeToolCallResult(block=True, reason=decision.reason)
        if decision.arguments is not None:
            self._edits[tool_call.id] = decision.args
        return None

    def wrap_tool_call(
        self, wrap: Callable[..., Any] | None
    ) -> Callable[[ToolInvocation, Callable[[], Awaitable[object]]], Awaitable[object]]:
        """The run's `wrap_tool_call`: a call approved with edited arguments runs with them."""

        async def wrap_tool_call(invocation: ToolInvocation, proceed: Callable[[], Awaitable[object]]) -> object:
            edited = self._edits.pop(invocation.tool_call.id, _UNEDITED)
            if edited is not _UNEDITED:
                invocation = dataclasses.replace(invocation, args=edited)

                async def proceed() -> object:
                    tool = invocation.tool
                    on_update = cast("OnUpdate", invocation.on_update)
                    execution = tool.execute(invocation.tool_call.id, edited, invocation.signal, on_update)
                    return await within_timeout(tool, execution)

            if wrap is None:
                return await proceed()
            return await call(wrap, invocation, proceed)

        return wrap_tool_call

    # --- calls loaded from a session ----------------------------------------------------------
    def restore(self, records: Sequence[Mapping[str, Any]], tools: Sequence[AgentTool]) -> None:
        """Load the stored calls (waiting, or answered and not yet run) as parked calls."""
        for record in records:
            request = ApprovalRequest.from_json(record)
            tool = next((t for t in tools if t.name == request.tool_name), None)
            pending = _Pending(request, tool, parked=True)
            answer = record.get("decision")
            if answer is not None:
                arguments = answer.get("arguments")
                pending.decision = _Decision(answer["approved"], answer.get("reason"), arguments, None)
                pending.answered.set()
            self._pending[request.tool_call_id] = pending

    async def resolve_parked(self, tools: Sequence[AgentTool]) -> list[ToolResultMessage]:
        """Run the parked calls (all must be answered): their results, in the order they were asked.

        A denied call gets its error result, an approved one runs (with its edited arguments,
        validated again) within its timeout; it sees no abort signal of a run.
        """
        parked = [pending for pending in self._pending.values() if pending.parked]
        waiting = [pending.request.tool_call_id for pending in parked if pending.decision is None]
        if waiting:
            raise ValueError(f"tool calls wait for approval: answer them first with approve() ({waiting})")
        results = [await _run_parked(pending, tools) for pending in parked]
        for pending in parked:
            del self._pending[pending.request.tool_call_id]
        return results


_UNEDITED = object()


async def _run_parked(pending: _Pending, tools: Sequence[AgentTool]) -> ToolResultMessage:
    request, decision = pending.request, pending.decision
    assert decision is not None
    result, is_error = await _parked_outcome(request, decision, tools)
    return ToolResultMessage(
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        content=result.content,
        details=result.details,
        is_error=is_error,
    )


async def _parked_outcome(
    request: ApprovalRequest, decision: _Decision, tools: Sequence[AgentTool]
) -> tuple[AgentToolResult, bool]:
    if not decision.approved:
        return error_result(decision.reason or BLOCKED_TEXT), True
    tool = next((t for t in tools if t.name == request.tool_name), None)
    if tool is None:
        return error_result(f"Tool {request.tool_name} not found"), True
    arguments = request.arguments if decision.arguments is None else decision.arguments
    try:
        args = await validated_arguments(tool, ToolCall(request.tool_call_id, request.tool_name, dict(arguments)))
        value = await within_timeout(tool, tool.execute(request.tool_call_id, args, AbortSignal(), _no_update))
    except Exception as exc:
        return error_result(exception_text(exc)), True
    if isinstance(value, AgentToolResult):
        return value, False
    if isinstance(value, str):
        return AgentToolResult(content=(TextContent(value),)), False
    return error_result(
        f"tool {tool.name!r} returned {type(value).__name__}, expected an AgentToolResult or a str"
    ), True


async def _no_update(result: AgentToolResult) -> None:
    pass
