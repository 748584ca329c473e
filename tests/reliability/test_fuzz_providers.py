"""Fuzzing the provider parsers and the proxy wire decoder with random and mutated byte streams.

Each example is one HTTP response made of protocol events (plausible ones with junk mixed in),
framed as server-sent events in every way the spec allows, sometimes mutated at the byte level,
cut into random chunks, sometimes with an error status, a wrong content type, a `Retry-After`,
a connection refused or a read error mid-body, and sometimes aborted after a random event. It goes
through `httpx.MockTransport` into the real stream function. For every example, on asyncio and trio:

- the stream never raises and ends within a bound, with exactly one terminal event, last;
- the events obey the assistant-message protocol (`start` first, each block started before its
  deltas and ended once, `done` only with every block ended, the terminal's message matches);
- the final message survives the JSON codec, and can be sent back to the same provider (a model's
  output never makes the next request fail: the "poisoned conversation" check).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
from agentloop.providers import (
    HTTPOptions,
    stream_anthropic,
    stream_openai_completions,
    stream_openai_responses,
    stream_proxy,
)
from agentloop.wire import dumps, loads, to_json

from . import _wire
from ._profile import BACKENDS, Tally, examples, settings_for

KEY = "sk-fuzz-canary-0123456789"
HTTP = HTTPOptions(max_retries=1, backoff=0.0005, max_backoff=0.001, total_timeout=20)
N = examples(100, 1500)
TALLY = Tally("fuzz_providers")
TERMINAL = ("done", "error")


@dataclass(frozen=True)
class Provider:
    api: str
    stream: Callable[..., Any]
    events: st.SearchStrategy[list[tuple[str, Any]]]
    ok_body: bytes
    """A minimal valid response (for the replay check)."""


def _sse(items: list[dict[str, Any]], named: bool) -> bytes:
    if named:
        return "".join(f"event: {i['type']}\ndata: {json.dumps(i)}\n\n" for i in items).encode()
    return "".join(f"data: {json.dumps(i)}\n\n" for i in items).encode() + b"data: [DONE]\n\n"


PROVIDERS = {
    "completions": Provider(
        "openai-completions",
        stream_openai_completions,
        _wire.completions_events,
        _sse(
            [
                {"choices": [{"index": 0, "delta": {"content": "ok"}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ],
            named=False,
        ),
    ),
    "responses": Provider(
        "openai-responses",
        stream_openai_responses,
        _wire.responses_events,
        _sse(
            [
                {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_9"}},
                {"type": "response.output_text.delta", "item_id": "msg_9", "delta": "ok"},
                {"type": "response.output_item.done", "item": {"type": "message", "id": "msg_9"}},
                {"type": "response.completed", "response": {"status": "completed"}},
            ],
            named=True,
        ),
    ),
    "anthropic": Provider(
        "anthropic-messages",
        stream_anthropic,
        _wire.anthropic_events,
        _sse(
            [
                {"type": "message_start", "message": {"id": "m"}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
                {"type": "message_stop"},
            ],
            named=True,
        ),
    ),
}


@dataclass
class Case:
    body: list[bytes]
    status: int
    content_type: str
    retry_after: str | None
    failure: str | None  # "connect" before the answer, "read" after the first chunk
    abort_at: int | None
    mutated: bool
    pristine: bool = False
    """A well-formed response sent intact: it must end with `done`."""


@st.composite
def cases(draw: st.DrawFn, events: st.SearchStrategy[list[tuple[str, Any]]]) -> Case:
    drawn = draw(events)
    if isinstance(drawn, _wire.Clean) and draw(st.booleans()):
        body = draw(_wire.sse_body(drawn, legal=True))
        return Case(draw(_wire.chunked(body)), 200, "text/event-stream", None, None, None, False, pristine=True)
    body = draw(_wire.sse_body(drawn))
    mutate = draw(st.integers(0, 3)) == 0
    if mutate:
        body = draw(_wire.mutated(body))
    return Case(
        body=draw(_wire.chunked(body)),
        status=draw(st.sampled_from([200] * 30 + [204, 302, 400, 401, 408, 429, 500, 503, 529])),
        content_type=draw(
            st.sampled_from(["text/event-stream"] * 16 + ["text/event-stream; charset=utf-8", "application/json", ""])
        ),
        retry_after=draw(
            st.sampled_from([None, None, None, "0", "0.001", "junk", "-3", "1e9", "Wed, 21 Oct 2015 07:28:00 GMT"])
        ),
        failure=draw(st.sampled_from([None] * 20 + ["connect", "read"])),
        abort_at=draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, 15))),
        mutated=mutate,
    )


def _transport(case: Case) -> httpx.MockTransport:
    async def body() -> AsyncIterator[bytes]:
        for i, chunk in enumerate(case.body):
            if case.failure == "read" and i == 1:
                raise httpx.ReadError("connection reset by peer")
            yield chunk
            await anyio.lowlevel.checkpoint()

    def handler(request: httpx.Request) -> httpx.Response:
        if case.failure == "connect":
            raise httpx.ConnectError("[Errno 111] Connection refused")
        headers = {"content-type": case.content_type} if case.content_type else {}
        if case.retry_after is not None:
            headers["retry-after"] = case.retry_after
        return httpx.Response(case.status, headers=headers, content=body())

    return httpx.MockTransport(handler)


def check_assistant_events(events: list[Any]) -> Any:
    """The assistant-message protocol of one response; returns the final message."""
    kinds = [e.type for e in events]
    assert events, "a stream always ends with a terminal event"
    assert sum(k in TERMINAL for k in kinds) == 1 and kinds[-1] in TERMINAL, kinds
    assert all(isinstance(e, al.AssistantMessageEvent.__args__) for e in events)
    body = kinds[:-1]
    if body:
        assert body[0] == "start" and body.count("start") == 1, kinds
    state: dict[int, tuple[str, bool]] = {}  # content index -> (kind, ended)
    for event in events[1:-1]:
        kind, _, step = event.type.partition("_")
        index = event.content_index
        assert 0 <= index < len(event.partial.content), (event.type, index, len(event.partial.content))
        if step == "start":
            assert index not in state and index == len(state), (kinds, index)
            state[index] = (kind, False)
        else:
            assert index in state and state[index] == (kind, False), (event.type, index, state)
            if step == "end":
                state[index] = (kind, True)
    last = events[-1]
    if last.type == "done":
        final = last.message
        assert last.reason == final.stop_reason and final.stop_reason in ("stop", "length", "toolUse")
        assert all(ended for _, ended in state.values()), f"done with blocks still open: {state}"
    else:
        final = last.error
        assert last.reason == final.stop_reason and final.stop_reason in ("error", "aborted")
        assert isinstance(final.error_message, str) and final.error_message
        # The catch-all for exceptions a parser did not expect: junk data must be handled, not crash it.
        assert not final.error_message.startswith("Unexpected data from the provider"), final.error_message
    assert isinstance(final, al.AssistantMessage)
    usage = final.usage
    for count in (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens):
        assert type(count) is int and count >= 0, usage
    for cost in (usage.cost.input, usage.cost.output, usage.cost.cache_read, usage.cost.cache_write, usage.cost.total):
        assert type(cost) in (int, float) and math.isfinite(cost), usage
    if body:
        assert len(final.content) >= len(state), (final.content, state)
    return final


def _same_json(a: Any, b: Any) -> bool:
    """Equality of decoded JSON values where NaN equals NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _not_strict(name: str) -> Any:
    raise AssertionError(f"dumps wrote {name}, which is not JSON")


