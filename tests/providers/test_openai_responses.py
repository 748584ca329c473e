"""OpenAI Responses: the request we send and the stream we read (httpx.MockTransport)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

import agentloop as al
from agentloop.providers import stream_openai_responses
from agentloop.providers._openai_responses import build_responses_request

from .helpers import (
    FAST,
    Server,
    collect,
    context,
    ended_together,
    model,
    ok,
    options,
    sse_events,
    stream_body,
    streamed,
    types,
)

IMAGE = al.ImageContent(data="aGVsbG8=", mime_type="image/jpeg")
REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Plan A"}, {"type": "summary_text", "text": "Plan B"}],
    "encrypted_content": "enc",
}


def created() -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}


def completed(status: str = "completed", **extra: Any) -> dict[str, Any]:
    usage = {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 20}, "output_tokens": 10, "total_tokens": 60}
    return {
        "type": f"response.{status}" if status != "failed" else "response.failed",
        "response": {"id": "resp_1", "status": status, "usage": usage, **extra},
    }


def reasoning_and_text() -> list[dict[str, Any]]:
    return [
        created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []},
        },
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0, "summary_index": 0},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "delta": "Plan "},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "delta": "A"},
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0, "summary_index": 1},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "delta": "Plan B"},
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING_ITEM},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "Hello",
        },
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "!"},
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello!"}],
                "phase": "final_answer",
            },
        },
    ]


async def stream(
    items: list[dict[str, Any]], m: Any = None, ctx: al.Context | None = None, raw: bytes | None = None, **opts: Any
) -> tuple[list[Any], al.AssistantMessage]:
    body = raw if raw is not None else sse_events(*items)
    return await stream_body(stream_openai_responses, body, m or model("openai-responses"), ctx, **opts)


# --- the stream -------------------------------------------------------------------------------


async def test_reasoning_summary_then_text() -> None:
    m = model("openai-responses", cost=al.ModelCost(input=2.0, output=8.0, cache_read=0.5))
    events, final = await stream([*reasoning_and_text(), completed()], m)
    assert types(events) == ["start", *streamed("thinking", 4), *streamed("text", 2), "done"]
    thinking, text = final.content
    assert isinstance(thinking, al.ThinkingContent) and thinking.thinking == "Plan A\n\nPlan B"
    assert json.loads(thinking.thinking_signature or "") == REASONING_ITEM
    assert thinking.thinking_signature == json.dumps(REASONING_ITEM, separators=(",", ":"))  # as JSON.stringify
    assert text == al.TextContent("Hello!", text_signature='{"v":1,"id":"msg_1","phase":"final_answer"}')
    assert final.stop_reason == "stop" and final.response_id == "resp_1"
    assert (final.usage.input, final.usage.cache_read, final.usage.output, final.usage.total_tokens) == (30, 20, 10, 60)
    assert final.usage.cost.total == pytest.approx((30 * 2 + 20 * 0.5 + 10 * 8) / 1e6)


def function_call(n: int, name: str, arguments: str) -> dict[str, Any]:
    """The output item of function call `n` (`fc_<n>`, `call_<n>`) with its arguments so far."""
    return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name, "arguments": arguments}


async def test_parallel_function_calls() -> None:
    items = [
        created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": function_call(1, "get_weather", ""),
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": function_call(2, "get_time", ""),
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"city": '},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_2",
            "output_index": 1,
            "delta": '{"tz": "UTC"}',
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '"Paris"}'},
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": '{"city": "Paris"}',
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": function_call(1, "get_weather", '{"city": "Paris"}'),
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": function_call(2, "get_time", '{"tz": "UTC"}'),
        },
        completed(),
    ]
    events, final = await stream(items)
    assert final.stop_reason == "toolUse"
    assert final.tool_calls == (
        al.ToolCall("call_1|fc_1", "get_weather", {"city": "Paris"}),
        al.ToolCall("call_2|fc_2", "get_time", {"tz": "UTC"}),
    )
    partial = [e.partial.content[0].arguments for e in events if e.type == "toolcall_delta" and e.content_index == 0]
    assert partial == [{}, {"city": "Paris"}]


async def test_llama_cpp_shape_without_output_index_and_interleaved_items() -> None:
    # llama.cpp b11549: no output_index, raw reasoning_text, the reasoning item done after the
    # message item was added.
    items: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_x", "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "item": {"id": "rs_9", "summary": [], "type": "reasoning", "content": [], "encrypted_content": ""},
        },
        {"type": "response.reasoning_text.delta", "delta": "\nI", "item_id": "rs_9"},
        {"type": "response.reasoning_text.delta", "delta": "'m", "item_id": "rs_9"},
        {
            "type": "response.output_item.added",
            "item": {"content": [], "id": "msg_9", "role": "assistant", "type": "message"},
        },
        {"type": "response.content_part.added", "item_id": "msg_9", "part": {"type": "output_text", "text": ""}},
        {"type": "response.output_text.delta", "item_id": "msg_9", "delta": "A"},
        {"type": "response.output_text.delta", "item_id": "msg_9", "delta": " terse"},
        {
            "type": "response.output_item.done",
            "item": {
                "id": "rs_9",
                "summary": [],
                "type": "reasoning",
                "content": [{"text": "\nI'm", "type": "reasoning_text"}],
                "encrypted_content": "",
            },
        },
        {"type": "response.output_text.done", "item_id": "msg_9", "text": "A terse"},
        {
            "type": "response.output_item.done",
            "item": {
                "type": "message",
                "id": "msg_9",
                "content": [{"type": "output_text", "text": "A terse"}],
                "role": "assistant",
            },
        },
        {
            "type": "response.completed",
            "response": {
                "id": "resp_x",
                "status": "completed",
                "usage": {"input_tokens": 24, "output_tokens": 12, "total_tokens": 36},
            },
        },
    ]
    events, final = await stream(items)
    assert types(events) == ended_together(("thinking", 2), ("text", 2))
    item = {
        "id": "rs_9",
        "summary": [],
        "type": "reasoning",
        "content": [{"text": "\nI'm", "type": "reasoning_text"}],
        "encrypted_content": "",
    }
    # Every reasoning item is the signature of its block, as pi-ai keeps it (it used to be only
    # items with a summary or encrypted content).
    signature = json.dumps(item, separators=(",", ":"))
    assert final.content == (
        al.ThinkingContent("\nI'm", thinking_signature=signature),
        al.TextContent("A terse", text_signature='{"v":1,"id":"msg_9"}'),
    )
    assert final.usage.total_tokens == 36


async def test_items_only_seen_at_done_and_never_closed_items() -> None:
    items = [
        created(),
        {
            "type": "response.output_item.done",
            "item": {"type": "message", "id": "msg_2", "content": [{"type": "refusal", "refusal": "No."}]},
        },
        {
            "type": "response.output_item.added",
            "item": {"type": "function_call", "id": "fc_5", "call_id": "call_5", "name": "f", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_5", "delta": '{"a": 1}'},
        {"type": "response.output_item.added", "item": {"type": "web_search_call", "id": "ws_1"}},
        completed(),
    ]
    _, final = await stream(items)
    assert final.content == (
        al.TextContent("No.", text_signature='{"v":1,"id":"msg_2"}'),
        al.ToolCall("call_5|fc_5", "f", {"a": 1}),
    )
    assert final.stop_reason == "toolUse"


async def test_incomplete_is_length_and_content_filter_an_error() -> None:
    text = reasoning_and_text()[8:12]
    _, final = await stream(
        [created(), *text, completed("incomplete", incomplete_details={"reason": "max_output_tokens"})]
    )
    assert final.stop_reason == "length" and final.text == "Hello!" and final.usage.output == 10
    _, final = await stream(
        [created(), *text, completed("incomplete", incomplete_details={"reason": "content_filter"})]
    )
    assert (final.stop_reason, final.error_message) == ("error", "Response incomplete: content_filter")
    _, final = await stream([created(), *text, completed("incomplete")])
    # pi-ai's reading: without a reason, an incomplete response is an error (it used to be `length`).
    assert (final.stop_reason, final.error_message) == ("error", "Response incomplete without a provider reason")


async def test_failed_and_error_events() -> None:
    text = reasoning_and_text()[8:12]
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "invalid_prompt", "message": "Bad prompt"}},
    }
    _, final = await stream([created(), *text, failed])
    assert (
        final.stop_reason == "error" and final.error_message == "Bad prompt (invalid_prompt)" and final.text == "Hello!"
    )
    error = {
        "type": "error",
        "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model.",
        "param": None,
    }
    _, final = await stream([created(), error])
    assert final.error_message == "Your input exceeds the context window of this model. (context_length_exceeded)"


async def test_a_rate_limit_error_before_content_is_retried() -> None:
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}
    server = Server(ok(sse_events(created(), error)), ok(sse_events(*reasoning_and_text(), completed())))
    async with server.client() as client:
        events, final = await collect(
            stream_openai_responses(model("openai-responses"), context(), options(), http=FAST, client=client)
        )
    assert final.text == "Hello!" and len(server.requests) == 2 and types(events).count("start") == 1


async def test_service_tier_pricing() -> None:
    m = model("openai-responses", cost=al.ModelCost(input=1.0, output=1.0))
    _, final = await stream([*reasoning_and_text(), completed(service_tier="flex")], m)
    assert final.usage.cost.total == pytest.approx(0.5 * (30 + 10) / 1e6)
    _, final = await stream([*reasoning_and_text(), completed(service_tier="priority")], m)
    assert final.usage.cost.total == pytest.approx(2 * (30 + 10) / 1e6)


async def test_a_stream_without_response_completed_is_an_error() -> None:
    _, final = await stream(reasoning_and_text())
    assert final.stop_reason == "error" and "response.completed" in (final.error_message or "")
    assert final.text == "Hello!"


# --- the request ------------------------------------------------------------------------------


class Tool:
    name = "f"
    description = "does f"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}


def test_request_body_and_replay() -> None:
    m = model(
        "openai-responses",
        id="gpt-5",
        provider="openai",
        base_url="https://api.openai.com/v1",
        reasoning=True,
        input=("text", "image"),
    )
    own = al.AssistantMessage(
        content=(
            al.ThinkingContent(
                "Plan A\n\nPlan B", thinking_signature=json.dumps(REASONING_ITEM, separators=(",", ":"))
            ),
            al.TextContent("Hello!", text_signature='{"v":1,"id":"msg_1","phase":"final_answer"}'),
            al.ToolCall("call_1|fc_1", "f", {"x": 1}),
        ),
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    transcript: list[al.Message] = [
        al.UserMessage(content=(al.TextContent("look"), IMAGE)),
        own,
        al.ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="f", content=(al.TextContent("done"), IMAGE)),
    ]
    request = build_responses_request(
        m,
        al.Context(system_prompt="sys", messages=transcript, tools=[Tool()]),
        options(reasoning="medium", max_tokens=99, session_id="sess"),
    )
    body = request.body
    assert request.url == "https://api.openai.com/v1/responses"
    assert body["store"] is False and body["max_output_tokens"] == 99 and body["prompt_cache_key"] == "sess"
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "f",
            "description": "does f",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    items = body["input"]
    assert items[0] == {"role": "developer", "content": "sys"}
    assert items[1]["content"][1] == {
        "type": "input_image",
        "detail": "auto",
        "image_url": "data:image/jpeg;base64,aGVsbG8=",
    }
    assert items[2] == REASONING_ITEM
    assert items[3] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        "status": "completed",
        "id": "msg_1",
        "phase": "final_answer",
    }
    assert items[4] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "status": "completed",  # as OpenAI returns it (pi-ai 1.6.1)
        "arguments": '{"x": 1}',
        "id": "fc_1",
    }
    assert items[5] == {"type": "function_call_output", "call_id": "call_1", "output": "done"}
    assert items[6]["role"] == "user" and items[6]["content"][0]["text"] == "Attached image(s) from tool result:"


def test_replay_from_another_model_and_other_providers() -> None:
    target = model("openai-responses", id="gpt-5-mini", provider="openai")
    same_provider = al.AssistantMessage(
        content=(
            al.ThinkingContent("t"),
            al.TextContent("x" * 3, text_signature="msg_" + "y" * 70),
            al.ToolCall("call_1|fc_1", "f", {}),
        ),
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    anthropic = al.AssistantMessage(
        content=(al.ThinkingContent("deep", thinking_signature="sig"), al.ToolCall("toolu_01.A", "g", {})),
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        stop_reason="toolUse",
    )
    transcript: list[al.Message] = [
        al.UserMessage(content="q"),
        same_provider,
        al.ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="f"),
        anthropic,
        al.ToolResultMessage(tool_call_id="toolu_01.A", tool_name="g", content=(al.TextContent("r"),)),
    ]
    items = build_responses_request(target, al.Context(messages=transcript), options()).body["input"]
    # the thinking of another model ("t", "deep") is dropped, as pi-ai 1.6.1 does
    assert [item.get("type", item.get("role")) for item in items] == [
        "user",
        "message",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
    ]
    assert items[1]["content"] == [{"type": "output_text", "text": "xxx", "annotations": []}]
    assert items[1]["id"] == "msg_1"  # another model's message id is not replayed
    assert "id" not in items[2]  # an fc_ id from another model is left out
    assert items[3]["output"] == "(see attached image)"
    assert items[4] == {
        "type": "function_call",
        "call_id": "toolu_01_A",
        "name": "g",
        "status": "completed",
        "arguments": "{}",
    }
    assert items[5] == {"type": "function_call_output", "call_id": "toolu_01_A", "output": "r"}


def test_llama_cpp_thinking_format() -> None:
    m = model("openai-responses", compat={"thinking_format": "llama.cpp", "supports_store": False})
    body = build_responses_request(m, context(), options(reasoning="low", thinking_budgets={"low": 3})).body
    assert body["thinking_budget_tokens"] == 3 and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert "store" not in body and "reasoning" not in body


async def test_empty_deltas_are_events_and_the_done_item_still_fills_an_unstreamed_block() -> None:
    # pi-ai passes empty deltas on; one that carries no text does not make the block "streamed".
    items = [
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_e", "type": "message"}},
        {"type": "response.output_text.delta", "item_id": "msg_e", "output_index": 0, "delta": ""},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "message", "id": "msg_e", "content": [{"type": "output_text", "text": "Hi"}]},
        },
        completed(),
    ]
    events, final = await stream(items)
    assert [(e.type, getattr(e, "delta", None)) for e in events if e.type.endswith("delta")] == [
        ("text_delta", ""),
        ("text_delta", "Hi"),
    ]
    assert final.text == "Hi"
