"""A durable agent's definition (`TemporalAgent`) and the activities that run its calls.

The workflow runs the loop; a model call is the `<agent>.model` activity, which consumes the
provider's stream and returns the final message (cancelled by an abort, the message so far); a
tool call is the `<agent>.tool.<name>` activity. Activities run on the worker, where the keys,
the network and the tools' side effects live: nothing of that enters the workflow's history but
what the calls return.
"""

from __future__ import annotations

import asyncio  # noqa: TID251  (Temporal's activities run on asyncio; its cancellation is asyncio's)
import contextvars
import sys
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import anyio
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from .._core._config import api_key_for
from .._core._updates import DELIVERED, Delivery
from .._core._util import single_exception
from .._durable import (
    IncompleteStream,
    StreamProgress,
    approval_names,
    check_approval_timeout,
    check_definition,
    durable_options,
    final_message,
)
from .._tools._tool import AgentTool, validated_arguments, within_timeout
from .._types._abort import AbortSignal
from .._types._constants import ABORTED_TEXT
from .._types._messages import (
    AgentToolResult,
    Context,
    Model,
    TextContent,
    ThinkingLevel,
    ToolCall,
    ended_message,
    now_ms,
)
from .._types._stream_fn import StreamFn, StreamOptions
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._model_json import model_from_json
from ..approvals._request import ApprovalRequest, needs_approval_of
from ..context._compaction import Compaction
from ..context._durable import write_summary
from . import _decisions
from ._context import CONTEXT_MISSING, ContextStore, StoredContexts, check_context_store
from ._payload import PAYLOAD_LIMIT, PayloadTooLarge, check_fits, json_size

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("ActivityOptions", "TemporalAgent", "idempotency_key")


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityOptions:
    """How Temporal runs one kind of call: its timeouts and its retry policy.

    Attributes:
        start_to_close_timeout: The longest one attempt may take.
        heartbeat_timeout: An attempt that has not heartbeaten for this long is retried (a
            crashed worker is noticed this soon). The activity heartbeats every half of it
            while the call runs. None: no heartbeats; a crash is noticed only at
            `start_to_close_timeout`, and an abort cannot reach the running call (Temporal
            delivers cancellation with heartbeats).
        retry_policy: Temporal's retry policy for failed attempts (None: the agent's default,
            5 attempts for a model call and 3 for a tool call; `RetryPolicy()` is Temporal's own
            default, which retries without limit).
        schedule_to_close_timeout: The longest all attempts together may take.
        local: Run the call as a local activity: in the worker that runs the workflow, within
            its workflow task, with no round trip through the server (a turn of a near-instant
            model and tool costs about a tenth). The price: the call's result is recorded, the
            run's events reach callers, and signals (an abort, a steer) reach the run only when
            the workflow task completes, which Temporal does at least every 80% of the workflow
            task timeout (10 s by default) while local calls run; a worker that dies before
            runs the call again. For short calls that may run twice. A local call does not
            heartbeat (leave `heartbeat_timeout` None): an abort that has reached the run
            cancels it at once, in its process.
    """

    start_to_close_timeout: timedelta = timedelta(minutes=10)
    heartbeat_timeout: timedelta | None = None
    retry_policy: RetryPolicy | None = None
    schedule_to_close_timeout: timedelta | None = None
    local: bool = False

    def __post_init__(self) -> None:
        for name in ("start_to_close_timeout", "heartbeat_timeout", "schedule_to_close_timeout"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
                raise TypeError(f"ActivityOptions.{name} must be a positive timedelta, got {value!r}")
        if self.retry_policy is not None and not isinstance(self.retry_policy, RetryPolicy):
            raise TypeError(f"ActivityOptions.retry_policy must be a temporalio RetryPolicy, got {self.retry_policy!r}")
        if type(self.local) is not bool:
            raise TypeError(f"ActivityOptions.local must be a bool, got {self.local!r}")
        if self.local and self.heartbeat_timeout is not None:
            raise ValueError("ActivityOptions: a local activity does not heartbeat; leave heartbeat_timeout None")

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `workflow.start_activity` (or `start_local_activity`)."""
        kwargs: dict[str, Any] = {
            "start_to_close_timeout": self.start_to_close_timeout,
            "retry_policy": self.retry_policy,
            "schedule_to_close_timeout": self.schedule_to_close_timeout,
        }
        if not self.local:
            kwargs["heartbeat_timeout"] = self.heartbeat_timeout
        return kwargs


# Heartbeats by default: a crashed worker is noticed in 30 s (not at the 10-minute timeout), and an
# abort or a cancelled workflow reaches a running call (cancellation travels on heartbeats).
_DEFAULT_MODEL_ACTIVITY = ActivityOptions(
    heartbeat_timeout=timedelta(seconds=30), retry_policy=RetryPolicy(maximum_attempts=5)
)
_DEFAULT_TOOL_ACTIVITY = ActivityOptions(
    heartbeat_timeout=timedelta(seconds=30), retry_policy=RetryPolicy(maximum_attempts=3)
)


def _with_retry(options: ActivityOptions, default: ActivityOptions) -> ActivityOptions:
    """`options` with the default's retry policy when it sets none (not an `ActivityOptions`: as
    it is, for the checks that follow)."""
    if isinstance(options, ActivityOptions) and options.retry_policy is None:
        return replace(options, retry_policy=default.retry_policy)
    return options


_current_call: contextvars.ContextVar[str] = contextvars.ContextVar("agentloop_temporal_tool_call")


def idempotency_key() -> str:
    """In a tool running as an activity: `<workflow id>/<tool call id>`, the same on every attempt.

    A tool with side effects passes it to the system it changes (a payment's idempotency key, a
    row's unique key), so that the attempt Temporal retries after a crash does not do it twice.
    """
    try:
        call_id = _current_call.get()
    except LookupError:
        raise RuntimeError("idempotency_key() is only available in a tool running as a Temporal activity") from None
    return f"{activity.info().workflow_id}/{call_id}"


class TemporalAgent:
    """An agent whose runs are durable: the loop in a Temporal workflow, its calls in activities.

    Define it once, at import time, in a module the worker imports; the workflow finds it by
    `name`. The worker (`agentloop.temporal.worker` or `AgentLoopPlugin`) registers its
    activities.

    Args:
        name: Names the agent's activities (`<name>.model`, `<name>.tool.<tool>`); letters,
            digits, `_` and `-`.
        model: The model every call uses.
        tools: The tools; each call runs as its own activity.
        system_prompt: The system prompt.
        stream_fn: The provider stream the model activity consumes (default: the built-in
            providers, chosen by `model.api`).
        model_activity: Timeouts and retries of the model call (default: 10 minutes an
            attempt, a heartbeat every second with a 30 s timeout, 5 attempts). An abort
            cancels the call and gets the message so far (see `AgentWorkflow.abort`).
        tool_activities: Per tool name, its `ActivityOptions`; default_tool_activity: for the
            others (default: 10 minutes an attempt, 30 s heartbeat timeout, 3 attempts).
            Options without a `retry_policy` keep the default's attempts (5 for the model, 3 for
            a tool).
        turns_per_history: After this many turns a workflow continues as new, carrying the
            transcript, so that its history stays bounded (see `AgentWorkflow`).
        needs_approval: The tools whose calls wait for a person's decision (`agent.approve(run,
            ...)`) before they run: tool names, or `(tool_call) -> bool`, called in the workflow (it must
            be deterministic: a function of the call alone).
        approval_timeout: A call not decided within this time is blocked with an error result
            saying so (None: it waits as long as the run lasts).
        context_store: Where the workers keep the runs' transcripts (a `ContextStore` every
            worker of the agent reaches): a model activity then carries what is new since the
            previous call and a key, not the whole transcript, and a history grows linearly
            (see `agentloop.temporal.FileContextStore`). None: every call carries it all.
        compaction: Compact the run's context as an `Agent` with `Compaction(...).attach` does
            (the same settings and rules): before a model call that would not leave
            `reserve_tokens` of `model.context_window`, and after an overflow error. The summary
            is the `<name>.summary` activity (with `model_activity`'s options); a history
            continues as new with the compacted transcript and the summary.
        reasoning: As on `AgentLoopConfig`.
        options: The loop options, as `LoopOptions` (the same names, defaults and checks), those
            a durable run carries (`DURABLE_OPTIONS`): `api_key` and `get_api_key` (called in the
            model activity; keys never enter the workflow's history), `max_turns`,
            `tool_execution`, `max_parallel_tool_calls`, `tool_abort_grace`, `temperature`,
            `max_tokens`, `session_id`. Another option raises TypeError.
    """

    def __init__(
        self,
        name: str,
        *,
        model: Model,
        tools: Sequence[AgentTool] = (),
        system_prompt: str = "",
        stream_fn: StreamFn | None = None,
        model_activity: ActivityOptions = _DEFAULT_MODEL_ACTIVITY,
        tool_activities: Mapping[str, ActivityOptions] | None = None,
        default_tool_activity: ActivityOptions = _DEFAULT_TOOL_ACTIVITY,
        turns_per_history: int = 25,
        needs_approval: Collection[str] | Callable[[ToolCall], bool] = (),
        approval_timeout: timedelta | None = None,
        context_store: ContextStore | None = None,
        compaction: Compaction | None = None,
        reasoning: ThinkingLevel | None = None,
        **options: Any,
    ) -> None:
        tools = check_definition("TemporalAgent", name, model, tools, stream_fn)
        default_tool_activity = _with_retry(default_tool_activity, _DEFAULT_TOOL_ACTIVITY)
        model_activity = _with_retry(model_activity, _DEFAULT_MODEL_ACTIVITY)
        self.options = durable_options("TemporalAgent", options)
        """The loop options (`LoopOptions`, limited to `DURABLE_OPTIONS`)."""
        names = [tool.name for tool in tools]
        tool_activities = dict(tool_activities or {})
        for tool_name, activity_options in tool_activities.items():
            if tool_name not in names:
                raise ValueError(f"tool_activities names {tool_name!r}, which is not one of the tools {names}")
            if not isinstance(activity_options, ActivityOptions):
                raise TypeError(f"tool_activities[{tool_name!r}] must be an ActivityOptions, got {activity_options!r}")
            tool_activities[tool_name] = _with_retry(activity_options, _DEFAULT_TOOL_ACTIVITY)
        for label, activity_options in (
            ("model_activity", model_activity),
            ("default_tool_activity", default_tool_activity),
        ):
            if not isinstance(activity_options, ActivityOptions):
                raise TypeError(f"TemporalAgent {label} must be an ActivityOptions, got {activity_options!r}")
        if isinstance(turns_per_history, bool) or not isinstance(turns_per_history, int) or turns_per_history < 1:
            raise ValueError(f"turns_per_history must be a positive int, got {turns_per_history!r}")
        if isinstance(needs_approval, str):
            raise TypeError(f"needs_approval must be a collection of tool names or a callable, got {needs_approval!r}")
        if not callable(needs_approval):
            needs_approval = approval_names(needs_approval, tools)
        check_approval_timeout(approval_timeout)
        if context_store is not None:
            check_context_store(context_store)
        if compaction is not None and not isinstance(compaction, Compaction):
            raise TypeError(f"compaction must be an agentloop.context.Compaction or None, got {compaction!r}")
        self.name = name
        self.model = model
        self.tools = tools
        self.system_prompt = system_prompt
        self.stream_fn = stream_fn
        self.model_activity = model_activity
        self.tool_activities = tool_activities
        self.default_tool_activity = default_tool_activity
        self.turns_per_history = turns_per_history
        self.needs_approval = needs_approval
        self.approval_timeout = approval_timeout
        self.contexts = None if context_store is None else StoredContexts(context_store)
        """The worker's side of `context_store` (None without one)."""
        self.compaction = compaction
        self.reasoning: ThinkingLevel | None = reasoning
        self._tools_by_name = {tool.name: tool for tool in tools}
        self.activities: tuple[Callable[..., Any], ...] = (
            activity.defn(name=self.model_activity_name)(self._model_activity_fn()),
            *(activity.defn(name=self.tool_activity_name(t.name))(self._tool_activity(t)) for t in tools),
            *([activity.defn(name=self.summary_activity_name)(self._summary_activity_fn())] if compaction else []),
        )
        """The activities a worker registers for this agent."""

    def __repr__(self) -> str:
        return f"TemporalAgent(name={self.name!r}, model={self.model.id!r}, tools={list(self._tools_by_name)})"

    @property
    def model_activity_name(self) -> str:
        return f"{self.name}.model"

    @property
    def summary_activity_name(self) -> str:
        return f"{self.name}.summary"

    def tool_activity_name(self, tool_name: str) -> str:
        return f"{self.name}.tool.{tool_name}"

    @property
    def asks_approval(self) -> bool:
        """Whether some calls may wait for a person's decision."""
        return callable(self.needs_approval) or bool(self.needs_approval)

    def call_needs_approval(self, tool_call: ToolCall) -> bool:
        return needs_approval_of(self.needs_approval, tool_call)

    def tool_activity_options(self, tool_name: str) -> ActivityOptions:
        return self.tool_activities.get(tool_name, self.default_tool_activity)

    # --- approvals (from any process with a client) -------------------------------------------

    async def pending_approvals(self, run: WorkflowHandle[Any, Any]) -> list[ApprovalRequest]:
        """The tool calls of `run` (the handle `start_agent` returned) waiting for a person's
        decision, oldest first: `Agent.pending_approvals` for a durable run."""
        return await _decisions.pending_approvals(run)

    async def approve(
        self,
        run: WorkflowHandle[Any, Any],
        tool_call_id: str,
        approved: bool = True,
        reason: str | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """Decide a pending tool call of `run` (the handle `start_agent` returned), as
        `Agent.approve` does: approved, it runs (with `arguments` instead of the model's, if
        given); denied, the model gets an error result with `reason`.

        Returns once the workflow has recorded the decision (a worker must be running). Raises
        ValueError if the call is not pending (unknown, already decided, or the run is over) or
        if the edited arguments do not fit the tool's parameters (the call keeps waiting).
        """
        await _decisions.approve(run, tool_call_id, approved, reason, arguments=arguments)

    # --- the activities (on the worker) ------------------------------------------------------

    def _model_activity_fn(self) -> Callable[[dict[str, Any]], Any]:
        async def call_model(request: dict[str, Any]) -> dict[str, Any]:
            """Call the model: consume the provider's stream, return the final message's JSON form."""
            return await self._call_model(request)

        return call_model

    async def _call_model(self, request: dict[str, Any]) -> dict[str, Any]:
        model = model_from_json(request["model"])
        data = request["context"]
        unknown = [n for n in data["tools"] if n not in self._tools_by_name]
        if unknown:
            raise ApplicationError(f"agent {self.name!r} has no tools {unknown}", non_retryable=True)
        # By reference (a "base" key, None at first): `messages` are those added since that context.
        base: str | None = data.get("base")
        messages: tuple[Any, ...] = tuple(from_json(m) for m in data["messages"])
        depth = 0
        if base is not None:
            if self.contexts is None:  # the workflow sends the whole context again
                raise ApplicationError(
                    f"agent {self.name!r} has no context_store on this worker", type=CONTEXT_MISSING, non_retryable=True
                )
            base_messages, depth = await self.contexts.load(base)
            messages = (*base_messages, *messages)
        context = Context(
            system_prompt=data["systemPrompt"],
            messages=messages,
            tools=tuple(self._tools_by_name[n] for n in data["tools"]),
        )
        options = request["options"]
        stream_options = StreamOptions(
            signal=AbortSignal(),
            api_key=await self._api_key_for(model.provider),
            reasoning=options.get("reasoning"),
            session_id=options.get("sessionId"),
            temperature=options.get("temperature"),
            max_tokens=options.get("maxTokens"),
        )
        stream_fn = self.stream_fn
        if stream_fn is None:
            from .._core._default_stream import default_stream_fn

            stream_fn = default_stream_fn
        progress = StreamProgress()
        try:
            async with _heartbeating(_MODEL_BEAT):
                try:
                    final = await final_message(stream_fn(model, context, stream_options), progress)
                except IncompleteStream as exc:
                    raise ApplicationError(str(exc), non_retryable=True) from None
        except asyncio.CancelledError:
            cancel = activity.cancellation_details()
            if cancel is None or not cancel.cancel_requested:
                raise  # the worker is shutting down, the attempt timed out...: not an answer
            # An abort: the workflow waits for what the model said so far, as a run in one
            # process keeps it.
            _uncancel()
            final = ended_message(model, "aborted", ABORTED_TEXT, now_ms(), progress.partial)
        if "base" not in data or self.contexts is None:
            answer = to_json(final)
            if self.contexts is None:
                check_fits("the model's answer", answer)
            return answer
        answer = to_json(final)
        key = await self.contexts.save(base, depth, [*data["messages"], answer], (*context.messages, final))
        return {"message": answer, "contextKey": key}

    def _summary_activity_fn(self) -> Callable[[dict[str, Any]], Any]:
        async def write_compaction_summary(request: dict[str, Any]) -> dict[str, str]:
            """Write a compaction's summary: `{"summary": text}`, or `{"error": text}`."""
            return await self._write_summary(request)

        return write_compaction_summary

    async def _write_summary(self, request: dict[str, Any]) -> dict[str, str]:
        assert self.compaction is not None
        context = Context(
            system_prompt=request["systemPrompt"], messages=tuple(from_json(m) for m in request["messages"]), tools=()
        )
        async with _heartbeating(_MODEL_BEAT):
            return await write_summary(
                self.compaction, self.model, self.stream_fn, context, request["maxTokens"], self._api_key_for
            )

    async def _api_key_for(self, provider: str) -> str | None:
        return await api_key_for(self.options, provider)

    def _tool_activity(self, tool: AgentTool) -> Callable[[dict[str, Any]], Any]:
        async def run_tool(request: dict[str, Any]) -> dict[str, Any]:
            """Run one tool call: `{"result": ...}`, or `{"error": text}` when the tool raised.

            A tool that raises Temporal's `ApplicationError` asks for a retry (the activity fails
            and Temporal's retry policy applies); any other exception is the call's error result,
            as in a run in one process.
            """
            tool_call = from_json(request["toolCall"])
            token = _current_call.set(tool_call.id)
            try:
                async with _heartbeating():
                    try:
                        args = await validated_arguments(tool, tool_call)
                        result = await within_timeout(
                            tool, tool.execute(tool_call.id, args, AbortSignal(), _ignore_update)
                        )
                    except ApplicationError:
                        raise
                    except Exception as exc:
                        return {"error": str(exc) or type(exc).__name__}
            finally:
                _current_call.reset(token)
            if isinstance(result, str):
                result = AgentToolResult(content=(TextContent(result),))
            if not isinstance(result, AgentToolResult):
                kind = type(result).__name__
                return {"error": f"tool {tool.name!r} returned {kind}, expected an AgentToolResult or a str"}
            # A result that cannot travel is the call's error result now: failing the activity
            # would run the tool again, and no attempt would do better.
            data = to_json(result)
            try:
                size = json_size(data)
            except (TypeError, ValueError) as exc:
                return {"error": f"tool {tool.name!r} returned details that are not JSON values: {exc}"}
            if size > PAYLOAD_LIMIT and self.contexts is None:
                return {"error": str(PayloadTooLarge(f"the result of tool {tool.name!r}", size))}
            return {"result": data}

        return run_tool


def _ignore_update(partial_result: AgentToolResult) -> Delivery:
    """Progress updates of a tool in an activity are not streamed (they would fill the history).

    Already delivered, as the loop's own `on_update` answers: a tool may await it or not (a
    coroutine nobody awaited would warn).
    """
    return DELIVERED


_MODEL_BEAT = 1.0
"""Seconds between a model call's heartbeats: an abort reaches the call this soon (with the
worker's heartbeat throttle at most this long too, as `agentloop.temporal.worker` sets it)."""


def _uncancel() -> None:
    """Forget a cancellation this task has handled (on Python 3.11+ asyncio counts them)."""
    task = asyncio.current_task()
    if task is not None and hasattr(task, "uncancel"):
        task.uncancel()


@asynccontextmanager
async def _heartbeating(every: float | None = None) -> AsyncIterator[None]:
    """Heartbeat every half `heartbeat_timeout` (or `every` seconds, if sooner) while the body
    runs (nothing without a timeout).

    A heartbeat is how Temporal learns that the attempt is alive, and how a cancellation (an
    abort, a cancelled workflow) reaches it.
    """
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    interval = timeout.total_seconds() / 2
    if every is not None:
        interval = min(interval, every)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await anyio.sleep(interval)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(beat)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as failed:  # the body's own error, as it raised it (its flags kept)
        exc = single_exception(failed)
        raise exc from exc.__cause__
