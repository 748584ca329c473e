"""`AgentWorkflow`: agentloop's loop as a Temporal workflow.

The loop runs in the workflow, unchanged (`run_agent_loop`), with the extension points set:
the stream function runs the `<agent>.model` activity and yields `start` and `done` for the
message it returns; `wrap_tool_call` runs each tool as its `<agent>.tool.<name>` activity;
Temporal's own exceptions propagate; the clock is the workflow's.

What a caller sees: every event, in an envelope whose `seq` counts from 0 for the whole run
(across continue-as-new), through the `events(after_seq, part)` update, a long poll, answered in
pages that fit a payload (`_PAGE_BYTES`; an envelope larger than that in parts); a workflow about
to end or continue as new waits while its caller is still reading (`_let_the_caller_read`). Steering,
follow-up and abort are signals; an abort during a model call waits (at most `_ABORT_WAIT`) for
the call's answer, the message so far, which the run keeps as a run in one process does
(`AgentWorkflow.abort`, `model_stream`).

Sizes: without a context store a value over `PAYLOAD_LIMIT` cannot travel, so the workflow
checks a model call's context, what it carries into a new history (the transcript and every
message the run added: the run's result) and the run's result before they leave it, and fails
the run (`PayloadTooLarge`) rather than leave a workflow task failing for ever. Compaction keeps
the model's context small, not the run's messages: without a store, those bound a run. With one,
Temporal's external storage keeps them in the store.

Bounded history: after `turns_per_history` turns (or when Temporal suggests it) the workflow
stops the loop after the turn, and continues as new with the transcript, the queued messages
and the event counters; the caller sees one run. With the agent's `context_store`, a model call
carries the messages added since the previous call and the key of the context it ended with
(`SentContext`), not the whole transcript (see `_context`).

Compaction: with the agent's `compaction`, the loop's `transform_context` and stream function are
a `DurableCompactor`'s (the rules of `agentloop.context`); its summary is the `<agent>.summary`
activity. A new history starts with the transcript from the first kept message on, and the
compaction's state in `CarriedState`: the model sees the same context. (`CarriedState` still
carries every message the run added, which the run returns.)

Human approval: with the agent's `needs_approval`, `before_tool_call` waits for the `approve`
update (see `_approval`; its validator refuses a decision the run cannot take); the `approvals`
query lists the calls waiting; a call approved with edited arguments runs its activity with them.
"""

from __future__ import annotations

import asyncio  # noqa: TID251  (Temporal workflows run on asyncio only)
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TemporalError

from .._core._config import AgentContext, AgentLoopConfig, ToolInvocation, TurnContext
from .._core._loop import run_agent_loop, run_agent_loop_continue
from .._durable import workflow_options
from .._tools._tool import validation_in_line
from .._types._abort import AbortSignal
from .._types._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    TurnStart,
)
from .._types._messages import (
    AgentMessage,
    AgentToolResult,
)
from .._types._stream_fn import StreamFn
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._envelope import EventEnvelope, envelope_to_json
from .._wire._json_text import encode_json
from ..context._durable import DurableCompactor
from ._agent import TemporalAgent
from ._approval import PendingApprovals
from ._calls import InFlight, SentContext, failure_text, finished, model_stream, start_call, summary_call, workflow_ms
from ._payload import AgentRun, CarriedState, PayloadTooLarge, UndecodableRun, check_fits

__all__ = ("AgentWorkflow", "register_agent", "registered_agent")

_AGENTS: dict[str, TemporalAgent] = {}
_UNDECODABLE = "AgentLoopUndecodableRun"
"""The type of the (non-retryable) error that fails a run whose input this worker cannot decode."""
_DRAIN_TIMEOUT = timedelta(seconds=10)
"""How long a workflow about to end or continue as new waits for an attached caller that asks for
no events (it went away) before it stops waiting for it to read them (`_let_the_caller_read`)."""
_ABORT_WAIT = timedelta(seconds=10)
"""How long an abort waits for the model call in flight to answer with what it has said so far."""
_PAGE_BYTES = 192 * 1024
"""The most envelope JSON one answer to `events` carries: under Temporal's 2 MiB payload limit,
and under the 256 KiB above which a store would keep it (so a caller needs no store to read)."""


def _answer_size(data: Any) -> int:
    """The bytes of `data` in an answer to `events`: Temporal's JSON (non-ASCII as `\\u` escapes)."""
    return len(json.dumps(data, separators=(",", ":")))


