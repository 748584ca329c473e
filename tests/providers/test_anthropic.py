"""Anthropic Messages: the request we send and the stream we read (httpx.MockTransport)."""

from __future__ import annotations

from typing import Any

import pytest

import agentloop as al
from agentloop.providers import stream_anthropic
from agentloop.providers._anthropic import build_anthropic_request, map_stop_reason

from .helpers import (
    FAST,
    IMAGE,
    Server,
    Weather,
    collect,
    context,
    model,
    ok,
    options,
    sse_events,
    stream_body,
    streamed,
    types,
)


def start(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = usage or {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
    }
    return {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude",
            "usage": usage,
        },
    }


def block(index: int, **content: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": content}


def delta(index: int, **content: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": content}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def end(reason: str = "end_turn", output: int = 20) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output},
        },
        {"type": "message_stop"},
    ]


async def stream(
    items: list[dict[str, Any]], m: Any = None, ctx: al.Context | None = None, **opts: Any
) -> tuple[list[Any], al.AssistantMessage]:
    return await stream_body(stream_anthropic, sse_events(*items), m or model("anthropic-messages"), ctx, **opts)


async def test_thinking_text_and_tool_use() -> None:
    items = [
        start(),
        {"type": "ping"},
        block(0, type="thinking", thinking="", signature=""),
        delta(0, type="thinking_delta", thinking="Let me "),
        delta(0, type="thinking_delta", thinking="think."),
        delta(0, type="signature_delta", signature="EqQBCkgIARABGAIiQL"),
        stop(0),
        block(1, type="text", text=""),
        delta(1, type="text_delta", text="Checking."),
        stop(1),
        block(2, type="tool_use", id="toolu_01", name="get_weather", input={}),
        {"type": "ping"},
        delta(2, type="input_json_delta", partial_json=""),
        delta(2, type="input_json_delta", partial_json='{"city": "Pa'),
        delta(2, type="input_json_delta", partial_json='ris"}'),
        stop(2),
        {"type": "some_future_event", "x": 1},
        *end("tool_use"),
    ]
    m = model("anthropic-messages", cost=al.ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75))
    events, final = await stream(items, m)
    # the tool call's first delta is the API's first, empty, fragment: kept, as pi-ai keeps it
    assert types(events) == ["start", *streamed("thinking", 2), *streamed("text", 1), *streamed("toolcall", 3), "done"]
    assert final.content == (
        al.ThinkingContent("Let me think.", thinking_signature="EqQBCkgIARABGAIiQL"),
        al.TextContent("Checking."),
        al.ToolCall("toolu_01", "get_weather", {"city": "Paris"}),
    )
    assert final.stop_reason == "toolUse" and final.response_id == "msg_01"
    usage = final.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (10, 20, 100, 5, 135)
    assert usage.cost.total == pytest.approx((10 * 3 + 20 * 15 + 100 * 0.3 + 5 * 3.75) / 1e6)
    previews = [dict(e.partial.content[2].arguments) for e in events if e.type == "toolcall_delta"]
    assert previews == [{}, {"city": "Pa"}, {"city": "Paris"}]


async def test_llama_cpp_overlapping_blocks_are_routed_by_index() -> None:
    items = [
        start({"cache_read_input_tokens": 23, "input_tokens": 1, "output_tokens": 0}),
        block(0, type="thinking", thinking=""),
        delta(0, type="thinking_delta", thinking="\nI"),
        block(1, type="text", text=""),
        delta(1, type="text_delta", text="an"),
        delta(0, type="thinking_delta", thinking="'m"),
        delta(1, type="text_delta", text=" AI"),
        delta(0, type="signature_delta", signature=""),
        stop(0),
        stop(1),
        *end("max_tokens", 16),
    ]
    events, final = await stream(items)
    assert types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "text_start",
        "text_delta",
        "thinking_delta",
        "text_delta",
        "thinking_end",
        "text_end",
        "done",
    ]
    # A thinking block's signature is always a string, "" when none came (as pi-ai).
    assert final.content == (al.ThinkingContent("\nI'm", thinking_signature=""), al.TextContent("an AI"))
    assert final.stop_reason == "length"
    assert (final.usage.input, final.usage.cache_read, final.usage.output) == (1, 23, 16)


async def test_redacted_thinking_and_a_block_never_stopped() -> None:
    items = [
        start(),
        block(0, type="redacted_thinking", data="opaque-bytes"),
        stop(0),
        block(1, type="server_tool_use", id="srv_1", name="web_search", input={}),
        delta(1, type="input_json_delta", partial_json="{}"),
        stop(1),
        block(2, type="text", text="Hi"),
        *end(),
    ]
    _, final = await stream(items)
    assert final.content == (
        al.ThinkingContent("[Reasoning redacted]", thinking_signature="opaque-bytes", redacted=True),
        al.TextContent("Hi"),
    )


