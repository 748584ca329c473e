"""The workflow's calls: each model and tool call an activity, awaited so that an abort cuts it
at once; and the workflow's stream function (`model_stream`), which runs the model activity and
gives the loop its answer as a stream, sending a context by reference when the agent has a store.
"""

from __future__ import annotations

import asyncio  # noqa: TID251  (Temporal workflows run on asyncio only)
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType, ActivityHandle

from .._core._config import default_convert_to_llm
from .._durable import replayed
from .._types._constants import ABORTED_TEXT
from .._types._events import AssistantMessageEvent, ErrorEvent
from .._types._messages import AgentMessage, AssistantMessage, Context, Message, Model, ended_message
from .._types._stream_fn import StreamOptions
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._model_json import model_to_json
from ..context._summary import CompactionError
from ._agent import ActivityOptions, TemporalAgent
from ._context import CONTEXT_MISSING
from ._payload import check_fits

__all__ = (
    "InFlight",
    "SentContext",
    "failure_text",
    "finished",
    "model_stream",
    "start_call",
    "summary_call",
    "workflow_ms",
)


def workflow_ms() -> int:
    return int(workflow.now().timestamp() * 1000)


def start_call(name: str, arg: Any, options: ActivityOptions, summary: str, **more: Any) -> ActivityHandle[Any]:
    """Start an activity (a local one if `options.local`)."""
    start = workflow.start_local_activity if options.local else workflow.start_activity
    return start(name, arg, summary=summary, **options.as_kwargs(), **more)


async def finished(handle: ActivityHandle[Any]) -> Any:
    """The activity's result; a cancellation (an abort's cut) returns at once and asks Temporal to cancel it.

    Awaiting the activity's handle directly would not do: cancelling it resolves the handle only
    in a later activation, and anyio re-delivers a scope's cancellation until the task has left
    the scope, which in a workflow's event loop never yields. A plain future cancels at once.
    """
    finished = asyncio.get_running_loop().create_future()

    def wake(_: object) -> None:
        if not finished.done():
            finished.set_result(None)

    handle.add_done_callback(wake)
    try:
        await finished
    except BaseException:
        handle.cancel()
        raise
    return handle.result()


def failure_text(exc: BaseException) -> str:
    """The innermost message of an activity failure (the tool's or the timeout's)."""
    while isinstance(exc, ActivityError) and exc.cause is not None:
        exc = exc.cause
    return str(exc) or type(exc).__name__


class SentContext:
    """With a context store: the key of the context this run's last model call ended with (its
    messages and the answer), and those messages, to send the next call only what follows them."""

    def __init__(self, key: str | None = None, messages: tuple[Message, ...] = ()) -> None:
        self.key = key
        self.messages = messages

    @classmethod
    def carried(cls, key: str, length: int, transcript: Sequence[AgentMessage]) -> SentContext:
        """From a previous history: the context was the first `length` LLM messages of the transcript."""
        messages = tuple(default_convert_to_llm(transcript))
        return cls(key, messages[:length]) if len(messages) >= length else cls()

    def split(self, messages: Sequence[Message]) -> tuple[str | None, Sequence[Message]]:
        """The key to send and the messages after it; (None, all) if the context did not go on
        from the last one (compacted, or an answer the loop changed)."""
        known = self.messages
        if self.key is None or len(messages) < len(known):
            return None, messages
        for old, new in zip(known, messages, strict=False):  # `messages` may be longer
            if old is not new and old != new:
                return None, messages
        return self.key, messages[len(known) :]


def _context_missing(exc: ActivityError) -> bool:
    return isinstance(exc.cause, ApplicationError) and exc.cause.type == CONTEXT_MISSING


class InFlight:
    """A model or summary call in flight (its activity's handle), and whether an abort has
    cancelled it (see `AgentWorkflow.abort`)."""

    def __init__(self) -> None:
        self.handle: ActivityHandle[Any] | None = None
        self.abort_asked = False


