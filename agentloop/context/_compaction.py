"""Compaction as pi's coding agent does it, as a layer over an `Agent`.

`Compaction(...).attach(agent)` hooks a `Compactor` into two extension points and leaves the
loop and its events as they are:

* `transform_context`: before every model call the compactor maps the transcript to what the
  model sees (the summary, then the messages from the first kept one on) and, when that would
  leave less than `reserve_tokens` of the window, compacts first.
* the stream function: a response that fails with a context overflow before any content is
  answered by compacting and making the call again, once.

The agent's transcript (`agent.state.messages`) keeps the whole history; the compactor holds the
summary and where the kept messages start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .._core._agent import Agent
from .._core._config import api_key_for, call, notify
from .._types._abort import AbortSignal
from .._types._events import AssistantMessageEvent
from .._types._messages import AgentMessage, AssistantMessage, Context, Model
from .._types._stream_fn import MaybeAwaitable, StreamFn, StreamOptions
from ._rules import (
    compacted_view,
    context_overflowed,
    definitions_tokens,
    find_cut_point,
    over_threshold,
    overflow_guarded,
    summarize_cut,
    summary_message,
)
from ._summary import CompactionError, FileOperations, summary_model_call
from ._tokens import ContextUsage

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "Compaction",
    "CompactionEnd",
    "CompactionEvent",
    "CompactionListener",
    "CompactionReason",
    "CompactionResult",
    "CompactionStart",
    "CompactionState",
    "Compactor",
    "find_cut_point",
)

CompactionReason: TypeAlias = Literal["threshold", "overflow", "manual"]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction did.

    Attributes:
        reason: `threshold` (before a model call that would not leave the reserve), `overflow`
            (after the model refused the context) or `manual` (`Compactor.compact`).
        summary: The summary the model now sees in place of the compacted messages.
        first_kept_index: The index in the agent's transcript of the first message kept as it is.
        compacted: How many messages this compaction summarised.
        tokens_before: The context's tokens before (`estimate_context`), and `tokens_after` after.
        updated: True when the previous summary was updated rather than a first one written.
        read_files: Files only read by the compacted tool calls (cumulative); `modified_files`
            the files written or edited.
    """

    reason: CompactionReason
    summary: str
    first_kept_index: int
    compacted: int
    tokens_before: int
    tokens_after: int
    updated: bool
    read_files: tuple[str, ...] = ()
    modified_files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompactionStart:
    """A compaction begins (`tokens_before`: the context's estimated size)."""

    reason: CompactionReason
    tokens_before: int
    type: Literal["compaction_start"] = field(default="compaction_start", init=False)


@dataclass(frozen=True, slots=True)
class CompactionEnd:
    """A compaction ended: its `result`, or None with an `error` (or nothing to compact)."""

    reason: CompactionReason
    result: CompactionResult | None
    error: str | None = None
    type: Literal["compaction_end"] = field(default="compaction_end", init=False)