async def test_a_mid_stream_overloaded_error() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    events, final = await stream(
        [start(), block(0, type="text", text=""), delta(0, type="text_delta", text="Part"), overloaded]
    )
    assert (
        final.stop_reason == "error" and final.error_message == "Overloaded (overloaded_error)" and final.text == "Part"
    )
    assert final.usage.input == 10  # message_start's input tokens survive the failure
    # before any content, the same error is retried
    server = Server(
        ok(sse_events(start(), {"type": "ping"}, overloaded)),
        ok(sse_events(start(), block(0, type="text", text="ok"), stop(0), *end())),
    )
    async with server.client() as client:
        events, final = await collect(
            stream_anthropic(model("anthropic-messages"), context(), options(), http=FAST, client=client)
        )
    assert final.text == "ok" and len(server.requests) == 2 and types(events).count("start") == 1


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "toolUse"),
        ("brand_new_reason", "stop"),
    ],
)
async def test_stop_reasons(reason: str, expected: str) -> None:
    _, final = await stream([start(), block(0, type="text", text="x"), stop(0), *end(reason)])
    assert final.stop_reason == expected
    assert map_stop_reason(reason) == expected


async def test_a_refusal_is_an_error_with_the_content() -> None:
    _, final = await stream([start(), block(0, type="text", text="I won't"), stop(0), *end("refusal")])
    assert final.stop_reason == "error" and final.text == "I won't"
    assert final.error_message == "The model refused to complete the request"


async def test_a_refusal_says_the_apis_explanation() -> None:
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "refusal", "stop_details": {"type": "refusal", "explanation": "Unsafe request."}},
        "usage": {"output_tokens": 3},
    }
    _, final = await stream([start(), delta, {"type": "message_stop"}])
    assert (final.stop_reason, final.error_message) == ("error", "Unsafe request.")
    _, flagged = await stream([start(), *end("sensitive")])
    assert (flagged.stop_reason, flagged.error_message) == ("error", "Provider stopped with: sensitive")


async def test_without_message_stop_the_stream_is_incomplete() -> None:
    _, final = await stream(
        [
            start(),
            block(0, type="text", text="cut"),
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        ]
    )
    assert final.stop_reason == "error" and "message_stop" in (final.error_message or "") and final.text == "cut"


async def test_invalid_tool_json_sets_arguments_error() -> None:
    items = [
        start(),
        block(0, type="tool_use", id="toolu_1", name="f", input={}),
        delta(0, type="input_json_delta", partial_json='{"unit": celsius}'),
        stop(0),
        *end("tool_use"),
    ]
    _, final = await stream(items)
    call = final.tool_calls[0]
    assert call.arguments == {} and (call.arguments_error or "").startswith("the arguments are not valid JSON")


async def test_a_tool_call_cut_by_max_tokens_has_no_arguments_and_an_error() -> None:
    """The call still open when the message ends: empty arguments and `arguments_error` quoting the
    text received (pi-ai leaves the last preview as the arguments)."""
    items = [
        start(),
        block(0, type="tool_use", id="toolu_1", name="write", input={}),
        delta(0, type="input_json_delta", partial_json='{"path": "a.txt", "content": "half of'),
        *end("max_tokens", 16),
    ]
    events, final = await stream(items)
    assert types(events)[-3:] == ["toolcall_delta", "toolcall_end", "done"]
    assert dict(events[-3].partial.content[0].arguments) == {"path": "a.txt", "content": "half of"}  # the preview
    call = final.tool_calls[0]
    assert call.arguments == {} and final.stop_reason == "length"
    assert (call.arguments_error or "").startswith("the arguments are not valid JSON") and "half of" in (
        call.arguments_error or ""
    )


async def test_message_delta_without_input_tokens_keeps_them() -> None:
    items = [
        start(),
        block(0, type="text", text="a"),
        stop(0),
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 7, "input_tokens": None},
        },
        {"type": "message_stop"},
    ]
    _, final = await stream(items)
    assert final.usage.input == 10 and final.usage.output == 7


# --- the request ------------------------------------------------------------------------------


