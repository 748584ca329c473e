"""OpenAI Chat Completions: the request we send and the stream we read (httpx.MockTransport)."""

from __future__ import annotations

from typing import Any

import pytest

import agentloop as al
from agentloop.providers import stream_openai_completions
from agentloop.providers._openai_completions import build_completions_request, map_finish_reason
from agentloop.providers._transform import mistral_id

from .helpers import (
    IMAGE,
    Weather,
    chat_chunk,
    context,
    ended_together,
    model,
    options,
    sse_data,
    stream_body,
    types,
)


async def stream(
    body: bytes | list[bytes], m: Any = None, ctx: al.Context | None = None, **opts: Any
) -> tuple[list[Any], al.AssistantMessage]:
    return await stream_body(stream_openai_completions, body, m or model("openai-completions"), ctx, **opts)


# --- the request ------------------------------------------------------------------------------


def body_of(m: Any, ctx: al.Context, **opts: Any) -> dict[str, Any]:
    return dict(build_completions_request(m, ctx, options(**opts)).body)


def test_messages_tools_and_images() -> None:
    m = model("openai-completions", input=("text", "image"))
    call = al.ToolCall("call_1", "get_weather", {"city": "Paris"})
    transcript: list[al.Message] = [
        al.UserMessage(content=(al.TextContent("look"), IMAGE)),
        al.AssistantMessage(
            content=(
                al.ThinkingContent("hmm", thinking_signature="reasoning_content"),
                al.TextContent("Let me "),
                al.TextContent("check."),
                call,
            ),
            api="openai-completions",
            provider="test",
            model="test-model",
            stop_reason="toolUse",
        ),
        al.ToolResultMessage(tool_call_id="call_1", tool_name="get_weather", content=(al.TextContent("sunny"), IMAGE)),
        al.UserMessage(content="thanks"),
    ]
    body = body_of(
        m, al.Context(system_prompt="be brief", messages=transcript, tools=[Weather()]), max_tokens=100, temperature=0.2
    )
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 100 and body["temperature"] == 0.2
    assert "store" not in body and "reasoning_effort" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Get the weather", "parameters": Weather.parameters},
        }
    ]
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
        ],
    }
    assert messages[2] == {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "hmm",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    }
    assert messages[3] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    assert messages[4]["role"] == "user" and messages[4]["content"][0] == {
        "type": "text",
        "text": "Attached image(s) from tool result:",
    }
    assert messages[5] == {"role": "user", "content": "thanks"}


