"""`DBOSAgent`: agentloop's loop as a DBOS workflow, its model and tool calls as DBOS steps.

The loop runs in the workflow, unchanged (`run_agent_loop`), with the extension points set:

- the stream function runs the `<agent>.model` step, which consumes the provider's stream and
  returns the final message (recorded), then yields `start` and `done` for it;
- `wrap_tool_call` runs each tool call as a `<agent>.tool.<name>` step (`proceed()` inside the
  step: the tool runs in this process, within its timeout); a tool that needs approval first
  waits for it (see "Approvals" below);
- DBOS's own exceptions propagate (`propagate=`), and the clock is the latest time a recorded
  step returned, so a replay stamps what the first run stamped.

Replay needs DBOS's operations in the same order every time. The model step, a compaction's
`<agent>.summary` step (decided from the transcript, before a model call or after its overflow),
the `recv`s of steering, follow-up and abort messages, and the final `publish` step run in the
loop's own task at points that do not depend on timing; the tool steps of a batch begin in
source order (the core begins a batch's calls in source order, and a step takes its place in the
workflow when it is called). Events are written by steps, not by the workflow: the sink buffers
them, and the next step writes them to the `agentloop.events` stream from inside the step (a
step's writes are not replayed); the only operations the sink makes are the approval list's
`set_event`s, at points of the loop that do not depend on timing. A step interrupted by a crash
runs again and writes again: every event has an identity (`tool_execution_end/<call id>/0`,
`turn_start//2`, ...), and the reader keeps the first of each, so a caller sees every event
once, whatever order a replay emitted them in.

Control messages (steering, follow-up, abort) cost recorded `recv`s only when one was sent (a
`recv` that finds nothing costs as much as two steps). Their senders (`steer`, `follow_up`,
`abort`) send the message, then set the run's `CONTROL_ATTRIBUTE` (a DBOS workflow attribute) to
a new value. A step ends, after its work, by reading that attribute (`_control_mark`, one read
of the run's status) and records it in its output, with whether it changed since the run last
saw it; the loop's poll receives (every message waiting) only when a step saw a change since the
last poll, and at a run's first poll (a message may have been sent before it began). The answers
are recorded, so a replay makes the same `recv`s. A message sent while a step runs is seen by it
and taken at the poll that follows; one sent in the moment between a step's look and the poll is
taken at the poll after the next step, as a message sent just after a poll is in a run in one
process.

Approvals (`_approval`): the sink lists a call that needs one as its `tool_execution_start` is
emitted (`set_event`, a recorded operation at that point of the loop), and the call waits for a
decision before its step, alone in its batch.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import Any

import anyio
from dbos import DBOS, DBOSClient
from dbos import error as dbos_error

from .._core._config import AgentContext, AgentLoopConfig, ToolInvocation, api_key_for
from .._core._loop import run_agent_loop, run_agent_loop_continue
from .._core._util import exception_text
from .._durable import (
    approval_names,
    check_approval_timeout,
    check_definition,
    durable_options,
    final_message,
    replayed,
    workflow_options,
)
from .._tools._tool import AgentTool
from .._types._abort import AbortSignal
from .._types._constants import ABORTED_TEXT
from .._types._events import (
    AgentEvent,
    AssistantMessageEvent,
    ErrorEvent,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnStart,
)
from .._types._messages import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    Context,
    Model,
    ThinkingLevel,
    ended_message,
    now_ms,
)
from .._types._stream_fn import StreamFn, StreamOptions
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._envelope import EventEnvelope, envelope_to_json
from .._wire._json_text import encode_json
from ..approvals._request import ApprovalRequest
from ..context._compaction import Compaction
from ..context._durable import DurableCompactor, write_summary
from ..context._summary import CompactionError
from . import _decisions
from ._approval import RunApprovals, with_arguments

__all__ = (
    "CONTROL_ATTRIBUTE",
    "CONTROL_TOPIC",
    "DBOSAgent",
    "EVENTS_STREAM",
    "defined_agents",
    "idempotency_key",
    "registered_agent",
    "workflow_name",
)

EVENTS_STREAM = "agentloop.events"
"""The DBOS stream a run's events are written to (each value a list of `{"id", "envelope"}`)."""
CONTROL_TOPIC = "agentloop.control"
"""The DBOS topic of steering, follow-up and abort messages (`{"kind": ..., "message": ...}`).

Send them with `steer`, `follow_up` and `abort`: a message sent to the topic by hand is taken
only once the run's `CONTROL_ATTRIBUTE` changes (or at its first poll)."""
CONTROL_ATTRIBUTE = "agentloop.control"
"""The workflow attribute the senders of control messages set to a new value after each message:
a run's step that finds a value it has not seen makes the next poll receive."""

