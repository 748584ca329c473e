"""Cache retention as aimock receives it, and a fallback from an overloaded model to another API,
against aimock (`pytest -m servers` after `python tests/providers/servers.py start`)."""

from __future__ import annotations

import functools
import json
import urllib.request
import uuid
from typing import Any

import anyio
import pytest

from agentloop import AbortSignal, Context, Model, StreamOptions, UserMessage
from agentloop.providers import HTTPOptions, fallback_stream, stream_simple

from .helpers import collect, types

pytestmark = pytest.mark.servers

FAST = HTTPOptions(max_retries=0, idle_timeout=30)


def aimock_model(url: str, api: str, model_id: str = "test-model") -> Model:
    base = url if api == "anthropic-messages" else url + "/v1"
    return Model(id=model_id, api=api, provider="aimock", base_url=base, context_window=8192)


def post(url: str, path: str, data: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url + path, data=json.dumps(data).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def requests_with(url: str, marker: str) -> list[dict[str, Any]]:
    """The request bodies aimock received that carry `marker`."""
    with urllib.request.urlopen(url + "/__aimock/journal", timeout=5) as response:
        journal = json.loads(response.read())
    return [entry["body"] for entry in journal if marker in json.dumps(entry.get("body"))]


async def test_a_long_cache_retention_reaches_the_server(aimock_url: str) -> None:
    """Chat Completions (aimock's journal keeps that API's body as sent; the Anthropic and Responses
    bodies are checked in test_pi_ai_161.py)."""
    marker = f"cache-{uuid.uuid4().hex}"
    fixture = {"match": {"userMessage": marker}, "response": {"content": "ok"}}
    post(aimock_url, "/__aimock/fixtures", {"fixtures": [fixture]})
    ctx = Context(system_prompt="You are terse.", messages=[UserMessage(content=marker)])
    options = StreamOptions(signal=AbortSignal(), api_key="sk-aimock", cache_retention="long", session_id=marker)
    model = aimock_model(aimock_url, "openai-completions")
    with anyio.fail_after(20):
        _, final = await collect(stream_simple(model, ctx, options, http=FAST))
    assert final.text == "ok", final.error_message
    (body,) = requests_with(aimock_url, marker)
    assert body["prompt_cache_retention"] == "24h" and body["prompt_cache_key"] == marker


async def test_an_overloaded_anthropic_model_falls_back_to_an_openai_one(aimock_url: str) -> None:
    marker = f"fallback-{uuid.uuid4().hex}"
    post(
        aimock_url,
        "/__aimock/fixtures",
        {
            "fixtures": [
                {
                    "match": {"userMessage": marker, "model": "busy-model"},
                    "response": {"error": {"message": "Overloaded", "type": "overloaded_error"}, "status": 529},
                },
                {"match": {"userMessage": marker}, "response": {"content": "the backup answers"}},
            ]
        },
    )
    primary = aimock_model(aimock_url, "anthropic-messages", "busy-model")
    backup = aimock_model(aimock_url, "openai-completions")
    stream = fallback_stream([backup], stream_fn=functools.partial(stream_simple, http=FAST))
    ctx = Context(messages=[UserMessage(content=marker)])
    with anyio.fail_after(20):
        events, final = await collect(stream(primary, ctx, StreamOptions(signal=AbortSignal(), api_key="sk-aimock")))
    assert final.text == "the backup answers" and final.api == "openai-completions" and final.model == "test-model"
    assert types(events)[0] == "start" and types(events).count("start") == 1
    assert (final.extra or {})["failedAttempts"] == [
        {"provider": "aimock", "model": "busy-model", "errorMessage": "HTTP 529: Overloaded (overloaded_error)"}
    ]
    assert [body["model"] for body in requests_with(aimock_url, marker)] == ["busy-model", "test-model"]
