"""Typed results through the providers' schema-constrained output (`prompt_typed(mode="native")`,
`NativeOutput`, `StreamOptions.output_schema`): the schema on each wire, the answer parsed and
retried with the tool mode's semantics, on canned bytes and against aimock."""

from __future__ import annotations

import dataclasses
import functools

import anyio
import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from agentloop import Agent, AssistantMessage, Model, UserMessage
from agentloop.output import NativeOutput, OutputError, OutputSchema, prompt_typed
from agentloop.output._native import strict_schema
from agentloop.providers import get_model, stream_simple
from agentloop.providers._azure import build_azure_request
from agentloop.providers._google import build_google_request
from agentloop.providers._mistral import build_mistral_request
from agentloop.providers._openai_completions import build_completions_request
from agentloop.providers._openai_responses import build_responses_request

from .conftest import AIMOCK_HTTP
from .helpers import Server, chat_chunk, collect, context, model, ok, options, sse_data


class Forecast(BaseModel):
    city: str
    celsius: int


class StrictForecast(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    celsius: int


SCHEMA = OutputSchema(name="Forecast", schema=Forecast.model_json_schema())
WANTED = options(output_schema=SCHEMA)


def test_each_wire_carries_the_schema_where_the_provider_has_one() -> None:
    schema = dict(SCHEMA.schema)
    chat = build_completions_request(model("openai-completions"), context(), WANTED).body
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Forecast", "schema": schema, "strict": False},
    }
    responses = build_responses_request(model("openai-responses"), context(), WANTED).body
    assert responses["text"] == {
        "format": {"type": "json_schema", "name": "Forecast", "schema": schema, "strict": False}
    }
    azure = dataclasses.replace(get_model("azure", "gpt-5-mini"), base_url="http://mock/openai/v1")
    azure_body = build_azure_request(azure, context(), WANTED).body
    assert azure_body["text"] == responses["text"]
    mistral = build_mistral_request(get_model("mistral", "mistral-large-latest"), context(), WANTED).body
    assert mistral["response_format"] == chat["response_format"]
    gemini = build_google_request(get_model("google", "gemini-2.5-flash"), context(), WANTED).body
    assert gemini["generationConfig"]["responseMimeType"] == "application/json"
    assert gemini["generationConfig"]["responseJsonSchema"] == schema
    for built in (
        build_completions_request(model("openai-completions"), context(), options()).body,
        build_responses_request(model("openai-responses"), context(), options()).body,
    ):
        assert "response_format" not in built and "text" not in built  # nothing asked, nothing sent


@pytest.mark.parametrize("api", ["anthropic-messages", "bedrock-converse-stream"])
async def test_a_provider_without_constrained_output_fails_the_call_saying_so(api: str) -> None:
    server = Server()
    async with server.client() as client:
        m = model(api, base_url="http://mock")
        events, final = await collect(stream_simple(m, context(), WANTED, client=client))
    assert [e.type for e in events] == ["error"] and server.requests == []
    assert final.error_message == (
        f"The {api} API has no schema-constrained output (StreamOptions.output_schema): "
        "ask for the result through a tool instead"
    )


def test_strict_mode_only_for_a_schema_openai_takes_as_it_is() -> None:
    assert NativeOutput(StrictForecast).output_schema.strict is True
    assert NativeOutput(Forecast).output_schema.strict is False  # extra keys allowed
    nested = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}, "required": []}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_schema(nested) is False  # the inner object leaves `b` optional
    assert NativeOutput(Forecast).output_schema.name == "Forecast"
    with pytest.raises(ValueError, match="name must be letters"):
        NativeOutput(Forecast, name="a b")