def _part_ends(text: str) -> list[int]:
    """Where the parts of an envelope's JSON `text` end: each part as a JSON string (as an answer
    carries it) is at most `_PAGE_BYTES`."""
    ends: list[int] = []
    begin = 0
    while begin < len(text):
        end = min(begin + _PAGE_BYTES, len(text))  # a character takes a byte or more
        while (size := _answer_size(text[begin:end])) > _PAGE_BYTES:
            end = begin + max((end - begin) * _PAGE_BYTES // size, 1)
        ends.append(end)
        begin = end
    return ends


def register_agent(agent: TemporalAgent) -> None:
    """Make `agent` findable by name in this process's workflows (the worker does it)."""
    if not isinstance(agent, TemporalAgent):
        raise TypeError(f"expected a TemporalAgent, got {type(agent).__name__}")
    known = _AGENTS.get(agent.name)
    if known is not None and known is not agent:
        raise ValueError(f"another TemporalAgent is already registered as {agent.name!r} in this process")
    _AGENTS[agent.name] = agent


def registered_agent(name: str) -> TemporalAgent:
    agent = _AGENTS.get(name)
    if agent is None:
        raise LookupError(
            f"no TemporalAgent named {name!r} on this worker (registered: {sorted(_AGENTS)}); "
            "pass it to agentloop.temporal.worker(..., agents=[...])"
        )
    return agent


class _AgentNotHeld(Exception):
    """The workflow names an agent this worker does not hold: its workflow task fails, and
    Temporal gives it to a worker again (as for a workflow type a worker has not registered),
    until one that holds the agent runs it: a rolling deploy loses no run."""


class _ToolFailed(Exception):
    """A tool activity's error, as the model sees it (a tool error result, not an engine error)."""


@workflow.defn(name="agentloop.AgentWorkflow")
class AgentWorkflow:
    """Runs one agent run durably; returns the messages the run added (prompts included)."""

    def __init__(self) -> None:
        self._log: list[dict[str, Any]] = []  # this history's envelopes, JSON
        self._sizes: list[int] = []  # the size of each one's JSON text
        self._first_seq = 0
        self._next_seq = 0
        self._turn = 0
        self._run_id = ""
        self._steering: list[AgentMessage] = []
        self._follow_ups: list[AgentMessage] = []
        self._signal = AbortSignal()
        self._finished = False
        self._continuing = False
        self._read_up_to = -1  # the caller attached through `events` has seen the events up to it
        self._given_up_to = -1  # `events` has answered with every event up to it
        self._pages_given = 0  # the answers of `events`
        self._turns_here = 0
        self._history_full = False
        self._held_end: AgentEnd | None = None
        self._carried: list[AgentMessage] = []
        self._terminating: dict[str, bool] = {}
        self._terminated = False  # every call of the last turn asked to end the run
        self._turns_left: int | None = None  # of `max_turns`, in this history
        self._approvals: PendingApprovals | None = None
        self._sent = SentContext()
        self._model_call = InFlight()
        self._summary_call = InFlight()

    # --- the run -------------------------------------------------------------------------------

    @workflow.run
    async def run(self, run: AgentRun) -> list[AgentMessage]:
        received: object = run
        if isinstance(received, UndecodableRun):
            raise ApplicationError(
                f"this worker cannot decode the run's input ({received.reason}): start it with "
                "agentloop.temporal.start_agent, from a client using agentloop's data_converter",
                type=_UNDECODABLE,
                non_retryable=True,
            )
        try:
            agent = registered_agent(run.agent)
        except LookupError as exc:
            raise _AgentNotHeld(f"{exc}; the run waits for a worker that holds it") from None
        self._agent = agent
        if agent.asks_approval:
            self._approvals = PendingApprovals(
                agent.call_needs_approval, agent.approval_timeout, workflow_ms, agent.tools
            )
        first = run.state is None  # the run's first history
        state = run.state or CarriedState(run_id=workflow.info().workflow_id)
        self._run_id = state.run_id
        self._first_seq = self._next_seq = state.seq
        self._turn = state.turn
        self._carried = list(state.run_messages)
        self._steering = [*state.steering, *self._steering]
        self._follow_ups = [*state.follow_ups, *self._follow_ups]
        turns_before = state.turns
        if state.aborted:
            self._signal.abort()
        compactor = None
        if agent.compaction is not None:
            compactor = DurableCompactor(
                agent.compaction,
                model=agent.model,
                system_prompt=agent.system_prompt,
                tools=agent.tools,
                summarizer=summary_call(agent, self._summary_call),
                state=state.compaction,
            )
        self._compactor = compactor
        if state.context_key is not None:  # the context the store holds, from the last history
            sent = run.messages if compactor is None else compactor.context(run.messages)
            self._sent = SentContext.carried(state.context_key, state.context_length, sent)
        max_turns = None if agent.options.max_turns is None else max(agent.options.max_turns - turns_before, 1)
        self._turns_left = max_turns  # None: no limit
        config = AgentLoopConfig(
            model=agent.model,
            get_steering_messages=self._take_steering,
            get_follow_up_messages=self._take_follow_ups,
            should_stop_after_turn=self._should_stop,
            reasoning=agent.reasoning,
            **(workflow_options(agent.options) | {"max_turns": max_turns}),
            before_tool_call=None if self._approvals is None else self._approvals.before_tool_call,
            transform_context=None if compactor is None else compactor.transform_context,
            wrap_tool_call=self._call_tool,
            propagate=(TemporalError,),
            clock=workflow_ms,
        )
        context = AgentContext(system_prompt=agent.system_prompt, messages=tuple(run.messages), tools=agent.tools)
        stream: StreamFn = model_stream(agent, self._sent, self._model_call)
        if compactor is not None:
            stream = compactor.stream(stream)
        try:
            with validation_in_line():  # a workflow runs no threads
                if first and run.prompts:
                    new = await run_agent_loop(run.prompts, context, config, self._emit, self._signal, stream)
                elif not first and run.messages and run.messages[-1].role == "assistant":
                    prompts = self._take_steering() or self._take_follow_ups()
                    new = await run_agent_loop(prompts, context, config, self._emit, self._signal, stream)
                else:
                    new = await run_agent_loop_continue(context, config, self._emit, self._signal, stream)
            run_messages = [*self._carried, *new]
            transcript = [*run.messages, *new]
            if self._history_full and self._goes_on(transcript):
                await self._continue_as_new(agent, transcript, run_messages, turns_before)
        except PayloadTooLarge:  # the run fails: its caller first gets the events it has not read
            self._finished = True
            await self._let_the_caller_read(lambda: self._given_up_to >= self._next_seq - 1)
            raise
        if self._held_end is not None:
            self._record(self._held_end)
        self._finished = True
        await self._let_the_caller_read(lambda: self._given_up_to >= self._next_seq - 1)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return run_messages

    async def _let_the_caller_read(self, done: Callable[[], bool]) -> None:
        """With a caller attached (`events` answered it), wait until `done()` while it keeps asking.

        Once the workflow has closed, each page of its events is a query, which a worker answers
        by replaying the whole history: a caller that is still reading a run's large events reads
        them here instead, from the worker's memory. A caller that asks for nothing for
        `_DRAIN_TIMEOUT` is taken to have gone away.
        """
        if self._pages_given == 0:
            return
        while not done():
            given = self._pages_given
            with contextlib.suppress(asyncio.TimeoutError):
                await workflow.wait_condition(done, timeout=_DRAIN_TIMEOUT)
            if self._pages_given == given:
                return

    def _goes_on(self, transcript: Sequence[AgentMessage]) -> bool:
        """Whether the loop, stopped at the history limit, would have gone on."""
        if self._signal.aborted or self._turns_left == 0:
            return False
        last = transcript[-1]
        if last.role == "assistant":
            return bool(self._steering or self._follow_ups)
        return not self._terminated

    async def _continue_as_new(
        self, agent: TemporalAgent, transcript: list[AgentMessage], run_messages: list[AgentMessage], turns_before: int
    ) -> None:
        self._continuing = True  # waiting polls answer now
        await self._let_the_caller_read(lambda: self._read_up_to >= self._next_seq - 1)  # this history's events
        await workflow.wait_condition(workflow.all_handlers_finished)
        compaction = None
        if self._compactor is not None:  # the next history starts at the first kept message
            transcript, compaction = self._compactor.carried(transcript)
        state = CarriedState(
            run_id=self._run_id,
            seq=self._next_seq,
            turn=self._turn,
            turns=turns_before + self._turns_here,
            run_messages=tuple(run_messages),
            steering=tuple(self._steering),
            follow_ups=tuple(self._follow_ups),
            aborted=self._signal.aborted,
            context_key=self._sent.key,
            context_length=len(self._sent.messages),
            compaction=compaction,
        )
        if agent.contexts is None:  # the new history's input: the transcript, and every message the run added
            carried = {"messages": [to_json(m) for m in transcript], "state": state.to_json()}
            check_fits("the run carried into the next history (its transcript and the messages it added)", carried)
        workflow.continue_as_new(AgentRun(agent=agent.name, messages=transcript, state=state))

    def _should_stop(self, turn: TurnContext) -> bool:
        self._turns_here += 1
        if self._turns_left is not None:
            self._turns_left -= 1
        if self._turns_here >= self._agent.turns_per_history or workflow.info().is_continue_as_new_suggested():
            self._history_full = True
            results = turn.tool_results
            self._terminated = bool(results) and all(self._terminating.get(r.tool_call_id) for r in results)
            return True
        return False

    def _take_steering(self) -> list[AgentMessage]:
        taken, self._steering = self._steering, []
        return taken

    def _take_follow_ups(self) -> list[AgentMessage]:
        taken, self._follow_ups = self._follow_ups, []
        return taken

    async def _call_tool(self, invocation: ToolInvocation, proceed: Callable[[], Awaitable[object]]) -> AgentToolResult:
        """Run the tool as its activity (the tool call id is the activity's idempotency key)."""
        agent = self._agent
        name = invocation.tool.name
        call_id = invocation.tool_call.id
        tool_call = invocation.tool_call if self._approvals is None else self._approvals.to_run(invocation.tool_call)
        try:
            handle = start_call(
                agent.tool_activity_name(name),
                {"toolCall": to_json(tool_call)},
                agent.tool_activity_options(name),
                f"{name} ({call_id})",
            )
            out = await finished(handle)
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise
            raise _ToolFailed(failure_text(exc)) from None
        if "error" in out:
            raise _ToolFailed(out["error"])
        result: AgentToolResult = from_json(out["result"])
        self._terminating[call_id] = result.terminate is True
        return result

    # --- events --------------------------------------------------------------------------------

    def _emit(self, event: AgentEvent) -> None:
        kind = type(event)
        if kind is AgentStart and self._next_seq > 0:
            return  # a continued history: the caller saw this run's agent_start
        if isinstance(event, AgentEnd):
            end = AgentEnd((*self._carried, *event.messages))
            if self._agent.contexts is None:  # the run's result is these messages
                check_fits("the run's result", [to_json(m) for m in end.messages])
            if self._history_full:
                self._held_end = end  # sent if the run does not go on in a new history
                return
            event = end
        self._record(event)

    def _record(self, event: AgentEvent) -> None:
        if isinstance(event, TurnStart):
            self._turn += 1
        envelope = EventEnvelope(
            event=event, run_id=self._run_id, seq=self._next_seq, turn=self._turn, timestamp=workflow_ms()
        )
        data = envelope_to_json(envelope)
        self._log.append(data)
        self._sizes.append(_answer_size(data))
        self._next_seq += 1

    def _page(self, after_seq: int, part: int) -> dict[str, Any]:
        """The envelopes after `after_seq` that fit `_PAGE_BYTES` (at least one), or part `part`
        of the next one when it alone is larger (`part`, `parts`, and its `seq`)."""
        start = max(after_seq + 1 - self._first_seq, 0)
        page: dict[str, Any] = {
            "envelopes": [],
            "firstSeq": self._first_seq,
            "finished": self._finished,
            "continuing": self._continuing,
        }
        if start < len(self._log) and self._sizes[start] > _PAGE_BYTES:
            text = encode_json(self._log[start])
            ends = _part_ends(text)
            if not 0 <= part < len(ends):
                raise ValueError(f"event {self._first_seq + start} has {len(ends)} parts, not a part {part}")
            begin = ends[part - 1] if part else 0
            page.update(seq=self._first_seq + start, part=text[begin : ends[part]], parts=len(ends))
            return page
        end, total = start, 0
        while end < len(self._log) and total + self._sizes[end] <= _PAGE_BYTES:
            total += self._sizes[end]
            end += 1
        page["envelopes"] = self._log[start:end]
        return page

    @workflow.update(name="events")
    async def events(self, after_seq: int, part: int = 0) -> dict[str, Any]:
        """The envelopes after `after_seq` (-1: from the start), waiting until there is one.

        Answers at once when the run has finished or is moving to a new history (`continuing`:
        ask again). `firstSeq` is the first envelope this history still has. An envelope larger
        than a page comes in parts: ask again with the same `after_seq` and the next `part`.
        """
        self._read_up_to = max(self._read_up_to, after_seq)
        await workflow.wait_condition(lambda: self._next_seq - 1 > after_seq or self._finished or self._continuing)
        page = self._page(after_seq, part)
        self._pages_given += 1
        if page["envelopes"]:
            self._given_up_to = max(self._given_up_to, page["envelopes"][-1]["seq"])
        elif "part" in page and part == page["parts"] - 1:
            self._given_up_to = max(self._given_up_to, page["seq"])
        return page

    @events.validator
    def _check_events(self, after_seq: int, part: int = 0) -> None:
        if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < -1:
            raise ValueError(f"events(after_seq) needs an int >= -1, got {after_seq!r}")
        if isinstance(part, bool) or not isinstance(part, int) or part < 0:
            raise ValueError(f"events(after_seq, part) needs a part >= 0, got {part!r}")

    @workflow.query(name="events_now")
    def events_now(self, after_seq: int, part: int = 0) -> dict[str, Any]:
        """The envelopes after `after_seq` without waiting (also on a finished workflow)."""
        return self._page(after_seq, part)

    # --- steering, follow-up, abort --------------------------------------------------------------

    @workflow.signal(name="steer")
    def steer(self, message: AgentMessage) -> None:
        """Queue a message for the next turn (taken after the current turn's tool calls)."""
        self._steering.append(message)

    @workflow.signal(name="follow_up")
    def follow_up(self, message: AgentMessage) -> None:
        """Queue a message for when the agent would otherwise stop."""
        self._follow_ups.append(message)

    @workflow.signal(name="abort")
    async def abort(self) -> None:
        """Abort the run: the tools in flight are cancelled and the run ends `aborted`.

        A model call in flight is cancelled too, and asked for what the model has said so far:
        the run keeps it (the aborted message's content), as a run in one process does, if the
        call answers within `_ABORT_WAIT` (the cancellation reaches it with its next heartbeat,
        every second). If it does not, the run ends without it. A compaction's summary in flight is
        cancelled: the model call it came before ends at once, aborted.
        """
        summary = self._summary_call
        if summary.handle is not None and not self._signal.aborted:
            summary.abort_asked = True
            summary.handle.cancel()
        call = self._model_call
        if call.handle is not None and not self._signal.aborted:
            call.abort_asked = True  # the model stream aborts the signal once the loop has the answer
            call.handle.cancel()
            with contextlib.suppress(asyncio.TimeoutError):
                await workflow.wait_condition(lambda: self._signal.aborted, timeout=_ABORT_WAIT)
        self._signal.abort()

    # --- human approval --------------------------------------------------------------------------

    @workflow.update(name="approve")
    def approve(
        self, tool_call_id: str, approved: bool, reason: str | None = None, arguments: dict[str, Any] | None = None
    ) -> None:
        """Decide a pending tool call: approved, it runs (with `arguments` instead of the model's,
        if given); denied, it is blocked with `reason`."""
        self._pending_approvals().decide(tool_call_id, approved, reason, arguments)

    @approve.validator
    def _check_approve(
        self, tool_call_id: str, approved: bool, reason: str | None = None, arguments: dict[str, Any] | None = None
    ) -> None:
        """A decision the run cannot take (a call not waiting, edited arguments that do not fit
        the tool) is refused here: it never enters the history."""
        self._pending_approvals().check(tool_call_id, approved, reason, arguments)

    @workflow.query(name="approvals")
    def approvals(self) -> list[dict[str, Any]]:
        """The tool calls waiting for a decision, oldest first (JSON `ApprovalRequest`s)."""
        return [] if self._approvals is None else self._approvals.listed()

    def _pending_approvals(self) -> PendingApprovals:
        if self._approvals is None:
            raise ValueError("approve: no approval is pending: this run's agent asks none (needs_approval is empty)")
        return self._approvals

    _agent: TemporalAgent
    _compactor: DurableCompactor | None