def _as_written(value: Any) -> Any:
    """A JSON value as `dumps` writes it: NaN and the infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _as_written(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_written(v) for v in value]
    return value


async def _collect(stream: Any, signal: al.AbortSignal, abort_at: int | None) -> list[Any]:
    events: list[Any] = []
    async with stream as iterator:
        async for event in iterator:
            events.append(event)
            if abort_at is not None and len(events) == abort_at:
                signal.abort()
    return events


async def run_case(provider: Provider, case: Case) -> None:
    model = al.Model(id="fuzz", api=provider.api, provider="fuzz", base_url="http://mock/v1")
    context = al.Context(system_prompt="s", messages=(al.UserMessage(content="hi"),))
    signal = al.AbortSignal()
    options = al.StreamOptions(signal=signal, api_key=KEY, max_retry_delay=0.05)
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=_transport(case)) as client:
            stream = provider.stream(model, context, options, http=HTTP, client=client)
            events = await _collect(stream, signal, case.abort_at)
    final = check_assistant_events(events)
    if case.pristine:
        assert events[-1].type == "done", f"a well-formed response failed: {final.error_message}"
        TALLY.add("well-formed streams (must end with done)")
    TALLY.add("streams")
    TALLY.add("faults injected", bool(case.mutated or case.failure or case.status != 200 or case.content_type == ""))
    TALLY.add("aborts", signal.aborted)
    TALLY.add(f"terminal {events[-1].type}")
    for event in (events[0], events[-1]):
        text = dumps(event)
        assert KEY not in text and KEY not in repr(event)
        # Strict JSON: NaN and the infinities (arguments of 1e999) are written as null.
        assert _same_json(json.loads(text, parse_constant=_not_strict), _as_written(to_json(event)))
    back = loads(dumps(final))
    assert _same_json(_as_written(to_json(back)), _as_written(to_json(final)))
    await replay(provider, model, context, final)


def _not_json(name: str) -> Any:
    raise AssertionError(f"the request body is not standard JSON: it holds {name}")


async def replay(provider: Provider, model: al.Model, context: al.Context, final: al.AssistantMessage) -> None:
    """Whatever the model sent, the conversation can go on: the next request is sent and answered."""
    results = tuple(
        al.ToolResultMessage(tool_call_id=c.id, tool_name=c.name, content=(al.TextContent("r"),))
        for c in final.tool_calls
    )
    next_context = al.Context(
        system_prompt=context.system_prompt,
        messages=(*context.messages, final, *results, al.UserMessage(content="and?")),
    )
    sent: list[bytes] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        sent.append(await request.aread())
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=provider.ok_body)

    options = al.StreamOptions(signal=al.AbortSignal(), api_key=KEY)
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            events = await _collect(
                provider.stream(model, next_context, options, http=HTTP, client=client), options.signal, None
            )
    last = events[-1]
    assert last.type == "done", f"the next request failed: {getattr(last, 'error', last)!r}"
    assert len(sent) == 1
    json.loads(sent[0].decode("utf-8"), parse_constant=_not_json)  # valid UTF-8 (no lone surrogate), standard JSON


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_provider_streams_survive_random_and_mutated_bytes(backend: str, name: str) -> None:
    provider = PROVIDERS[name]

    @settings_for(N)
    @given(case=cases(provider.events))
    def check(case: Case) -> None:
        anyio.run(run_case, provider, case, backend=backend)

    check()


# --- the proxy wire ------------------------------------------------------------------------------

_index = st.one_of(st.integers(0, 3), st.integers(0, 3), _wire.junk)
_tool_call_json = st.one_of(
    st.builds(
        lambda i, n, a: {"type": "toolCall", "id": i, "name": n, "arguments": a},
        _wire.maybe(st.sampled_from(["c1", "c2"])),
        _wire.maybe(st.just("echo")),
        _wire.maybe(st.dictionaries(st.text(max_size=3), _wire.junk, max_size=2)),
    ),
    _wire.junk,
)
_usage_json = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "input": _wire.maybe(st.integers(0, 100)),
            "output": _wire.maybe(st.integers(0, 100)),
            "totalTokens": _wire.maybe(st.integers(0, 100)),
            "cost": _wire.maybe(st.fixed_dictionaries({"total": st.floats(0, 1)})),
        },
    ),
    _wire.junk,
)
_block_json = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _wire.maybe(_wire.text)}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _wire.maybe(_wire.text)}),
    _tool_call_json,
)
_wire_event = st.fixed_dictionaries(
    {
        "type": _wire.maybe(
            st.sampled_from(
                [
                    "start",
                    "text_start",
                    "text_delta",
                    "text_end",
                    "thinking_start",
                    "thinking_delta",
                    "thinking_end",
                    "toolcall_start",
                    "toolcall_delta",
                    "toolcall_end",
                    "done",
                    "error",
                    "future_event",
                ]
            )
        )
    },
    optional={
        "contentIndex": _index,
        "delta": _wire.maybe(st.one_of(_wire.text, _wire.arguments)),
        "contentSignature": _wire.maybe(_wire.text),
        "redacted": _wire.junk,
        "id": _wire.maybe(st.just("c1")),
        "toolName": _wire.maybe(st.just("echo")),
        "toolCall": _tool_call_json,
        "reason": _wire.maybe(st.sampled_from(["stop", "length", "toolUse", "error", "aborted"])),
        "errorMessage": _wire.maybe(_wire.text),
        "usage": _usage_json,
        "responseId": _wire.maybe(st.just("r1")),
        "content": _wire.maybe(st.lists(_block_json, max_size=2)),
    },
)


@st.composite
def proxy_cases(draw: st.DrawFn) -> Case:
    newline = draw(st.sampled_from(["\n", "\r\n", "\r", "\n\n"]))
    lines = []
    for event in draw(st.lists(st.one_of(_wire_event, _wire_event, _wire.junk), max_size=14)):
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from([": ping", "event: x", "data:", "data: ", "garbage"])))
        lines.append("data: " + json.dumps(event, ensure_ascii=draw(st.booleans())))
    body = newline.join(lines).encode("utf-8", "surrogatepass") + draw(st.sampled_from([b"", newline.encode()]))
    mutate = draw(st.integers(0, 2)) == 0
    if mutate:
        body = draw(_wire.mutated(body))
    return Case(
        body=draw(_wire.chunked(body)),
        status=draw(st.sampled_from([200] * 12 + [400, 401, 500])),
        content_type="text/event-stream",
        retry_after=None,
        failure=draw(st.sampled_from([None] * 10 + ["connect", "read"])),
        abort_at=draw(st.one_of(st.none(), st.none(), st.integers(0, 15))),
        mutated=mutate,
    )


async def run_proxy_case(case: Case) -> None:
    model = al.Model(id="fuzz", api="proxied", provider="fuzz")
    context = al.Context(messages=(al.UserMessage(content="hi"),))
    signal = al.AbortSignal()
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=_transport(case)) as client:
            fn = stream_proxy("http://proxy.test", "proxy-token", client=client, max_line_size=4096)
            events = await _collect(fn(model, context, al.StreamOptions(signal=signal)), signal, case.abort_at)
    final = check_assistant_events(events)
    TALLY.add("proxy streams")
    TALLY.add("faults injected", bool(case.mutated or case.failure or case.status != 200))
    TALLY.add("aborts", signal.aborted)
    assert loads(dumps(final)) is not None


@pytest.mark.parametrize("backend", BACKENDS)
@settings_for(N)
@given(case=proxy_cases())
def test_proxy_client_survives_random_and_mutated_lines(backend: str, case: Case) -> None:
    anyio.run(run_proxy_case, case, backend=backend)


@settings_for(examples(300, 5000))
@given(events=st.lists(st.one_of(_wire_event, _wire.junk), max_size=12))
def test_wire_decoder_raises_only_protocol_errors(events: list[Any]) -> None:
    from agentloop.providers._proxy._wire import ProxyProtocolError, WireDecoder

    decoder = WireDecoder(al.Model(id="m"))
    for event in events:
        try:
            out = decoder.feed(event)
        except ProxyProtocolError:
            return  # the client ends the stream here with an error event
        assert out is None or isinstance(out, al.AssistantMessageEvent.__args__)
        if out is not None and out.type in TERMINAL:
            return


_request_body = st.one_of(
    st.binary(max_size=40),
    _wire.junk.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {
            "model": _wire.maybe(
                st.fixed_dictionaries(
                    {"id": _wire.maybe(st.just("m"))},
                    optional={
                        "api": _wire.maybe(st.just("x")),
                        "input": _wire.maybe(st.just(["text"])),
                        "cost": _wire.maybe(st.fixed_dictionaries({"input": st.floats(0, 10)})),
                        "headers": _wire.maybe(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)),
                        "maxTokens": _wire.maybe(st.integers(0, 10**6)),
                        "reasoning": _wire.maybe(st.booleans()),
                    },
                )
            ),
            "context": _wire.maybe(
                st.fixed_dictionaries(
                    {
                        "messages": _wire.maybe(
                            st.lists(st.one_of(_wire.junk, st.just({"role": "user", "content": "hi"})), max_size=2)
                        )
                    },
                    optional={"tools": _wire.junk, "systemPrompt": _wire.junk},
                )
            ),
        },
        optional={
            "options": _wire.maybe(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "temperature": _wire.maybe(st.floats(0, 2)),
                        "maxTokens": _wire.maybe(st.integers(-1, 10**6)),
                        "reasoning": _wire.maybe(st.sampled_from(["off", "low", "high", "max", "extreme"])),
                        "thinkingBudgets": _wire.maybe(
                            st.dictionaries(st.sampled_from(["low", "high"]), st.integers())
                        ),
                        "maxRetryDelayMs": _wire.maybe(st.integers(-1, 10**6)),
                        "headers": _wire.maybe(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)),
                    },
                )
            )
        },
    ).map(lambda v: json.dumps(v).encode("utf-8", "surrogatepass")),
)


@settings_for(examples(300, 5000))
@given(body=_request_body)
def test_proxy_request_decoder_raises_only_value_errors(body: bytes) -> None:
    from agentloop.providers._proxy._wire import decode_request

    try:
        model, context, options = decode_request(body)
    except ValueError:
        TALLY.add("proxy requests refused")
        return
    assert isinstance(model, al.Model) and isinstance(context, al.Context)
    al.StreamOptions(signal=al.AbortSignal(), **options)  # the server builds its options from them
    TALLY.add("proxy requests accepted")


# --- regressions found by the fuzzing above --------------------------------------------------------


def _tool_call_body(name: str, arguments: str) -> bytes:
    if name == "completions":
        call = {"index": 0, "id": "call_1", "function": {"name": "echo", "arguments": arguments}}
        return _sse(
            [
                {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            ],
            named=False,
        )
    if name == "responses":
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "echo", "arguments": arguments}
        return _sse(
            [
                {"type": "response.output_item.added", "item": {**item, "arguments": ""}},
                {"type": "response.output_item.done", "item": item},
                {"type": "response.completed", "response": {"status": "completed"}},
            ],
            named=True,
        )
    block = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}
    return _sse(
        [
            {"type": "message_start", "message": {"id": "m"}},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": arguments},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
            {"type": "message_stop"},
        ],
        named=True,
    )


POISONS = ['{"a": "\\ud800"}', '{"\\udfff": [1]}', '{"n": 1e999}', '{"n": NaN}', "[" * 5000 + "]" * 5000]


@pytest.mark.parametrize("arguments", POISONS)
@pytest.mark.parametrize("name", sorted(PROVIDERS))
async def test_tool_arguments_that_poisoned_the_conversation(anyio_backend: object, name: str, arguments: str) -> None:
    """Arguments with a lone surrogate or an infinity once made every later request fail (the body
    could not be encoded); NaN is not JSON (JavaScript refuses it) and too deep a nesting raised
    RecursionError out of the parser. Each now ends in a response that can be sent back."""
    case = Case([_tool_call_body(name, arguments)], 200, "text/event-stream", None, None, None, False)
    await run_case(PROVIDERS[name], case)


JUNK_FIELDS = {
    # Junk where a parser expected a name or a list: once a TypeError ("unhashable type") that lost
    # the whole response as "Unexpected data from the provider".
    "completions": [
        {"choices": [], "error": {"message": "busy", "code": [500], "type": {"x": 1}}},
    ],
    "responses": [
        {"type": "response.output_item.added", "item": {"type": "reasoning", "id": "rs_1"}},
        {
            "type": "response.output_item.done",
            "item": {"type": "reasoning", "id": "rs_1", "summary": True, "content": 5},
        },
        {"type": "response.output_item.added", "item": {"type": "message", "id": "m_1"}},
        {"type": "response.output_item.done", "item": {"type": "message", "id": "m_1", "content": [{"text": 7}]}},
        {"type": "response.completed", "response": {"status": "completed", "service_tier": ["flex"]}},
    ],
    "anthropic": [
        {"type": "message_start", "message": {"id": "m"}},
        {"type": "error", "error": {"type": ["overloaded_error"], "message": "busy"}},
    ],
}


@pytest.mark.parametrize("name", sorted(PROVIDERS))
async def test_junk_in_fields_the_parsers_look_up_by_name(anyio_backend: object, name: str) -> None:
    case = Case(
        [_sse(JUNK_FIELDS[name], named=name != "completions")], 200, "text/event-stream", None, None, None, False
    )
    await run_case(PROVIDERS[name], case)


PROXY_BREACHES = {
    "second start": ['{"type":"start"}', '{"type":"start"}', '{"type":"done","reason":"stop"}'],
    "block before start": ['{"type":"text_start","contentIndex":0}', '{"type":"done","reason":"stop"}'],
    "delta after end": [
        '{"type":"start"}',
        '{"type":"text_start","contentIndex":0}',
        '{"type":"text_end","contentIndex":0}',
        '{"type":"text_delta","contentIndex":0,"delta":"late"}',
    ],
    "end twice": [
        '{"type":"start"}',
        '{"type":"thinking_start","contentIndex":0}',
        '{"type":"thinking_end","contentIndex":0}',
        '{"type":"thinking_end","contentIndex":0}',
    ],
    "usage of the wrong types": ['{"type":"start"}', '{"type":"done","reason":"stop","usage":{"input":"lots"}}'],
    "a NaN cost": ['{"type":"done","reason":"stop","usage":{"cost":{"total":NaN}}}'],
    "an error without a message": ['{"type":"error","reason":"error","errorMessage":""}'],
    "nesting too deep": ['{"type":"start"}', "[" * 5000 + "]" * 5000],
    "tool arguments nesting too deep": [
        '{"type":"start"}',
        '{"type":"toolcall_start","contentIndex":0,"id":"c1","toolName":"echo"}',
        '{"type":"toolcall_delta","contentIndex":0,"delta":"' + "[" * 5000 + '"}',
        '{"type":"toolcall_end","contentIndex":0}',
        '{"type":"done","reason":"toolUse"}',
    ],
}


@pytest.mark.parametrize("breach", sorted(PROXY_BREACHES))
async def test_a_proxy_stream_that_breaks_the_protocol_is_one_error_event(anyio_backend: object, breach: str) -> None:
    body = "".join(f"data: {line}\n\n" for line in PROXY_BREACHES[breach]).encode()
    await run_proxy_case(Case([body], 200, "text/event-stream", None, None, None, False))


def teardown_module() -> None:
    TALLY.write()


LINE_BREAKERS = "a\u2028b\u2029c\x85d\x1ce\x0bf"
"""Characters Python's `splitlines` (and httpx's own line reader) takes for line ends, which JSON
carries unescaped (all but the last two here): an SSE reader must end lines only at CR, LF or CRLF."""


def _text_body(name: str, text: str, newline: str) -> bytes:
    items: list[dict[str, object]]
    if name == "completions":
        items = [
            {"choices": [{"index": 0, "delta": {"content": text}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
    elif name == "responses":
        items = [
            {"type": "response.output_item.added", "item": {"type": "message", "id": "m_1"}},
            {"type": "response.output_text.delta", "item_id": "m_1", "delta": text},
            {"type": "response.output_item.done", "item": {"type": "message", "id": "m_1"}},
            {"type": "response.completed", "response": {"status": "completed"}},
        ]
    else:
        items = [
            {"type": "message_start", "message": {"id": "m"}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
            {"type": "message_stop"},
        ]
    # Events that carry no data (a lone id, retry or event name) are not events (the SSE spec); they
    # were dispatched with empty data, which the parsers took for malformed JSON: the response was lost.
    lines = [": comment", "retry: 3000", "", "id: 7", "", "event: ping", ""]
    for item in items:
        lines += [f"data: {json.dumps(item, ensure_ascii=False)}", ""]
    if name == "completions":
        lines += ["data: [DONE]", ""]
    return (newline.join(lines) + newline).encode()


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("name", sorted(PROVIDERS))
async def test_text_with_unicode_line_separators_survives_any_chunking(
    anyio_backend: object, name: str, newline: str
) -> None:
    provider = PROVIDERS[name]
    body = _text_body(name, LINE_BREAKERS, newline)
    model = al.Model(id="fuzz", api=provider.api, provider="fuzz", base_url="http://mock/v1")
    for size in (1, 2, 3, 7, len(body)):  # every cut: inside CRLF, inside a UTF-8 sequence, ...
        parts = [body[i : i + size] for i in range(0, len(body), size)]
        case = Case(parts, 200, "text/event-stream", None, None, None, False)
        signal = al.AbortSignal()
        with anyio.fail_after(10):
            async with httpx.AsyncClient(transport=_transport(case)) as client:
                options = al.StreamOptions(signal=signal, api_key=KEY)
                stream = provider.stream(model, al.Context(), options, http=HTTP, client=client)
                events = await _collect(stream, signal, None)
        final = check_assistant_events(events)
        assert events[-1].type == "done", final.error_message
        assert final.text == LINE_BREAKERS, (size, final.text)