@dataclass(frozen=True, slots=True)
class CompactionState:
    """Where a compactor stands, by index into the agent's transcript: what to keep beside a
    saved transcript (`to_json`) to restore a compactor after reloading it (`Compactor.restore`).

    Attributes:
        summary: The current summary.
        first_kept_index: The index of the first message the model sees after the summary.
        fresh_from_index: Usage reports of the messages before this index describe a context
            from before the compaction, and are not used.
        read_files: Files only read by the compacted tool calls; `modified_files`: written or edited.
    """

    summary: str
    first_kept_index: int
    fresh_from_index: int
    read_files: tuple[str, ...] = ()
    modified_files: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The state as JSON-ready data (camelCase keys, as the codec writes messages)."""
        return {
            "summary": self.summary,
            "firstKeptIndex": self.first_kept_index,
            "freshFromIndex": self.fresh_from_index,
            "readFiles": list(self.read_files),
            "modifiedFiles": list(self.modified_files),
        }

    def context(self, messages: Sequence[AgentMessage]) -> list[AgentMessage]:
        """What the model sees of `messages` (the transcript this state was saved with): the
        summary as a user message, then the messages from `first_kept_index` on."""
        return [summary_message(self.summary, messages, self.first_kept_index), *messages[self.first_kept_index :]]

    @classmethod
    def from_json(cls, data: Any) -> CompactionState:
        """The state `to_json` gave; ValueError naming the field that is missing or wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"a compaction state must be a JSON object, got {type(data).__name__}")
        summary = data.get("summary")
        if not isinstance(summary, str):
            raise ValueError("a compaction state's summary must be a string")
        indexes = []
        for key in ("firstKeptIndex", "freshFromIndex"):
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"a compaction state's {key} must be an int >= 0, got {value!r}")
            indexes.append(value)
        files = []
        for key in ("readFiles", "modifiedFiles"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
                raise ValueError(f"a compaction state's {key} must be a list of strings")
            files.append(tuple(value))
        return cls(summary, indexes[0], indexes[1], files[0], files[1])


CompactionEvent: TypeAlias = CompactionStart | CompactionEnd
CompactionListener: TypeAlias = Callable[[CompactionEvent], MaybeAwaitable[None]]


def _check_tokens(value: object, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """How an agent's context is compacted (pi's coding agent's settings and defaults).

    Attributes:
        reserve_tokens: Compact before a model call when the context would leave fewer than
            this many tokens of the model's window (`model.context_window`; a model without one
            is never compacted automatically). The summary may be up to 80% of it.
        keep_recent_tokens: About how many tokens of the newest messages are kept as they are.
        auto: Compact automatically before model calls (False: only on `compact()` and after
            an overflow).
        retry_on_overflow: When the model refuses the context (`is_context_overflow`) before any
            content, compact and make the call again, once.
        model: The model that writes the summary (None: the agent's).
        stream_fn: Its stream function (None: the agent's).
    """

    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000
    auto: bool = True
    retry_on_overflow: bool = True
    model: Model | None = None
    stream_fn: StreamFn | None = None

    def __post_init__(self) -> None:
        _check_tokens(self.reserve_tokens, "reserve_tokens", 0)
        _check_tokens(self.keep_recent_tokens, "keep_recent_tokens", 1)
        for name in ("auto", "retry_on_overflow"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.model is not None and not isinstance(self.model, Model):
            raise TypeError(f"model must be an agentloop.Model or None, got {type(self.model).__name__}")
        if self.stream_fn is not None and not callable(self.stream_fn):
            raise TypeError(f"stream_fn must be callable or None, got {self.stream_fn!r}")

    def attach(self, agent: Agent) -> Compactor:
        """Compact `agent`'s context from its next model call on; returns the `Compactor`."""
        return Compactor(agent, self)


class Compactor:
    """The compaction of one agent: made by `Compaction.attach(agent)`.

    Example:
        ```python
        compactor = Compaction(reserve_tokens=2048, keep_recent_tokens=3000).attach(agent)
        compactor.subscribe(lambda event: print(event.type))
        await agent.prompt("...")
        await compactor.compact("Keep the numbers")  # on demand
        ```
    """

    __slots__ = (
        "_agent",
        "_files",
        "_first_kept",
        "_fresh_after",
        "_inner_stream",
        "_inner_transform",
        "_last_input",
        "_listeners",
        "_lock",
        "_summary",
        "_transform",
        "settings",
    )

    def __init__(self, agent: Agent, settings: Compaction) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        if not isinstance(settings, Compaction):
            raise TypeError(f"settings must be a Compaction, got {type(settings).__name__}")
        self.settings = settings
        self._agent = agent
        self._summary: str | None = None
        self._first_kept: AgentMessage | None = None
        self._fresh_after: AgentMessage | None = None
        self._files = FileOperations()
        self._listeners: tuple[CompactionListener, ...] = ()
        self._lock = anyio.Lock()
        self._last_input: Sequence[AgentMessage] | None = None
        self._inner_transform = agent.options.transform_context
        self._inner_stream = agent.stream_fn
        self._transform = self.transform_context
        agent.options = agent.options.replace(transform_context=self._transform)
        agent.stream_fn = self.stream

    def detach(self) -> None:
        """Stop compacting: the agent gets back its own `transform_context` and stream function."""
        agent = self._agent
        if agent.options.transform_context == self._transform:
            agent.options = agent.options.replace(transform_context=self._inner_transform)
        if agent.stream_fn == self.stream:
            agent.stream_fn = self._inner_stream

    def subscribe(self, listener: CompactionListener) -> Callable[[], None]:
        """Call `listener(event)` (plain or async) at each compaction's start and end; returns a
        function that unsubscribes."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(fn for fn in self._listeners if fn is not listener)

        return unsubscribe

    @property
    def agent(self) -> Agent:
        """The agent whose context this compactor compacts."""
        return self._agent

    @property
    def summary(self) -> str | None:
        """The current summary (None before the first compaction)."""
        return self._summary

    @property
    def state(self) -> CompactionState | None:
        """Where the compactor stands in the agent's transcript (None before a compaction)."""
        messages = self._agent.state.messages
        start = self._start(messages)
        if self._summary is None:
            return None
        read, modified = self._files.lists()
        return CompactionState(self._summary, start, self._fresh_from(messages, start), tuple(read), tuple(modified))

    def restore(self, state: CompactionState) -> None:
        """Take up `state` (saved with the transcript the agent now holds, for example a session
        reloaded): the model sees its summary and the messages from `first_kept_index` on."""
        if not isinstance(state, CompactionState):
            raise TypeError(f"state must be a CompactionState, got {type(state).__name__}")
        messages = self._agent.state.messages
        if not 0 < state.first_kept_index < len(messages) or not state.first_kept_index <= state.fresh_from_index:
            raise ValueError(
                f"state.first_kept_index must be an index of the agent's {len(messages)} messages after the first, "
                f"and fresh_from_index at or after it, got {state.first_kept_index} and {state.fresh_from_index}"
            )
        self._set(state.summary, messages[state.first_kept_index])
        fresh = min(state.fresh_from_index, len(messages))
        self._fresh_after = messages[fresh - 1]
        self._files = FileOperations(state.read_files, (*state.modified_files,))

    def _set(self, summary: str, first_kept: AgentMessage) -> None:
        self._summary = summary
        self._first_kept = first_kept

    # --- the view -------------------------------------------------------------------------
    def _start(self, messages: Sequence[AgentMessage]) -> int:
        """Where the kept messages start in `messages` (0 without a compaction). A transcript
        that no longer holds the first kept message (reset, replaced) drops the compaction."""
        first = self._first_kept
        if first is None:
            return 0
        for i in range(len(messages) - 1, -1, -1):
            if messages[i] is first:
                return i
        self._summary = self._first_kept = self._fresh_after = None
        self._files = FileOperations()
        return 0

    def _fresh_from(self, messages: Sequence[AgentMessage], start: int) -> int:
        """The index in `messages` from which usage reports describe the compacted context."""
        fresh = self._fresh_after
        if fresh is not None:
            for i in range(len(messages) - 1, start - 1, -1):
                if messages[i] is fresh:
                    return i + 1
        return start

    def _account(self, messages: Sequence[AgentMessage]) -> tuple[list[AgentMessage], ContextUsage]:
        start = self._start(messages)
        state = self._agent.state
        overhead = definitions_tokens(state.system_prompt, state.tools)
        return compacted_view(messages, start, self._summary, self._fresh_from(messages, start), overhead)

    def context(self, messages: Sequence[AgentMessage] | None = None) -> list[AgentMessage]:
        """What the model sees of `messages` (default the agent's transcript): the summary as a
        user message, then the kept messages."""
        return self._account(self._agent.state.messages if messages is None else messages)[0]

    def usage(self, messages: Sequence[AgentMessage] | None = None) -> ContextUsage:
        """The tokens `context(messages)` takes (the system prompt and tools included)."""
        return self._account(self._agent.state.messages if messages is None else messages)[1]

    # --- the extension points -------------------------------------------------------------
    async def transform_context(self, messages: Sequence[AgentMessage], signal: AbortSignal) -> list[AgentMessage]:
        """The agent's `transform_context` while attached: compact if needed, then the view (and
        the agent's own `transform_context` after it)."""
        async with self._lock:
            self._last_input = messages
            view, usage = self._account(messages)
            over = over_threshold(self.settings, usage, self._agent.state.model.context_window)
            if over and await self._compact(messages, "threshold", None, signal, usage.tokens) is not None:
                view = self._account(messages)[0]
        if self._inner_transform is not None:
            return list(await call(self._inner_transform, view, signal))
        return view

    def stream(self, model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        """The agent's stream function while attached: its own, with the overflow retry."""
        return self._guarded(model, context, options)

    def _stream_fn(self) -> StreamFn:
        from .._core._loop import resolve_stream_fn

        return resolve_stream_fn(self._inner_stream)

    def _guarded(self, model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        return overflow_guarded(self._stream_fn(), model, context, options, self._is_overflow, self._after_overflow)

    def _is_overflow(self, message: AssistantMessage, model: Model) -> bool:
        return self._last_input is not None and context_overflowed(self.settings, message, model)

    async def _after_overflow(self, context: Context, signal: AbortSignal) -> Context | None:
        messages = self._last_input
        assert messages is not None
        async with self._lock:
            tokens = self._account(messages)[1].tokens
            if await self._compact(messages, "overflow", None, signal, tokens) is None:
                return None
            view = self._account(messages)[0]
        if self._inner_transform is not None:
            view = list(await call(self._inner_transform, view, signal))
        llm = await call(self._agent.options.convert_to_llm, view)
        return Context(system_prompt=context.system_prompt, messages=tuple(llm), tools=context.tools)

    # --- compacting -----------------------------------------------------------------------
    async def compact(self, instructions: str | None = None) -> CompactionResult | None:
        """Compact the agent's context now (`instructions` focus the summary); None when there is
        nothing to compact. Raises `CompactionError` when the summary model fails. While a run is
        active, its next model call sees the result."""
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError(f"instructions must be a str or None, got {type(instructions).__name__}")
        signal = self._agent.signal or AbortSignal()
        async with self._lock:
            messages = list(self._agent.state.messages)
            tokens = self._account(messages)[1].tokens
            return await self._compact(messages, "manual", instructions, signal, tokens, raise_errors=True)

    async def _emit(self, event: CompactionEvent) -> None:
        for listener in self._listeners:
            await notify(listener, f"compaction listener {listener!r}", event)

    async def _compact(
        self,
        messages: Sequence[AgentMessage],
        reason: CompactionReason,
        instructions: str | None,
        signal: AbortSignal,
        tokens_before: int,
        *,
        raise_errors: bool = False,
    ) -> CompactionResult | None:
        await self._emit(CompactionStart(reason, tokens_before))
        start = self._start(messages)
        previous = self._summary
        agent = self._agent
        model = self.settings.model or agent.state.model
        options = agent.options

        async def summarizer(request: Context, max_tokens: int) -> str:
            api_key = await api_key_for(options, model.provider)
            stream_fn = self.settings.stream_fn or self._stream_fn()
            return await summary_model_call(
                stream_fn, model, request, max_tokens=max_tokens, api_key=api_key, signal=signal
            )

        try:
            done = await summarize_cut(self.settings, messages, start, previous, self._files, instructions, summarizer)
        except CompactionError as exc:
            await self._emit(CompactionEnd(reason, None, str(exc)))
            if raise_errors:
                raise
            return None
        if done is None:
            await self._emit(CompactionEnd(reason, None))
            return None
        summary, cut, files = done.summary, done.cut, done.files
        self._set(summary, messages[cut])
        self._fresh_after = messages[-1]
        self._files = files
        read, modified = files.lists()
        result = CompactionResult(
            reason=reason,
            summary=summary,
            first_kept_index=cut,
            compacted=cut - start,
            tokens_before=tokens_before,
            tokens_after=self._account(messages)[1].tokens,
            updated=previous is not None,
            read_files=tuple(read),
            modified_files=tuple(modified),
        )
        await self._emit(CompactionEnd(reason, result))
        return result
