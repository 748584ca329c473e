"""Tool calling for the small local model by constrained output: the choice (a few-shot completion
under a grammar), the tool call, the answer with the results in the prompt. The server is replaced
by scripted responses, or by a small HTTP server on loopback for the choice's request itself."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
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


class Chooser:
    """Stands in for the choice's completion request: records each `Choice`, answers `text`."""

    def __init__(self, text: str, usage: al.Usage | None = None, failure: Exception | None = None) -> None:
        self.text, self.usage, self.failure = text, usage or al.Usage(input=90, output=6, total_tokens=96), failure
        self.choices: list[_constrained_tools.Choice] = []

    async def __call__(self, model: al.Model, choice: Any, options: al.StreamOptions) -> tuple[str, al.Usage]:
        self.choices.append(choice)
        if self.failure is not None:
            raise self.failure
        return self.text, self.usage


def use_chooser(monkeypatch: pytest.MonkeyPatch, text: str, **kwargs: Any) -> Chooser:
    chooser = Chooser(text, **kwargs)
    monkeypatch.setattr(_constrained_tools, "_complete", chooser)
    return chooser


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
    chooser = use_chooser(monkeypatch, " math\nInput: 17 * 23\n")
    server = use_server(monkeypatch, ["17 * 23 = 391"])
    agent, events = await run_agent(tmp_path, "What is 17 * 23?")
    check_events(events)
    start = next(e for e in events if isinstance(e, al.ToolExecutionStart))
    assert (start.tool_name, start.args) == ("calculator", {"expression": "17 * 23"})
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage) and answer.text == "17 * 23 = 391"

    (choice,) = chooser.choices
    assert choice.prompt.startswith("Message: What is 6 * 7?\nTool: math\nInput: 6 * 7\n\n")
    assert choice.prompt.endswith("Message: What is 17 * 23?\nTool:")
    assert set(choice.tools) == {"chat", "read", "ls", "math", "clock"}
    ((_, answer_context, answer_options),) = server.requests
    assert answer_options.temperature == 0.0
    # the template has no tool role: the result is written into the prompt, the call and result left out
    assert answer_context.tools == ()
    assert answer_context.system_prompt == _constrained_tools.ANSWER_SYSTEM_PROMPT
    assert [m.role for m in answer_context.messages] == ["user"]
    shown = [block.text for block in answer_context.messages[0].content]  # type: ignore[union-attr]
    assert shown == ["What is 17 * 23?", "The calculator tool says: 17 * 23 = 391\nAnswer with this result."]


