"""What the POST routes of an `AgentSSEApp` do to a session's agent, and the approval routes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._wire._json_text import encode_json
from ._live import LiveSession
from ._requests import HTTPError, messages_of

if TYPE_CHECKING:
    from ._app import AgentSSEApp

__all__ = (
    "ACTIONS",
    "Answer",
    "abort",
    "approvals",
    "approve",
    "continue_",
    "drive",
    "follow_up",
    "prompt",
    "start",
    "steer",
)

Answer = tuple[int, dict[str, Any]]


def start(app: AgentSSEApp, live: LiveSession, run: Callable[[], Awaitable[None]]) -> None:
    app._check_running()
    if live.busy:
        raise HTTPError(409, "the agent is running: steer, follow-up or abort it, or wait for agent_end")
    assert app._task_group is not None
    live.busy = True
    app._task_group.start_soon(drive, live, run)


async def drive(live: LiveSession, run: Callable[[], Awaitable[None]]) -> None:
    try:
        await run()
    except Exception as exc:  # what the Agent could not turn into events (a storage failure, ...)
        live.publish("error", encode_json({"error": str(exc) or type(exc).__name__}))
    finally:
        live.busy = False
        live.notify()


async def prompt(app: AgentSSEApp, live: LiveSession, body: dict[str, Any]) -> Answer:
    messages = messages_of(body)
    start(app, live, lambda: live.agent.prompt(messages))
    return 202, {"accepted": True, "lastEventId": live.last_event_id}


async def continue_(app: AgentSSEApp, live: LiveSession, body: dict[str, Any]) -> Answer:
    agent = live.agent
    transcript = agent.state.messages
    if not live.busy:
        if not transcript:
            raise HTTPError(409, "nothing to continue: the session has no messages; send a prompt")
        if agent.approvals.parked and agent.pending_approvals:
            raise HTTPError(409, "tool calls wait for approval: answer them (approve) first")
        if transcript[-1].role == "assistant" and not agent.has_queued_messages() and not agent.approvals.parked:
            raise HTTPError(409, "cannot continue after the assistant's answer: send a prompt")
    start(app, live, agent.continue_)
    return 202, {"accepted": True, "lastEventId": live.last_event_id}


async def steer(app: AgentSSEApp, live: LiveSession, body: dict[str, Any]) -> Answer:
    for message in messages_of(body):
        live.agent.steer(message)
    return 202, {"queued": True, "running": live.busy}


async def follow_up(app: AgentSSEApp, live: LiveSession, body: dict[str, Any]) -> Answer:
    for message in messages_of(body):
        live.agent.follow_up(message)
    return 202, {"queued": True, "running": live.busy}


async def abort(app: AgentSSEApp, live: LiveSession, body: dict[str, Any]) -> Answer:
    running = live.agent.signal is not None
    live.agent.abort()
    return 200, {"aborted": running}


async def approvals(app: AgentSSEApp, live: LiveSession) -> Answer:
    """`GET /sessions/{id}/approvals`: the tool calls waiting for a decision, oldest first."""
    return 200, {"approvals": [request.to_json() for request in live.agent.pending_approvals]}


async def approve(app: AgentSSEApp, live: LiveSession, body: dict[str, Any]) -> Answer:
    """`POST /sessions/{id}/approve`: `{"toolCallId", "approved", "reason", "arguments"}`."""
    tool_call_id = body.get("toolCallId")
    approved = body.get("approved", True)
    reason = body.get("reason")
    arguments = body.get("arguments")
    if not isinstance(tool_call_id, str):
        raise HTTPError(400, "'toolCallId' must be a string")
    if not isinstance(approved, bool):
        raise HTTPError(400, "'approved' must be true or false")
    if reason is not None and not isinstance(reason, str):
        raise HTTPError(400, "'reason' must be a string")
    if arguments is not None and not isinstance(arguments, dict):
        raise HTTPError(400, "'arguments' must be an object")
    agent = live.agent
    if all(request.tool_call_id != tool_call_id for request in agent.pending_approvals):
        raise HTTPError(409, f"no approval is pending for tool call {tool_call_id!r}")
    try:
        await agent.approve(tool_call_id, approved, reason, arguments=arguments)
    except ValueError as exc:
        raise HTTPError(422, str(exc)) from None
    return 200, {"approved": approved, "running": live.busy}


ACTIONS: dict[str, Callable[[AgentSSEApp, LiveSession, dict[str, Any]], Awaitable[Answer]]] = {
    "prompt": prompt,
    "continue": continue_,
    "steer": steer,
    "follow-up": follow_up,
    "follow_up": follow_up,
    "abort": abort,
    "approve": approve,
}
"""The POST actions on a session (the ticket is the app's own)."""
