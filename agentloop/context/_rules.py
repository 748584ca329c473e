"""The rules every compaction follows, an agent's `Compactor`'s and a durable run's: when to
compact, where to cut, the summary that updates the previous one, and the retry after an overflow."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._types._abort import AbortSignal
from .._types._events import AssistantMessageEvent
from .._types._messages import AgentMessage, AssistantMessage, Context, Model, ToolResultMessage, UserMessage
from .._types._stream_fn import StreamFn, StreamOptions, opened_stream
from ._summary import SUMMARY_PREFIX, SUMMARY_SUFFIX, FileOperations, summary_request
from ._tokens import ContextUsage, estimate_context, estimate_text, estimate_tokens

if TYPE_CHECKING:
    from typing import TypeAlias

    from ._compaction import Compaction

__all__ = (
    "Summarized",
    "Summarizer",
    "compacted_view",
    "context_overflowed",
    "definitions_tokens",
    "find_cut_point",
    "over_threshold",
    "overflow_guarded",
    "summarize_cut",
    "summary_message",
)


def find_cut_point(messages: Sequence[AgentMessage], start: int, keep_recent_tokens: int) -> int:
    """The index of the first message to keep when compacting `messages[start:]` (pi's `findCutPoint`).

    Walking back from the newest message, estimated tokens add up until they reach
    `keep_recent_tokens`; the cut is the first valid cut point at or after that message (a user,
    assistant or custom message: never a tool result, which stays with its call). When the
    newest messages alone are over the budget and none of them is a valid cut point (a huge
    tool result), the cut is the assistant message that made the call, so that the call and its
    results stay together. Returns `start` when there is nothing to compact.

    Worked cases (u user, a assistant, t tool result; sizes in tokens; keep 100): in
    `u:10 a:10 t:200` the cut is the a (index 1); in `u:50 a:50 t:50 u:50 a:50` the walk reaches
    100 at the second u (index 3), and the cut is there.
    """
    end = len(messages)
    valid = [i for i in range(start, end) if not isinstance(messages[i], ToolResultMessage)]
    if not valid:
        return start
    total = 0
    for i in range(end - 1, start - 1, -1):
        total += estimate_tokens(messages[i])
        if total >= keep_recent_tokens:
            after = [c for c in valid if c >= i]
            if after:
                return after[0]
            return max(c for c in valid if c < i)
    return start


def summary_message(summary: str, messages: Sequence[AgentMessage], first_kept: int) -> UserMessage:
    """The user message that stands for the messages before `messages[first_kept]`, dated as that
    message is (the same message whenever it is made: a durable run's replay makes it again)."""
    timestamp = messages[first_kept].timestamp if first_kept < len(messages) else 0
    return UserMessage(content=SUMMARY_PREFIX + summary + SUMMARY_SUFFIX, timestamp=timestamp)


Summarizer: TypeAlias = Callable[[Context, int], Awaitable[str]]
"""`(request, max_tokens) -> summary text`: one call of the summary model (`CompactionError` if it fails)."""


def definitions_tokens(system_prompt: str, tools: Sequence[Any]) -> int:
    """The estimated tokens of a request's system prompt and tool definitions."""
    chars = len(system_prompt)
    for tool in tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters, default=str))
    return estimate_text(chars)


def compacted_view(
    messages: Sequence[AgentMessage], start: int, summary: str | None, fresh_from: int, overhead: int
) -> tuple[list[AgentMessage], ContextUsage]:
    """What the model sees of `messages` (the summary, then the messages from `start` on) and its
    size; usage reports of the messages before `fresh_from` are not used."""
    view = list(messages[start:])
    usage_from = 0
    if summary is not None:
        view.insert(0, summary_message(summary, messages, start))
        usage_from = max(fresh_from - start, 0) + 1
    return view, estimate_context(view, overhead=overhead, usage_from=usage_from)


def over_threshold(settings: Compaction, usage: ContextUsage, context_window: int) -> bool:
    """Whether a model call with this context compacts first (`auto`, and the reserve not left)."""
    return settings.auto and not usage.fits(context_window, settings.reserve_tokens)


@dataclass(frozen=True, slots=True)
class Summarized:
    """A compaction's outcome: the first kept message's index, the summary (with the file tags),
    the files touched so far."""

    cut: int
    summary: str
    files: FileOperations


async def summarize_cut(
    settings: Compaction,
    messages: Sequence[AgentMessage],
    start: int,
    previous: str | None,
    files: FileOperations,
    instructions: str | None,
    summarizer: Summarizer,
) -> Summarized | None:
    """Cut `messages[start:]` (`find_cut_point`) and summarise what is cut, updating `previous`
    (pi's prompts); None when there is nothing to compact. `CompactionError` from `summarizer`."""
    cut = find_cut_point(messages, start, settings.keep_recent_tokens)
    if cut <= start:
        return None
    compacted = messages[start:cut]
    files = FileOperations(files.read, files.modified)
    files.add(compacted)
    request = summary_request(compacted, previous, instructions)
    text = await summarizer(request, max(1, int(0.8 * settings.reserve_tokens)))
    return Summarized(cut, text + files.tags(), files)


async def overflow_guarded(
    stream_fn: StreamFn,
    model: Model,
    context: Context,
    options: StreamOptions,
    is_overflow: Callable[[AssistantMessage, Model], bool],
    after_overflow: Callable[[Context, AbortSignal], Awaitable[Context | None]],
) -> AsyncIterator[AssistantMessageEvent]:
    """`stream_fn`'s response; one that fails with a context overflow before any content is
    answered by `after_overflow` (compact: the context to call with again, or None) and one more
    call. The `start` event is held until content shows."""
    overflow: AssistantMessageEvent | None = None
    async with opened_stream(stream_fn(model, context, options)) as events:
        held: list[AssistantMessageEvent] | None = []
        async for event in events:
            if held is not None:
                if event.type == "start":
                    held.append(event)
                    continue
                if event.type == "error" and is_overflow(event.error, model):
                    overflow = event
                    break
                for early in held:
                    yield early
                held = None
            yield event
        if held and overflow is None:
            for early in held:
                yield early
    if overflow is None:
        return
    retry = await after_overflow(context, options.signal)
    if retry is None:
        yield overflow
        return
    async with opened_stream(stream_fn(model, retry, options)) as events:
        async for event in events:
            yield event


def context_overflowed(settings: Compaction, message: AssistantMessage, model: Model) -> bool:
    """Whether `message` is an overflow that compaction answers (`retry_on_overflow`)."""
    if not settings.retry_on_overflow:
        return False
    from ._overflow import is_context_overflow

    return bool(is_context_overflow(message, model.context_window))
