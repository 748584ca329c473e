"""`Session`: the one writer of a session, and the recorder of an attached `Agent`."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Sequence
from types import TracebackType

import anyio
import anyio.to_thread

from .._core._agent import Agent
from .._core._loop import check_messages
from .._types._abort import AbortSignal
from .._types._errors import AgentBusyError
from .._types._events import AgentEvent, AgentStart, MessageEnd
from .._types._messages import AgentMessage, AssistantMessage, TextContent, ToolResultMessage, now_ms
from ..approvals._request import ApprovalRequest
from ..context._compaction import CompactionEnd, CompactionEvent, CompactionState, Compactor
from ._backend import Writer, encode_message
from ._model import JSONDict, Meta, SessionError, SessionInfo, SessionSettings, check_title

__all__ = ("INTERRUPTED_TOOL_TEXT", "Session", "missing_tool_results")

INTERRUPTED_TOOL_TEXT = (
    "Tool call was interrupted: the agent stopped before the tool finished, so its effects are unknown. "
    "Call the tool again if it is still needed."
)
"""The error result `Session.resume` records for a tool call left without a result by a crash."""


# --- the writer ------------------------------------------------------------------------------


class Session:
    """A session open for writing: the holder of its lock. Made by `store.open(id)`.

    `attach(agent)` records an agent from now on; `resume(agent)` first loads the session into
    the agent. Close it with `aclose()` (or `async with`): that detaches the agent and releases
    the lock. Writes run in a worker thread and are not interrupted by cancellation once
    started, so `messages` always matches what is stored.
    """

    def __init__(
        self,
        writer: Writer,
        meta: Meta,
        messages: builtins.list[AgentMessage],
        on_close: Callable[[Session], None],
    ) -> None:
        self._on_close = on_close  # the store forgets the session
        self._writer = writer
        self._meta = meta
        self._messages = messages
        self._write_lock = threading.Lock()
        self._closed = False
        self._agent: Agent | None = None
        self._listener = self._on_event
        self._stored_settings: JSONDict = meta.settings
        self._compactions = builtins.list(meta.compaction_states(len(messages)))
        self._compactor: Compactor | None = None
        self._unsubscribe_compactor: Callable[[], None] | None = None
        approvals = meta.settings.get("approvals")
        self._approvals: builtins.list[JSONDict] = approvals if isinstance(approvals, builtins.list) else []

    # --- what it holds -----------------------------------------------------------------------
    @property
    def id(self) -> str:
        """The session id."""
        return self._meta.id

    @property
    def info(self) -> SessionInfo:
        """The session's info now."""
        meta = self._meta
        meta.message_count = len(self._messages)
        return meta.info()

    @property
    def messages(self) -> tuple[AgentMessage, ...]:
        """The stored transcript."""
        return tuple(self._messages)

    @property
    def compactions(self) -> tuple[CompactionState, ...]:
        """The stored compactions, oldest first."""
        return tuple(self._compactions)

    @property
    def compaction(self) -> CompactionState | None:
        """The latest stored compaction (None when the session was never compacted)."""
        return self._compactions[-1] if self._compactions else None

    def context(self) -> builtins.list[AgentMessage]:
        """What the model sees: the latest compaction's summary and the messages from its first
        kept one on (the whole transcript when the session was never compacted)."""
        state = self.compaction
        return builtins.list(self._messages) if state is None else state.context(self._messages)

    @property
    def pending_approvals(self) -> builtins.list[ApprovalRequest]:
        """The stored tool calls waiting for a person's decision, oldest first.

        Answer them on the agent the session resumes (`agent.approve`): its next run first runs
        the calls answered, then goes on.
        """
        return [ApprovalRequest.from_json(record) for record in self._approvals if record.get("decision") is None]

    @property
    def closed(self) -> bool:
        """Whether `aclose()` was called."""
        return self._closed

    @property
    def agent(self) -> Agent | None:
        """The attached agent, if any."""
        return self._agent

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._messages)} messages"
        return f"Session({self.id!r}, {state})"

    # --- writes ------------------------------------------------------------------------------
    async def _write(self, fn: Callable[[], None]) -> None:
        if self._closed:
            raise SessionError(f"session {self.id!r} is closed")

        def work() -> None:
            with self._write_lock:
                if self._closed:
                    raise SessionError(f"session {self.id!r} is closed")
                fn()

        await anyio.to_thread.run_sync(work)

    async def append(self, messages: Sequence[AgentMessage]) -> None:
        """Append messages to the transcript (one durable record each)."""
        messages = check_messages(messages, "messages")
        if not messages:
            return

        def fn() -> None:
            encoded = [encode_message(m) for m in messages]
            now = now_ms()
            self._writer.append(len(self._messages), encoded, now)
            self._messages.extend(messages)
            self._meta.updated = now

        await self._write(fn)

    async def replace(self, messages: Sequence[AgentMessage]) -> None:
        """Replace the whole transcript at once (after a compaction, or an agent's reset)."""
        messages = check_messages(messages, "messages")

        def fn() -> None:
            encoded = [encode_message(m) for m in messages]
            now = now_ms()
            self._writer.replace(encoded, now)
            self._messages[:] = messages
            self._compactions.clear()
            self._meta.updated = now

        await self._write(fn)

    async def record_compaction(self, state: CompactionState) -> None:
        """Store a compaction of the stored transcript (one atomic record: a crash keeps it whole
        or not at all). The transcript stays whole; `context()` is rebuilt from the summary."""
        if not isinstance(state, CompactionState):
            raise TypeError(f"state must be a CompactionState, got {type(state).__name__}")
        count = len(self._messages)
        if not 0 < state.first_kept_index < count or state.fresh_from_index > count:
            raise ValueError(
                f"state.first_kept_index must be an index of the session's {count} messages after the first, "
                f"and fresh_from_index at most {count}, got {state.first_kept_index} and {state.fresh_from_index}"
            )

        def fn() -> None:
            now = now_ms()
            self._writer.compact(state.to_json(), now)
            self._compactions.append(state)
            self._meta.updated = now

        await self._write(fn)

    async def set_title(self, title: str | None) -> None:
        """Change the session's title."""
        check_title(title)
        await self._update({"title": title})

    async def set_settings(self, settings: SessionSettings) -> None:
        """Change the stored settings (an attached agent's are recorded at each run's start)."""
        if not isinstance(settings, SessionSettings):
            raise TypeError(f"settings must be a SessionSettings, got {type(settings).__name__}")
        await self._update({"settings": settings.to_json()})

    async def _update(self, changes: JSONDict) -> None:
        def fn() -> None:
            now = now_ms()
            self._writer.update(changes, now)
            if "title" in changes:
                self._meta.title = changes["title"]
            if "settings" in changes:
                self._meta.settings = self._stored_settings = changes["settings"]
            self._meta.updated = now

        await self._write(fn)

    # --- agents ------------------------------------------------------------------------------
    async def attach(self, agent: Agent, *, compactor: Compactor | None = None) -> None:
        """Record `agent` from now on: each message is written at its `message_end`.

        The session's listener runs before every other listener of the agent, so they see a
        message only once it is stored. The session's transcript must be a prefix of the
        agent's (the rest is written now); to load a stored transcript into an agent, use
        `resume()`. One agent at a time; `detach()` or `aclose()` ends the recording. With
        `compactor` (the agent's, from `Compaction(...).attach(agent)`), each compaction is
        recorded too, before the model call that follows it.
        """
        self._check_attachable(agent)
        self._check_compactor(agent, compactor)
        have, theirs = self._messages, agent.state.messages
        if len(have) > len(theirs) or any(a is not b and a != b for a, b in zip(have, theirs, strict=False)):
            raise ValueError(
                f"session {self.id!r} has messages the agent does not ({len(have)} stored, "
                f"{len(theirs)} in the agent): use session.resume(agent) to load them into the agent"
            )
        await self._sync(agent)
        self._subscribe(agent, compactor)

    async def resume(self, agent: Agent, *, restore_settings: bool = True, compactor: Compactor | None = None) -> Agent:
        """Load the session into `agent`, attach it, and return it (ready for `continue_()`).

        The agent's transcript becomes the session's. A tool call that a crash left without a
        result gets an error result (`INTERRUPTED_TOOL_TEXT`), stored first, so the transcript
        is one a model accepts. With `restore_settings` (the default), the system prompt, the
        thinking level and the model (when one is stored) are set from the session; the tools
        stay the agent's own (`info.settings.tool_names` says which ones the session used).
        With `compactor` (the agent's, from `Compaction(...).attach(agent)`), the latest stored
        compaction is restored into it (the model sees its summary and the messages after it)
        and each new compaction is recorded.
        Then: `continue_()` when the last message is a prompt or a tool result, else `prompt()`.
        Tool calls stored waiting for approval wait again in the agent (`agent.pending_approvals`):
        once they are answered (`agent.approve`), its next run first runs them.
        """
        self._check_attachable(agent)
        self._check_compactor(agent, compactor)
        asked = {record["toolCallId"] for record in self._approvals}
        missing = [result for result in missing_tool_results(self._messages) if result.tool_call_id not in asked]
        if missing:
            await self.append(missing)
        if restore_settings:
            settings = self.info.settings
            agent.state.system_prompt = settings.system_prompt
            agent.state.thinking_level = settings.thinking_level
            if settings.model is not None:
                agent.state.model = settings.model
        agent.state.messages = self._messages
        if compactor is not None and self._compactions:
            compactor.restore(self._compactions[-1])
        if self._approvals:
            agent.approvals.restore(self._approvals, agent.state.tools)
        await self._sync_settings(agent)
        self._subscribe(agent, compactor)
        return agent

    def detach(self) -> None:
        """Stop recording the attached agent (no-op when none is attached)."""
        agent, self._agent = self._agent, None
        if agent is not None:
            self._unsubscribe()
            if agent.approvals.recorder == self._record_approvals:
                agent.approvals.recorder = None
        unsubscribe, self._unsubscribe_compactor = self._unsubscribe_compactor, None
        self._compactor = None
        if unsubscribe is not None:
            unsubscribe()

    def _check_attachable(self, agent: Agent) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        if self._closed:
            raise SessionError(f"session {self.id!r} is closed")
        if self._agent is not None:
            raise SessionError(f"session {self.id!r} already records an agent: detach() it first")
        if agent.signal is not None:
            raise AgentBusyError("Agent is already processing. Attach a session while it is idle.")

    def _check_compactor(self, agent: Agent, compactor: Compactor | None) -> None:
        if compactor is None:
            return
        if not isinstance(compactor, Compactor):
            raise TypeError(f"compactor must be an agentloop.context.Compactor, got {type(compactor).__name__}")
        if compactor.agent is not agent:
            raise ValueError("compactor must be the agent's own (made by Compaction(...).attach(agent))")

    def _subscribe(self, agent: Agent, compactor: Compactor | None = None) -> None:
        self._agent = agent
        self._unsubscribe = agent.subscribe(self._listener, first=True)
        agent.approvals.recorder = self._record_approvals
        if compactor is not None:
            self._compactor = compactor
            self._unsubscribe_compactor = compactor.subscribe(self._on_compaction)

    async def _record_approvals(self, records: builtins.list[JSONDict]) -> None:
        """Store the agent's calls waiting for approval (with the transcript they belong to)."""
        agent = self._agent
        if agent is None or self._closed:  # pragma: no cover - detached meanwhile
            return
        self._approvals = records
        await self._sync(agent)

    async def _on_compaction(self, event: CompactionEvent) -> None:
        agent, compactor = self._agent, self._compactor
        if not isinstance(event, CompactionEnd) or event.result is None or agent is None or compactor is None:
            return
        state = compactor.state
        if state is None:  # pragma: no cover - a compaction that ended with a result has a state
            return
        if len(agent.state.messages) != len(self._messages):
            await self._sync(agent)
        await self.record_compaction(state)

    async def _on_event(self, event: AgentEvent, signal: AbortSignal) -> None:
        agent = self._agent
        if agent is None:  # pragma: no cover - detached while an event was in flight
            return
        kind = type(event)
        if kind is MessageEnd:
            theirs = agent.state.messages
            have = self._messages
            n = len(have)
            if len(theirs) == n + 1 and (n == 0 or theirs[n - 1] is have[n - 1]):
                await self.append([theirs[n]])  # the usual case: the message just ended
            else:
                await self._sync(agent)
        elif kind is AgentStart:
            await self._sync(agent)

    async def _sync(self, agent: Agent) -> None:
        """Make the stored transcript and settings the agent's."""
        await self._sync_settings(agent)
        have, theirs = self._messages, builtins.list(agent.state.messages)
        same = 0
        for a, b in zip(have, theirs, strict=False):
            if a is not b and a != b:
                break
            same += 1
        if same == len(have):
            if len(theirs) > same:
                await self.append(theirs[same:])
        else:
            await self.replace(theirs)  # the agent's transcript was replaced (reset, compaction)

    async def _sync_settings(self, agent: Agent) -> None:
        settings = SessionSettings.of(agent).to_json()
        if self._approvals:
            settings["approvals"] = self._approvals
        if settings != self._stored_settings:
            await self._update({"settings": settings})

    # --- closing -----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Detach the agent and release the lock (idempotent)."""
        if self._closed:
            return
        self.detach()

        def work() -> None:
            with self._write_lock:
                self._closed = True
                self._writer.release()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(work)
        self._on_close(self)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def missing_tool_results(messages: Sequence[AgentMessage]) -> builtins.list[ToolResultMessage]:
    """Error results for the tool calls of the last assistant message that have none.

    A crash between a tool call and its result leaves such calls; a model rejects a transcript
    with unanswered calls, so `Session.resume` records these results (`INTERRUPTED_TOOL_TEXT`).
    Error and aborted responses need no results.
    """
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                return []
            answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolResultMessage)}
            return [
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=(TextContent(INTERRUPTED_TOOL_TEXT),),
                    details={"interrupted": True},
                    is_error=True,
                )
                for call in message.tool_calls
                if call.id not in answered
            ]
    return []
