"""Durable agents on Temporal (the `temporal` extra): asyncio only.

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

A tool the agent's `needs_approval` names waits for `await agent.approve(handle, tool_call_id,
approved=True, reason=None, *, arguments=None)` (`await agent.pending_approvals(handle)` lists
the calls waiting; the module's `approve` and `pending_approvals` are the same calls for a
process without the agent's definition); with a `context_store`
(`FileContextStore`, `MemoryContextStore`, or your own `ContextStore`) model calls carry what is
new and a key instead of the whole transcript, and a history grows linearly with its turns.

Size limits: Temporal refuses a payload over 2 MiB. Events reach a caller in pages of at most
192 KiB (an event larger than that in parts), so reading never meets the limit. With a
`context_store`, every payload of 256 KiB or more (a large tool result, a long transcript, the
run's result) is kept in the store and its history holds the key: a client that reads such a
result connects with `stored_data_converter(store)`. Without one, a tool result over
`PAYLOAD_LIMIT` bytes of JSON is the call's error result, and a context, result or transcript
over it fails the run (`PayloadTooLarge`, seen by `result()` and `stream_events`).

Temporal's Python SDK runs on asyncio: on trio, every function here raises RuntimeError at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

try:
    import temporalio  # noqa: F401
except ImportError as _error:  # pragma: no cover - depends on the environment
    from ..cli._install import install_command

    raise ImportError(
        f"agentloop.temporal needs the temporalio package, the 'temporal' extra: {install_command('temporal')}"
    ) from _error

# Imported here, outside any workflow sandbox: the sandbox must find anyio's asyncio backend
# already loaded (it is passed through, as pydantic-ai's plugin does).
import json

import anyio
import anyio._backends._asyncio
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from .._durable import require_asyncio
from .._types._errors import InvalidContextError
from .._types._messages import AgentMessage
from .._wire._envelope import EventEnvelope, envelope_from_json
from ._agent import ActivityOptions, TemporalAgent, idempotency_key
from ._context import STORED_THRESHOLD, ContextStore, FileContextStore, MemoryContextStore, payload_storage
from ._decisions import ASYNCIO_ONLY, approve, pending_approvals
from ._payload import PAYLOAD_LIMIT, AgentLoopPayloadConverter, AgentRun, PayloadTooLarge, data_converter
from ._workflow import AgentWorkflow, register_agent

__all__ = (
    "ActivityOptions",
    "AgentLoopPayloadConverter",
    "AgentLoopPlugin",
    "AgentRun",
    "AgentWorkflow",
    "ContextStore",
    "EventsLostError",
    "FileContextStore",
    "MemoryContextStore",
    "PAYLOAD_LIMIT",
    "PayloadTooLarge",
    "TemporalAgent",
    "data_converter",
    "stored_data_converter",
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


_HEARTBEAT_THROTTLE = timedelta(seconds=1)
"""The longest a worker made by `worker` holds an activity's heartbeat back (Temporal's default: 60 s)."""


class EventsLostError(Exception):
    """Raised by `stream_events` when events the caller asked for are no longer kept.

    A workflow keeps the events of its current history; a caller that fell more than one
    history behind (`turns_per_history` turns, while nobody read them) cannot get them back.
    The run's messages are all in the workflow's result.
    """


def _sandbox(runner: WorkflowRunner | None) -> WorkflowRunner:
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner if runner is not None else SandboxedWorkflowRunner()
    return replace(runner, restrictions=runner.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES))


def stored_data_converter(store: ContextStore, *, threshold: int = STORED_THRESHOLD) -> DataConverter:
    """`data_converter`, keeping every payload of `threshold` bytes or more in `store` (Temporal's
    external storage): for a client that reads the results of agents with this `context_store`."""
    return replace(data_converter, external_storage=payload_storage(store, threshold))


def _converter_for(agents: Sequence[TemporalAgent]) -> Callable[[DataConverter | None], DataConverter]:
    """The worker's converter: agentloop's payloads, and external storage in the agents' store
    unless the converter has external storage already."""
    stores = list({id(a.contexts.store): a.contexts.store for a in agents if a.contexts is not None}.values())
    if len(stores) > 1:
        raise ValueError(
            "the agents of one worker must share one context_store (it also keeps their large payloads), "
            f"got {len(stores)} stores"
        )
    if stores and any(a.contexts is None for a in agents):
        # Temporal keeps large payloads through the worker's data converter, one for all its
        # workflows: the store would keep those of the agents without one too, and their
        # clients, with the plain data_converter, could not read their results.
        plain = sorted(a.name for a in agents if a.contexts is None)
        raise ValueError(
            f"agents with a context_store and agents without ({', '.join(plain)}) cannot share a worker: "
            "the store keeps every large payload of the worker's runs; run them on workers of their own "
            "(another task_queue)"
        )

    def converter_for(converter: DataConverter | None) -> DataConverter:
        converter = converter or data_converter
        if not issubclass(converter.payload_converter_class, AgentLoopPayloadConverter):
            converter = replace(converter, payload_converter_class=AgentLoopPayloadConverter)
        if stores and converter.external_storage is None:
            converter = replace(converter, external_storage=payload_storage(stores[0]))
        return converter

    return converter_for


def _with_agent_workflow(workflows: Sequence[type] | None) -> Sequence[type]:
    workflows = list(workflows or ())
    return workflows if AgentWorkflow in workflows else [*workflows, AgentWorkflow]


class AgentLoopPlugin(SimplePlugin):
    """A worker (and Replayer) plugin: `AgentWorkflow`, the agents' activities, the sandbox's
    pass-through modules, and the payload converter for agentloop's values.

    A worker takes its client's data converter: with agents that have a `context_store`, give
    `Worker` a client connected with this plugin (or `stored_data_converter(store)`), or use
    `agentloop.temporal.worker`, which does it.

    Its agents are registered by name in this process when the plugin is made.
    """

    def __init__(self, agents: Sequence[TemporalAgent]) -> None:
        agents = list(agents)
        for agent in agents:
            register_agent(agent)
        self.converter = _converter_for(agents)
        """The converter for these agents' payloads, from a client's (external storage in their store)."""
        super().__init__(
            "agentloop.AgentLoopPlugin",
            data_converter=self.converter,
            workflows=_with_agent_workflow,
            activities=[a for agent in agents for a in agent.activities],
            workflow_runner=_sandbox,
            # A run that cannot start (a transcript that cannot be continued) fails its workflow
            # instead of retrying the workflow task forever. A run of an agent this worker does
            # not hold fails its workflow task: Temporal gives it to a worker again.
            workflow_failure_exception_types=[InvalidContextError],
        )


def worker(client: Client, *, task_queue: str, agents: Sequence[TemporalAgent], **options: Any) -> Worker:
    """A Temporal `Worker` that runs these agents (`async with worker(...):` runs it).

    The client must use `data_converter` (`Client.connect(..., data_converter=data_converter)`).
    Other keyword arguments go to `temporalio.worker.Worker`. Its heartbeat throttle
    (`max_heartbeat_throttle_interval`) is 1 s unless given: a model call's heartbeats then
    reach Temporal every second, and so an abort reaches the call in a second or two (see
    `AgentWorkflow.abort`).
    """
    require_asyncio("agentloop.temporal.worker", ASYNCIO_ONLY)
    if not isinstance(client, Client):
        raise TypeError(f"worker needs a temporalio Client, got {type(client).__name__}")
    if not issubclass(client.data_converter.payload_converter_class, AgentLoopPayloadConverter):
        raise ValueError(
            "the client must use agentloop's payload converter: "
            "Client.connect(..., data_converter=agentloop.temporal.data_converter)"
        )
    plugin = AgentLoopPlugin(agents)
    converter = plugin.converter(client.data_converter)
    if converter is not client.data_converter:  # a worker takes its client's converter
        config = client.config()
        config["data_converter"] = converter
        client = Client(**config)
    options.setdefault("max_heartbeat_throttle_interval", _HEARTBEAT_THROTTLE)
    plugins = [*options.pop("plugins", ()), plugin]
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
    require_asyncio("agentloop.temporal.start_agent", ASYNCIO_ONLY)
    run = AgentRun(agent=agent, prompts=tuple(prompts), messages=tuple(messages))
    return await client.start_workflow(AgentWorkflow.run, run, id=id, task_queue=task_queue, **options)


async def stream_events(handle: WorkflowHandle[Any, Any], after_seq: int = -1) -> AsyncIterator[EventEnvelope]:
    """Every event of the run after `after_seq`, in its envelope, in order, each once; ends after `agent_end`.

    A caller that reconnects passes the `seq` of the last envelope it handled. While the run
    goes on this long-polls the workflow's `events` update; once it has finished, its query (a
    worker answers it). A server too busy to answer in time, or a workflow task that failed or
    timed out (a worker that died with it), is asked again. Raises `EventsLostError` if the
    events asked for are no longer kept, and Temporal's `WorkflowFailureError` after the last
    event of a workflow that failed or was cancelled.
    """
    require_asyncio("agentloop.temporal.stream_events", ASYNCIO_ONLY)
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < -1:
        raise ValueError(
            f"after_seq must be the seq of an event already seen, or -1 (from the start), got {after_seq!r}"
        )
    seq = after_seq
    parts: list[str] = []  # of an event too large for one page
    pause = _ASK_AGAIN_AFTER
    while True:
        page = await _page(handle, seq, len(parts))
        if page is None:  # the server could not answer now
            await anyio.sleep(pause)
            pause = min(pause * 2, _ASK_AGAIN_AT_MOST)
            continue
        pause = _ASK_AGAIN_AFTER
        envelopes = page["envelopes"]
        first = page.get("seq", envelopes[0]["seq"] if envelopes else seq + 1)
        if first != seq + 1:
            raise EventsLostError(
                f"events {seq + 1} to {first - 1} of workflow {handle.id!r} are no longer kept "
                "(they were in an earlier history and nobody read them)"
            )
        if "part" in page:
            parts.append(page["part"])
            if len(parts) < page["parts"]:
                continue
            envelopes = [json.loads("".join(parts))]
            parts = []
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


_ASK_AGAIN_AFTER = 0.2
_ASK_AGAIN_AT_MOST = 2.0
"""Seconds `stream_events` waits before it asks again when the server could not answer: 0.2,
doubled each time it still cannot, up to 2."""


async def _page(handle: WorkflowHandle[Any, Any], seq: int, part: int) -> dict[str, Any] | None:
    """The next page of the run's events after `seq`; None when the server cannot answer now.

    While the run goes on: the `events` update, a long poll (None when its deadline passed). When
    that fails, the workflow has finished, or its workflow task has failed or timed out (a worker
    died with it, or was too busy): the `events_now` query, answered from the history (None while
    the task is in that failed state). A page with nothing new from a workflow that is still
    running means the latter: None.
    """
    try:
        page: dict[str, Any] = await handle.execute_update("events", args=[seq, part], result_type=dict)
        return page
    except (WorkflowUpdateFailedError, RPCTimeoutOrCancelledError, RPCError) as exc:
        if _timed_out(exc):
            return None
    try:
        page = await handle.query("events_now", args=[seq, part], result_type=dict)
    except RPCError as exc:
        if _timed_out(exc) or exc.status == RPCStatusCode.FAILED_PRECONDITION:
            return None
        raise
    if not page["finished"] and not page["envelopes"] and "part" not in page:
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            return None
        page["finished"] = True  # it failed, or was cancelled or terminated
    return page


def _timed_out(exc: BaseException) -> bool:
    """Whether a call to the server failed only because its deadline passed (asking again is
    right): the statuses Temporal's client itself reads so."""
    if isinstance(exc, RPCTimeoutOrCancelledError):
        return True
    return isinstance(exc, RPCError) and exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)
