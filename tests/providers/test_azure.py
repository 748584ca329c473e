"""Azure OpenAI (`azure-openai-responses`): where the request goes and how it authenticates, the
request compared with pi-ai's own, the stream (the Responses parser's), and an agent turn against
aimock's Azure endpoint (`-m servers`)."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agentloop import (
    AbortSignal,
    AssistantMessage,
    Context,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    UserMessage,
)
from agentloop.providers import (
    HTTPOptions,
    azure_openai_model,
    get_model,
    get_models,
    stream_azure_openai_responses,
    stream_simple,
)
from agentloop.providers._azure import azure_base_url, azure_deployment_name, build_azure_request

from ..support import as_assistant
from .conftest import Weather, aimock_weather_turn
from .helpers import FAST, Server, collect, ok, options, sse_events, types
from .pi_requests import Call, our_request, pi_requests

AZURE_ENV = (
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_BASE_URL",
    "AZURE_OPENAI_RESOURCE_NAME",
    "AZURE_OPENAI_API_VERSION",
    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
)


@pytest.fixture(autouse=True)
def _no_azure_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in AZURE_ENV:
        monkeypatch.delenv(name, raising=False)


def azure(model_id: str = "gpt-5-mini", **changes: Any) -> Model:
    """A registry model, served by the mock."""
    changes.setdefault("base_url", "http://mock/openai/v1")
    return dataclasses.replace(get_model("azure", model_id), **changes)


def hi() -> Context:
    return Context(messages=[UserMessage(content="hi")])


def request(model: Model, **opts: Any) -> Any:
    opts.setdefault("api_key", "azure-key")
    return build_azure_request(model, hi(), StreamOptions(signal=AbortSignal(), **opts))


def text_stream(text: str = "Hello", **response: Any) -> bytes:
    usage = {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 200}, "output_tokens": 100}
    return sse_events(
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        },
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": text},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            },
        },
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": usage, **response}},
    )


# --- where the request goes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("https://res.openai.azure.com", "https://res.openai.azure.com/openai/v1"),
        ("https://res.openai.azure.com/", "https://res.openai.azure.com/openai/v1"),
        ("https://res.openai.azure.com/openai", "https://res.openai.azure.com/openai/v1"),
        ("https://res.openai.azure.com/openai/v1/responses?x=1", "https://res.openai.azure.com/openai/v1"),
        ("https://res.openai.azure.com/openai/v1/", "https://res.openai.azure.com/openai/v1"),
        ("https://res.cognitiveservices.azure.com/openai", "https://res.cognitiveservices.azure.com/openai/v1"),
        ("https://proj.services.ai.azure.com", "https://proj.services.ai.azure.com/openai/v1"),
        ("https://gateway.example.com/azure", "https://gateway.example.com/azure"),
        ("https://res.openai.azure.com/openai/deployments/d1", "https://res.openai.azure.com/openai/deployments/d1"),
    ],
)
def test_base_urls_on_azure_hosts_become_the_v1_api(given: str, used: str) -> None:
    assert azure_base_url(Model(id="m", api="azure-openai-responses", provider="azure", base_url=given)) == used


def test_where_the_base_url_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    bare = get_model("azure", "gpt-4o")
    with pytest.raises(Exception, match="Azure OpenAI base URL is required"):
        azure_base_url(bare)
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "from-name")
    assert azure_base_url(bare) == "https://from-name.openai.azure.com/openai/v1"
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "https://from-env.openai.azure.com/openai")
    assert azure_base_url(bare) == "https://from-env.openai.azure.com/openai/v1"
    # A model given its own endpoint keeps it.
    assert azure_base_url(azure("gpt-4o")) == "http://mock/openai/v1"
    with pytest.raises(Exception, match="Invalid Azure OpenAI base URL"):
        azure_base_url(azure("gpt-4o", base_url="res.openai.azure.com"))


def test_the_deployment_and_the_api_version(monkeypatch: pytest.MonkeyPatch) -> None:
    m = azure("gpt-4o")
    got = request(m)
    assert got.url == "http://mock/openai/v1/responses?api-version=v1" and got.body["model"] == "gpt-4o"
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", " gpt-4o = prod-4o , broken, gpt-5=g5")
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "preview")
    got = request(m)
    assert got.body["model"] == "prod-4o" and got.url.endswith("/responses?api-version=preview")
    flagged = azure("gpt-4o", compat={"azure_deployment_name": "mine", "azureApiVersion": "2025-04-01-preview"})
    assert azure_deployment_name(flagged) == "mine"
    assert request(flagged).url.endswith("/responses?api-version=2025-04-01-preview")


def test_the_key_goes_in_the_api_key_header(monkeypatch: pytest.MonkeyPatch) -> None:
    got = request(azure())
    assert got.headers["api-key"] == "azure-key" and "authorization" not in got.headers
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "from-env")
    got = build_azure_request(azure(), hi(), StreamOptions(signal=AbortSignal()))
    assert got.headers["api-key"] == "from-env" and got.secret == "from-env"


async def test_no_key_and_no_token_is_an_error_event() -> None:
    events, final = await collect(stream_azure_openai_responses(azure(), hi(), StreamOptions(signal=AbortSignal())))
    assert types(events) == ["error"]
    assert "AZURE_OPENAI_API_KEY" in (final.error_message or "")


# --- the request compared with pi-ai's --------------------------------------------------------

LONG_SESSION = "s" * 70 + "\u00e9"
CALLS = [
    Call(
        "plain",
        azure(),
        Context(system_prompt="Be terse.", messages=[UserMessage(content="hi")], tools=[Weather()]),
        {"apiKey": "azure-key", "temperature": 0.3, "maxTokens": 8, "sessionId": LONG_SESSION},
    ),
    Call("effort", azure("gpt-5.2"), hi(), {"apiKey": "azure-key", "maxTokens": 500, "reasoning": "medium"}),
    Call("off-as-none", azure("gpt-6-luna"), hi(), {"apiKey": "azure-key", "maxTokens": 500}),
    Call("no-map-off", azure("o3"), hi(), {"apiKey": "azure-key", "maxTokens": 500}),
    Call("no-map-xhigh", azure("o3"), hi(), {"apiKey": "azure-key", "maxTokens": 500, "reasoning": "xhigh"}),
    Call("clamped-up", azure("gpt-5.5-pro"), hi(), {"apiKey": "azure-key", "maxTokens": 500, "reasoning": "minimal"}),
    Call("max", azure("gpt-6-cyber"), hi(), {"apiKey": "azure-key", "maxTokens": 500, "reasoning": "max"}),
    Call("not-reasoning", azure("gpt-4o"), hi(), {"apiKey": "azure-key", "maxTokens": 500, "reasoning": "high"}),
    Call(
        "deployment",
        azure("gpt-4.1", compat={"azure_deployment_name": "prod-41", "azure_api_version": "2025-04-01-preview"}),
        hi(),
        {
            "apiKey": "azure-key",
            "maxTokens": 500,
            # pi-ai's simple options take these from the environment
            "env": {
                "AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "gpt-4.1=prod-41",
                "AZURE_OPENAI_API_VERSION": "2025-04-01-preview",
            },
        },
    ),
    Call(
        "same-model-turns",
        azure("gpt-4.1"),
        Context(
            messages=[
                UserMessage(content="hi"),
                AssistantMessage(
                    content=(TextContent("Hello.", text_signature='{"v":1,"id":"msg_abc"}'),),
                    api="azure-openai-responses",
                    provider="azure",
                    model="gpt-4.1",
                ),
                UserMessage(content="again"),
            ]
        ),
        {"apiKey": "azure-key", "maxTokens": 500},
    ),
]


def ours(call: Call) -> tuple[str, dict[str, str], dict[str, Any]]:
    return our_request(call, build_azure_request)


async def test_requests_are_the_ones_pi_ai_sends(anyio_backend: object, pi_node_modules: Path) -> None:
    with anyio.fail_after(120):
        theirs = await pi_requests(CALLS, pi_node_modules)
    for call in CALLS:
        path, headers, body = ours(call)
        reference = theirs[call.id]
        assert (path, body) == (reference["path"], reference["body"]), call.id
        assert headers["api-key"] == reference["headers"]["api-key"] and "authorization" not in reference["headers"]


def test_max_output_tokens_thinking_and_the_cache_key() -> None:
    bodies = {call.id: ours(call)[2] for call in CALLS}
    plain = bodies["plain"]
    assert plain["max_output_tokens"] == 16 and plain["prompt_cache_key"] == "s" * 64 and plain["store"] is False
    assert "reasoning" not in plain  # GPT-5 mini cannot turn thinking off: nothing is asked
    assert bodies["effort"]["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert bodies["effort"]["include"] == ["reasoning.encrypted_content"]
    assert bodies["off-as-none"]["reasoning"] == {"effort": "none"}
    assert bodies["no-map-xhigh"]["reasoning"]["effort"] == "high"
    assert bodies["clamped-up"]["reasoning"]["effort"] == "medium"
    assert bodies["max"]["reasoning"]["effort"] == "max"
    assert "reasoning" not in bodies["not-reasoning"]
    assert bodies["deployment"]["model"] == "prod-41"


# --- the stream -------------------------------------------------------------------------------


async def test_a_response_streams_as_on_openai_and_is_priced_at_the_models_rates() -> None:
    m = azure(cost=ModelCost(input=2.0, output=8.0, cache_read=0.5))
    server = Server(ok(text_stream(service_tier="priority")))
    async with server.client() as client:
        events, final = await collect(
            stream_azure_openai_responses(m, hi(), options(api_key="azure-key"), http=FAST, client=client)
        )
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final.text == "Hello" and final.api == "azure-openai-responses" and final.provider == "azure"
    assert (final.usage.input, final.usage.cache_read, final.usage.output) == (800, 200, 100)
    assert final.usage.cost.total == pytest.approx((800 * 2.0 + 200 * 0.5 + 100 * 8.0) / 1e6)  # no tier factor
    sent = server.requests[0]
    assert str(sent.url) == "http://mock/openai/v1/responses?api-version=v1"
    assert sent.headers["api-key"] == "azure-key" and "authorization" not in sent.headers


async def test_an_error_body_that_echoes_the_key_is_redacted() -> None:
    server = Server(
        httpx.Response(401, json={"error": {"code": "401", "message": "Access denied: key azure-secret-9 is invalid"}})
    )
    async with server.client() as client:
        _, final = await collect(
            stream_azure_openai_responses(azure(), hi(), options(api_key="azure-secret-9"), http=FAST, client=client)
        )
    assert final.error_message == "HTTP 401: Access denied: key *** is invalid (401)"


# --- Entra ID tokens --------------------------------------------------------------------------


async def test_an_async_token_provider_is_called_per_request_and_sent_as_a_bearer_token() -> None:
    calls: list[int] = []

    async def token() -> str:
        calls.append(1)
        return f"entra-token-{len(calls)}"

    server = Server(ok(text_stream()), ok(text_stream()))
    async with server.client() as client:
        for _ in range(2):
            _, final = await collect(
                stream_azure_openai_responses(
                    azure(), hi(), options(api_key=None), http=FAST, client=client, azure_ad_token_provider=token
                )
            )
            assert final.stop_reason == "stop"
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer entra-token-1", "Bearer entra-token-2"]
    assert all("api-key" not in r.headers for r in server.requests)


async def test_a_plain_token_provider_runs_in_a_worker_thread() -> None:
    import threading

    threads: list[threading.Thread] = []

    def token() -> str:
        threads.append(threading.current_thread())
        return "entra-sync"

    server = Server(ok(text_stream()))
    async with server.client() as client:
        _, final = await collect(
            stream_azure_openai_responses(
                azure(), hi(), options(), http=FAST, client=client, azure_ad_token_provider=token
            )
        )
    assert final.stop_reason == "stop" and server.requests[0].headers["authorization"] == "Bearer entra-sync"
    assert threads and threads[0] is not threading.main_thread()


@pytest.mark.parametrize(
    ("provider", "text"),
    [
        (lambda: "", "The Azure AD token provider returned str, not a token (a non-empty str)"),
        (lambda: None, "The Azure AD token provider returned NoneType, not a token (a non-empty str)"),
        (lambda: 1 / 0, "The Azure AD token provider failed: ZeroDivisionError: division by zero"),
    ],
)
async def test_a_token_provider_that_fails_ends_the_stream_with_an_error(provider: Any, text: str) -> None:
    server = Server()
    async with server.client() as client:
        events, final = await collect(
            stream_azure_openai_responses(
                azure(), hi(), options(), http=FAST, client=client, azure_ad_token_provider=provider
            )
        )
    assert types(events) == ["error"] and final.error_message == text and not server.requests


async def test_an_abort_while_the_token_is_fetched_ends_the_stream_aborted() -> None:
    signal = AbortSignal()
    started = anyio.Event()

    async def token() -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def abort_when_started() -> None:
        await started.wait()
        signal.abort()

    server = Server()
    async with server.client() as client, anyio.create_task_group() as tg:
        tg.start_soon(abort_when_started)
        with anyio.fail_after(10):
            events, final = await collect(
                stream_azure_openai_responses(
                    azure(), hi(), options(signal=signal), http=FAST, client=client, azure_ad_token_provider=token
                )
            )
    assert types(events) == ["error"] and final.stop_reason == "aborted" and not server.requests


def test_a_token_provider_must_be_callable() -> None:
    with pytest.raises(TypeError, match="azure_ad_token_provider must be a function"):
        stream_azure_openai_responses(azure(), hi(), options(), azure_ad_token_provider="token")  # type: ignore[arg-type]


# --- models -------------------------------------------------------------------------------------


def test_the_registry_lists_pi_ais_azure_models() -> None:
    models = get_models("azure")
    assert len(models) == 37 and all(m.api == "azure-openai-responses" and m.base_url == "" for m in models)
    gpt = get_model("azure", "gpt-5.4")
    assert gpt.context_window == 1_050_000 and gpt.max_tokens == 128_000 and gpt.reasoning
    assert gpt.cost == ModelCost(input=2.5, output=15.0, cache_read=0.25)


def test_azure_openai_model_keeps_the_registry_entry_and_says_where_it_is_served() -> None:
    m = azure_openai_model("gpt-5.2", resource_name="res", deployment="prod", api_version="preview")
    known = get_model("azure", "gpt-5.2")
    assert (m.cost, m.context_window, m.reasoning) == (known.cost, known.context_window, known.reasoning)
    assert m.base_url == "https://res.openai.azure.com/openai/v1"
    assert m.compat is not None and m.compat["thinking_level_map"] == {"off": None, "xhigh": "xhigh"}
    got = build_azure_request(m, hi(), StreamOptions(signal=AbortSignal(), api_key="k"))
    assert (
        got.url == "https://res.openai.azure.com/openai/v1/responses?api-version=preview"
        and got.body["model"] == "prod"
    )
    own = azure_openai_model("my-finetune", base_url="https://gw.example.com/openai/v1")
    assert (own.api, own.provider, own.reasoning, own.base_url) == (
        "azure-openai-responses",
        "azure",
        False,
        "https://gw.example.com/openai/v1",
    )
    with pytest.raises(ValueError, match="not both"):
        azure_openai_model("gpt-4o", base_url="https://a.openai.azure.com", resource_name="a")
    with pytest.raises(TypeError, match="model_id"):
        azure_openai_model("")


# --- against aimock (`pytest -m servers`) -------------------------------------------------------


@pytest.mark.servers
async def test_an_agent_turn_against_aimocks_azure_endpoint(aimock_url: str) -> None:
    agent = await aimock_weather_turn(
        azure_openai_model("gpt-5-mini", base_url=aimock_url + "/openai/v1", deployment="test-model"),
        functools.partial(stream_simple, http=HTTPOptions(max_retries=0)),
        "sk-aimock",
        thinking_level="low",
    )
    first = as_assistant(agent.state.messages[1])
    assert first.content[0].type == "thinking" and len(first.tool_calls) == 2


# --- the official SDK as an oracle (`oracle/sdk_oracle.json`, made by `oracle/sdk_oracle.py`) --------

ORACLE = json.loads((Path(__file__).parent / "oracle" / "sdk_oracle.json").read_text(encoding="utf-8"))
RECORDINGS = Path(__file__).parent / "pi_wire" / "recordings"
SDK_REFUSES = {
    # the body ends before a terminal event: the SDK has no final response, agentloop ends with an error
    "aimock-dropped.azure.sse": "no terminal response event",
}


def test_the_sdk_sends_what_we_send() -> None:
    key = ORACLE["aimock-hello.azure.sse"]["request"]
    assert key == {
        "api-key": "azure-key",
        "authorization": None,
        "path": "/openai/v1/responses",
        "query": "api-version=v1",
    }
    assert ORACLE["entra-token-request"]["authorization"] == "Bearer entra-token"
    assert ORACLE["entra-token-request"]["api-key"] is None


@pytest.mark.parametrize("name", sorted(n for n in ORACLE if n.endswith(".azure.sse")))
async def test_final_messages_agree_with_the_openai_sdks_azure_client(name: str) -> None:
    oracle = ORACLE[name]
    assert oracle.get("error") == SDK_REFUSES.get(name)
    server = Server(ok((RECORDINGS / name).read_bytes()))
    async with server.client() as client:
        _, final = await collect(stream_azure_openai_responses(azure(), hi(), options(), http=FAST, client=client))
    if "error" in oracle:
        assert final.stop_reason == "error"
        assert (final.error_message or "").startswith("The stream ended before its response.completed event")
        return
    assert final.text == oracle["text"]
    assert [b.thinking for b in final.content if b.type == "thinking"] == oracle["thinking"]
    assert [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in final.tool_calls] == oracle[
        "tool_calls"
    ]
    if oracle["status"] == "incomplete":
        expected = "length" if oracle["incomplete_reason"] == "max_output_tokens" else "error"
    else:
        expected = "toolUse" if oracle["tool_calls"] else "stop"
    assert final.stop_reason == expected
    usage = oracle["usage"]
    assert (final.usage.input + final.usage.cache_read, final.usage.cache_read, final.usage.output) == (
        usage["input"],
        usage["cached"],
        usage["output"],
    )