def model_stream(
    agent: TemporalAgent, sent: SentContext, in_flight: InFlight
) -> Callable[[Model, Context, StreamOptions], AsyncIterator[AssistantMessageEvent]]:
    """The workflow's stream function: the model activity, then `start` and `done` for its message.

    An abort while the activity runs (`AgentWorkflow.abort`) cancels it and waits for its answer:
    the message so far, ended `aborted`. Once that answer has reached the loop, the stream aborts
    the run's signal, and the loop ends the run as in one process.
    """

    async def call(model: Model, context: Context, options: StreamOptions) -> AssistantMessage:
        by_reference = agent.contexts is not None
        base, messages = sent.split(context.messages) if by_reference else (None, context.messages)
        request = {
            "model": model_to_json(model),
            "context": {
                "systemPrompt": context.system_prompt,
                "messages": [to_json(m) for m in messages],
                "tools": [tool.name for tool in context.tools],
                **({"base": base} if by_reference else {}),
            },
            "options": {
                "reasoning": options.reasoning,
                "sessionId": options.session_id,
                "temperature": options.temperature,
                "maxTokens": options.max_tokens,
            },
        }
        if agent.contexts is None:
            check_fits("the model call's context", request)
        in_flight.handle = start_call(
            agent.model_activity_name,
            request,
            agent.model_activity,
            model.id,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        try:
            data = await finished(in_flight.handle)
        finally:
            in_flight.handle = None
        # Either shape, whatever this worker's agent has: workers may gain or lose their store
        # while a run goes on (a deploy), and a history recorded either way must replay.
        if "contextKey" not in data:
            sent.key, sent.messages = None, ()
            return from_json(data)  # type: ignore[no-any-return]
        final: AssistantMessage = from_json(data["message"])
        sent.key, sent.messages = data["contextKey"], (*context.messages, final)
        return final

    async def answer(model: Model, context: Context, options: StreamOptions) -> list[AssistantMessageEvent]:
        """The stream events of the call's outcome."""
        try:
            try:
                final = await call(model, context, options)
            except ActivityError as exc:
                if not _context_missing(exc):
                    raise
                sent.key, sent.messages = None, ()  # the store lost it: send the whole context
                final = await call(model, context, options)
        except ActivityError as exc:
            if not isinstance(exc.cause, CancelledError):
                failure = f"The model call failed: {failure_text(exc)}"
                return [ErrorEvent("error", ended_message(model, "error", failure, workflow_ms()))]
            if not in_flight.abort_asked:
                raise  # the workflow is cancelled
            # cancelled before an attempt ran (between retries): nothing was said
            return [ErrorEvent("aborted", ended_message(model, "aborted", ABORTED_TEXT, workflow_ms()))]
        return [event async for event in replayed(final)]

    async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        if options.signal.aborted:  # the contract: an aborted signal ends the stream at once
            yield ErrorEvent("aborted", ended_message(model, "aborted", ABORTED_TEXT, workflow_ms()))
            return
        events = await answer(model, context, options)
        try:
            for event in events:
                yield event
        finally:
            if in_flight.abort_asked:  # the loop has the answer to the abort: now the run ends
                in_flight.abort_asked = False
                options.signal.abort()

    return stream


def summary_call(agent: TemporalAgent, in_flight: InFlight) -> Callable[[Context, int], Awaitable[str]]:
    """The workflow's summarizer for compaction: the `<agent>.summary` activity (recorded: a replay
    gets the same summary without calling the model); `CompactionError` when it fails, or when an
    abort cancelled it (`AgentWorkflow.abort`: the run then ends aborted)."""

    async def summary_activity(request: Context, max_tokens: int) -> str:
        data = {
            "systemPrompt": request.system_prompt,
            "messages": [to_json(m) for m in request.messages],
            "maxTokens": max_tokens,
        }
        if agent.contexts is None:
            check_fits("the compaction's summary request", data)
        try:
            in_flight.handle = start_call(agent.summary_activity_name, data, agent.model_activity, "compaction summary")
            out = await finished(in_flight.handle)
        except ActivityError as exc:
            if not isinstance(exc.cause, CancelledError):
                raise CompactionError(f"Summarization failed: {failure_text(exc)}") from None
            if not in_flight.abort_asked:
                raise  # the workflow is cancelled
            raise CompactionError("Summarization was aborted") from None
        finally:
            in_flight.handle, in_flight.abort_asked = None, False
        if "error" in out:
            raise CompactionError(out["error"])
        return str(out["summary"])

    return summary_activity