def test_images_are_dropped_for_text_only_models_and_tool_results_get_a_placeholder() -> None:
    transcript: list[al.Message] = [
        al.UserMessage(content=(IMAGE,)),
        al.UserMessage(content=(al.TextContent("hi"), IMAGE)),
        al.AssistantMessage(
            content=(al.ToolCall("c1", "shot", {}),), api="x", provider="y", model="z", stop_reason="toolUse"
        ),
        al.ToolResultMessage(tool_call_id="c1", tool_name="shot", content=(IMAGE,)),
    ]
    messages = body_of(model("openai-completions"), al.Context(messages=transcript))["messages"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert messages[-1] == {"role": "tool", "content": "(see attached image)", "tool_call_id": "c1"}


def test_official_openai_defaults_and_reasoning_effort() -> None:
    m = model("openai-completions", base_url="https://api.openai.com/v1", reasoning=True)
    body = body_of(
        m,
        al.Context(system_prompt="sys", messages=[al.UserMessage(content="q")], tools=[Weather()]),
        reasoning="high",
        max_tokens=50,
    )
    assert body["store"] is False
    assert body["max_completion_tokens"] == 50
    assert body["messages"][0]["role"] == "developer"
    assert body["reasoning_effort"] == "high"
    assert body["tools"][0]["function"]["strict"] is False
    assert body_of(m, context(), reasoning="max")["reasoning_effort"] == "high"
    assert body_of(m, context(), reasoning="off").get("reasoning_effort") is None
    xhigh = model(
        "openai-completions", reasoning=True, compat={"supportsXhigh": True, "reasoningEffortMap": {"minimal": "low"}}
    )
    assert body_of(xhigh, context(), reasoning="max")["reasoning_effort"] == "xhigh"
    assert body_of(xhigh, context(), reasoning="minimal")["reasoning_effort"] == "low"


def test_thinking_formats_and_extra_body() -> None:
    qwen = model("openai-completions", reasoning=True, compat={"thinking_format": "qwen"})
    assert body_of(qwen, context(), reasoning="low")["enable_thinking"] is True
    assert body_of(qwen, context())["enable_thinking"] is False
    llama = model("openai-completions", compat={"thinking_format": "llama.cpp", "extra_body": {"top_k": 1}})
    body = body_of(llama, context(), reasoning="low", thinking_budgets={"low": 7})
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["thinking_budget_tokens"] == 7 and body["top_k"] == 1
    assert body_of(llama, context())["chat_template_kwargs"] == {"enable_thinking": False}
    template = model("openai-completions", compat={"thinking_format": "qwen-chat-template"})
    assert body_of(template, context(), reasoning="high")["chat_template_kwargs"] == {"enable_thinking": True}


def test_mistral_compat() -> None:
    m = model("openai-completions", base_url="https://api.mistral.ai/v1")
    transcript: list[al.Message] = [
        al.UserMessage(content="q"),
        al.AssistantMessage(
            content=(al.ThinkingContent("think"), al.ToolCall("call_123456789xyz", "f", {})),
            api="openai-completions",
            provider="test",
            model="test-model",
            stop_reason="toolUse",
        ),
        al.ToolResultMessage(tool_call_id="call_123456789xyz", tool_name="f", content=(al.TextContent("r"),)),
    ]
    body = body_of(m, al.Context(messages=transcript))
    assistant, result = body["messages"][1], body["messages"][2]
    assert assistant["content"] == "<thinking>\nthink\n</thinking>"
    expected = mistral_id("call_123456789xyz")  # the rule of the mistral-conversations API
    assert len(expected) == 9 and expected.isalnum() and expected != "call12345"
    assert assistant["tool_calls"][0]["id"] == expected
    assert result == {"role": "tool", "content": "r", "tool_call_id": expected, "name": "f"}


def test_empty_assistant_messages_are_skipped_and_headers_merge() -> None:
    transcript: list[al.Message] = [
        al.UserMessage(content="q"),
        al.AssistantMessage(content=(al.TextContent(" "),), api="x", provider="y", model="z"),
    ]
    m = model("openai-completions", headers={"x-model": "1"})
    request = build_completions_request(m, al.Context(messages=transcript), options(headers={"x-call": "2"}))
    assert [msg["role"] for msg in request.body["messages"]] == ["user"]
    assert request.headers["x-model"] == "1" and request.headers["x-call"] == "2"
    assert "sk-test" not in repr(request)


def test_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.local/v1/")
    official = model("openai-completions", base_url="https://api.openai.com/v1")
    assert build_completions_request(official, context(), options()).url == "http://proxy.local/v1/chat/completions"
    assert build_completions_request(model("openai-completions", base_url=""), context(), options()).url.startswith(
        "http://proxy.local"
    )
    assert (
        build_completions_request(model("openai-completions"), context(), options()).url
        == "http://mock/v1/chat/completions"
    )


# --- the stream -------------------------------------------------------------------------------


async def test_reasoning_then_text_and_usage_with_cached_tokens() -> None:
    body = sse_data(
        chat_chunk({"role": "assistant", "content": None}),
        chat_chunk({"reasoning_content": "think "}),
        chat_chunk({"reasoning_content": "more"}),
        chat_chunk({"content": "Hi"}),
        chat_chunk(finish="stop"),
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "total_tokens": 120,
                "prompt_tokens_details": {"cached_tokens": 60},
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
        },
    )
    m = model("openai-completions")
    priced = model("openai-completions", cost=al.ModelCost(input=1.0, output=2.0, cache_read=0.5))
    events, final = await stream(body, priced)
    # pi-ai's order: no block ends before the stream does (then all end, in content order).
    assert types(events) == ended_together(("thinking", 2), ("text", 1))
    assert final.content == (
        al.ThinkingContent("think more", thinking_signature="reasoning_content"),
        al.TextContent("Hi"),
    )
    usage = final.usage
    assert (usage.input, usage.output, usage.cache_read, usage.total_tokens) == (40, 20, 60, 120)
    assert usage.cost.input == pytest.approx(40e-6) and usage.cost.output == pytest.approx(40e-6)
    assert usage.cost.cache_read == pytest.approx(30e-6) and usage.cost.total == pytest.approx(110e-6)
    groq = model("openai-completions", compat={"add_reasoning_tokens": True})
    _, final = await stream(body, groq)
    assert final.usage.output == 25
    assert m.api == "openai-completions"


