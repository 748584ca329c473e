"""A stream function over several models: the next one answers when one fails before answering."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent, DoneEvent, ErrorEvent, StartEvent
from .._types._messages import AssistantMessage, Context, Model
from .._types._stream_fn import StreamFn, StreamOptions, opened_stream
from ._failures import is_context_overflow, is_retryable_error, is_unavailable_model
from ._stream import AssistantMessageEventStream, check_arguments

__all__ = ("FallbackOn", "fallback_stream", "should_fall_back")

FallbackOn = Callable[[AssistantMessage, Model], bool]
"""Whether a model's failed (or empty) answer sends the request to the next model."""


def should_fall_back(message: AssistantMessage, model: Model) -> bool:
    """The default test of `fallback_stream`: a transient failure, a context overflow (of `model`'s
    window), or a model that cannot be used (unknown, its key refused or missing)."""
    if is_retryable_error(message) or is_unavailable_model(message):
        return True
    return is_context_overflow(message, model.context_window)


def fallback_stream(
    fallbacks: Sequence[Model],
    *,
    stream_fn: StreamFn | None = None,
    fallback_on: FallbackOn = should_fall_back,
) -> Callable[[Model, Context, StreamOptions], AssistantMessageEventStream]:
    """A stream function that calls the model it is given, then each of `fallbacks` in turn while
    the one before failed before any content streamed (pydantic-ai's `FallbackModel`).

    A model's answer is passed on as soon as its first content block starts; from then on it is
    the answer, whatever happens. A model whose stream ends before that (an `error`, or a `done`
    with no content) is left for the next one when `fallback_on(message, model)` says so: by
    default a transient failure (`is_retryable_error`), a context overflow (`is_context_overflow`
    with the model's window) or a model that cannot be used (`is_unavailable_model`). An abort is
    never passed on. The last model's answer is the answer.

    Which model answered: the events' partial messages and the final message name it (`provider`,
    `model`, `api`), and the final message lists the models that failed before it, in order, in
    `extra["failedAttempts"]` (`{"provider", "model", "errorMessage"}` each).

    Each provider retries a failed request itself before anything streams (`HTTPOptions.
    max_retries`, 2 by default) before the next model is tried; pass a `stream_fn` with
    `HTTPOptions(max_retries=0)` to move on at once.

    Args:
        fallbacks: The models to try after the one the stream function is called with, in order.
        stream_fn: The stream function of every model (`stream_simple` by default, which dispatches
            on `model.api`).
        fallback_on: `(message, model) -> bool`: whether a failed answer of `model` goes to the next.

    Example:
        ```python { .notest }
        from agentloop import Agent
        from agentloop.providers import fallback_stream, get_model

        agent = Agent(
            model=get_model("anthropic", "claude-sonnet-4-5"),
            stream_fn=fallback_stream([get_model("openai", "gpt-5")]),
        )
        ```
    """
    if isinstance(fallbacks, (Model, str)) or not all(isinstance(m, Model) for m in fallbacks):
        raise TypeError(f"fallbacks must be a sequence of agentloop.Model, got {fallbacks!r}")
    models = tuple(fallbacks)
    if stream_fn is not None and not callable(stream_fn):
        raise TypeError(f"stream_fn must be a stream function, got {type(stream_fn).__name__}")
    if not callable(fallback_on):
        raise TypeError(f"fallback_on must be a function (message, model) -> bool, got {type(fallback_on).__name__}")

    def stream(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        check_arguments(model, context, options)
        inner = stream_fn
        if inner is None:
            from ._registry import stream_simple

            inner = stream_simple
        return AssistantMessageEventStream(_answer((model, *models), context, options, inner, fallback_on))

    return stream


async def _answer(
    candidates: tuple[Model, ...],
    context: Context,
    options: StreamOptions,
    stream_fn: StreamFn,
    fallback_on: FallbackOn,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    failed: list[dict[str, Any]] = []
    for position, model in enumerate(candidates):
        last = position == len(candidates) - 1
        held: list[AssistantMessageEvent] = []  # the `start` of an answer not yet passed on
        answering = False
        try:
            async with opened_stream(stream_fn(model, context, options)) as events:
                async for event in events:
                    if answering:
                        yield _with_failures(event, failed)
                    elif isinstance(event, (DoneEvent, ErrorEvent)):
                        final = event.message if isinstance(event, DoneEvent) else event.error
                        if not last and not final.content and fallback_on(final, model):
                            failed.append(_failure(final, model))
                            break
                        for early in held:
                            yield early
                        yield _with_failures(event, failed)
                        return
                    elif isinstance(event, StartEvent):
                        held.append(event)
                    else:  # the first content: this model answers
                        answering = True
                        for early in held:
                            yield early
                        yield event
        except Exception as exc:  # a stream function that broke its contract: still one terminal event
            builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
            yield _with_failures(builder.error("error", f"{type(exc).__name__}: {exc}"), failed)
            return
        if answering:
            return


def _failure(message: AssistantMessage, model: Model) -> dict[str, Any]:
    return {"provider": model.provider, "model": model.id, "errorMessage": message.error_message or message.stop_reason}


def _with_failures(event: AssistantMessageEvent, failed: list[dict[str, Any]]) -> AssistantMessageEvent:
    """The terminal event with the failed attempts in its message's `extra`; other events as they are."""
    if not failed:
        return event
    if isinstance(event, DoneEvent):
        return dataclasses.replace(event, message=_noted(event.message, failed))
    if isinstance(event, ErrorEvent):
        return dataclasses.replace(event, error=_noted(event.error, failed))
    return event


def _noted(message: AssistantMessage, failed: list[dict[str, Any]]) -> AssistantMessage:
    return dataclasses.replace(message, extra={**(message.extra or {}), "failedAttempts": list(failed)})
