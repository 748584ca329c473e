"""Mistral (`mistral-conversations`): the request we send (compared with pi-ai's own), the stream we
read (httpx.MockTransport), and a whole agent turn against aimock (`-m servers`)."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agentloop as al
from agentloop.providers import HTTPOptions, get_model, get_models, stream_mistral, stream_simple
from agentloop.providers._mistral import build_mistral_request
from agentloop.providers._transform import mistral_tool_call_ids, short_hash

from ..support import as_assistant
from .conftest import Weather, aimock_weather_turn
from .helpers import FAST, IMAGE, Server, collect, context, options, sse_data, stream_body, streamed, types
from .pi_requests import Call, our_request, same_path_and_body_as_pi


def mistral(model_id: str = "magistral-medium-latest", **changes: Any) -> al.Model:
    """A registry model, served by the mock."""
    return dataclasses.replace(get_model("mistral", model_id), base_url="http://mock", **changes)


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def thinking(text: str) -> dict[str, Any]:
    return {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]}


USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 100,
    "total_tokens": 1100,
    "prompt_tokens_details": {"cached_tokens": 400},
}


async def stream(
    body: bytes, m: al.Model | None = None, ctx: al.Context | None = None, **opts: Any
) -> tuple[list[Any], al.AssistantMessage]:
    return await stream_body(stream_mistral, body, m or mistral(), ctx or context("hi"), **opts)


# --- the request ----------------------------------------------------------------------------


def replayed_transcript(model_id: str) -> list[Any]:
    """A conversation begun on OpenAI (a Responses id, two ids that differ only in punctuation, a
    call left unanswered, images), an error turn, then Mistral's own turn (its thinking and
    9-character id kept: a turn of `model_id`)."""
    openai = functools.partial(al.AssistantMessage, api="openai-responses", provider="openai", model="gpt-5")
    return [
        al.UserMessage(content=(al.TextContent("Look"), IMAGE, IMAGE, al.TextContent("and"))),
        openai(
            content=(
                al.TextContent("Calling.", text_signature='{"v":1,"id":"msg_1"}'),
                al.ToolCall("call_abc12|fc_0123456789abcdef", "get_weather", {"location": "Paris"}),
                al.ToolCall("call_abc12", "get_weather", {"location": "Lyon"}),
                al.ToolCall("call-abc12", "get_weather", {"location": "Nice"}),
                al.ToolCall("call_zz", "get_weather", {"location": "Metz"}),
            ),
            stop_reason="toolUse",
        ),
        al.ToolResultMessage(
            tool_call_id="call_abc12|fc_0123456789abcdef", tool_name="get_weather", content=(al.TextContent(" sunny "),)
        ),
        al.ToolResultMessage(tool_call_id="call_abc12", tool_name="get_weather", content=(al.TextContent("cloudy"),)),
        al.ToolResultMessage(tool_call_id="call-abc12", tool_name="get_weather", content=(IMAGE,), is_error=True),
        openai(content=(al.TextContent("half"),), stop_reason="error", error_message="boom"),
        al.UserMessage(content="And Rome?"),
        al.AssistantMessage(
            content=(
                al.ThinkingContent("Rome next."),
                al.TextContent("  "),
                al.ToolCall("D681PevKs", "get_weather", {"location": "Rome"}),
            ),
            stop_reason="toolUse",
            api="mistral-conversations",
            provider="mistral",
            model=model_id,
        ),
        al.ToolResultMessage(
            tool_call_id="D681PevKs", tool_name="get_weather", content=(al.TextContent("rain"), IMAGE)
        ),
        al.UserMessage(content="Thanks"),
    ]


CALLS = [
    Call(
        "plain",
        mistral("mistral-small-latest"),
        al.Context(system_prompt="Be terse.", messages=[al.UserMessage(content="hi")], tools=[Weather()]),
        {"apiKey": "sk-m", "temperature": 0.2, "maxTokens": 300, "sessionId": "session-1"},
    ),
    Call(
        "effort-mapped",
        mistral(),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "reasoning": "medium", "maxTokens": 50},
    ),
    Call(
        "effort-off",
        mistral(),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "maxTokens": 50},
    ),
    Call(
        "no-off",
        mistral("mistral-large-latest"),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "maxTokens": 50},
    ),
    Call(
        "clamped-up",
        mistral("mistral-large-latest"),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "reasoning": "minimal", "maxTokens": 50},
    ),
    Call(
        "clamped-down",
        mistral("mistral-large-latest"),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "reasoning": "xhigh", "maxTokens": 50},
    ),
    Call(
        "prompt-mode",
        al.Model(id="my-reasoner", api="mistral-conversations", provider="mistral", reasoning=True, max_tokens=64),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "reasoning": "high", "maxTokens": 50},
    ),
    Call(
        "replay-vision",
        mistral(),
        al.Context(messages=replayed_transcript("magistral-medium-latest"), tools=[Weather()]),
        {"apiKey": "sk-m", "maxTokens": 50},
    ),
    Call(
        "replay-text-only",
        mistral("codestral-latest"),
        al.Context(system_prompt="Sys", messages=replayed_transcript("codestral-latest")),
        {"apiKey": "sk-m", "maxTokens": 50},
    ),
    Call(
        "own-affinity",
        mistral("ministral-8b-latest", headers={"X-Affinity": "mine"}),
        al.Context(messages=[al.UserMessage(content="hi")]),
        {"apiKey": "sk-m", "sessionId": "s-2", "maxTokens": 50},
    ),
]


def ours(call: Call) -> tuple[str, dict[str, str], dict[str, Any]]:
    return our_request(call, build_mistral_request)


async def test_requests_are_the_ones_pi_ai_sends(anyio_backend: object, pi_node_modules: Path) -> None:
    for call_id, headers, reference in await same_path_and_body_as_pi(CALLS, pi_node_modules, build_mistral_request):
        for name in ("authorization", "x-affinity"):
            assert headers.get(name) == reference.get(name), (call_id, name)


def test_thinking_levels_become_reasoning_effort_or_prompt_mode() -> None:
    bodies = {call.id: ours(call)[2] for call in CALLS}
    assert bodies["effort-mapped"]["reasoning_effort"] == "high"  # medium is not offered: the next level up
    assert bodies["effort-off"]["reasoning_effort"] == "none"
    assert "reasoning_effort" not in bodies["no-off"]  # the model cannot turn thinking off
    assert bodies["clamped-up"]["reasoning_effort"] == "low"
    assert bodies["clamped-down"]["reasoning_effort"] == "high"
    assert bodies["prompt-mode"]["prompt_mode"] == "reasoning" and "reasoning_effort" not in bodies["prompt-mode"]
    assert "prompt_mode" not in bodies["plain"] and bodies["plain"]["reasoning_effort"] == "none"


def test_a_session_id_asks_for_the_prompt_cache_unless_the_affinity_header_is_set() -> None:
    _, headers, body = ours(CALLS[0])
    assert headers["x-affinity"] == "session-1" and body["prompt_cache_key"] == "session-1"
    _, headers, body = ours(CALLS[-1])
    assert headers["x-affinity"] == "mine" and body["prompt_cache_key"] == "s-2"


def test_replayed_tool_call_ids_become_nine_letters_and_digits_and_results_follow() -> None:
    _, _, body = ours(CALLS[7])
    messages = body["messages"]
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    ids = [c["id"] for c in calls]
    assert all(len(i) == 9 and i.isalnum() and i.isascii() for i in ids), ids
    assert len(set(ids)) == len(ids)
    assert ids[0] == short_hash("callabc12fc0123456789abcdef")[:9]
    assert ids[1] == "callabc12"  # 9 letters and digits once the punctuation is gone: kept
    assert ids[2] == short_hash("callabc12:1")[:9]  # the same 9 characters as the call before: made distinct
    assert ids[3] == short_hash("callzz")[:9]
    assert ids[4] == "D681PevKs"  # Mistral's own call: untouched
    results = [m for m in messages if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ids
    assert [r["content"][0]["text"] for r in results] == [
        "sunny",
        "cloudy",
        "[tool error] (see attached image)",
        "[tool error] No result provided",
        "rain",
    ]
    assert results[2]["content"][1] == {"type": "image_url", "image_url": "data:image/png;base64,aGVsbG8="}
    own = [m for m in messages if m["role"] == "assistant"][-1]
    assert own["content"] == [{"type": "thinking", "thinking": [{"type": "text", "text": "Rome next."}]}]


def test_a_model_without_images_is_told_where_they_were() -> None:
    _, _, body = ours(CALLS[8])
    first = body["messages"][1]
    assert first["content"] == [
        {"type": "text", "text": "Look"},
        {"type": "text", "text": "(image omitted: model does not support images)"},
        {"type": "text", "text": "and"},
    ]
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    assert results[2] == [{"type": "text", "text": "[tool error] (tool image omitted: model does not support images)"}]
    assert results[4] == [{"type": "text", "text": "rain\n(tool image omitted: model does not support images)"}]


def test_the_id_normalizer_is_stable_and_never_gives_two_ids_one_name() -> None:
    normalize = mistral_tool_call_ids()
    first = normalize("call_1|fc_1")
    assert normalize("call_1|fc_1") == first
    assert normalize("abcdefghi") == "abcdefghi"
    assert normalize("abc-defghi") != "abcdefghi"  # taken by the call before
    assert len({normalize(f"call_{i}") for i in range(200)}) == 200


def test_the_key_comes_from_mistral_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "sk-env")
    request = build_mistral_request(
        mistral(), al.Context(messages=[al.UserMessage(content="hi")]), al.StreamOptions(signal=al.AbortSignal())
    )
    assert request.headers["authorization"] == "Bearer sk-env" and request.url == "http://mock/v1/chat/completions"
    default = build_mistral_request(
        get_model("mistral", "codestral-latest"), al.Context(), al.StreamOptions(signal=al.AbortSignal())
    )
    assert default.url == "https://api.mistral.ai/v1/chat/completions"


async def test_no_key_is_an_error_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    events, final = await collect(stream_mistral(mistral(), al.Context(), al.StreamOptions(signal=al.AbortSignal())))
    assert types(events) == ["error"]
    assert "MISTRAL_API_KEY" in (final.error_message or "")


# --- the stream -----------------------------------------------------------------------------


async def test_thinking_then_text_with_usage_and_cost() -> None:
    m = mistral(cost=al.ModelCost(input=2.0, output=5.0, cache_read=0.2))
    body = sse_data(
        chunk({"role": "assistant", "content": ""}),
        chunk(thinking("Plan")),
        chunk(thinking(" it.")),
        chunk({"content": [{"type": "text", "text": "Hel"}]}),
        chunk({"content": "lo"}),
        chunk({"content": ""}, "stop", usage=USAGE),
    )
    events, final = await stream(body, m)
    assert types(events) == ["start", *streamed("thinking", 2), *streamed("text", 2), "done"]
    assert final.content == (al.ThinkingContent("Plan it."), al.TextContent("Hello"))
    assert final.stop_reason == "stop" and final.response_id == "cmpl-1"
    usage = final.usage
    assert (usage.input, usage.cache_read, usage.output, usage.total_tokens) == (600, 400, 100, 1100)
    assert usage.cost.total == pytest.approx((600 * 2.0 + 400 * 0.2 + 100 * 5.0) / 1e6)


async def test_whole_tool_calls_string_or_object_arguments_and_a_missing_id() -> None:
    body = sse_data(
        chunk(
            {
                "tool_calls": [
                    {
                        "id": "D681PevKs",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                        "index": 0,
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {"id": "null", "function": {"name": "get_weather", "arguments": {"location": "Lyon"}}, "index": 1}
                ]
            }
        ),
        chunk({}, "tool_calls"),
    )
    events, final = await stream(body)
    assert final.stop_reason == "toolUse"
    assert [(c.id, c.name, dict(c.arguments)) for c in final.tool_calls] == [
        ("D681PevKs", "get_weather", {"location": "Paris"}),
        ("toolcall1", "get_weather", {"location": "Lyon"}),  # from `toolcall:<index>`, as pi-ai names it
    ]
    deltas = [e.delta for e in events if e.type == "toolcall_delta"]
    assert deltas == ['{"location": "Paris"}', '{"location":"Lyon"}']
    # Calls stay open until the stream ends, then close in the order they started.
    assert types(events)[-3:] == ["toolcall_end", "toolcall_end", "done"]


async def test_text_after_a_tool_call_is_a_new_block_and_empty_deltas_open_none() -> None:
    body = sse_data(
        chunk(thinking("a")),
        chunk({"content": ""}),
        chunk(thinking("b")),
        chunk({"content": "Checking."}),
        chunk({"tool_calls": [{"id": "Q1w2E3r4T", "function": {"name": "f", "arguments": "{}"}, "index": 0}]}),
        chunk({"content": "More."}, "tool_calls"),
    )
    events, final = await stream(body)
    assert [type(b).__name__ for b in final.content] == ["ThinkingContent", "TextContent", "ToolCall", "TextContent"]
    assert final.content[0] == al.ThinkingContent("ab")
    assert types(events).count("thinking_start") == 1


@pytest.mark.parametrize(
    ("reason", "stop", "error"),
    [
        ("stop", "stop", None),
        ("length", "length", None),
        ("model_length", "length", None),
        ("tool_calls", "toolUse", None),
        ("error", "error", "Provider stopped with: error"),
        ("content_filter", "error", "Provider stopped with: content_filter"),
    ],
)
async def test_finish_reasons(reason: str, stop: str, error: str | None) -> None:
    _, final = await stream(sse_data(chunk({"content": "x"}), chunk({}, reason)))
    assert (final.stop_reason, final.error_message) == (stop, error)
    assert final.text == "x"


async def test_a_stream_without_a_finish_reason_is_an_error_and_done_ends_the_reading() -> None:
    _, final = await stream(sse_data(chunk({"content": "x"})))
    assert (final.stop_reason, final.error_message) == ("error", "Mistral stream ended without a finish reason")
    after_done = sse_data(chunk({"content": "x"}, "stop")) + b"data: not json\n\n"
    _, final = await stream(after_done)
    assert final.stop_reason == "stop"
    no_done = sse_data(chunk({"content": "x"}, "stop"), done=False)
    _, final = await stream(no_done)
    assert final.stop_reason == "stop"


async def test_an_event_that_is_no_chunk_ends_the_stream_with_its_message() -> None:
    body = sse_data(chunk({"content": "x"}), {"object": "error", "message": "Service unavailable", "type": "internal"})
    _, final = await stream(body)
    assert final.stop_reason == "error" and final.text == "x"
    assert final.error_message == "Invalid Mistral streaming event: Service unavailable (internal)"


async def test_http_errors_are_retried_then_reported_with_the_key_redacted() -> None:
    server = Server(
        httpx.Response(429, json={"message": "Rate limited"}, headers={"retry-after": "0"}),
        httpx.Response(401, json={"message": "Bad key sk-secret-1234"}),
    )
    async with server.client() as client:
        _, final = await collect(
            stream_mistral(
                mistral(),
                al.Context(messages=[al.UserMessage(content="hi")]),
                options(api_key="sk-secret-1234"),
                http=FAST,
                client=client,
            )
        )
    assert len(server.requests) == 2
    assert final.error_message == "HTTP 401: Bad key ***"
    assert server.requests[0].headers["authorization"] == "Bearer sk-secret-1234"


async def test_an_abort_mid_stream_ends_it_aborted_with_the_content_so_far() -> None:
    signal = al.AbortSignal()
    gate = anyio.Event()

    async def body() -> Any:
        yield b"data: " + json.dumps(chunk({"content": "partial"})).encode() + b"\n\n"
        await gate.wait()
        yield b"data: [DONE]\n\n"

    server = Server(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body()))
    async with server.client() as client:
        events = []
        with anyio.fail_after(10):
            async with stream_mistral(
                mistral(),
                al.Context(messages=[al.UserMessage(content="hi")]),
                options(signal=signal),
                http=FAST,
                client=client,
            ) as s:
                async for event in s:
                    events.append(event)
                    if event.type == "text_delta":
                        signal.abort()
    assert events[-1].type == "error" and events[-1].reason == "aborted"
    assert events[-1].error.text == "partial"


def test_the_registry_lists_pi_ais_mistral_models() -> None:
    models = get_models("mistral")
    assert len(models) == 23 and all(m.api == "mistral-conversations" for m in models)
    large = get_model("mistral", "mistral-large-latest")
    assert large.context_window == 1_048_576 and large.max_tokens == 262_144 and large.reasoning
    assert large.cost == al.ModelCost(input=0.7, output=2.1, cache_read=0.07)
    assert get_model("mistral", "codestral-latest").input == ("text",)


# --- against aimock (`pytest -m servers`) ----------------------------------------------------


@pytest.mark.servers
async def test_an_agent_turn_with_parallel_tool_calls_against_aimock(aimock_url: str) -> None:
    agent = await aimock_weather_turn(
        al.Model(id="test-model", api="mistral-conversations", provider="aimock", base_url=aimock_url),
        functools.partial(stream_simple, http=HTTPOptions(max_retries=0)),
        "sk-aimock",
    )
    calls = as_assistant(agent.state.messages[1]).tool_calls
    assert [dict(c.arguments) for c in calls] == [
        {"location": "Paris", "unit": "celsius"},
        {"location": "Paris, Texas", "unit": "fahrenheit"},
    ]


@pytest.mark.servers
@pytest.mark.parametrize(
    ("prompt", "stop", "text"), [("hello", "stop", "Hello!"), ("truncate-me", "length", "This answer")]
)
async def test_text_and_length_against_aimock(aimock_url: str, prompt: str, stop: str, text: str) -> None:
    m = al.Model(id="test-model", api="mistral-conversations", provider="aimock", base_url=aimock_url)
    with anyio.fail_after(20):
        events, final = await collect(
            stream_simple(m, al.Context(messages=[al.UserMessage(content=prompt)]), options(), http=FAST)
        )
    assert final.stop_reason == stop and final.text.startswith(text), final.error_message
    assert types(events).count("text_delta") > 1


# --- the official SDK as an oracle (`oracle/sdk_oracle.json`, made by `oracle/sdk_oracle.py`) --------

ORACLE = json.loads((Path(__file__).parent / "oracle" / "sdk_oracle.json").read_text(encoding="utf-8"))
RECORDINGS = Path(__file__).parent / "pi_wire" / "recordings"
SDK_REFUSES = {
    # aimock answers in OpenAI's format: its tool-call deltas after the first carry no function
    # name, which Mistral's schema requires (pi-ai and agentloop read them as OpenAI's)
    "aimock-tools.mistral.sse": "ResponseValidationError",
}
FINISH = {"stop": "stop", "length": "length", "model_length": "length", "tool_calls": "toolUse", None: "error"}


def _content(final: al.AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in final.content:
        if isinstance(block, al.TextContent):
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, al.ThinkingContent):
            out.append({"type": "thinking", "text": block.thinking})
        else:
            out.append({"type": "toolCall", "id": block.id, "name": block.name, "arguments": dict(block.arguments)})
    return out


@pytest.mark.parametrize("name", sorted(n for n in ORACLE if n.endswith(".mistral.sse")))
async def test_final_messages_agree_with_the_mistralai_sdk(name: str) -> None:
    oracle = ORACLE[name]
    assert oracle.get("error") == SDK_REFUSES.get(name)
    assert oracle["request"] == {"authorization": "Bearer mistral-key", "path": "/v1/chat/completions", "query": ""}
    _, final = await stream((RECORDINGS / name).read_bytes(), mistral(cost=al.ModelCost()))
    if "error" in oracle:
        assert final.stop_reason == "toolUse" and len(final.tool_calls) == 2
        return
    expected = oracle["content"]
    for block in expected:  # the SDK's default id "null": agentloop names the call as pi-ai does
        if block["type"] == "toolCall" and block["id"] == "null":
            block["id"] = "toolcall0"
    assert _content(final) == expected
    assert final.stop_reason == FINISH[oracle["finish_reason"]]
    usage = oracle["usage"]
    if usage is not None:
        ours = final.usage
        assert (ours.input + ours.cache_read, ours.cache_read, ours.output, ours.total_tokens) == (
            usage["prompt"],
            usage["cached"],
            usage["completion"],
            usage["total"],
        )
