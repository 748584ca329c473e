"""Durable agents on Temporal (`pip install 'anyio-agentloop[temporal]'`): asyncio only.

The loop runs in a Temporal workflow (`AgentWorkflow`); each model call is an activity that
consumes the provider's stream and returns the final message; each tool call is an activity
with its own timeouts and retry policy, and `idempotency_key()` for side effects. A worker
killed in the middle of a call is replaced by another: finished calls are not repeated, the
interrupted one is retried.

    agent = TemporalAgent("support", model=model, tools=[lookup])    # in a module the worker imports
    client = await Client.connect("127.0.0.1:7233", data_converter=data_converter)
    async with worker(client, task_queue="agents", agents=[agent]):
        handle = await start_agent(client, "support", [UserMessage(content="hi")], id="chat-1", task_queue="agents")
        async for envelope in stream_events(handle):
            ...

A tool the agent's `needs_approval` names waits for `approve(handle, tool_call_id, approved,
reason)` (`pending_approvals(handle)` lists the calls waiting); with a `context_store`
(`FileContextStore`, `MemoryContextStore`, or your own `ContextStore`) model calls carry what is
new and a key instead of the whole transcript, and a history grows linearly with its turns.

Temporal's Python SDK runs on asyncio: on trio, every function here raises RuntimeError at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

try:
    import temporalio  # noqa: F401
except ImportError as _error:  # pragma: no cover
    raise ImportError(
        "agentloop.temporal needs the temporalio package: pip install 'anyio-agentloop[temporal]'"
    ) from _error

# Imported here, outside any workflow sandbox: the sandbox must find anyio's asyncio backend
# already loaded (it is passed through, as pydantic-ai's plugin does).
import anyio
import anyio._backends._asyncio
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.service import RPCError
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from .._types._errors import InvalidContextError
from .._types._messages import AgentMessage
from .._wire._envelope import EventEnvelope, envelope_from_json
from ._agent import ActivityOptions, TemporalAgent, idempotency_key
from ._approval import ApprovalRequest
from ._context import ContextStore, FileContextStore, MemoryContextStore
from ._payload import AgentLoopPayloadConverter, AgentRun, data_converter
from ._workflow import AgentWorkflow, _AgentNotFound, register_agent

__all__ = (
    "ActivityOptions",
    "AgentLoopPayloadConverter",
    "AgentLoopPlugin",
    "AgentRun",
    "AgentWorkflow",
    "ApprovalRequest",
    "ContextStore",
    "EventsLostError",
    "FileContextStore",
    "MemoryContextStore",
    "TemporalAgent",
    "data_converter",
    "approve",
    "idempotency_key",
    "pending_approvals",
    "start_agent",
    "stream_events",
    "worker",
)

PASSTHROUGH_MODULES = (
    "agentloop",
    "anyio",
    "sniffio",
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "attrs",
    "pydantic",
    "pydantic_core",
    "httpx",
    "httpcore",
    "httpx_sse",
    "certifi",
    "idna",
    "exceptiongroup",
    "typing_extensions",
)
"""Modules the workflow sandbox takes from the worker instead of re-importing them per run."""


class EventsLostError(Exception):
    """Raised by `stream_events` when events the caller asked for are no longer kept.

    A workflow keeps the events of its current history; a caller that fell more than one
    history behind (`turns_per_history` turns, while nobody read them) cannot get them back.
    The run's messages are all in the workflow's result.
    """


def _require_asyncio(what: str) -> None:
    import sniffio

    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    if library != "asyncio":
        raise RuntimeError(f"{what} needs asyncio: Temporal's Python SDK runs on asyncio only, not on {library}")


def _sandbox(runner: WorkflowRunner | None) -> WorkflowRunner:
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner if runner is not None else SandboxedWorkflowRunner()
    return replace(runner, restrictions=runner.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES))


def _converter(converter: DataConverter | None) -> DataConverter:
    if converter is None:
        return data_converter
    if issubclass(converter.payload_converter_class, AgentLoopPayloadConverter):
        return converter
    return replace(converter, payload_converter_class=AgentLoopPayloadConverter)


def _with_agent_workflow(workflows: Sequence[type] | None) -> Sequence[type]:
    workflows = list(workflows or ())
    return workflows if AgentWorkflow in workflows else [*workflows, AgentWorkflow]


class AgentLoopPlugin(SimplePlugin):
    """A worker (and Replayer) plugin: `AgentWorkflow`, the agents' activities, the sandbox's
    pass-through modules, and the payload converter for agentloop's values.

    Its agents are registered by name in this process when the plugin is made.
    """

    def __init__(self, agents: Sequence[TemporalAgent]) -> None:
        agents = list(agents)
        for agent in agents:
            register_agent(agent)
        super().__init__(
            "agentloop.AgentLoopPlugin",
            data_converter=_converter,
            workflows=_with_agent_workflow,
            activities=[a for agent in agents for a in agent.activities],
            workflow_runner=_sandbox,
            # A run that cannot start (an unknown agent, a transcript that cannot be continued)
            # fails its workflow instead of retrying the workflow task forever.
            workflow_failure_exception_types=[_AgentNotFound, InvalidContextError],
        )


def worker(client: Client, *, task_queue: str, agents: Sequence[TemporalAgent], **options: Any) -> Worker:
    """A Temporal `Worker` that runs these agents (`async with worker(...):` runs it).

    The client must use `data_converter` (`Client.connect(..., data_converter=data_converter)`).
    Other keyword arguments go to `temporalio.worker.Worker`.
    """
    _require_asyncio("agentloop.temporal.worker")
    if not isinstance(client, Client):
        raise TypeError(f"worker needs a temporalio Client, got {type(client).__name__}")
    if not issubclass(client.data_converter.payload_converter_class, AgentLoopPayloadConverter):
        raise ValueError(
            "the client must use agentloop's payload converter: "
            "Client.connect(..., data_converter=agentloop.temporal.data_converter)"
        )
    plugins = [*options.pop("plugins", ()), AgentLoopPlugin(agents)]
    return Worker(client, task_queue=task_queue, plugins=plugins, **options)


async def start_agent(
    client: Client,
    agent: str,
    prompts: Sequence[AgentMessage],
    *,
    id: str,
    task_queue: str,
    messages: Sequence[AgentMessage] = (),
    **options: Any,
) -> WorkflowHandle[AgentWorkflow, list[AgentMessage]]:
    """Start a durable run of the agent named `agent` from `prompts` after the transcript `messages`.

    `await handle.result()` is the list of messages the run added. Other keyword arguments go
    to `Client.start_workflow`.
    """
    _require_asyncio("agentloop.temporal.start_agent")
    run = AgentRun(agent=agent, prompts=tuple(prompts), messages=tuple(messages))
    return await client.start_workflow(AgentWorkflow.run, run, id=id, task_queue=task_queue, **options)


async def stream_events(handle: WorkflowHandle[Any, Any], after_seq: int = -1) -> AsyncIterator[EventEnvelope]:
    """Every event of the run after `after_seq`, in its envelope, in order, each once; ends after `agent_end`.

    A caller that reconnects passes the `seq` of the last envelope it handled. While the run
    goes on this long-polls the workflow's `events` update; once it has finished, its query (a
    worker answers it). Raises `EventsLostError` if the events asked for are no longer kept, and
    Temporal's `WorkflowFailureError` after the last event of a workflow that failed or was
    cancelled.
    """
    _require_asyncio("agentloop.temporal.stream_events")
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < -1:
        raise ValueError(
            f"after_seq must be the seq of an event already seen, or -1 (from the start), got {after_seq!r}"
        )
    seq = after_seq
    while True:
        try:
            page = await handle.execute_update("events", seq, result_type=dict)
        except (WorkflowUpdateFailedError, RPCError):
            page = await handle.query("events_now", seq, result_type=dict)  # the workflow has finished
            page["finished"] = True
        envelopes = page["envelopes"]
        if envelopes and envelopes[0]["seq"] != seq + 1:
            raise EventsLostError(
                f"events {seq + 1} to {envelopes[0]['seq'] - 1} of workflow {handle.id!r} are no longer kept "
                "(they were in an earlier history and nobody read them)"
            )
        for data in envelopes:
            envelope = envelope_from_json(data)
            seq = envelope.seq
            yield envelope
            if envelope.event.type == "agent_end":
                return
        if page["finished"] and not envelopes:
            await handle.result()  # a failed or cancelled workflow: its WorkflowFailureError
            raise EventsLostError(f"workflow {handle.id!r} finished without an agent_end after seq {seq}")
        if page["continuing"] and not envelopes:
            await anyio.sleep(0.05)  # the workflow is moving to its next history


async def pending_approvals(handle: WorkflowHandle[Any, Any]) -> list[ApprovalRequest]:
    """The tool calls of the run waiting for a person's decision, oldest first (a query).

    A call is pending from its `tool_execution_start` event until it is decided: ask after
    seeing that event for a tool the agent's `needs_approval` names.
    """
    _require_asyncio("agentloop.temporal.pending_approvals")
    listed = await handle.query("approvals", result_type=list)
    return [ApprovalRequest.from_json(data) for data in listed]


async def approve(
    handle: WorkflowHandle[Any, Any], tool_call_id: str, approved: bool = True, reason: str | None = None
) -> None:
    """Decide a pending tool call: approved, it runs; denied (`approved=False`), the model gets an
    error result with `reason` (default "Tool execution was blocked"), as a `before_tool_call`
    that blocks the call in one process.

    Returns once the workflow has recorded the decision (an update: a worker must be running).
    Raises ValueError if that call is not pending (unknown, already decided, or the run is over).
    """
    _require_asyncio("agentloop.temporal.approve")
    if not isinstance(tool_call_id, str):
        raise TypeError(f"approve: tool_call_id must be a str, got {type(tool_call_id).__name__}")
    if type(approved) is not bool:
        raise TypeError(f"approve: approved must be a bool, got {type(approved).__name__}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"approve: reason must be a str or None, got {type(reason).__name__}")
    try:
        await handle.execute_update("approve", args=[tool_call_id, approved, reason])
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise ValueError(getattr(cause, "message", None) or str(cause)) from exc
    except RPCError as exc:
        raise ValueError(f"approve: workflow {handle.id!r} takes no decisions: {exc.message}") from exc