_ENGINE_ERRORS: tuple[type[BaseException], ...] = (dbos_error.DBOSException, dbos_error.DBOSBaseException)
_AGENTS: dict[str, DBOSAgent] = {}
_current_call: contextvars.ContextVar[str] = contextvars.ContextVar("agentloop_dbos_tool_call")


def _control_mark(workflow_id: str) -> str:
    """The run's `CONTROL_ATTRIBUTE` ('' before any control message), read from its status
    without its input or output. Blocking: run it in a worker thread.

    On any error, a new value: the run then receives at its next poll (a recorded `recv` more),
    never misses a message.
    """
    try:
        found = DBOS.list_workflows(workflow_ids=[workflow_id], load_input=False, load_output=False)
        value = (found[0].attributes or {}).get(CONTROL_ATTRIBUTE, "")
    except Exception:
        return f"unread-{uuid.uuid4().hex}"
    return value if isinstance(value, str) else str(value)


def idempotency_key() -> str:
    """In a tool running as a DBOS step: `<workflow id>/<tool call id>`, the same on every attempt.

    A tool with side effects passes it to the system it changes (a payment's idempotency key, a
    row's unique key), so that the attempt DBOS runs again after a crash does not do it twice.
    """
    try:
        call_id = _current_call.get()
    except LookupError:
        raise RuntimeError("idempotency_key() is only available in a tool running as a DBOS step") from None
    return f"{DBOS.workflow_id}/{call_id}"


def workflow_name(agent_name: str) -> str:
    """The name of the DBOS workflow of the agent named `agent_name`."""
    return f"agentloop.{agent_name}"


def defined_agents() -> list[str]:
    """The names of the `DBOSAgent`s defined in this process."""
    return sorted(_AGENTS)


def registered_agent(name: str) -> DBOSAgent:
    """The `DBOSAgent` named `name` in this process (LookupError, naming the known ones, if none)."""
    agent = _AGENTS.get(name)
    if agent is None:
        raise LookupError(f"no DBOSAgent named {name!r} in this process (defined: {sorted(_AGENTS)})")
    return agent


class _ToolFailed(Exception):
    """A tool's failure as recorded by its step: the model sees its text as the error result."""


