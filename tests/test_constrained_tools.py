"""Tool calling for the small local model by constrained output: the choice, the tool call, the
answer with the results in the system prompt. The server is replaced by scripted responses."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentloop as al
import agentloop.providers as providers
from agentloop.cli import _constrained_tools
from agentloop.cli._tools import builtin_tools
from agentloop.providers import AssistantMessageEventStream
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedThinking, check_events

MODEL = providers.local_model("http://127.0.0.1:1")


class Server:
    """Stands in for llama.cpp: records each request (model, context, options) and plays a script."""

    def __init__(self, responses: list[Response | str]) -> None:
        self.script = ScriptedModel(responses)
        self.requests: list[tuple[al.Model, al.Context, al.StreamOptions]] = []

    def __call__(self, model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        self.requests.append((model, context, options))
        return AssistantMessageEventStream(self.script(model, context, options))  # type: ignore[arg-type]


def use_server(monkeypatch: pytest.MonkeyPatch, responses: list[Response | str]) -> Server:
    server = Server(responses)
    monkeypatch.setattr(providers, "stream_openai_completions", server)
    return server


async def run_agent(tmp_path: Any, prompt: str) -> tuple[al.Agent, list[al.AgentEvent]]:
    events: list[al.AgentEvent] = []
    agent = al.Agent(
        model=MODEL,
        system_prompt="Be brief.",
        tools=builtin_tools(tmp_path),
        stream_fn=_constrained_tools.constrained_tool_stream,
    )
    agent.subscribe(lambda event, signal: events.append(event))
    await agent.prompt(prompt)
    return agent, events


async def test_a_chosen_tool_becomes_a_tool_call_and_its_result_reaches_the_answer(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    server = use_server(monkeypatch, ['{"tool": "calculator", "input": "17 * 23"}', "17 * 23 = 391"])
    agent, events = await run_agent(tmp_path, "What is 17 * 23?")
    check_events(events)
    start = next(e for e in events if isinstance(e, al.ToolExecutionStart))
    assert (start.tool_name, start.args) == ("calculator", {"expression": "17 * 23"})
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage) and answer.text == "17 * 23 = 391"

    (choice_model, choice_context, choice_options), (_, answer_context, answer_options) = server.requests
    assert choice_model.compat is not None
    extra = choice_model.compat["extra_body"]
    schema = extra["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["tool"]["enum"] == ["read_file", "list_folder", "calculator", "current_time", "answer"]
    assert extra["chat_template_kwargs"] == {"enable_thinking": False}
    assert choice_context.tools == () and "- calculator: Evaluate" in choice_context.system_prompt
    assert choice_options.temperature == 0.0 and answer_options.temperature == 0.0
    # the template has no tool role: the result is written into the prompt, the call and result left out
    assert answer_context.tools == ()
    assert answer_context.system_prompt == _constrained_tools.ANSWER_SYSTEM_PROMPT
    assert [m.role for m in answer_context.messages] == ["user"]
    shown = [block.text for block in answer_context.messages[0].content]  # type: ignore[union-attr]
    assert shown == ["What is 17 * 23?", "The calculator tool says: 17 * 23 = 391\nAnswer with this result."]


async def test_with_thinking_an_answer_that_only_reasoned_gets_its_text_from_a_second_request(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    server = use_server(
        monkeypatch,
        [
            Response(content=['{"tool": "answer", "input": ""}'], usage=al.Usage(input=10, cache_read=4)),
            Response(content=[ScriptedThinking("The answer is 391")], usage=al.Usage(input=20, output=5)),
            Response(content=[ScriptedText("391")], usage=al.Usage(input=20, output=2, cache_read=16)),
        ],
    )
    events: list[al.AgentEvent] = []
    agent = al.Agent(
        model=MODEL,
        tools=builtin_tools(tmp_path),
        stream_fn=_constrained_tools.constrained_tool_stream,
        thinking_level="low",
    )
    agent.subscribe(lambda event, signal: events.append(event))
    await agent.prompt("What is 17 * 23?")
    check_events(events)
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage) and answer.stop_reason == "stop"
    assert [block.type for block in answer.content] == ["thinking", "text"] and answer.text == "391"
    assert (answer.usage.input, answer.usage.output, answer.usage.cache_read) == (50, 7, 20)
    assert server.requests[1][2].reasoning == "low" and server.requests[2][2].reasoning is None


@pytest.mark.parametrize("choice", ['{"tool": "answer", "input": ""}', '{"tool": "nope", "input": "x"}', "not json"])
async def test_answer_or_an_unusable_choice_streams_a_plain_answer(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, choice: str
) -> None:
    choice_usage = al.Usage(input=100, output=10, total_tokens=110)
    server = use_server(
        monkeypatch,
        [Response(content=[choice], usage=choice_usage), Response(content=[ScriptedText(["Hel", "lo!"])])],
    )
    agent, events = await run_agent(tmp_path, "Say hello.")
    check_events(events)
    assert not any(isinstance(e, al.ToolExecutionStart) for e in events)
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage) and answer.text == "Hello!"
    assert answer.usage.input == 100 and answer.usage.output == 10  # the choice's tokens are counted
    assert len(server.requests) == 2 and "response_format" not in json.dumps(server.requests[1][0].compat)


async def test_a_failed_choice_ends_the_response_with_its_error(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    use_server(monkeypatch, [Response(stop_reason="error", error_message="server said no")])
    agent, events = await run_agent(tmp_path, "What is 17 * 23?")
    check_events(events)
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage)
    assert (answer.stop_reason, answer.error_message) == ("error", "server said no")


def test_the_input_fills_the_required_string_parameter() -> None:
    parameter = _constrained_tools._string_parameter
    schema = {"properties": {"n": {"type": "integer"}, "a": {"type": "string"}, "b": {"type": "string"}}}
    assert parameter({**schema, "required": ["b"]}) == "b"
    assert parameter(schema) == "a"
    assert parameter({"properties": {}}) is None and parameter(None) is None
