"""`fallback_stream`: the next model answers when one fails before any content streamed, and the
events say which model answered."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from agentloop import (
    AbortSignal,
    Agent,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StreamOptions,
)
from agentloop._types._builder import AssistantMessageBuilder
from agentloop.providers import HTTPOptions, fallback_stream, stream_simple

from ..support import text_then_waits
from .helpers import Server, chat_chunk, collect, context, model, ok, options, sse_data, sse_events, types

Script = Callable[[AssistantMessageBuilder], list[AssistantMessageEvent]]


def answer(text: str) -> Script:
    def script(b: AssistantMessageBuilder) -> list[AssistantMessageEvent]:
        return [b.start(), b.text_start(), b.text_delta(text), b.text_end(), b.done("stop")]

    return script


def fails(message: str, *, started: bool = False, content: str = "") -> Script:
    def script(b: AssistantMessageBuilder) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = [b.start()] if started or content else []
        if content:
            events += [b.text_start(), b.text_delta(content)]
        return [*events, b.error("error", message)]

    return script


class Fake:
    """An in-process stream function: each model id answers with its script; calls are recorded."""

    def __init__(self, **scripts: Script) -> None:
        self.scripts = scripts
        self.calls: list[str] = []

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        self.calls.append(model.id)
        return self._events(model)

    async def _events(self, model: Model) -> AsyncIterator[AssistantMessageEvent]:
        builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        for event in self.scripts[model.id](builder):
            await anyio.lowlevel.checkpoint()
            yield event


PRIMARY = Model(id="primary", api="fake", provider="one", context_window=100_000)
BACKUP = Model(id="backup", api="fake", provider="two")
THIRD = Model(id="third", api="fake", provider="three")


async def run(fake: Fake, *fallbacks: Model, **kwargs: Any) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    stream = fallback_stream(list(fallbacks) or [BACKUP], stream_fn=fake, **kwargs)
    with anyio.fail_after(10):
        return await collect(stream(PRIMARY, context(), options()))


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        (fails("HTTP 429: Rate limit reached (rate_limit_error) (after 2 retries)"), "retryable"),
        (fails("HTTP 400: prompt is too long: 213462 tokens > 200000 maximum", started=True), "overflow"),
        (fails("HTTP 404: The model `primary` does not exist (model_not_found)"), "unavailable"),
        (fails("No API key for provider 'one': set ONE_API_KEY, or pass api_key"), "unavailable"),
    ],
)
async def test_the_next_model_answers_a_failure_before_any_content(failure: Script, why: str) -> None:
    fake = Fake(primary=failure, backup=answer("hello"))
    events, final = await run(fake)
    assert fake.calls == ["primary", "backup"]
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]  # one start, the backup's
    partials = [e.partial for e in events if not isinstance(e, (DoneEvent, ErrorEvent))]
    assert len(partials) == 4 and all(p.model == "backup" for p in partials)  # every event names who answered
    assert (final.text, final.provider, final.model, final.stop_reason) == ("hello", "two", "backup", "stop")
    attempts = (final.extra or {})["failedAttempts"]
    assert [(a["provider"], a["model"]) for a in attempts] == [("one", "primary")]
    assert attempts[0]["errorMessage"].startswith(("HTTP 4", "No API key"))


async def test_an_overflow_that_streams_nothing_but_a_length_stop_moves_on() -> None:
    def cut(b: AssistantMessageBuilder) -> list[AssistantMessageEvent]:
        b.usage = b.usage.__class__(input=99_800, output=0, total_tokens=99_800)
        return [b.start(), b.done("length")]

    fake = Fake(primary=cut, backup=answer("fits"))
    _, final = await run(fake)
    assert final.model == "backup" and final.text == "fits"
    assert final.extra is not None and final.extra["failedAttempts"][0]["errorMessage"] == "length"


async def test_content_commits_to_the_model_whatever_follows() -> None:
    fake = Fake(primary=fails("HTTP 529: Overloaded", content="partial"), backup=answer("never"))
    events, final = await run(fake)
    assert fake.calls == ["primary"]
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert final.model == "primary" and final.text == "partial" and final.extra is None


async def test_a_lasting_error_is_the_answer() -> None:
    fake = Fake(primary=fails("HTTP 400: Unsupported parameter: 'temperature'"), backup=answer("never"))
    events, final = await run(fake)
    assert fake.calls == ["primary"]
    assert types(events) == ["error"] and final.error_message == "HTTP 400: Unsupported parameter: 'temperature'"


async def test_when_every_model_fails_the_last_error_lists_the_others() -> None:
    fake = Fake(
        primary=fails("HTTP 503: Service Unavailable"),
        backup=fails("HTTP 429: rate limit", started=True),
        third=fails("HTTP 500: Internal Server Error"),
    )
    events, final = await run(fake, BACKUP, THIRD)
    assert fake.calls == ["primary", "backup", "third"]
    assert types(events) == ["error"] and final.model == "third"
    assert final.error_message == "HTTP 500: Internal Server Error"
    assert [a["model"] for a in (final.extra or {})["failedAttempts"]] == ["primary", "backup"]


async def test_an_abort_is_not_passed_on() -> None:
    def aborted(b: AssistantMessageBuilder) -> list[AssistantMessageEvent]:
        return [b.error("aborted", "Request was aborted")]

    fake = Fake(primary=aborted, backup=answer("never"))
    _, final = await run(fake)
    assert fake.calls == ["primary"] and final.stop_reason == "aborted"


async def test_fallback_on_decides() -> None:
    fake = Fake(primary=fails("HTTP 400: nope"), backup=answer("yes"))
    _, final = await run(fake, fallback_on=lambda message, model: model.id == "primary")
    assert final.model == "backup"
    fake = Fake(primary=fails("HTTP 503: Service Unavailable"), backup=answer("never"))
    _, final = await run(fake, fallback_on=lambda message, model: False)
    assert final.model == "primary" and fake.calls == ["primary"]


async def test_closing_early_closes_the_model_that_answers() -> None:
    closed: list[str] = []

    def slow(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        return text_then_waits(model, "a", lambda: closed.append(model.id))

    stream = fallback_stream([BACKUP], stream_fn=slow)(PRIMARY, context(), options())
    with anyio.fail_after(10):
        async with stream as events:
            async for event in events:
                if event.type == "text_delta":
                    break
    assert closed == ["primary"]


def test_wrong_arguments() -> None:
    with pytest.raises(TypeError, match="fallbacks"):
        fallback_stream(BACKUP)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback_on"):
        fallback_stream([BACKUP], fallback_on="retry")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model must be"):
        fallback_stream([BACKUP])("primary", context(), options())  # type: ignore[arg-type]


async def test_real_providers_over_http_openai_rate_limited_then_anthropic() -> None:
    """The built-in providers: OpenAI answers 429 (no retry here), Anthropic answers."""
    anthropic = sse_events(
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "from Claude"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    )

    def route(request: httpx.Request) -> httpx.Response:
        if request.url.host == "openai.test":
            return httpx.Response(429, json={"error": {"message": "Rate limit reached", "type": "rate_limit_error"}})
        return ok(anthropic)

    server = Server(route, route)
    gpt = model("openai-completions", id="gpt", provider="openai", base_url="http://openai.test/v1")
    claude = model("anthropic-messages", id="claude", provider="anthropic", base_url="http://anthropic.test")
    async with server.client() as client:
        inner = functools.partial(stream_simple, http=HTTPOptions(max_retries=0), client=client)
        with anyio.fail_after(10):
            events, final = await collect(fallback_stream([claude], stream_fn=inner)(gpt, context(), options()))
    assert [r.url.host for r in server.requests] == ["openai.test", "anthropic.test"]
    assert final.api == "anthropic-messages" and final.model == "claude" and final.text == "from Claude"
    assert (final.extra or {})["failedAttempts"] == [
        {"provider": "openai", "model": "gpt", "errorMessage": "HTTP 429: Rate limit reached (rate_limit_error)"}
    ]
    assert types(events)[0] == "start"


async def test_an_agent_with_a_fallback_records_who_answered() -> None:
    server = Server(
        httpx.Response(503, json={"error": {"message": "Service Unavailable"}}),
        ok(sse_data(chat_chunk({"content": "backup here"}), chat_chunk(finish="stop"))),
    )
    primary = model("openai-completions", id="primary", base_url="http://a.test/v1")
    backup = model("openai-completions", id="backup", base_url="http://b.test/v1")
    async with server.client() as client:
        inner = functools.partial(stream_simple, http=HTTPOptions(max_retries=0), client=client)
        agent = Agent(model=primary, stream_fn=fallback_stream([backup], stream_fn=inner))
        with anyio.fail_after(10):
            await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "backup here" and last.model == "backup"
    assert agent.state.model.id == "primary"  # the agent keeps its model
    assert json.loads(json.dumps((last.extra or {})["failedAttempts"]))[0]["model"] == "primary"


async def test_the_default_uses_stream_simple() -> None:
    stream = fallback_stream([BACKUP])(PRIMARY, context(), StreamOptions(signal=AbortSignal()))
    with anyio.fail_after(10):
        final = await stream.result()
    # Neither model's API has a stream function: the last one's error, the first listed as failed.
    assert final.model == "backup" and "No API provider registered" in (final.error_message or "")
    assert (final.extra or {})["failedAttempts"][0]["model"] == "primary"