class DBOSAgent:
    """An agent whose runs are durable DBOS workflows; its model and tool calls are steps.

    Define it at import time, before `DBOS.launch()`, in a module every process of the
    application imports: DBOS finds the workflow (`agentloop.<name>`) by name when it recovers a
    run. The model and the tools run in the process that runs the workflow.

    Args:
        name: Names the workflow and its steps (`<name>.model`, `<name>.tool.<tool>`); letters,
            digits, `_` and `-`, unique in the process.
        model: The model every call uses.
        tools: The tools; each call runs as its own step.
        system_prompt: The system prompt.
        stream_fn: The provider stream the model step consumes (default: the built-in
            providers, chosen by `model.api`).
        needs_approval: Names of tools whose calls wait for `agent.approve(workflow_id,
            tool_call_id, ...)` before they run (a denied call gets an error result, and the
            tool does not run). Such a tool must be a barrier (`execution_mode="sequential"`):
            it runs alone.
        approval_timeout: A call not decided within this time is blocked with an error result
            saying so (None: it waits as long as the run lasts).
        compaction: Compact the run's context as an `Agent` with `Compaction(...).attach` does
            (the same settings and rules): before a model call that would not leave
            `reserve_tokens` of `model.context_window`, and after an overflow error. The summary
            is the `<name>.summary` step.
        reasoning: As on `AgentLoopConfig`.
        options: The loop options, as `LoopOptions` (the same names, defaults and checks), those
            a durable run carries (`DURABLE_OPTIONS`): `api_key` and `get_api_key` (called in the
            model step; keys never enter DBOS's database), `max_turns`, `tool_execution`,
            `max_parallel_tool_calls`, `tool_abort_grace`, `temperature`, `max_tokens`,
            `session_id`. Another option raises TypeError.
    """

    def __init__(
        self,
        name: str,
        *,
        model: Model,
        tools: Sequence[AgentTool] = (),
        system_prompt: str = "",
        stream_fn: StreamFn | None = None,
        needs_approval: Sequence[str] = (),
        approval_timeout: timedelta | None = None,
        compaction: Compaction | None = None,
        reasoning: ThinkingLevel | None = None,
        **options: Any,
    ) -> None:
        tools = check_definition("DBOSAgent", name, model, tools, stream_fn)
        loop_options = durable_options("DBOSAgent", options)
        if name in _AGENTS:
            raise ValueError(f"a DBOSAgent named {name!r} is already defined in this process")
        approved_tools = approval_names(needs_approval, tools)
        if compaction is not None and not isinstance(compaction, Compaction):
            raise TypeError(f"compaction must be an agentloop.context.Compaction or None, got {compaction!r}")
        for tool in tools:
            if tool.name in approved_tools and tool.execution_mode != "sequential":
                # While a call waits for its approval nothing else may run: the order of the
                # workflow's operations must not depend on when the answer comes.
                raise ValueError(
                    f"a tool that waits for approval must run alone in its batch: "
                    f"define {tool.name!r} with execution_mode='sequential'"
                )
        self.name = name
        self.model = model
        self.tools = tools
        self.system_prompt = system_prompt
        self.stream_fn = stream_fn
        check_approval_timeout(approval_timeout)
        self.needs_approval = approved_tools
        self.compaction = compaction
        self.approval_timeout = approval_timeout
        self.reasoning: ThinkingLevel | None = reasoning
        self.options = loop_options
        """The loop options (`LoopOptions`, limited to `DURABLE_OPTIONS`)."""
        # Checked here, once: a bad option fails where the agent is defined, not in a workflow.
        self._loop_config(_DurableRun(self))

        async def workflow(request: dict[str, Any]) -> list[Any]:
            return await _DurableRun(self).run(request)

        workflow.__qualname__ = workflow.__name__ = f"agentloop_{name}"
        self.workflow: Callable[[dict[str, Any]], Coroutine[Any, Any, list[Any]]] = DBOS.workflow(
            name=self.workflow_name
        )(workflow)
        """The DBOS workflow: `{"prompts": [...], "messages": [...]}` (JSON forms) -> the new messages' JSON forms."""
        _AGENTS[name] = self

    @property
    def workflow_name(self) -> str:
        return workflow_name(self.name)

    async def pending_approvals(self, run: str, *, client: DBOSClient | None = None) -> list[ApprovalRequest]:
        """The tool calls of `run` (the workflow id `start_agent` returned) waiting for a person's
        decision, oldest first: `Agent.pending_approvals` for a durable run."""
        return await _decisions.pending_approvals(run, client=client)

    async def approve(
        self,
        run: str,
        tool_call_id: str,
        approved: bool = True,
        reason: str | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
        client: DBOSClient | None = None,
    ) -> None:
        """Decide a pending tool call of `run` (the workflow id `start_agent` returned), as
        `Agent.approve` does: approved, it runs (with `arguments` instead of the model's, if
        given); denied, the model gets an error result with `reason`.

        Returns once the run has taken the decision (a process must be running it). Raises
        ValueError if the call is not pending (unknown, already decided, or the run is over) or
        if the edited arguments do not fit the tool's parameters (the call keeps waiting).
        """
        await _decisions.approve(run, tool_call_id, approved, reason, arguments=arguments, client=client)

    def __repr__(self) -> str:
        return f"DBOSAgent(name={self.name!r}, model={self.model.id!r}, tools={[t.name for t in self.tools]})"

    def _loop_config(self, run: _DurableRun) -> AgentLoopConfig:
        return AgentLoopConfig(
            model=self.model,
            get_steering_messages=run.take_steering,
            get_follow_up_messages=run.take_follow_ups,
            reasoning=self.reasoning,
            **workflow_options(self.options),
            wrap_tool_call=run.call_tool,
            transform_context=None if run.compactor is None else run.compactor.transform_context,
            propagate=_ENGINE_ERRORS,
            clock=run.clock,
        )

    async def _api_key_for(self, provider: str) -> str | None:
        return await api_key_for(self.options, provider)