async def test_with_thinking_an_answer_that_only_reasoned_gets_its_text_from_a_second_request(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    use_chooser(monkeypatch, " chat\n", usage=al.Usage(input=10, cache_read=4))
    server = use_server(
        monkeypatch,
        [
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
    assert server.requests[0][2].reasoning == "low" and server.requests[1][2].reasoning is None


@pytest.mark.parametrize("choice", [" chat\n", " nope\nInput: x\n", "not a choice"])
async def test_chat_or_an_unusable_choice_streams_a_plain_answer(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, choice: str
) -> None:
    use_chooser(monkeypatch, choice, usage=al.Usage(input=100, output=10, total_tokens=110))
    server = use_server(monkeypatch, [Response(content=[ScriptedText(["Hel", "lo!"])])])
    agent, events = await run_agent(tmp_path, "Say hello.")
    check_events(events)
    assert not any(isinstance(e, al.ToolExecutionStart) for e in events)
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage) and answer.text == "Hello!"
    assert answer.usage.input == 100 and answer.usage.output == 10  # the choice's tokens are counted
    assert len(server.requests) == 1 and server.requests[0][1].system_prompt == "Be brief."


@pytest.mark.parametrize("reason", ["error", "aborted"])
async def test_a_failed_choice_ends_the_response_with_its_error(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, reason: str
) -> None:
    use_chooser(monkeypatch, "", failure=_constrained_tools._ChoiceFailed(reason, "server said no"))
    agent, events = await run_agent(tmp_path, "What is 17 * 23?")
    check_events(events)
    answer = agent.state.messages[-1]
    assert isinstance(answer, al.AssistantMessage)
    assert (answer.stop_reason, answer.error_message) == (reason, "server said no")


def test_the_choice_offers_paths_from_the_message_and_math_only_with_a_number(tmp_path: Any) -> None:
    tools = builtin_tools(tmp_path)
    choice = _constrained_tools.choice_prompt("What does notes/plan.md say about the docs folder?", tools)
    root = choice.grammar.splitlines()[0]
    assert '" read\\nInput: " ("notes/plan.md") "\\n"' in root  # a file: a word with a dot or a slash
    assert '" ls\\nInput: " ("notes/plan.md" | "about" | "docs" | ".") "\\n"' in root
    assert '" clock\\n"' in root and '" chat\\n"' in root and "math" not in root  # no number, no math
    with_number = _constrained_tools.choice_prompt('What is "12" * 3?', tools)
    assert '" math\\nInput: " expression "\\n"' in with_number.grammar
    assert '"\\"12\\""' not in with_number.grammar  # quotes are escaped in any literal
    assert "read" not in with_number.grammar.splitlines()[0]  # no file named: no read


def test_a_tool_the_examples_do_not_show_is_offered_by_its_description(tmp_path: Any) -> None:
    @al.tool
    async def weather(city: str) -> str:
        """The weather of a city, today."""
        return "sunny"

    @al.tool
    async def math(expression: str) -> str:
        """Named like a label."""
        return "0"

    choice = _constrained_tools.choice_prompt("Weather in Oslo?", [*builtin_tools(tmp_path), weather])
    assert "Message: The weather of a city, today.\nTool: weather\n\n" in choice.prompt
    assert '" weather\\nInput: " line "\\n"' in choice.grammar and choice.tools["weather"] is weather
    call = _constrained_tools._tool_call(" weather\nInput: Oslo\n", choice)
    assert call is not None and (call.name, call.arguments) == ("weather", {"city": "Oslo"})
    clashing = _constrained_tools.choice_prompt("1 + 1?", [*builtin_tools(tmp_path), math])
    assert set(clashing.tools) == {"chat", "read_file", "list_folder", "calculator", "current_time", "math"}


@pytest.fixture
def completions() -> Iterator[tuple[str, list[dict[str, Any]], list[int]]]:
    """A `/v1/completions` server on loopback: answers 200 with a choice, or the status queued first."""
    bodies: list[dict[str, Any]] = []
    statuses: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            status = statuses.pop(0) if statuses else 200
            usage = {"prompt_tokens": 380, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 370}}
            body = {"choices": [{"text": " ls\nInput: docs\n"}], "usage": usage} if status == 200 else {"error": "no"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", bodies, statuses
    httpd.shutdown()
    httpd.server_close()


async def test_the_choice_is_one_greedy_completion_with_its_grammar(
    anyio_backend: object, completions: tuple[str, list[dict[str, Any]], list[int]], tmp_path: Any
) -> None:
    url, bodies, statuses = completions
    model = providers.local_model(url)
    choice = _constrained_tools.choice_prompt("What is in docs?", builtin_tools(tmp_path))
    with anyio.fail_after(10):
        text, usage = await _constrained_tools._complete(model, choice, al.StreamOptions(signal=al.AbortSignal()))
    assert text == " ls\nInput: docs\n"
    assert (usage.input, usage.cache_read, usage.output, usage.total_tokens) == (10, 370, 7, 387)
    (body,) = bodies
    assert body["prompt"] == choice.prompt and body["grammar"] == choice.grammar and body["temperature"] == 0.0
    statuses.append(500)
    with anyio.fail_after(10), pytest.raises(_constrained_tools._ChoiceFailed, match="HTTP 500"):
        await _constrained_tools._complete(model, choice, al.StreamOptions(signal=al.AbortSignal()))
    aborted = al.AbortSignal()
    aborted.abort()
    with anyio.fail_after(10), pytest.raises(_constrained_tools._ChoiceFailed, match="aborted") as failed:
        await _constrained_tools._complete(model, choice, al.StreamOptions(signal=aborted))
    assert failed.value.reason == "aborted"


def test_the_input_fills_the_required_string_parameter() -> None:
    parameter = _constrained_tools._string_parameter
    schema = {"properties": {"n": {"type": "integer"}, "a": {"type": "string"}, "b": {"type": "string"}}}
    assert parameter({**schema, "required": ["b"]}) == "b"
    assert parameter(schema) == "a"
    assert parameter({"properties": {}}) is None and parameter(None) is None
