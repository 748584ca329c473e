"""`agentloop.output`: an output type as the run's final tool, on the scripted model, on both
backends: first-time validation, retries, the retry limit, partial objects in order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import pytest
from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypedDict

import agentloop as al
from agentloop.output import OutputError, OutputTool, prompt_typed
from agentloop.output._tool import PartialObjects
from agentloop.sync import SyncAgent
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall, check_events

pytestmark = pytest.mark.anyio
MODEL = al.Model(id="scripted", api="scripted")


class Sum(BaseModel):
    a: int
    b: int
    total: int


class Recipe(TypedDict):
    title: str
    steps: list[str]


@dataclass
class Point:
    x: int
    y: int


def final(call_id: str, arguments: Mapping[str, object], chunks: list[str] | None = None) -> Response:
    return Response(content=[ScriptedToolCall(call_id, "final_result", arguments, args_chunks=chunks)])


def agent_for(*responses: Response | str) -> tuple[al.Agent, ScriptedModel, list[al.AgentEvent]]:
    model = ScriptedModel(responses)
    agent = al.Agent(model=MODEL, stream_fn=model)
    events: list[al.AgentEvent] = []
    agent.subscribe(lambda event, signal: events.append(event))
    return agent, model, events


def tool_results(agent: al.Agent) -> list[al.ToolResultMessage]:
    return [m for m in agent.state.messages if isinstance(m, al.ToolResultMessage)]


async def test_a_result_that_validates_the_first_time_ends_the_run_as_the_typed_object() -> None:
    agent, model, events = agent_for(final("c1", {"a": 2, "b": 3, "total": 5}), "never asked")
    result = await prompt_typed(agent, "Add 2 and 3", Sum)
    assert result == Sum(a=2, b=3, total=5)
    assert len(model.calls) == 1  # terminate: no second model call
    check_events(events)
    (answer,) = tool_results(agent)
    assert not answer.is_error and answer.content[0].text == "Result accepted."  # type: ignore[union-attr]
    assert agent.state.tools == []  # the final tool was for that run only
    # the model saw the tool's schema
    (tool,) = model.calls[0].tools
    assert tool.name == "final_result" and set(tool.parameters["required"]) == {"a", "b", "total"}


async def test_two_bad_attempts_go_back_to_the_model_and_the_third_validates() -> None:
    agent, model, _ = agent_for(
        final("c1", {"a": 2, "b": 3, "total": "five"}),
        final("c2", {"a": 2, "b": 3}),
        final("c3", {"a": 2, "b": 3, "total": 5}),
    )
    assert await prompt_typed(agent, "Add 2 and 3", Sum) == Sum(a=2, b=3, total=5)
    assert len(model.calls) == 3
    first, second, third = tool_results(agent)
    assert first.is_error and "total: Input should be a valid integer" in first.content[0].text  # type: ignore[union-attr]
    assert second.is_error and "total: Field required" in second.content[0].text  # type: ignore[union-attr]
    assert not third.is_error
    # the second model call saw the first error: the retry is the model's, with the reason
    assert "valid integer" in str(model.calls[1].messages[-1])


async def test_a_result_that_never_validates_ends_the_run_after_the_retries_with_a_clear_error() -> None:
    bad = [final(f"c{i}", {"a": 1}) for i in range(5)]
    agent, model, events = agent_for(*bad)
    with pytest.raises(OutputError, match="did not validate after 3 attempts") as caught:
        await prompt_typed(agent, "Add", Sum, max_retries=2)
    assert len(model.calls) == 3  # two retries, then the run ended
    assert len(caught.value.errors) == 3 and "b: Field required" in caught.value.errors[-1]
    check_events(events)
    assert isinstance(events[-1], al.AgentEnd)
    assert [r.is_error for r in tool_results(agent)] == [True, True, True]


async def test_a_model_that_answers_in_text_gives_a_clear_error() -> None:
    agent, _, _ = agent_for("It is 5.")
    with pytest.raises(OutputError, match="without a call to final_result"):
        await prompt_typed(agent, "Add", Sum)


async def test_partial_objects_arrive_in_order_each_valid_as_far_as_it_goes() -> None:
    chunks = ['{"title": "Te', 'a", "st', 'eps": ["boil', ' water", "ste', 'ep"]}']
    arguments = {"title": "Tea", "steps": ["boil water", "steep"]}
    agent, _, _ = agent_for(final("c1", arguments, chunks))
    partials: list[Recipe] = []

    async def collect(partial: Recipe) -> None:
        partials.append(partial)

    result = await prompt_typed(agent, "Tea?", Recipe, on_partial=collect)
    assert result == arguments
    # a partial object appears once every required field has started; the last string may be cut
    assert partials == [
        {"title": "Tea", "steps": ["boil"]},
        {"title": "Tea", "steps": ["boil water", "ste"]},
        {"title": "Tea", "steps": ["boil water", "steep"]},
    ]
    adapter = TypeAdapter(Recipe)
    for partial in partials:  # each one is a valid (partial) Recipe
        assert adapter.validate_python(partial, experimental_allow_partial=True) == partial


class CountingAdapter:
    """Recipe's validator, counting the characters each partial validation reads."""

    def __init__(self) -> None:
        self.adapter = TypeAdapter(Recipe)
        self.read = 0

    def validate_json(self, data: str, **kwargs: Any) -> Recipe:
        self.read += len(data)
        return self.adapter.validate_json(data, **kwargs)