def test_request_headers_and_body() -> None:
    m = model(
        "anthropic-messages",
        id="claude-sonnet-4-5",
        provider="anthropic",
        base_url="https://api.anthropic.com",
        reasoning=True,
        max_tokens=64000,
        input=("text", "image"),
    )
    own = al.AssistantMessage(
        content=(
            al.ThinkingContent("hmm", thinking_signature="sig"),
            al.ThinkingContent("[Reasoning redacted]", thinking_signature="opaque", redacted=True),
            al.ThinkingContent("unsigned"),
            al.TextContent(""),
            al.TextContent("Checking."),
            al.ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
            al.ToolCall("toolu_2", "get_weather", {"city": "Rome"}),
        ),
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
    )
    transcript: list[al.Message] = [
        al.UserMessage(content=(al.TextContent("look"), IMAGE)),
        own,
        al.ToolResultMessage(tool_call_id="toolu_1", tool_name="get_weather", content=(al.TextContent("sunny"),)),
        al.ToolResultMessage(tool_call_id="toolu_2", tool_name="get_weather", content=(IMAGE,), is_error=True),
    ]
    request = build_anthropic_request(
        m,
        al.Context(system_prompt="sys", messages=transcript, tools=[Weather()]),
        options(api_key="sk-ant-x", reasoning="medium", max_tokens=1000, temperature=0.5, metadata={"user_id": "u1"}),
    )
    assert request.url == "https://api.anthropic.com/v1/messages"
    headers = request.headers
    assert headers["x-api-key"] == "sk-ant-x" and headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14"
    body = request.body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 9192
    assert "temperature" not in body  # not allowed with thinking
    assert body["metadata"] == {"user_id": "u1"}
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Get the weather",
            "input_schema": Weather.parameters,
            "cache_control": {"type": "ephemeral"},  # the last tool, as pi-ai marks it
        }
    ]
    messages = body["messages"]
    assert messages[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
    }
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "unsigned"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
        ],
    }
    assert messages[2]["role"] == "user"
    first, second = messages[2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
    assert second["is_error"] is True and second["content"][0] == {"type": "text", "text": "(see attached image)"}
    assert second["content"][1]["type"] == "image"
    assert second["cache_control"] == {"type": "ephemeral"}  # the last user block is cacheable


def test_thinking_budget_is_capped_by_the_model_and_temperature_without_thinking() -> None:
    m = model("anthropic-messages", reasoning=True, max_tokens=4000)
    body = build_anthropic_request(m, context(), options(reasoning="high", max_tokens=2000)).body
    assert body["max_tokens"] == 4000 and body["thinking"]["budget_tokens"] == 2976
    body = build_anthropic_request(m, context(), options(temperature=0.3)).body
    assert body["temperature"] == 0.3 and "thinking" not in body and body["max_tokens"] == 4000
    plain = model("anthropic-messages")
    assert build_anthropic_request(plain, context(), options(reasoning="high")).body.get("thinking") is None
    assert build_anthropic_request(plain, context(), options()).body["max_tokens"] == 4096


def test_adaptive_thinking_and_llama_cpp_format() -> None:
    opus = model("anthropic-messages", id="claude-opus-4-6", base_url="https://api.anthropic.com", reasoning=True)
    body = build_anthropic_request(opus, context(), options(reasoning="max")).body
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "high"}
    llama = model("anthropic-messages", compat={"thinking_format": "llama.cpp", "cache_control": False})
    body = build_anthropic_request(
        llama,
        al.Context(system_prompt="s", messages=[al.UserMessage(content="q")]),
        options(reasoning="low", thinking_budgets={"low": 4}, max_tokens=12),
    ).body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4} and body["max_tokens"] == 16
    assert body["system"] == [{"type": "text", "text": "s"}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "q"}]}]
    assert build_anthropic_request(llama, context(), options()).body["chat_template_kwargs"] == {
        "enable_thinking": False
    }


def test_handoff_from_openai_normalises_ids_and_thinking() -> None:
    other = al.AssistantMessage(
        content=(
            al.ThinkingContent("reasoning", thinking_signature='{"type": "reasoning"}'),
            al.ToolCall("call_1|fc_" + "x" * 100, "f", {}),
        ),
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    transcript: list[al.Message] = [al.UserMessage(content="q"), other, al.UserMessage(content="go on")]
    messages = build_anthropic_request(model("anthropic-messages"), al.Context(messages=transcript), options()).body[
        "messages"
    ]
    assert [block["type"] for block in messages[1]["content"]] == ["tool_use"]  # the other model's thinking: dropped
    tool_id = messages[1]["content"][0]["id"]
    assert len(tool_id) == 64 and "|" not in tool_id
    assert messages[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": "No result provided",
        "is_error": True,
    }


def test_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.local/")
    official = model("anthropic-messages", base_url="https://api.anthropic.com")
    assert build_anthropic_request(official, context(), options()).url == "http://gateway.local/v1/messages"


async def test_empty_text_and_thinking_deltas_are_events_as_in_pi_ai() -> None:
    items = [
        start(),
        block(0, type="thinking", thinking=""),
        delta(0, type="thinking_delta", thinking=""),
        stop(0),
        block(1, type="text", text=""),
        delta(1, type="text_delta", text=""),
        delta(1, type="text_delta", text="ok"),
        stop(1),
        *end(),
    ]
    events, final = await stream(items)
    assert [(e.type, e.delta) for e in events if e.type.endswith("delta")] == [
        ("thinking_delta", ""),
        ("text_delta", ""),
        ("text_delta", "ok"),
    ]
    assert final.text == "ok"


async def test_a_fallback_model_that_answered_is_kept() -> None:
    """pi-ai 1.6's `responseModel`: `message_start`'s model when it is not the one asked for."""
    items = [start(), block(0, type="text", text=""), delta(0, type="text_delta", text="Hi."), stop(0), *end()]
    _, final = await stream(items)  # asked for "test-model", "claude" answered
    assert final.extra == {"responseModel": "claude"} and final.text == "Hi."
    _, final = await stream(items, model("anthropic-messages", id="claude"))
    assert final.extra is None
