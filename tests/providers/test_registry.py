"""The model registry, `stream_simple`, cost, and a whole Agent run over each API (mocked HTTP)."""

from __future__ import annotations

import functools
import json
from typing import Any

import anyio
import httpx
import pytest

from agentloop import Agent, AgentTool, Model, ModelCost, ToolResultMessage, Usage
from agentloop.providers import (
    API_STREAMS,
    calculate_cost,
    get_model,
    get_models,
    get_providers,
    local_model,
    openai_compatible_model,
    register_model,
    stream_simple,
)
from agentloop.testing import check_events

from ..support import as_assistant, text
from .helpers import FAST, Server, chat_chunk, collect, context, model, ok, options, sse_data, sse_events


def test_builtin_catalogue() -> None:
    gpt = get_model("openai", "gpt-5")
    assert gpt.api == "openai-responses" and gpt.reasoning and "image" in gpt.input
    assert gpt.cost == ModelCost(input=1.25, output=10.0, cache_read=0.125)
    assert gpt.context_window == 400_000 and gpt.max_tokens == 128_000
    claude = get_model("anthropic", "claude-sonnet-4-5")
    assert claude.api == "anthropic-messages" and claude.base_url == "https://api.anthropic.com"
    assert claude.cost.cache_write == 3.75
    assert {"openai", "anthropic"} <= set(get_providers())
    assert all(m.provider == "anthropic" for m in get_models("anthropic"))
    assert all(m.api in API_STREAMS for m in get_models())


def test_unknown_models_and_providers() -> None:
    with pytest.raises(LookupError, match=r"unknown model 'gpt-9' for provider 'openai'; known: .*gpt-5"):
        get_model("openai", "gpt-9")
    with pytest.raises(LookupError, match="unknown provider 'nope'"):
        get_model("nope", "x")


def test_register_and_remove_models() -> None:
    local = Model(id="smollm2", api="openai-completions", provider="llama.cpp", base_url="http://127.0.0.1:8080/v1")
    remove = register_model(local)
    assert get_model("llama.cpp", "smollm2") is local
    assert "llama.cpp" in get_providers()
    remove()
    with pytest.raises(LookupError):
        get_model("llama.cpp", "smollm2")
    cheaper = Model(id="gpt-5", api="openai-responses", provider="openai", cost=ModelCost(input=0.1))
    original = get_model("openai", "gpt-5")
    remove = register_model(cheaper)
    assert get_model("openai", "gpt-5") is cheaper
    remove()
    assert get_model("openai", "gpt-5") is original
    with pytest.raises(TypeError):
        register_model("gpt")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        register_model(Model(id="x"))


def test_model_helpers_for_local_servers() -> None:
    ollama = openai_compatible_model("llama3.2", "http://127.0.0.1:11434/v1/", images=True, context_window=8192)
    assert (ollama.api, ollama.provider, ollama.base_url, ollama.name) == (
        "openai-completions",
        "openai-compatible",
        "http://127.0.0.1:11434/v1",
        "llama3.2",
    )
    assert ollama.input == ("text", "image") and ollama.cost == ModelCost()
    local = local_model("http://127.0.0.1:8080/")
    assert local.base_url == "http://127.0.0.1:8080/v1" and local.id == "smollm2-135m"
    assert local.compat == {"thinking_format": "llama.cpp"} and local.reasoning


def test_calculate_cost() -> None:
    m = Model(id="m", cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75))
    usage = calculate_cost(
        m, Usage(input=1_000_000, output=2_000, cache_read=10_000, cache_write=100, total_tokens=1_012_100)
    )
    assert usage.cost.input == pytest.approx(3.0)
    assert usage.cost.output == pytest.approx(0.03)
    assert usage.cost.cache_read == pytest.approx(0.003)
    assert usage.cost.cache_write == pytest.approx(0.000375)
    assert usage.cost.total == pytest.approx(3.033375)
    assert usage.total_tokens == 1_012_100


async def test_stream_simple_with_an_unknown_api() -> None:
    events, final = await collect(stream_simple(Model(id="x", api="gemini"), context(), options()))
    assert [e.type for e in events] == ["error"]
    assert final.error_message == (
        "No API provider registered for api: gemini "
        "(built in: anthropic-messages, azure-openai-responses, bedrock-converse-stream, google-generative-ai, "
        "google-vertex, mistral-conversations, openai-completions, openai-responses)"
    )


# --- a whole agent run: a tool call, its result, an answer ---------------------------------