def test_a_long_answer_costs_partial_validation_linear_in_its_length() -> None:
    # a model chooses its answer's length: 400,000 characters in 8-character fragments
    step = "x" * 400_000
    text = '{"title": "Long", "steps": ["' + step + '"]}'
    fragments = [text[i : i + 8] for i in range(0, len(text), 8)]
    counting = CountingAdapter()
    partials = PartialObjects(cast(TypeAdapter[Recipe], counting))
    seen = [value for fragment in fragments if (value := partials.add(fragment)) is not None]
    # validated at every fragment this would read about 10^10 characters; it reads about nine times
    # the text, and its first 4,096 characters at every fragment (about 10^6)
    assert counting.read <= 12 * len(text)
    assert len(seen) > 20  # still previews as it grows
    lengths = [len(value["steps"][0]) for value in seen]
    assert lengths == sorted(lengths)
    assert seen[-1]["steps"][0] == step[: lengths[-1]]
    assert lengths[-1] >= len(step) * 7 // 8  # the last preview lags at most an eighth behind


def test_a_short_answer_is_validated_at_every_fragment() -> None:
    partials = PartialObjects(TypeAdapter(Recipe))
    seen = [partials.add(fragment) for fragment in ['{"steps": [], "title": "T', "ea", '"}']]
    assert seen == [{"steps": [], "title": "T"}, {"steps": [], "title": "Tea"}, None]


async def test_on_agent_loop_the_tool_gives_partials_and_the_result() -> None:
    chunks = ['{"x": 1', ', "y": 2', "}"]
    model = ScriptedModel([final("c1", {"x": 1, "y": 2}, chunks), "never asked"])
    output = OutputTool(Point)
    context = al.AgentContext(tools=[output])
    config = al.AgentLoopConfig(model=MODEL)
    partials = []
    async with al.agent_loop([al.UserMessage(content="a point")], context, config, stream_fn=model) as events:
        async for event in events:
            if (partial := output.partial(event)) is not None:
                partials.append(partial)
    assert partials == [Point(1, 2)]  # a dataclass appears once every required field has started
    assert output.result() == Point(1, 2)
    assert len(model.calls) == 1


async def test_a_final_call_among_other_calls_ends_the_run_only_when_they_agree() -> None:
    @al.tool
    async def note(text: str) -> str:
        """Take a note."""
        return "noted"

    model = ScriptedModel(
        [
            Response(
                content=[
                    ScriptedToolCall("c0", "note", {"text": "x"}),
                    ScriptedToolCall("c1", "final_result", {"x": 1, "y": 2}),
                ]
            ),
            final("c2", {"x": 3, "y": 4}),
        ]
    )
    agent = al.Agent(model=MODEL, stream_fn=model, tools=[note])
    # the batch's other call does not terminate: the loop goes on; the first valid result stays
    assert await prompt_typed(agent, "go", Point) == Point(1, 2)
    assert len(model.calls) == 2
    assert agent.state.tools == [note]


def test_bad_output_types_and_options_are_named() -> None:
    with pytest.raises(TypeError, match="a JSON object"):
        OutputTool(int)
    with pytest.raises(ValueError, match="max_retries must be"):
        OutputTool(Sum, max_retries=-1)


async def test_a_name_clash_with_the_agents_tools_is_refused() -> None:
    @al.tool
    async def final_result(text: str) -> str:
        """A tool named like the final tool."""
        return text

    agent = al.Agent(model=MODEL, stream_fn=ScriptedModel([]), tools=[final_result])
    with pytest.raises(ValueError, match="already has a tool named 'final_result'"):
        await prompt_typed(agent, "go", Sum)


def test_sync_agent_runs_a_typed_prompt() -> None:
    agent, _, _ = agent_for(final("c1", {"a": 2, "b": 3, "total": 5}))
    assert SyncAgent(agent).run(prompt_typed, agent, "Add 2 and 3", Sum) == Sum(a=2, b=3, total=5)