class _DurableRun:
    """One execution of an agent's workflow (a first run or a replay after a crash)."""

    def __init__(self, agent: DBOSAgent) -> None:
        self.agent = agent
        self.workflow_id = DBOS.workflow_id or ""
        self.signal = AbortSignal()
        self.pending: list[dict[str, Any]] = []  # envelopes not written yet
        self.writing = anyio.Lock()  # writes in the order their events were taken
        self.seen: dict[str, int] = {}  # occurrences of each identity's base
        self.seq = 0
        self.turn = 0
        self.now = 0  # the clock: the latest time a recorded step returned
        self.steering: list[AgentMessage] = []
        self.follow_ups: list[AgentMessage] = []
        # The next poll receives: a control message may wait. True at the start (one may have
        # been sent before the run began), then set when a step saw one; cleared by the poll.
        self.waiting = True
        self.control_seen = ""  # the run's CONTROL_ATTRIBUTE, as its steps last read it
        self.approvals = RunApprovals(agent.name, agent.tools, agent.approval_timeout, self.signal, self.clock)
        self.compactor: DurableCompactor | None = None
        if agent.compaction is not None:
            self.compactor = DurableCompactor(
                agent.compaction,
                model=agent.model,
                system_prompt=agent.system_prompt,
                tools=agent.tools,
                summarizer=self.summary_step,
            )

    async def run(self, request: dict[str, Any]) -> list[Any]:
        agent = self.agent
        prompts: list[AgentMessage] = [from_json(m) for m in request.get("prompts", ())]
        messages: list[AgentMessage] = [from_json(m) for m in request.get("messages", ())]
        self.now = max((getattr(m, "timestamp", 0) or 0 for m in (*messages, *prompts)), default=0)
        config = agent._loop_config(self)
        context = AgentContext(system_prompt=agent.system_prompt, messages=tuple(messages), tools=agent.tools)
        stream: StreamFn = self.stream if self.compactor is None else self.compactor.stream(self.stream)
        if prompts:
            new = await run_agent_loop(prompts, context, config, self.emit, self.signal, stream)
        else:
            new = await run_agent_loop_continue(context, config, self.emit, self.signal, stream)
        await self.approvals.unlist()
        await DBOS.run_step_async({"name": f"{agent.name}.publish"}, self.publish, True)
        return [to_json(m) for m in new]

    # --- events ----------------------------------------------------------------------------------

    async def emit(self, event: AgentEvent) -> None:
        """The loop's sink: stamp the event and keep it for the next step to write.

        A tool's progress updates are left out: they happen inside its step, which a replay
        does not run again, so a caller could not get each of them exactly once. The start of
        a call that needs approval lists the call first (`APPROVALS_EVENT`): a caller who sees
        the start finds the call listed.
        """
        kind = type(event)
        if kind is ToolExecutionUpdate:
            return
        if isinstance(event, ToolExecutionStart) and event.tool_name in self.agent.needs_approval:
            await self.approvals.started(event.tool_call_id, event.tool_name, event.args)
        elif isinstance(event, ToolExecutionEnd):
            await self.approvals.ended(event.tool_call_id)
        if kind is TurnStart:
            self.turn += 1
        base = f"{event.type}/{_call_id(event)}"
        count = self.seen.get(base, 0)
        self.seen[base] = count + 1
        envelope = EventEnvelope(event=event, run_id=self.workflow_id, seq=self.seq, turn=self.turn, timestamp=self.now)
        self.seq += 1
        self.pending.append({"id": f"{base}/{count}", "envelope": envelope_to_json(envelope)})

    async def publish(self, close: bool = False) -> None:
        """In a step: write the events kept so far to the stream (and close it at the end).

        DBOS's stream writes are synchronous: they run in a worker thread, which carries the
        step's context (so they are the step's writes, not operations of the workflow).
        """
        async with self.writing:
            batch, self.pending = self.pending, []
            if batch:
                await anyio.to_thread.run_sync(DBOS.write_stream, EVENTS_STREAM, batch)
            if close:
                await anyio.to_thread.run_sync(DBOS.close_stream, EVENTS_STREAM)

    def clock(self) -> int:
        return self.now

    def _saw(self, timestamp: int) -> None:
        self.now = max(self.now, timestamp)

    # --- steering, follow-up, abort --------------------------------------------------------------

    async def _receive(self) -> None:
        """Take every control message waiting, if a step saw one since the last time (recorded `recv`s).

        Without a message seen, nothing: the loop's polls between two steps cost no operation.
        """
        if not self.waiting:
            return
        self.waiting = False
        while True:
            data = await DBOS.recv_async(CONTROL_TOPIC, timeout_seconds=0)
            if data is None:
                return
            kind = data.get("kind") if isinstance(data, dict) else None
            if kind == "abort":
                self.signal.abort()
            elif kind == "steer":
                self.steering.append(from_json(data["message"]))
            elif kind == "follow_up":
                self.follow_ups.append(from_json(data["message"]))

    async def take_steering(self) -> list[AgentMessage]:
        await self._receive()
        taken, self.steering = self.steering, []
        return taken

    async def take_follow_ups(self) -> list[AgentMessage]:
        await self._receive()
        taken, self.follow_ups = self.follow_ups, []
        return taken

    # --- the model call --------------------------------------------------------------------------

    async def stream(
        self, model: Model, context: Context, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        """The loop's stream function: the model step, then `start` and `done` for its message."""
        if options.signal.aborted:  # the contract: an aborted signal ends the stream at once
            yield ErrorEvent("aborted", ended_message(model, "aborted", ABORTED_TEXT, self.now))
            return
        await self.approvals.unlist()  # calls of the last batch that never waited (an abort answered them)
        data = await DBOS.run_step_async(
            {"name": f"{self.agent.name}.model"}, self._call_model, model, context, options
        )
        final: AssistantMessage = from_json(data["message"])
        self._saw(final.timestamp)
        self._saw_control(data)
        async for event in replayed(final):
            yield event

    async def _call_model(self, model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
        """The model step: write the events so far, consume the provider's stream; return the
        final message (`message`) and what its look for control messages found (`waiting`, `control`)."""
        await self.publish()
        agent = self.agent
        stream_fn = agent.stream_fn
        if stream_fn is None:
            from .._core._default_stream import default_stream_fn

            stream_fn = default_stream_fn
        try:
            options = StreamOptions(
                signal=options.signal,
                api_key=await agent._api_key_for(model.provider),
                reasoning=options.reasoning,
                session_id=options.session_id,
                temperature=options.temperature,
                max_tokens=options.max_tokens,
            )
            final = await final_message(stream_fn(model, context, options))
        except _ENGINE_ERRORS:
            raise
        except Exception as exc:  # get_api_key or a stream function that broke its contract: the call failed
            text = f"The model call failed: {type(exc).__name__}: {exception_text(exc)}"
            final = ended_message(model, "error", text, now_ms())
        return {"message": to_json(final), **await self._look_for_control_message()}

    async def summary_step(self, request: Context, max_tokens: int) -> str:
        """The compaction's summarizer: the `<agent>.summary` step (recorded: a replay gets the
        same summary without calling the model); `CompactionError` when it fails."""
        out = await DBOS.run_step_async(
            {"name": f"{self.agent.name}.summary"}, self._write_summary, request, max_tokens
        )
        if "error" in out:
            raise CompactionError(out["error"])
        return str(out["summary"])

    async def _write_summary(self, request: Context, max_tokens: int) -> dict[str, str]:
        """The summary step: write the events so far, call the summary model."""
        await self.publish()
        agent = self.agent
        assert agent.compaction is not None
        try:
            return await write_summary(
                agent.compaction, agent.model, agent.stream_fn, request, max_tokens, agent._api_key_for
            )
        except _ENGINE_ERRORS:
            raise
        except Exception as exc:  # get_api_key or a stream function that broke its contract
            return {"error": f"Summarization failed: {type(exc).__name__}: {exception_text(exc)}"}

    async def _look_for_control_message(self) -> dict[str, Any]:
        """In a step, after its work: the run's control mark (`control`), and whether it changed
        since the run last saw it (`waiting`: a control message waits)."""
        mark = await anyio.to_thread.run_sync(_control_mark, self.workflow_id)
        return {"waiting": mark != self.control_seen, "control": mark}

    def _saw_control(self, output: dict[str, Any]) -> None:
        """After a step: what its look for control messages found (recorded)."""
        self.waiting = self.waiting or output["waiting"]
        self.control_seen = output.get("control", self.control_seen)

    # --- tool calls --------------------------------------------------------------------------------

    async def call_tool(self, invocation: ToolInvocation, proceed: Callable[[], Awaitable[object]]) -> object:
        """`wrap_tool_call`: the call as its step (called at once: a step's place is where it is called).

        A tool named in `needs_approval` first waits for a decision (`RunApprovals`); approved with
        edited arguments, the tool runs with them (the transcript keeps the model's).
        """
        call_id = invocation.tool_call.id
        name = invocation.tool.name
        if name in self.agent.needs_approval:
            taken = await self.approvals.decision(call_id, self.publish)
            # The wait may have been long, and a denied call has no step to look for the control
            # messages sent meanwhile: the next poll receives.
            self.waiting = True
            if taken.blocked is not None:
                raise _ToolFailed(taken.blocked)
            if taken.arguments is not None:
                proceed = with_arguments(invocation, taken.arguments)
        out = await DBOS.run_step_async(
            {"name": f"{self.agent.name}.tool.{name}"}, self._run_tool, call_id, name, proceed
        )
        self._saw(out["time"])
        self._saw_control(out)
        if "error" in out:
            raise _ToolFailed(out["error"])
        if "text" in out:
            return out["text"]
        return from_json(out["result"])

    async def _run_tool(self, call_id: str, name: str, proceed: Callable[[], Awaitable[object]]) -> dict[str, Any]:
        """The tool step: write the events so far, run the tool (within its timeout); return its
        outcome (`text`, `result` or `error`), when it ended (`time`) and what its look for
        control messages found (`waiting`, `control`)."""
        await self.publish()
        token = _current_call.set(call_id)
        try:
            value = await proceed()  # within the tool's timeout: a timeout is this step's outcome
        except _ENGINE_ERRORS:
            raise
        except Exception as exc:
            outcome: dict[str, Any] = {"error": exception_text(exc)}
        else:
            outcome = _tool_outcome(value)
        finally:
            _current_call.reset(token)
        outcome["time"] = now_ms()
        outcome.update(await self._look_for_control_message())
        return outcome


def _tool_outcome(value: object) -> dict[str, Any]:
    """What a tool returned, as its step records it: `{"text"}`, `{"result"}` (JSON form) or `{"error"}`."""
    if isinstance(value, str):
        return {"text": value}
    if isinstance(value, AgentToolResult):
        data = to_json(value)
        try:  # the step's output must be plain values: any reader can decode it, without the tool's code
            encode_json(data)
        except (TypeError, ValueError) as exc:
            return {"error": f"the tool returned details that are not JSON values: {exc}"}
        return {"result": data}
    return {"error": f"the tool returned {type(value).__name__}, expected an AgentToolResult or a str"}


def _call_id(event: AgentEvent) -> str:
    """The tool call an event belongs to ('' for the run's and turns' own events)."""
    call_id = getattr(event, "tool_call_id", None)
    if call_id is None:
        message = getattr(event, "message", None)
        call_id = getattr(message, "tool_call_id", None)
    return call_id or ""