@pytest.mark.parametrize("field", ["reasoning", "reasoning_text"])
async def test_other_reasoning_fields(field: str) -> None:
    body = sse_data(
        chat_chunk({field: "why", "reasoning_content": None}), chat_chunk({"content": "ok"}), chat_chunk(finish="stop")
    )
    _, final = await stream(body)
    assert final.content[0] == al.ThinkingContent("why", thinking_signature=field)


async def test_refusals_are_text() -> None:
    body = sse_data(
        chat_chunk({"role": "assistant", "content": None, "refusal": ""}),
        chat_chunk({"refusal": "I can't help with that."}),
        chat_chunk(finish="stop"),
    )
    _, final = await stream(body)
    assert final.text == "I can't help with that." and final.stop_reason == "stop"


async def test_interleaved_parallel_tool_calls_are_keyed_by_index() -> None:
    body = sse_data(
        chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chat_chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": ""}}
                ]
            }
        ),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Pa'}}]}),
        chat_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": "UTC"}'}}]}),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ris"}'}}]}),
        chat_chunk(finish="tool_calls"),
    )
    events, final = await stream(body)
    assert final.stop_reason == "toolUse"
    assert final.tool_calls == (
        al.ToolCall("call_a", "get_weather", {"city": "Paris"}),
        al.ToolCall("call_b", "get_time", {"tz": "UTC"}),
    )
    deltas = [
        (e.content_index, e.delta, dict(e.partial.content[e.content_index].arguments))
        for e in events
        if e.type == "toolcall_delta"
    ]
    assert deltas == [  # every tool-call chunk is a delta, "" when it has no argument text (as pi-ai)
        (0, "", {}),
        (1, "", {}),
        (0, '{"city": "Pa', {"city": "Pa"}),
        (1, '{"tz": "UTC"}', {"tz": "UTC"}),
        (0, 'ris"}', {"city": "Paris"}),
    ]
    assert types(events)[-3:] == ["toolcall_end", "toolcall_end", "done"]


async def test_repeated_ids_and_names_are_set_not_appended_and_a_new_id_at_index_0_is_a_new_call() -> None:
    body = sse_data(
        chat_chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a":'}}]}),
        chat_chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": " 1}"}}]}),
        chat_chunk({"tool_calls": [{"index": 0, "id": "call_2", "function": {"name": "g", "arguments": "{}"}}]}),
        chat_chunk(finish="stop"),
    )
    _, final = await stream(body)
    assert final.tool_calls == (al.ToolCall("call_1", "f", {"a": 1}), al.ToolCall("call_2", "g", {}))
    assert final.stop_reason == "toolUse"  # `stop` with tool calls (some servers) still runs them