def _tool_turn(api: str) -> bytes:
    if api == "openai-completions":
        return sse_data(
            chat_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 2,'},
                        }
                    ]
                }
            ),
            chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "b": 3}'}}]}),
            chat_chunk(finish="tool_calls"),
        )
    if api == "openai-responses":
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": ""}
        return sse_events(
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": '{"a": 2, "b": 3}',
            },
            {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": '{"a": 2, "b": 3}'}},
            {
                "type": "response.completed",
                "response": {"status": "completed", "usage": {"input_tokens": 9, "output_tokens": 4}},
            },
        )
    return sse_events(
        {"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 9, "output_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 2, "b": 3}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}},
        {"type": "message_stop"},
    )


def _text_turn(api: str, text: str) -> bytes:
    if api == "openai-completions":
        return sse_data(chat_chunk({"content": text}), chat_chunk(finish="stop"))
    if api == "openai-responses":
        item = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
        return sse_events(
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": text},
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**item, "content": [{"type": "output_text", "text": text}]},
            },
            {"type": "response.completed", "response": {"status": "completed"}},
        )
    return sse_events(
        {"type": "message_start", "message": {"id": "m2", "usage": {"input_tokens": 20, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    )


async def _add(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> str:
    return str(params["a"] + params["b"])


ADD = AgentTool(
    name="add",
    description="Add two numbers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    execute=_add,
)


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
async def test_an_agent_run_with_a_tool_call(api: str) -> None:
    server = Server(ok(_tool_turn(api)), ok(_text_turn(api, "2 + 3 = 5")))
    events: list[Any] = []
    async with server.client() as client:
        agent = Agent(
            model=model(api),
            system_prompt="You add numbers.",
            tools=[ADD],
            stream_fn=functools.partial(stream_simple, client=client, http=FAST),
            get_api_key=lambda provider: "sk-test",
        )
        agent.subscribe(lambda event, signal: events.append(event))
        with anyio.fail_after(10):
            await agent.prompt("What is 2 + 3?")
    check_events(events)
    messages = agent.state.messages
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    result = messages[2]
    assert isinstance(result, ToolResultMessage) and text(result.content[0]) == "5" and not result.is_error
    assert as_assistant(messages[3]).text == "2 + 3 = 5"
    # the second request replays the tool call and its result in the API's own shape
    second = json.dumps(server.bodies[1])
    assert '"5"' in second and "add" in second
    if api == "anthropic-messages":
        assert server.requests[0].headers["x-api-key"] == "sk-test"
    else:
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_an_agent_run_that_fails_records_the_error() -> None:
    server = Server(httpx.Response(400, json={"error": {"message": "Unsupported parameter: 'temperature'"}}))
    async with server.client() as client:
        agent = Agent(model=model("openai-completions"), stream_fn=functools.partial(stream_simple, client=client))
        with anyio.fail_after(10):
            await agent.prompt("hi")
    last = as_assistant(agent.state.messages[-1])
    assert last.role == "assistant" and last.stop_reason == "error"
    assert last.error_message == "HTTP 400: Unsupported parameter: 'temperature'"
    assert agent.state.error_message == last.error_message


def test_the_public_namespace() -> None:
    import inspect
    import subprocess
    import sys
    import typing

    import agentloop.providers as providers

    public = {n for n, v in vars(providers).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert set(providers.__all__) == public - {"annotations"}
    for name in providers.__all__:
        value = getattr(providers, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            typing.get_type_hints(value)
    code = (
        "import sys, agentloop, agentloop.testing\nprint('httpx' in sys.modules, 'agentloop.providers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("api", "key_header"),
    [
        ("openai-completions", "authorization"),
        ("openai-responses", "authorization"),
        ("anthropic-messages", "x-api-key"),
    ],
)
def test_the_calls_headers_override_the_models_which_override_the_providers_own(api: str, key_header: str) -> None:
    from agentloop.providers._anthropic import build_anthropic_request
    from agentloop.providers._openai_completions import build_completions_request
    from agentloop.providers._openai_responses import build_responses_request

    build = {
        "openai-completions": build_completions_request,
        "openai-responses": build_responses_request,
        "anthropic-messages": build_anthropic_request,
    }[api]
    m = model(api, headers={key_header: "from-model", "x-both": "model", "x-model": "1"})
    request = build(m, context(), options(headers={"x-both": "call"}))
    assert request.headers[key_header] == "from-model"
    assert (request.headers["x-both"], request.headers["x-model"]) == ("call", "1")
    plain = build(model(api), context(), options(api_key=None, headers={key_header: "from-call"}))
    assert plain.headers[key_header] == "from-call"


def test_the_cli_help_names_the_credentials_of_every_registered_provider() -> None:
    from agentloop.cli._command import EPILOG
    from agentloop.providers._auth import ENV_API_KEYS

    keyed = [name for provider in get_providers() for name in ENV_API_KEYS.get(provider, ())]
    assert len(keyed) == 5 and all(name in EPILOG for name in keyed)
    for credential in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_API_KEY", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        assert credential in EPILOG  # Vertex AI and Bedrock: no key of their own
