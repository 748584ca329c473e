"""The Gemini API stream function (`google-generative-ai`) on scripted HTTP: the request, the
events, thought signatures and their replay, thinking levels, errors, retries, abort, keys."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from agentloop import (
    AbortSignal,
    AssistantMessage,
    Context,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentloop.providers import HTTPOptions, get_model, get_models, stream_google, stream_simple
from agentloop.providers._google_shared import map_stop_reason, thinking_config

from .helpers import Server, collect, context, ok, options, streamed, types

NO_RETRY = HTTPOptions(max_retries=0)
SIGNATURE = "c2lnbmF0dXJlLTE="


def gemini(model_id: str = "gemini-2.5-flash", **kwargs: Any) -> Model:
    kwargs.setdefault("base_url", "http://mock/v1beta")
    kwargs.setdefault("reasoning", True)
    return Model(id=model_id, api="google-generative-ai", provider="google", **kwargs)


def body(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def candidate(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": 0, "content": {"role": "model", "parts": list(parts)}}
    if finish:
        out["finishReason"] = finish
    return {"candidates": [out], **extra}


async def run(server: Server, model: Model | None = None, ctx: Context | None = None, **kwargs: Any) -> Any:
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        return await collect(
            stream_google(model or gemini(), ctx or context(), options(**kwargs), http=NO_RETRY, client=client)
        )


async def test_text_and_thinking_stream_as_blocks_with_usage_and_the_key_in_a_header() -> None:
    server = Server(
        ok(
            body(
                candidate({"text": "Hmm, ", "thought": True}, responseId="r-1"),
                candidate({"text": "a greeting.", "thought": True, "thoughtSignature": SIGNATURE}),
                candidate({"text": "Hello"}),
                candidate(
                    {"text": "!"},
                    finish="STOP",
                    usageMetadata={
                        "promptTokenCount": 100,
                        "cachedContentTokenCount": 60,
                        "candidatesTokenCount": 5,
                        "thoughtsTokenCount": 20,
                        "totalTokenCount": 125,
                    },
                ),
            )
        )
    )
    priced = gemini(cost=get_model("google", "gemini-2.5-flash").cost)
    events, final = await run(server, priced, api_key="AIza-secret")
    assert types(events) == ["start", *streamed("thinking", 2), *streamed("text", 2), "done"]
    assert final.content == (ThinkingContent("Hmm, a greeting.", thinking_signature=SIGNATURE), TextContent("Hello!"))
    assert final.stop_reason == "stop"
    assert final.response_id == "r-1"
    usage = final.usage
    assert (usage.input, usage.output, usage.cache_read, usage.total_tokens) == (40, 25, 60, 125)
    assert usage.cost.input == pytest.approx(40 * 0.3 / 1e6)
    assert usage.cost.cache_read == pytest.approx(60 * 0.03 / 1e6)
    request = server.requests[0]
    assert str(request.url) == "http://mock/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == "AIza-secret"
    assert "AIza-secret" not in str(request.url)


async def test_parallel_function_calls_keep_ids_and_signatures_and_end_as_tool_use() -> None:
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "fc-1"}
    server = Server(
        ok(
            body(
                candidate({"functionCall": call, "thoughtSignature": SIGNATURE}),
                candidate({"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}, finish="STOP"),
            )
        )
    )
    events, final = await run(server)
    assert types(events) == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert events[2].delta == '{"city":"Paris"}'
    first, second = final.content
    assert first == ToolCall("fc-1", "get_weather", {"city": "Paris"}, thought_signature=SIGNATURE)
    assert second.name == "get_weather" and second.arguments == {"city": "Rome"}
    assert second.id.startswith("get_weather_") and second.thought_signature is None
    assert final.stop_reason == "toolUse"


@pytest.mark.parametrize(
    ("reason", "stop", "error"),
    [
        ("MAX_TOKENS", "length", None),
        ("SAFETY", "error", "Provider stopped with: SAFETY"),
        ("RECITATION", "error", "Provider stopped with: RECITATION"),
        ("MALFORMED_FUNCTION_CALL", "error", "Provider stopped with: MALFORMED_FUNCTION_CALL"),
        ("MISSING_THOUGHT_SIGNATURE", "error", "Provider stopped with: MISSING_THOUGHT_SIGNATURE"),
        ("A_REASON_FROM_THE_FUTURE", "stop", None),
    ],
)
async def test_finish_reasons_map_as_pi_ai_maps_them(reason: str, stop: str, error: str | None) -> None:
    events, final = await run(Server(ok(body(candidate({"text": "Some text"}, finish=reason)))))
    assert types(events)[-2:] == ["text_end", "error" if error else "done"]
    assert final.stop_reason == stop
    assert final.error_message == error
    assert final.content == (TextContent("Some text"),)


def test_every_reason_google_genai_lists_is_mapped() -> None:
    assert map_stop_reason("STOP") == "stop"
    assert map_stop_reason("CONTINUATION") == "length"
    assert {map_stop_reason(r) for r in ("SPII", "BLOCKLIST", "IMAGE_SAFETY", "LANGUAGE", "MODEL_ARMOR")} == {"error"}


async def test_a_blocked_prompt_and_a_stream_without_finish_reason_are_errors() -> None:
    feedback = {
        "blockReason": "SAFETY",
        "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH"}],
    }
    _, blocked = await run(Server(ok(body({"promptFeedback": feedback}))))
    assert blocked.error_message == "Google prompt blocked: SAFETY. Safety rating: HARM_CATEGORY_HARASSMENT (HIGH)"
    events, cut = await run(Server(ok(body(candidate({"text": "Half"})))))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    assert cut.error_message == "Google stream ended without a finish reason after receiving 1 chunk"
    assert cut.content == (TextContent("Half"),)


async def test_an_error_chunk_before_content_is_retried_and_a_bad_key_is_redacted() -> None:
    overloaded = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    server = Server(
        ok(body(overloaded)),
        ok(body(candidate({"text": "Fine."}, finish="STOP"))),
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        stream = stream_google(gemini(), context(), options(), http=HTTPOptions(backoff=0), client=client)
        final = await stream.result()
    assert final.content == (TextContent("Fine."),)
    assert len(server.requests) == 2
    echo = {"error": {"code": 400, "message": "API key not valid: AIza-leaked", "status": "INVALID_ARGUMENT"}}
    refused = Server(httpx.Response(400, json=echo))
    _, final = await run(refused, api_key="AIza-leaked")
    assert final.stop_reason == "error"
    assert final.error_message == "HTTP 400: API key not valid: ***"


async def test_without_a_key_the_stream_ends_in_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    server = Server()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        final = await stream_google(gemini(), context(), options(api_key=None), client=client).result()
    assert final.stop_reason == "error"
    assert final.error_message is not None and "GEMINI_API_KEY" in final.error_message
    assert server.requests == []
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-env")
    server = Server(ok(body(candidate({"text": "ok"}, finish="STOP"))))
    await run(server, api_key=None)
    assert server.requests[0].headers["x-goog-api-key"] == "AIza-env"


async def test_an_abort_mid_stream_keeps_the_partial_content() -> None:
    signal = AbortSignal()
    first = body(candidate({"text": "Partial"}))
    gate = anyio.Event()

    async def parts() -> Any:
        yield first
        await gate.wait()  # never set: only the abort ends the wait
        yield b""

    server = Server(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=parts()))
    events: list[Any] = []
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(server)) as client,
        stream_google(gemini(), context(), options(signal=signal), client=client) as stream,
    ):
        async for event in stream:
            events.append(event)
            if event.type == "text_delta":
                signal.abort()
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert events[-1].reason == "aborted"
    assert events[-1].error.content == (TextContent("Partial"),)


# --- the request ---------------------------------------------------------------------------


async def test_a_replayed_turn_sends_signatures_back_only_to_the_same_model() -> None:
    turn = AssistantMessage(
        content=(
            ThinkingContent("plan", thinking_signature=SIGNATURE),
            TextContent("", text_signature=SIGNATURE),
            ToolCall("fc-1", "get_weather", {"city": "Paris"}, thought_signature=SIGNATURE),
        ),
        api="google-generative-ai",
        provider="google",
        model="gemini-3-flash-preview",
        stop_reason="toolUse",
    )
    history: list[Message] = [
        UserMessage(content="weather?"),
        turn,
        ToolResultMessage(tool_call_id="fc-1", tool_name="get_weather", content=(TextContent("sunny"),)),
    ]
    server = Server(
        ok(body(candidate({"text": "ok"}, finish="STOP"))), ok(body(candidate({"text": "ok"}, finish="STOP")))
    )
    same = gemini("gemini-3-flash-preview")
    await run(server, same, Context(messages=history))
    model_turn = server.bodies[0]["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [
            {"thought": True, "text": "plan", "thoughtSignature": SIGNATURE},
            {"text": "", "thoughtSignature": SIGNATURE},
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "fc-1"},
                "thoughtSignature": SIGNATURE,
            },
        ],
    }
    assert server.bodies[0]["contents"][2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}, "id": "fc-1"}}
    ]
    await run(server, gemini("gemini-3-pro-preview"), Context(messages=history))
    replayed = server.bodies[1]["contents"][1]["parts"]
    assert all("thoughtSignature" not in part for part in replayed)


def test_a_signature_that_is_not_base64_is_not_sent_back() -> None:
    from agentloop.providers._google_shared import convert_messages

    turn = AssistantMessage(
        content=(ToolCall("c", "f", {}, thought_signature="not base64!"),),
        api="google-generative-ai",
        provider="google",
        model="gemini-2.5-flash",
    )
    contents = convert_messages(gemini(), Context(messages=[UserMessage(content="x"), turn]))
    assert contents[1]["parts"] == [{"functionCall": {"name": "f", "args": {}}}]


@pytest.mark.parametrize(
    ("model_id", "level", "expected"),
    [
        ("gemini-2.5-flash", None, {"thinkingBudget": 0}),
        ("gemini-2.5-flash", "medium", {"includeThoughts": True, "thinkingBudget": 8192}),
        ("gemini-2.5-pro", "high", {"includeThoughts": True, "thinkingBudget": 32768}),
        ("gemini-2.5-pro", "max", {"includeThoughts": True, "thinkingBudget": 32768}),
        ("gemini-3-flash-preview", None, {"thinkingLevel": "MINIMAL"}),
        ("gemini-3-flash-preview", "low", {"includeThoughts": True, "thinkingLevel": "LOW"}),
        ("gemini-3.1-pro-preview", None, {"thinkingLevel": "LOW"}),
        ("gemini-3.1-pro-preview", "minimal", {"includeThoughts": True, "thinkingLevel": "LOW"}),
        ("gemini-3.1-pro-preview", "xhigh", {"includeThoughts": True, "thinkingLevel": "HIGH"}),
        ("gemini-4-neon", "xhigh", {"includeThoughts": True, "thinkingLevel": "XHIGH"}),
        ("gemma-4-31b-it", "medium", {"includeThoughts": True, "thinkingLevel": "HIGH"}),
        ("gemma-4-31b-it", None, {"thinkingLevel": "MINIMAL"}),
        ("deep-research-preview-04-2026", "low", {"includeThoughts": True, "thinkingBudget": -1}),
    ],
)
def test_thinking_levels_and_budgets_per_model(model_id: str, level: Any, expected: dict[str, Any]) -> None:
    assert thinking_config(get_model("google", model_id), options(reasoning=level)) == expected


def test_budgets_given_by_the_call_win_and_a_model_without_reasoning_gets_no_config() -> None:
    model = get_model("google", "gemini-2.5-flash")
    assert thinking_config(model, options(reasoning="low", thinking_budgets={"low": 77})) == {
        "includeThoughts": True,
        "thinkingBudget": 77,
    }
    assert thinking_config(gemini(reasoning=False), options(reasoning="high")) is None


def test_the_registry_lists_pi_ais_gemini_models() -> None:
    google = {m.id: m for m in get_models("google")}
    vertex = {m.id: m for m in get_models("google-vertex")}
    assert len(google) == 24 and len(vertex) == 17
    flash = google["gemini-2.5-flash"]
    assert (flash.api, flash.base_url, flash.context_window, flash.max_tokens) == (
        "google-generative-ai",
        "https://generativelanguage.googleapis.com/v1beta",
        1_048_576,
        65_536,
    )
    assert (flash.cost.input, flash.cost.output, flash.cost.cache_read) == (0.3, 2.5, 0.03)
    assert vertex["gemini-3.1-pro-preview"].base_url == "https://{location}-aiplatform.googleapis.com"
    assert vertex["gemini-3.1-pro-preview"].compat == {
        "thinking_level_map": {
            "off": None,
            "minimal": None,
            "low": "low",
            "medium": "medium",
            "high": "high",
            "xhigh": None,
            "max": None,
        }
    }


async def test_stream_simple_dispatches_on_the_api() -> None:
    server = Server(ok(body(candidate({"text": "ok"}, finish="STOP"))))
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        final = await stream_simple(gemini(), context(), options(), client=client).result()
    assert final.content == (TextContent("ok"),)
    assert final.api == "google-generative-ai"