async def test_text_after_tool_calls_goes_on_in_the_one_text_block_and_nothing_ends_before_the_end() -> None:
    # pi-ai's order (it used to end the text before the call and open a second text block).
    body = sse_data(
        chat_chunk({"content": "Checking."}),
        chat_chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
        chat_chunk({"content": " Done."}),
        chat_chunk(finish="tool_calls"),
    )
    events, final = await stream(body)
    assert final.content == (al.TextContent("Checking. Done."), al.ToolCall("c", "f", {}))
    assert [(e.type, getattr(e, "content_index", None)) for e in events] == [
        ("start", None),
        ("text_start", 0),
        ("text_delta", 0),
        ("toolcall_start", 1),
        ("toolcall_delta", 1),
        ("text_delta", 0),
        ("text_end", 0),
        ("toolcall_end", 1),
        ("done", None),
    ]
    assert [e.partial.text for e in events if e.type == "text_delta"] == ["Checking.", "Checking. Done."]


async def test_invalid_final_arguments_set_arguments_error() -> None:
    body = sse_data(
        chat_chunk(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"unit": celsius}'}}]}
        ),
        chat_chunk(finish="tool_calls"),
    )
    _, final = await stream(body)
    call = final.tool_calls[0]
    assert call.arguments == {} and (call.arguments_error or "").startswith("the arguments are not valid JSON")


async def test_other_choices_are_ignored() -> None:
    body = sse_data(
        {"choices": [{"index": 1, "delta": {"content": "B"}}, {"index": 0, "delta": {"content": "A"}}]},
        {"choices": [{"index": 2, "delta": {"content": "C"}, "finish_reason": "length"}]},
        chat_chunk(finish="stop"),
    )
    _, final = await stream(body)
    assert final.text == "A" and final.stop_reason == "stop"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("stop", "stop"),
        ("end", "stop"),
        ("length", "length"),
        ("tool_calls", "toolUse"),
        ("function_call", "toolUse"),
        ("eos_token", "stop"),
        (None, "stop"),
    ],
)
async def test_finish_reasons(reason: str | None, expected: str) -> None:
    body = sse_data(chat_chunk({"content": "x"}), chat_chunk(finish=reason))
    _, final = await stream(body)
    assert final.stop_reason == expected
    assert map_finish_reason(reason) == expected


async def test_content_filter_is_an_error_with_the_content() -> None:
    body = sse_data(chat_chunk({"content": "Some"}), chat_chunk(finish="content_filter"))
    events, final = await stream(body)
    assert final.stop_reason == "error" and final.text == "Some"
    assert "content_filter" in (final.error_message or "")
    assert types(events)[-2:] == ["text_end", "error"]


async def test_moonshot_usage_in_the_choice() -> None:
    body = sse_data(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "x"},
                    "finish_reason": "stop",
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                }
            ]
        }
    )
    _, final = await stream(body)
    assert final.usage.input == 3 and final.usage.output == 1 and final.usage.total_tokens == 4


async def test_unexpected_shapes_do_not_crash() -> None:
    body = sse_data(
        {"choices": "nope"},
        {"choices": [None, {"index": 0, "delta": None}]},
        {"choices": [{"index": 0, "delta": {"content": 5, "tool_calls": [None, {"index": "x", "function": "f"}]}}]},
        {"usage": {"prompt_tokens": "many", "completion_tokens": True}},
        [1, 2],
    )
    _, final = await stream(body)
    assert final.stop_reason == "error" and "not an object" in (final.error_message or "")


async def test_the_model_that_answered_is_kept_when_it_is_not_the_one_asked_for() -> None:
    """pi-ai 1.6's `responseModel`: the first chunk's `model` that differs from the model's id."""
    dated = [chat_chunk({"content": "hi"}, model="test-model-2026-01"), chat_chunk(finish="stop", model="other")]
    _, final = await stream(sse_data(*dated))
    assert final.extra == {"responseModel": "test-model-2026-01"}
    _, final = await stream(sse_data(chat_chunk({"content": "hi"}, finish="stop", model="test-model")))
    assert final.extra is None