def _answer(text: str, pieces: int = 1) -> httpx.Response:
    step = max(1, len(text) // pieces)
    deltas = [chat_chunk({"content": text[i : i + step]}) for i in range(0, len(text), step)]
    return ok(sse_data(chat_chunk({"role": "assistant"}), *deltas, chat_chunk(finish="stop")))


async def test_an_answer_that_does_not_validate_is_sent_back_then_the_typed_result_returned() -> None:
    server = Server(_answer('{"city": "Paris", "celsius": "warm"}'), _answer('{"city": "Paris", "celsius": 21}', 4))
    partials: list[Forecast] = []
    async with server.client() as client:
        agent = Agent(model=model("openai-completions"), stream_fn=functools.partial(stream_simple, client=client))
        result = await prompt_typed(agent, "Paris?", Forecast, mode="native", on_partial=partials.append, max_retries=1)
    assert result == Forecast(city="Paris", celsius=21)
    assert partials and partials[-1] == result
    assert all(body["response_format"]["json_schema"]["name"] == "Forecast" for body in server.bodies)
    feedback = server.bodies[1]["messages"][-1]["content"][0]["text"]
    assert feedback.startswith("The answer does not follow the schema:\n  - celsius:")
    assert agent.stream_fn is not None and agent.stream_fn.func is stream_simple  # type: ignore[attr-defined]


async def test_after_max_retries_failed_answers_output_error_holds_what_the_model_was_told() -> None:
    server = Server(_answer("not json"), _answer('{"city": 1}'))
    async with server.client() as client:
        agent = Agent(model=model("openai-completions"), stream_fn=functools.partial(stream_simple, client=client))
        with pytest.raises(OutputError) as caught:
            await prompt_typed(agent, "Paris?", Forecast, mode="native", max_retries=1)
    assert len(caught.value.errors) == 2 and len(server.requests) == 2
    assert "did not follow the schema Forecast after 2 attempts" in str(caught.value)


async def test_a_failed_call_ends_the_run_without_a_result() -> None:
    server = Server(httpx.Response(400, json={"error": {"message": "bad schema"}}))
    async with server.client() as client:
        agent = Agent(model=model("openai-completions"), stream_fn=functools.partial(stream_simple, client=client))
        with pytest.raises(OutputError, match="ended without an answer following the schema Forecast"):
            await prompt_typed(agent, "Paris?", Forecast, mode="native")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.error_message == "HTTP 400: bad schema"


def test_a_native_output_validates_a_message_once() -> None:
    final = NativeOutput(Forecast, max_retries=0)
    bad = AssistantMessage(content=(), api="x", provider="y", model="z")
    assert final.check(bad) is not None and not final.retries_left
    with pytest.raises(OutputError):
        final.result()


# --- against aimock (`pytest -m servers`) ----------------------------------------------------


def _aimock_model(url: str, api: str) -> Model:
    base = {"openai-completions": url + "/v1", "openai-responses": url + "/v1", "google-generative-ai": url + "/v1beta"}
    return Model(id="test-model", api=api, provider="aimock", base_url=base[api])


@pytest.mark.servers
@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "google-generative-ai"])
async def test_a_typed_result_from_aimocks_text_answer_after_one_retry(aimock_url: str, api: str) -> None:
    agent = Agent(
        model=_aimock_model(aimock_url, api),
        stream_fn=functools.partial(stream_simple, http=AIMOCK_HTTP),
        get_api_key=lambda provider: "sk-aimock",
    )
    with anyio.fail_after(30):
        result = await prompt_typed(agent, "Give the Paris forecast as JSON.", Forecast, mode="native")
    assert result == Forecast(city="Paris", celsius=21)
    users = [m for m in agent.state.messages if isinstance(m, UserMessage)]
    assert len(users) == 2 and "does not follow the schema" in str(users[1].content)


@pytest.mark.servers
async def test_llama_cpp_constrains_its_chat_answer_to_the_schema(llama_url: str) -> None:
    api = "openai-completions"  # llama.cpp's Responses endpoint ignores `text.format`
    agent = Agent(
        model=Model(
            id="smollm2",
            api=api,
            provider="llama.cpp",
            base_url=llama_url + "/v1",
            compat={"thinking_format": "llama.cpp"},  # the test template thinks unless told not to
        ),
        stream_fn=functools.partial(stream_simple, http=AIMOCK_HTTP),
        max_tokens=256,
        temperature=0.0,
    )
    with anyio.fail_after(120):
        try:
            result = await prompt_typed(agent, "The weather in Paris: 21 degrees.", StrictForecast, mode="native")
        except OutputError:
            raise AssertionError(agent.state.messages[-1]) from None
    assert isinstance(result, StrictForecast)  # the grammar made every answer valid JSON of the schema
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
