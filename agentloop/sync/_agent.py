"""`SyncAgent`: an `Agent`'s runs as blocking calls, each on a portal thread of its own."""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

import anyio
import anyio.lowlevel
from anyio.from_thread import BlockingPortal, start_blocking_portal

from .._core._agent import Agent, PromptInput
from .._core._state import AgentState
from .._types._messages import AssistantMessage, ImageContent
from ..approvals._request import ApprovalRequest

__all__ = ("SyncAgent",)

T = TypeVar("T")


class SyncAgent:
    """Blocking calls on an `Agent`, for scripts and notebooks.

    Example:
        ```python
        agent = SyncAgent(Agent(model=model, stream_fn=stream))
        answer = agent.prompt("What is 2 + 3?")
        print(answer.text)
        ```

    Each call starts an event loop in a thread of its own (anyio's `start_blocking_portal`),
    runs the agent there and waits for it. The calling thread may have an event loop running
    (a Jupyter cell, a trio or asyncio program): that loop is blocked for the duration of the
    call, the run is not. Listeners run in the portal's thread, one at a time as usual.

    Ctrl-C (`KeyboardInterrupt` in the waiting thread) aborts the run: the run ends as an abort
    does (an `aborted` assistant message, `agent_end`, a transcript that a follow-up can
    continue), then `KeyboardInterrupt` is raised again. A second Ctrl-C while the abort is under
    way cancels the run outright. (Inside `asyncio.run`, asyncio keeps the first Ctrl-C for its main
    task: the second one aborts the run.)

    Args:
        agent: The agent to drive. Use it from one thread at a time: not while a call runs.
        backend: The portal's event loop: `"asyncio"` (default) or `"trio"`.
        backend_options: Passed to `anyio.run` (e.g. `{"use_uvloop": True}`).

    Objects bound to an event loop (an open client, an MCP connection) cannot be shared across
    calls: each call has a loop of its own. Providers open their clients per request.

    `approve` and `pending_approvals` may be used from any thread while a call blocks in
    another (a UI thread, a notebook's background thread), and from the agent's callbacks
    (`on_approval_request`, listeners).
    """

    __slots__ = ("_lock", "_running", "agent", "backend", "backend_options")

    def __init__(
        self,
        agent: Agent,
        *,
        backend: Literal["asyncio", "trio"] = "asyncio",
        backend_options: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        if backend not in ("asyncio", "trio"):
            raise ValueError(f"backend must be 'asyncio' or 'trio', got {backend!r}")
        self.agent = agent
        self.backend = backend
        self.backend_options = backend_options
        self._lock = threading.Lock()  # held while another thread's call runs on the portal
        self._running: _Running | None = None

    def __repr__(self) -> str:
        return f"SyncAgent({self.agent!r}, backend={self.backend!r})"

    @property
    def state(self) -> AgentState:
        """The wrapped agent's state."""
        return self.agent.state

    def prompt(self, input: PromptInput, images: Sequence[ImageContent] | None = None) -> AssistantMessage:
        """`Agent.prompt`, blocking; returns the run's last assistant message.

        A failed or aborted run does not raise (as with `Agent.prompt`): the message's
        `stop_reason` is `"error"` or `"aborted"` and `error_message` says why.
        """
        self.run(self.agent.prompt, input, images)
        return self._last_answer()

    def continue_(self) -> AssistantMessage:
        """`Agent.continue_`, blocking; returns the run's last assistant message."""
        self.run(self.agent.continue_)
        return self._last_answer()

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """`Agent.pending_approvals`: the tool calls waiting for a person's decision, oldest first."""
        running = self._running
        if running is None or running.here():  # no run, or a callback of the run
            return self.agent.pending_approvals
        with self._lock:
            running = self._running
            if running is not None:
                return running.portal.call(lambda: self.agent.pending_approvals)
        return self.agent.pending_approvals

    def approve(
        self,
        tool_call_id: str,
        approved: bool = True,
        reason: str | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """`Agent.approve`, blocking: decide a pending tool call (see `Agent.approve`).

        From another thread while `prompt` or `continue_` blocks, it is decided on the run's
        event loop. From a plain callback of the run (`on_approval_request`, a listener),
        which runs on that loop and cannot wait, the decision is checked and taken at once: it
        raises there what `Agent.approve` raises (ValueError, TypeError; a second decision of the
        same call is a ValueError), and the call goes on once the callback returns.
        With no run going (calls a session stored), it is decided on a loop of its own.
        """
        decide = functools.partial(self.agent.approve, tool_call_id, approved, reason, arguments=arguments)
        running = self._running
        if running is not None and running.here():  # a callback of the run: it cannot wait
            self.agent.approvals.decide(tool_call_id, approved, reason, arguments)
            return
        with self._lock:
            running = self._running
            if running is not None:
                running.portal.call(decide)
                return
        with start_blocking_portal(self.backend, self.backend_options) as portal:
            portal.call(decide)

    def run(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run `await func(*args)` on a portal of its own and return its result.

        For other async calls on the agent (a typed result, a session's helpers): Ctrl-C
        aborts the agent's run as for `prompt`.
        """
        with start_blocking_portal(self.backend, self.backend_options) as portal:
            scope = portal.call(anyio.CancelScope)  # made in the portal's loop

            async def guarded() -> T | None:
                with scope:
                    await anyio.lowlevel.checkpoint()  # a cancel before the start lands here
                    return await func(*args)
                return None

            def interrupt() -> None:
                # In the portal's thread. Once `func` has started, the agent's run is active
                # (it becomes active before its first await): abort it. Before, cancel.
                if self.agent.signal is not None:
                    self.agent.abort()
                else:
                    scope.cancel()

            self._running = _Running(portal, portal.call(threading.get_ident))
            try:
                future = portal.start_task_soon(guarded)
                try:
                    result = future.result()
                except KeyboardInterrupt:
                    portal.call(interrupt)
                    try:
                        future.result()  # the aborted run ends cleanly
                    except KeyboardInterrupt:
                        portal.call(scope.cancel)
                        future.exception()
                    raise
            finally:
                with self._lock:  # after the decisions other threads are taking on this portal
                    self._running = None
            return cast(T, result)  # None only after a cancel, which raised above

    def _last_answer(self) -> AssistantMessage:
        for message in reversed(self.agent.state.messages):
            if isinstance(message, AssistantMessage):
                return message
        raise RuntimeError("the run ended without an assistant message")


class _Running:
    """The portal of the call that blocks now, and its event loop's thread."""

    __slots__ = ("portal", "thread")

    def __init__(self, portal: BlockingPortal, thread: int) -> None:
        self.portal = portal
        self.thread = thread

    def here(self) -> bool:
        """Whether the calling thread is the portal's (a callback of the run)."""
        return threading.get_ident() == self.thread
