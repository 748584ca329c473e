"""Durable agents on DBOS (the `dbos` extra): asyncio only.

The loop runs in a DBOS workflow (`DBOSAgent`, workflow `agentloop.<name>`); each model call is
a step that consumes the provider's stream and returns the final message; each tool call is a
step, with `idempotency_key()` for side effects. DBOS keeps its checkpoints in SQLite (the
default) or PostgreSQL; a process killed in the middle of a call is recovered by the next one
that launches DBOS on the same database: finished steps are not repeated, the interrupted one
runs again.

    agent = DBOSAgent("support", model=model, tools=[lookup])     # at import time, before DBOS.launch()
    DBOS(config={"name": "agents", "system_database_url": "sqlite:///agents.sqlite"})
    DBOS.launch()
    workflow_id = await start_agent(agent, [UserMessage(content="hi")], id="chat-1")
    async for envelope in stream_events(workflow_id):
        ...

A caller in another process uses a `DBOSClient` (`client=`): `start_agent` then enqueues the run
on its agent's queue (`agentloop.<name>`), which the workers that hold the agent listen to once
launched (`register_queues()`): a rolling deploy that adds an agent never hands its runs to an
old worker.

A tool the agent's `needs_approval` names waits for `await agent.approve(workflow_id,
tool_call_id, approved=True, reason=None, *, arguments=None)` (`await
agent.pending_approvals(workflow_id)` lists the calls waiting; the module's `approve` and
`pending_approvals` are the same calls for a process without the agent's definition).

DBOS's Python library runs async workflows on asyncio: on trio, every function here raises
RuntimeError at once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any

try:
    import dbos as _dbos
except ImportError as _error:  # pragma: no cover - depends on the environment
    from ..cli._install import install_command

    raise ImportError(f"agentloop.dbos needs the dbos package, the 'dbos' extra: {install_command('dbos')}") from _error

from dbos import DBOS, DBOSClient, SetWorkflowID, WorkflowHandleAsync

from .._durable import require_asyncio
from .._types._constants import AGENT_MESSAGE_TYPES
from .._types._messages import AgentMessage
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._envelope import EventEnvelope, envelope_from_json
from ._agent import (
    CONTROL_ATTRIBUTE,
    CONTROL_TOPIC,
    EVENTS_STREAM,
    DBOSAgent,
    defined_agents,
    idempotency_key,
    registered_agent,
    workflow_name,
)
from ._decisions import (
    ANSWER_EVENT_PREFIX,
    APPROVAL_TOPIC,
    APPROVALS_EVENT,
    ASYNCIO_ONLY,
    approve,
    check_call,
    pending_approvals,
)

__all__ = (
    "ANSWER_EVENT_PREFIX",
    "APPROVALS_EVENT",
    "APPROVAL_TOPIC",
    "CONTROL_ATTRIBUTE",
    "CONTROL_TOPIC",
    "DBOSAgent",
    "EVENTS_STREAM",
    "QUEUE",
    "abort",
    "agent_queue",
    "approve",
    "follow_up",
    "idempotency_key",
    "listen_queues",
    "pending_approvals",
    "register_queues",
    "result",
    "start_agent",
    "steer",
    "stream_events",
)

QUEUE = "agentloop"
"""The prefix of the DBOS queues `start_agent(..., client=...)` enqueues runs on: one queue per
agent, `agentloop.<name>` (`agent_queue`), which the workers that hold the agent listen to
(`listen_queues`, `register_queues`)."""


def agent_queue(agent: DBOSAgent | str, queue: str = QUEUE) -> str:
    """The DBOS queue of the runs of `agent` (a `DBOSAgent` or its name): `<queue>.<name>`."""
    name = agent.name if isinstance(agent, DBOSAgent) else agent
    if not isinstance(name, str) or not name:
        raise TypeError(f"agent must be a DBOSAgent or its name, got {agent!r}")
    return f"{queue}.{name}"


def listen_queues(agents: Sequence[DBOSAgent] | None = None, *, queue: str = QUEUE) -> list[str]:
    """In a worker, before `DBOS.launch()`: dequeue only from the queues of the agents it holds
    (`agents`, default every `DBOSAgent` this process defines); their names.

    DBOS keeps its queues in the database and a worker dequeues from every queue there unless told
    which ones are its own: without this, a worker could take a run of an agent it does not hold
    (during a rolling deploy, one only the new workers define), and the run would never finish.
    After the launch, `register_queues` registers the same queues.
    """
    names = [agent_queue(agent, queue) for agent in _held(agents, "listen_queues")]
    DBOS.listen_queues(names)
    return names


def register_queues(agents: Sequence[DBOSAgent] | None = None, *, queue: str = QUEUE, **options: Any) -> list[str]:
    """In a worker, once DBOS is launched: register the queue of each agent it holds (`agents`,
    default every `DBOSAgent` this process defines); their names.

    With `listen_queues` called before the launch, a worker dequeues only the runs of its
    agents: during a rolling deploy a run of an agent that only the new workers hold waits for
    one of them, never for a worker that cannot run it. Other keyword arguments go to
    `DBOS.register_queue` for every queue (`polling_interval_sec`, `worker_concurrency`, ...).
    """
    names = [agent_queue(agent, queue) for agent in _held(agents, "register_queues")]
    for name in names:
        DBOS.register_queue(name, **options)
    return names


def _held(agents: Sequence[DBOSAgent] | None, caller: str) -> list[DBOSAgent]:
    held = [registered_agent(name) for name in defined_agents()] if agents is None else list(agents)
    for agent in held:
        if not isinstance(agent, DBOSAgent):
            raise TypeError(f"{caller} takes DBOSAgents, got {type(agent).__name__}")
    return held


del _dbos


def _check_messages(messages: Sequence[AgentMessage], name: str) -> list[AgentMessage]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"{name} must be a sequence of messages, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, AGENT_MESSAGE_TYPES):
            raise TypeError(f"{name}[{i}] must be an agentloop message, got {type(message).__name__}")
    return list(messages)


async def start_agent(
    agent: DBOSAgent | str,
    prompts: Sequence[AgentMessage],
    *,
    id: str,
    messages: Sequence[AgentMessage] = (),
    client: DBOSClient | None = None,
    queue: str = QUEUE,
) -> str:
    """Start a durable run of `agent` from `prompts` after the transcript `messages`; return its workflow id.

    `id` is the workflow id: starting the same id again attaches to the run already started.
    Without `client` the run starts in this process (DBOS launched here, the agent defined
    here); with a `DBOSClient` it is enqueued by name on the agent's queue (`agent_queue(agent,
    queue)`), for a worker that holds the agent (`register_queues`) to run. `prompts`
    empty continues from `messages` (whose last message must not be an assistant message).

    Raises LookupError at once for a name no `DBOSAgent` of this process has, when this process
    defines any (a client that imports the agents' module checks every name). A client that
    defines none cannot tell: a run of an agent no worker holds stays enqueued until one does.
    """
    require_asyncio("agentloop.dbos.start_agent", ASYNCIO_ONLY)
    check_call(id, client, "id")
    name = agent.name if isinstance(agent, DBOSAgent) else agent
    if not isinstance(name, str):
        raise TypeError(f"agent must be a DBOSAgent or its name, got {type(agent).__name__}")
    request = {
        "prompts": [to_json(m) for m in _check_messages(prompts, "prompts")],
        "messages": [to_json(m) for m in _check_messages(messages, "messages")],
    }
    if client is not None:
        if defined_agents() and not isinstance(agent, DBOSAgent):
            registered_agent(name)  # this process defines the agents: a name that is not one fails now
        handle: WorkflowHandleAsync[list[Any]] = await client.enqueue_async(
            {"queue_name": agent_queue(name, queue), "workflow_name": workflow_name(name), "workflow_id": id}, request
        )
        return handle.get_workflow_id()
    found = agent if isinstance(agent, DBOSAgent) else registered_agent(name)
    with SetWorkflowID(id):
        started: WorkflowHandleAsync[list[Any]] = await DBOS.start_workflow_async(found.workflow, request)
    return started.get_workflow_id()


async def stream_events(
    workflow_id: str, *, after_seq: int = -1, client: DBOSClient | None = None, poll_interval: float = 0.1
) -> AsyncGenerator[EventEnvelope, None]:
    """Every event of the run after `after_seq`, in its envelope, in order, each once; ends after `agent_end`.

    A caller that reconnects passes the `seq` of the last envelope it handled. The events come
    from the run's DBOS stream (`EVENTS_STREAM`), written as the run reaches each step: an
    event reaches the caller when the step after it begins (the final ones when the run ends).
    `poll_interval` (seconds) is how often a reader in another process looks for new values
    (SQLite has no notifications; on PostgreSQL DBOS is notified). Raises the workflow's error
    if it failed or was cancelled before its `agent_end`. A caller that stops early closes it:
    `async with contextlib.aclosing(stream_events(...)) as events:`.
    """
    require_asyncio("agentloop.dbos.stream_events", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < -1:
        raise ValueError(
            f"after_seq must be the seq of an event already seen, or -1 (from the start), got {after_seq!r}"
        )
    reader = client if client is not None else DBOS
    values = reader.read_stream_async(workflow_id, EVENTS_STREAM, polling_interval_sec=poll_interval)
    seen: set[str] = set()
    try:
        async for value in values:
            for item in value:
                identity = item["id"]
                if identity in seen:  # written again by a step that ran again after a crash
                    continue
                seen.add(identity)
                seq = len(seen) - 1
                if seq <= after_seq:
                    continue
                envelope = replace(envelope_from_json(item["envelope"]), seq=seq)
                yield envelope
                if envelope.event.type == "agent_end":
                    return
    finally:
        await values.aclose()
    await _result_json(workflow_id, client, poll_interval)  # a failed or cancelled run raises its error here
    raise RuntimeError(f"the run of workflow {workflow_id!r} ended without an agent_end after seq {len(seen) - 1}")


async def _result_json(workflow_id: str, client: DBOSClient | None, poll_interval: float) -> list[Any]:
    handle: WorkflowHandleAsync[list[Any]]
    if client is not None:
        handle = await client.retrieve_workflow_async(workflow_id)
    else:
        handle = await DBOS.retrieve_workflow_async(workflow_id)
    return await handle.get_result(polling_interval_sec=poll_interval)


async def result(
    workflow_id: str, *, client: DBOSClient | None = None, poll_interval: float = 0.1
) -> list[AgentMessage]:
    """The messages the run added (prompts included), once it has finished (waits for it).

    Raises the workflow's error if it failed or was cancelled. `poll_interval`: seconds between
    two looks at the workflow's status.
    """
    require_asyncio("agentloop.dbos.result", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    return [from_json(m) for m in await _result_json(workflow_id, client, poll_interval)]


async def _send(workflow_id: str, data: dict[str, Any], topic: str, client: DBOSClient | None) -> None:
    """Send `data` to the run on `topic`; a control message then marks the run (`CONTROL_ATTRIBUTE`)."""
    sender = client if client is not None else DBOS
    await sender.send_async(workflow_id, data, topic)
    if topic == CONTROL_TOPIC:
        mark = {CONTROL_ATTRIBUTE: uuid.uuid4().hex}
        await sender.update_workflow_attributes_async(workflow_id, mark, merge=True)


async def steer(workflow_id: str, message: AgentMessage, *, client: DBOSClient | None = None) -> None:
    """Queue a message for the run's next turn (taken at the end of the current turn, after its tool calls)."""
    require_asyncio("agentloop.dbos.steer", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    _check_messages([message], "message")
    await _send(workflow_id, {"kind": "steer", "message": to_json(message)}, CONTROL_TOPIC, client)


async def follow_up(workflow_id: str, message: AgentMessage, *, client: DBOSClient | None = None) -> None:
    """Queue a message for when the run would otherwise stop."""
    require_asyncio("agentloop.dbos.follow_up", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    _check_messages([message], "message")
    await _send(workflow_id, {"kind": "follow_up", "message": to_json(message)}, CONTROL_TOPIC, client)


async def abort(workflow_id: str, *, client: DBOSClient | None = None) -> None:
    """Abort the run at the end of its current turn: it ends `aborted` (with `agent_end`) before its next model call.

    The calls of the turn under way run first (a step is not interrupted); a call waiting for
    approval is denied ("Operation aborted"). To stop a workflow at once, without the loop's
    ending, cancel it: `DBOS.cancel_workflow_async(id)`.
    """
    require_asyncio("agentloop.dbos.abort", ASYNCIO_ONLY)
    check_call(workflow_id, client)
    await _send(workflow_id, {"kind": "abort"}, CONTROL_TOPIC, client)
    await _send(workflow_id, {"kind": "abort"}, APPROVAL_TOPIC, client)  # a call waiting for approval
