"""The Gemini wire against its two references: the request bodies pi-ai 1.6.1 sends for the same
contexts (`google_wire/pi_requests.json`), and what Google's own SDK makes of each recorded stream
(`google_wire/sdk_oracle.json`). The commands that made both files are in their scripts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloop import AbortSignal, AssistantMessage, Model, StreamOptions, TextContent, ThinkingContent, ToolCall
from agentloop.providers import HTTPOptions, get_model, stream_simple

from .conftest import replay_model
from .google_wire.pi_requests import cases
from .helpers import context

HERE = Path(__file__).parent
RECORDINGS = HERE / "pi_wire" / "recordings"
PI_REQUESTS = json.loads((HERE / "google_wire" / "pi_requests.json").read_text())
ORACLE = json.loads((HERE / "google_wire" / "sdk_oracle.json").read_text())
CASES = {case[0]: case for case in cases()}


class Capture:
    """A transport that keeps each request and answers one text chunk."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        body = b'data: {"candidates":[{"content":{"parts":[{"text":"ok"}]},"finishReason":"STOP"}]}\r\n\r\n'
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def test_every_case_was_captured_from_pi_ai() -> None:
    assert PI_REQUESTS["pi-ai"] == "1.6.1"
    assert set(PI_REQUESTS["cases"]) == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_request_body_is_pi_ais(case: str) -> None:
    _, provider, model_id, ctx, options = CASES[case]
    model = get_model(provider, model_id)
    capture = Capture()
    async with httpx.AsyncClient(transport=httpx.MockTransport(capture)) as client:
        stream = stream_simple(
            model, ctx, StreamOptions(signal=AbortSignal(), api_key="k-test", **options), client=client
        )
        final = await stream.result()
    assert final.stop_reason == "stop", final.error_message
    [request] = capture.requests
    expected = PI_REQUESTS["cases"][case]
    assert json.loads(request.content) == expected["body"]
    # pi-ai was pointed at a base URL of its own; the resource path after it is the same.
    assert request.url.raw_path.decode().split("/models/")[-1] == expected["url"].split("/models/")[-1]


# --- streams against google-genai ----------------------------------------------------------


def _model(name: str) -> Model:
    api = "google-vertex" if name.endswith(".vertex.sse") else "google-generative-ai"
    return replay_model(api)


async def _final(name: str) -> AssistantMessage:
    body = (RECORDINGS / name).read_bytes()
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    )
    async with httpx.AsyncClient(transport=transport) as client:
        stream = stream_simple(
            _model(name),
            context(),
            StreamOptions(signal=AbortSignal(), api_key="k-replay"),
            http=HTTPOptions(max_retries=0),
            client=client,
        )
        return await stream.result()


def _expected_stop(sdk: dict[str, Any]) -> str:
    reason = sdk["finish_reason"]
    if sdk["error"] or reason is None:
        return "error"
    if reason in ("MAX_TOKENS", "CONTINUATION"):
        return "length"
    if reason in ("SAFETY", "MALFORMED_FUNCTION_CALL", "RECITATION", "OTHER"):
        return "error"
    return "toolUse" if sdk["calls"] else "stop"


def test_the_oracle_covers_every_gemini_recording() -> None:
    names = {p.name for p in RECORDINGS.glob("*.sse") if p.name.endswith((".gemini.sse", ".vertex.sse"))}
    assert ORACLE["google-genai"] == "3.6.1"
    assert set(ORACLE["recordings"]) == names
    assert len(names) >= 25


@pytest.mark.parametrize("name", sorted(ORACLE["recordings"]))
async def test_a_recorded_stream_adds_up_to_what_google_genai_reads(name: str) -> None:
    sdk = ORACLE["recordings"][name]
    final = await _final(name)
    thinking = [b for b in final.content if isinstance(b, ThinkingContent)]
    texts = [b for b in final.content if isinstance(b, TextContent)]
    calls = [b for b in final.content if isinstance(b, ToolCall)]
    assert "".join(b.thinking for b in thinking) == sdk["thinking"]
    assert "".join(b.text for b in texts) == sdk["text"]
    assert (thinking[-1].thinking_signature if thinking else None) == sdk["thinking_signature"]
    assert (texts[-1].text_signature if texts else None) == sdk["text_signature"]
    assert len(calls) == len(sdk["calls"])
    seen: set[str] = set()
    for ours, theirs in zip(calls, sdk["calls"], strict=True):
        assert (ours.name, dict(ours.arguments), ours.thought_signature) == (
            theirs["name"],
            theirs["args"],
            theirs["signature"],
        )
        if theirs["id"] and theirs["id"] not in seen:
            assert ours.id == theirs["id"]
        else:  # none, or a repeat: an id of its own, as pi-ai makes them
            assert re.fullmatch(re.escape(theirs["name"]) + r"_\d+_\d+", ours.id), ours.id
        seen.add(ours.id)
    assert final.stop_reason == _expected_stop(sdk), final.error_message
    if sdk["finish_reason"] == "SOME_NEW_REASON":  # google-genai warns and keeps it; so does the turn
        assert final.stop_reason == "stop"
    usage = sdk["usage"]
    if usage is not None and not sdk["error"]:
        assert (final.usage.input, final.usage.output, final.usage.cache_read, final.usage.total_tokens) == (
            usage["prompt"] - usage["cached"],
            usage["candidates"] + usage["thoughts"],
            usage["cached"],
            usage["total"],
        )
    assert final.response_id == sdk["response_id"]
    if sdk["block_reason"]:
        assert final.error_message is not None
        assert final.error_message.startswith(f"Google prompt blocked: {sdk['block_reason']}")
    if sdk["error"]:
        assert "UNAVAILABLE" in sdk["error"]
        assert final.error_message == "The model is overloaded. Please try again later. (UNAVAILABLE)"
