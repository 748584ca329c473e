"""Compaction in a durable run (`agentloop.temporal`, `agentloop.dbos`): the rules a `Compactor`
follows (`_rules`), kept by index in the run's transcript, in the workflow's own code.

The workflow's loop calls `transform_context` before each model call and reads the model's
answer through `stream(...)`; both run in the workflow, so they do nothing but what a replay does
again: the decision and the cut are functions of the transcript, and the summary is the engine's
recorded call (`summarizer`, a Temporal activity or a DBOS step, which calls `write_summary` where
the keys and the network are). There are no listeners: the summary call in the engine's history is
the record of a compaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from .._core._config import default_convert_to_llm
from .._types._abort import AbortSignal
from .._types._events import AssistantMessageEvent
from .._types._messages import AgentMessage, AssistantMessage, Context, Model
from .._types._stream_fn import StreamFn, StreamOptions
from ._compaction import Compaction, CompactionState
from ._rules import (
    Summarizer,
    compacted_view,
    context_overflowed,
    definitions_tokens,
    over_threshold,
    overflow_guarded,
    summarize_cut,
)
from ._summary import CompactionError, FileOperations, summary_model_call
from ._tokens import ContextUsage

__all__ = ("DurableCompactor", "write_summary")


class DurableCompactor:
    """The compaction of one durable run's transcript (the loop's messages in the workflow).

    `state` (a `CompactionState` by index into that transcript) is restored from a previous
    history with `state=`; `carried(transcript)` gives what the next history starts with.
    """

    __slots__ = (
        "_files",
        "_fresh_from",
        "_last_input",
        "_overhead",
        "_start",
        "_summary",
        "model",
        "settings",
        "summarizer",
    )

    def __init__(
        self,
        settings: Compaction,
        *,
        model: Model,
        system_prompt: str,
        tools: Sequence[Any],
        summarizer: Summarizer,
        state: CompactionState | None = None,
    ) -> None:
        self.settings = settings
        self.model = model
        self.summarizer = summarizer
        self._overhead = definitions_tokens(system_prompt, tools)
        self._summary: str | None = None if state is None else state.summary
        self._start = 0 if state is None else state.first_kept_index
        self._fresh_from = 0 if state is None else state.fresh_from_index
        self._files = FileOperations() if state is None else FileOperations(state.read_files, state.modified_files)
        self._last_input: Sequence[AgentMessage] | None = None

    @property
    def state(self) -> CompactionState | None:
        """Where the compaction stands (None before the first one)."""
        if self._summary is None:
            return None
        read, modified = self._files.lists()
        return CompactionState(self._summary, self._start, self._fresh_from, tuple(read), tuple(modified))

    def carried(self, transcript: Sequence[AgentMessage]) -> tuple[list[AgentMessage], CompactionState | None]:
        """The transcript a new history starts with (from the first kept message on) and the state
        for it: what the model sees stays the same, and what was summarised is left behind."""
        state = self.state
        if state is None:
            return list(transcript), None
        start = state.first_kept_index
        rebased = CompactionState(
            state.summary, 0, max(state.fresh_from_index - start, 0), state.read_files, state.modified_files
        )
        return list(transcript[start:]), rebased

    def _account(self, messages: Sequence[AgentMessage]) -> tuple[list[AgentMessage], ContextUsage]:
        return compacted_view(messages, self._start, self._summary, self._fresh_from, self._overhead)

    def context(self, messages: Sequence[AgentMessage]) -> list[AgentMessage]:
        """What the model sees of `messages`: the summary, then the kept messages."""
        return self._account(messages)[0]

    async def transform_context(self, messages: Sequence[AgentMessage], signal: AbortSignal) -> list[AgentMessage]:
        """The loop's `transform_context`: compact if the call would not leave the reserve, then the
        view. An aborted run starts no summary (its model call ends at once, aborted)."""
        self._last_input = messages
        view, usage = self._account(messages)
        if (
            not signal.aborted
            and over_threshold(self.settings, usage, self.model.context_window)
            and await self._compact(messages)
        ):
            view = self._account(messages)[0]
        return view

    def stream(self, stream_fn: StreamFn) -> StreamFn:
        """`stream_fn` (the engine's recorded model call) with the overflow retry."""

        def guarded(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
            return overflow_guarded(stream_fn, model, context, options, self._is_overflow, self._after_overflow)

        return guarded

    def _is_overflow(self, message: AssistantMessage, model: Model) -> bool:
        return self._last_input is not None and context_overflowed(self.settings, message, model)

    async def _after_overflow(self, context: Context, signal: AbortSignal) -> Context | None:
        messages = self._last_input
        if messages is None:
            return None
        if signal.aborted or not await self._compact(messages):
            # Aborted before or during the summary: the call again, which ends at once, aborted.
            return context if signal.aborted else None
        llm = default_convert_to_llm(self._account(messages)[0])
        return Context(system_prompt=context.system_prompt, messages=tuple(llm), tools=context.tools)

    async def _compact(self, messages: Sequence[AgentMessage]) -> bool:
        """Compact `messages`; False when there was nothing to compact or the summary failed (the
        model call then goes ahead, and an overflow ends the run with the provider's error)."""
        try:
            done = await summarize_cut(
                self.settings, messages, self._start, self._summary, self._files, None, self.summarizer
            )
        except CompactionError:
            return False
        if done is None:
            return False
        self._summary, self._start, self._files = done.summary, done.cut, done.files
        self._fresh_from = len(messages)
        return True


async def write_summary(
    settings: Compaction,
    model: Model,
    stream_fn: StreamFn | None,
    request: Context,
    max_tokens: int,
    api_key: Callable[[str], Awaitable[str | None]],
) -> dict[str, str]:
    """The summary call, where the engine runs its calls: `{"summary": text}`, or `{"error": text}`
    when the model answered with an error. `settings.model` and `settings.stream_fn` default to
    the agent's `model` and `stream_fn`; `api_key(provider)` gives the key."""
    from .._core._loop import resolve_stream_fn

    model = settings.model or model
    stream = settings.stream_fn or resolve_stream_fn(stream_fn)
    key = await api_key(model.provider)
    try:
        text = await summary_model_call(
            stream, model, request, max_tokens=max_tokens, api_key=key, signal=AbortSignal()
        )
    except CompactionError as exc:
        return {"error": str(exc)}
    return {"summary": text}
