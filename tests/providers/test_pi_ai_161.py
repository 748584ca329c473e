"""What pi-ai 1.6.1 sends and reads that 1.6.0 did not: Anthropic's short schema keyword list,
prompt-cache retention, replayed Responses calls marked completed, OpenRouter's native finish
reasons, and its model list."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentloop import (
    AbortSignal,
    AssistantMessage,
    Context,
    Message,
    StreamOptions,
    TextContent,
    ToolCall,
    UserMessage,
)
from agentloop.providers import get_model, get_models, stream_openai_completions
from agentloop.providers._anthropic import build_anthropic_request, input_schema
from agentloop.providers._openai_completions import build_completions_request
from agentloop.providers._openai_responses import build_responses_request
from agentloop.providers._proxy._wire import decode_request, encode_request

from .helpers import FAST, Server, chat_chunk, collect, context, model, ok, options, sse_data, types


class Tool:
    def __init__(self, name: str = "f", parameters: dict[str, Any] | None = None) -> None:
        self.name = name
        self.description = "a tool"
        self.parameters = parameters or {"type": "object", "properties": {}}


# --- Anthropic tool schemas ---------------------------------------------------------------------


def test_anthropic_input_schema_keeps_pi_ais_short_keyword_list() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Args",
        "description": "the arguments",
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "required": ["a"],
        "additionalProperties": False,
        "$defs": {"A": {"type": "string"}},
        "definitions": {"B": {"type": "integer"}},
        "anyOf": [{"required": ["a"]}],
        "examples": [{"a": "x"}],
    }
    assert input_schema(schema) == {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "required": ["a"],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$defs": {"A": {"type": "string"}},
        "definitions": {"B": {"type": "integer"}},
    }
    # A schema that is only a top-level union (Anthropic answers it with a 400) becomes an object.
    assert input_schema({"anyOf": [{"type": "object"}, {"type": "null"}]}) == {
        "type": "object",
        "properties": {},
        "required": [],
    }


# --- cache retention ----------------------------------------------------------------------------


def anthropic_body(retention: str | None, **model_kwargs: Any) -> dict[str, Any]:
    m = model("anthropic-messages", **model_kwargs)
    ctx = Context(system_prompt="sys", messages=[UserMessage(content="hi")], tools=[Tool("a"), Tool("b")])
    return dict(build_anthropic_request(m, ctx, options(cache_retention=retention)).body)


@pytest.mark.parametrize(
    ("retention", "compat", "mark"),
    [
        (None, None, {"type": "ephemeral"}),
        ("short", None, {"type": "ephemeral"}),
        ("long", None, {"type": "ephemeral", "ttl": "1h"}),
        ("long", {"supports_long_cache_retention": False}, {"type": "ephemeral"}),
        ("none", None, None),
        ("long", {"cache_control": False}, None),
    ],
)
def test_anthropic_cache_marks_follow_the_retention(
    retention: str | None, compat: dict[str, Any] | None, mark: dict[str, Any] | None
) -> None:
    body = anthropic_body(retention, compat=compat)
    marks = [
        body["system"][0].get("cache_control"),
        body["tools"][-1].get("cache_control"),
        body["messages"][-1]["content"][-1].get("cache_control"),
    ]
    assert marks == [mark, mark, mark]
    assert "cache_control" not in body["tools"][0]  # only the last tool ends the cached prefix


def completions_body(url: str, retention: str | None, session: str | None = "s" * 80, **kwargs: Any) -> dict[str, Any]:
    m = model("openai-completions", base_url=url, **kwargs)
    opts = options(cache_retention=retention, session_id=session)
    ctx = Context(system_prompt="sys", messages=[UserMessage(content="hi")])
    return dict(build_completions_request(m, ctx, opts).body)


def test_completions_prompt_cache_key_and_retention() -> None:
    official = completions_body("https://api.openai.com/v1", None)
    assert official["prompt_cache_key"] == "s" * 64 and "prompt_cache_retention" not in official
    long = completions_body("https://api.openai.com/v1", "long")
    assert long["prompt_cache_key"] == "s" * 64 and long["prompt_cache_retention"] == "24h"
    assert "prompt_cache_key" not in completions_body("https://api.openai.com/v1", "none")
    assert "prompt_cache_key" not in completions_body("https://api.openai.com/v1", "long", session=None)
    # Other servers get the key for a long retention only, and no 24-hour retention where it is unknown.
    assert "prompt_cache_key" not in completions_body("http://127.0.0.1:8080/v1", "short")
    assert completions_body("http://127.0.0.1:8080/v1", "long")["prompt_cache_retention"] == "24h"
    together = completions_body("https://api.together.xyz/v1", "long")
    assert "prompt_cache_key" not in together and "prompt_cache_retention" not in together
    enabled = completions_body("http://127.0.0.1:8080/v1", None, compat={"prompt_cache_key_mode": "enabled"})
    assert enabled["prompt_cache_key"] == "s" * 64
    disabled = completions_body("https://api.openai.com/v1", "long", compat={"promptCacheKeyMode": "disabled"})
    assert "prompt_cache_key" not in disabled and disabled["prompt_cache_retention"] == "24h"


def test_completions_marks_openrouter_anthropic_models_as_anthropic_does() -> None:
    m = model("openai-completions", id="anthropic/claude-sonnet-4.5", provider="openrouter")
    assistant = AssistantMessage(content=(TextContent("yes"),), api="openai-completions", provider="openrouter")
    transcript: list[Message] = [UserMessage(content="hi"), assistant, UserMessage(content="more")]
    ctx = Context(system_prompt="sys", messages=transcript, tools=[Tool()])
    body = build_completions_request(m, ctx, options(cache_retention="long")).body
    mark = {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][0]["content"] == [{"type": "text", "text": "sys", "cache_control": mark}]
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "more", "cache_control": mark}]
    assert body["messages"][1]["content"] == "hi"  # only the last message
    assert body["tools"][-1]["cache_control"] == mark
    plain = build_completions_request(model("openai-completions"), ctx, options(cache_retention="long")).body
    assert "cache_control" not in str(plain)


def test_responses_prompt_cache() -> None:
    def body(retention: str | None, **compat: Any) -> dict[str, Any]:
        m = model("openai-responses", compat=compat or None)
        return dict(build_responses_request(m, context(), options(cache_retention=retention, session_id="s1")).body)

    assert body(None)["prompt_cache_key"] == "s1" and "prompt_cache_retention" not in body(None)
    assert body("long")["prompt_cache_retention"] == "24h"
    assert "prompt_cache_key" not in body("none")
    assert "prompt_cache_key" not in body(None, prompt_cache_key_mode="disabled")
    assert "prompt_cache_retention" not in body("long", supports_long_cache_retention=False)
    explicit = body("long", supports_explicit_prompt_cache_mode=True)
    assert explicit["prompt_cache_options"] == {"ttl": "30m"} and "prompt_cache_retention" not in explicit
    assert body("none", supports_explicit_prompt_cache_mode=True)["prompt_cache_options"] == {"mode": "explicit"}


def test_an_unknown_cache_retention_is_refused_at_the_call() -> None:
    with pytest.raises(ValueError, match="cache_retention must be"):
        stream_openai_completions(model("openai-completions"), context(), options(cache_retention="forever"))


def test_the_proxy_carries_the_cache_retention() -> None:
    m = model("openai-completions")
    body = encode_request(m, context(), StreamOptions(signal=AbortSignal(), cache_retention="long"))
    assert b'"cacheRetention":"long"' in body
    assert decode_request(body)[2]["cache_retention"] == "long"
    with pytest.raises(ValueError, match="cacheRetention"):
        decode_request(body.replace(b'"long"', b'"forever"'))


# --- Responses replay ---------------------------------------------------------------------------


def test_replayed_responses_tool_calls_are_completed() -> None:
    m = model("openai-responses")
    call = ToolCall("call_1|fc_1", "f", {"x": 1})
    turn = AssistantMessage(content=(call,), api="openai-responses", provider="test", model="test-model")
    items = build_responses_request(m, Context(messages=[UserMessage(content="hi"), turn]), options()).body["input"]
    calls = [item for item in items if item.get("type") == "function_call"]
    assert len(calls) == 1 and calls[0]["status"] == "completed"


# --- finish reasons and OpenRouter --------------------------------------------------------------


async def completions(body: bytes, **model_kwargs: Any) -> tuple[list[Any], AssistantMessage]:
    server = Server(ok(body))
    async with server.client() as client:
        with anyio.fail_after(10):
            stream = stream_openai_completions(
                model("openai-completions", **model_kwargs), context(), options(), http=FAST, client=client
            )
            return await collect(stream)


def native(delta: dict[str, Any] | None, finish: str | None, reason: str | None) -> dict[str, Any]:
    chunk = chat_chunk(delta, finish=finish)
    if reason is not None:
        chunk["choices"][0]["native_finish_reason"] = reason
    return chunk


@pytest.mark.parametrize(
    ("finish", "text"),
    [
        ("content_filter", "Provider finish_reason: content_filter"),
        ("error", "Provider finish_reason: error"),
        ("network_error", "Provider finish_reason: network_error"),
    ],
)
async def test_failed_finish_reasons_are_errors_in_pi_ais_words(finish: str, text: str) -> None:
    _, final = await completions(sse_data(chat_chunk({"content": "x"}), chat_chunk(finish=finish)))
    assert final.stop_reason == "error" and final.error_message == text


CALL = {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}
OPENROUTER = {"provider": "openrouter", "base_url": "https://openrouter.ai/api/v1"}


async def test_openrouter_empty_stop_with_an_unclean_native_reason_is_an_error() -> None:
    body = sse_data(native({"reasoning": "thinking..."}, None, None), native(None, "stop", "MALFORMED_RESPONSE"))
    events, final = await completions(body, **OPENROUTER)
    assert final.stop_reason == "error"
    assert final.error_message == "OpenRouter returned an empty response (native_finish_reason: MALFORMED_RESPONSE)"
    assert types(events)[-2:] == ["thinking_end", "error"]  # the thinking is kept


@pytest.mark.parametrize(
    ("chunks", "stop"),
    [
        # A clean native reason (any case), text, or a tool call: a quiet stop.
        ([native(None, "stop", "END_TURN")], "stop"),
        ([native({"content": "hi"}, None, None), native(None, "stop", "MALFORMED_RESPONSE")], "stop"),
        ([native(CALL, None, None), native(None, "stop", "OTHER")], "toolUse"),
    ],
)
async def test_openrouter_stops_that_stay_stops(chunks: list[dict[str, Any]], stop: str) -> None:
    _, final = await completions(sse_data(*chunks), **OPENROUTER)
    assert final.stop_reason == stop


async def test_openrouter_native_reason_is_kept_across_chunks_and_named_in_errors() -> None:
    body = sse_data(native({"content": "x"}, None, "upstream_failure"), chat_chunk(finish="error"))
    _, final = await completions(body, **OPENROUTER)
    assert final.error_message == "Provider finish_reason: error (native_finish_reason: upstream_failure)"


async def test_native_finish_reason_is_read_from_openrouter_only() -> None:
    _, final = await completions(sse_data(native(None, "stop", "MALFORMED_RESPONSE")))
    assert final.stop_reason == "stop"


# --- the model list -----------------------------------------------------------------------------


def test_the_model_list_is_a_part_of_pi_ai_161s() -> None:
    ids = {m.id for m in get_models()}
    assert not ids & {"o4-mini", "claude-opus-4-1", "claude-sonnet-4-0"}  # not in pi-ai 1.6.1
    sonnet = get_model("anthropic", "claude-sonnet-4-6")
    assert sonnet.context_window == 1_000_000 and sonnet.max_tokens == 128_000
    assert sonnet.compat is not None and sonnet.compat["adaptive_thinking"] is True
    assert get_model("openai", "gpt-5-mini").name == "GPT-5 Mini"
