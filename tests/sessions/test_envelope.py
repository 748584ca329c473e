"""Event envelopes (run id, seq, turn, timestamp) and the generated JSON Schema of the wire format."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import jsonschema
import pytest

import agentloop as al
from agentloop._wire._envelope import (
    Enveloper,
    EventEnvelope,
    dumps_envelope,
    envelope_from_json,
    envelope_to_json,
    enveloping,
    with_envelopes,
)
from agentloop._wire._schema import SCHEMA_PATH, event_schema, main, render
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedThinking, ScriptedToolCall, check_events
from agentloop.wire import to_json

from .helpers import MODEL, TOOLS, step_script

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validator(definition: str | None = None) -> jsonschema.Draft202012Validator:
    schema = SCHEMA if definition is None else {"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]}
    return jsonschema.Draft202012Validator(schema)


ENVELOPE = validator()


@al.tool
async def progress(steps: int, on_update: Any) -> str:
    """Report progress, then finish."""
    for i in range(steps):
        await on_update(al.AgentToolResult.from_text(f"{i}/{steps}", details={"i": i}))
    return "finished"


@al.tool
async def broken() -> str:
    """Always fails."""
    raise al.ToolError("it broke")


def rich_script() -> list[Response]:
    """Responses that touch every shape of the wire format a scripted run can make."""
    return [
        Response(
            content=[
                ScriptedThinking(["Hmm", "..."]),
                ScriptedText(["Working ", "on it."]),
                ScriptedToolCall("p1", "progress", {"steps": 2}),
                ScriptedToolCall("b1", "broken", {}),
                ScriptedToolCall("u1", "unknown_tool", {"x": 1}),
                ScriptedToolCall("bad", "progress", args_chunks=['{"steps": "many"}']),
            ]
        ),
        Response(content=[ScriptedToolCall("t1", "progress", {"steps": 1})], stop_reason="length"),
        Response(content=["Final ", "answer."], usage=al.Usage(input=3, output=4, total_tokens=7)),
    ]


async def test_envelopes_on_the_stream(anyio_backend: object) -> None:
    with anyio.fail_after(10):
        context = al.AgentContext(system_prompt="s", tools=[*TOOLS, progress, broken])
        config = al.AgentLoopConfig(model=MODEL)
        prompt = al.UserMessage(content=(al.TextContent("look"), al.ImageContent("aGk=", "image/png")))
        envelopes: list[EventEnvelope] = []
        async with al.agent_loop([prompt], context, config, stream_fn=ScriptedModel(rich_script())) as events:
            async for envelope in with_envelopes(events):
                envelopes.append(envelope)
    check_events([e.event for e in envelopes])
    assert [e.seq for e in envelopes] == list(range(len(envelopes)))
    assert len({e.run_id for e in envelopes}) == 1
    assert envelopes[0].turn == 0 and envelopes[0].type == "agent_start"
    turns = [e.turn for e in envelopes]
    assert turns == sorted(turns) and turns[-1] == 3
    assert all(e.turn == turns[i] + 1 for i, e in enumerate(envelopes[1:]) if e.type == "turn_start")
    stamps = [e.timestamp for e in envelopes]
    assert stamps == sorted(stamps)
    types = {e.type for e in envelopes}
    assert {"tool_execution_update", "message_update", "turn_end", "agent_end"} <= types
    for envelope in envelopes:
        data = json.loads(dumps_envelope(envelope))
        ENVELOPE.validate(data)
        again = envelope_from_json(data)
        assert again == envelope
        assert envelope_to_json(again) == data


async def test_envelopes_for_agent_listeners_across_runs(anyio_backend: object) -> None:
    ids = iter(["run-a", "run-b", "run-c"])
    clock = iter(range(1000, 2000))
    seen: list[EventEnvelope] = []
    with anyio.fail_after(10):
        agent = al.Agent(model=MODEL, tools=TOOLS, stream_fn=ScriptedModel(step_script(1, chunk_delay=0)))
        agent.subscribe(
            enveloping(
                lambda envelope, signal: seen.append(envelope),
                Enveloper(run_id=lambda: next(ids), clock=lambda: next(clock)),
            )
        )
        await agent.prompt("one")
        agent.stream_fn = ScriptedModel([Response(raise_on_call=RuntimeError("the stream blew up"))])
        await agent.prompt("two")  # the Agent turns the failure into events
        assert agent.state.error_message == "the stream blew up"
    runs = [e.run_id for e in seen]
    assert runs == sorted(runs) and set(runs) == {"run-a", "run-b"}
    for run in ("run-a", "run-b"):
        mine = [e for e in seen if e.run_id == run]
        assert [e.seq for e in mine] == list(range(len(mine)))
        assert mine[0].type == "agent_start" and mine[-1].type == "agent_end"
    assert [e.timestamp for e in seen] == list(range(1000, 1000 + len(seen)))
    for envelope in seen:
        ENVELOPE.validate(envelope_to_json(envelope))


async def test_async_listener_and_plain_iterators(anyio_backend: object) -> None:
    got: list[int] = []

    async def listener(envelope: EventEnvelope, signal: al.AbortSignal) -> None:
        await anyio.lowlevel.checkpoint()
        got.append(envelope.seq)

    with anyio.fail_after(10):
        agent = al.Agent(model=MODEL, stream_fn=ScriptedModel(["hi"]))
        agent.subscribe(enveloping(listener))
        await agent.prompt("x")

        async def events() -> Any:
            yield al.TurnStart()  # no agent_start first: a run id is made anyway
            yield al.AgentStart()

        stamped = [e async for e in with_envelopes(events())]
    assert got == list(range(len(got))) and len(got) >= 6
    assert [(e.seq, e.turn) for e in stamped] == [(0, 1), (0, 0)]
    assert stamped[0].run_id != stamped[1].run_id


def test_bad_envelopes() -> None:
    good = envelope_to_json(EventEnvelope(event=al.AgentStart(), run_id="r", seq=0, turn=0, timestamp=1))
    assert envelope_from_json(good).event == al.AgentStart()
    for broken, message in [
        ([], "must be a JSON object"),
        ({**good, "runId": 3}, "'runId' must be a string"),
        ({**good, "seq": True}, "'seq' must be an integer"),
        ({**good, "turn": None}, "'turn' must be an integer"),
        ({**good, "event": {"type": "text"}}, "agent event"),
        ({**good, "event": "agent_start"}, "agent event"),
    ]:
        with pytest.raises(ValueError, match=message):
            envelope_from_json(broken)
    with pytest.raises(TypeError, match="expects an EventEnvelope"):
        envelope_to_json(al.AgentStart())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async iterator"):
        with_envelopes([al.AgentStart()])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        enveloping("nope")  # type: ignore[arg-type]


# --- the schema ------------------------------------------------------------------------------


def test_the_schema_file_is_generated_from_the_types() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render()
    assert main(["--check"]) == 0
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    out = subprocess.run(
        [sys.executable, "-m", "agentloop._wire._schema", "-"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == event_schema()


def test_schema_check_reports_a_stale_file(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "schema.json"
    assert main(["--check", str(path)]) == 1
    assert main([str(path)]) == 0
    assert main(["--check", str(path)]) == 0
    path.write_text("{}")
    assert main(["--check", str(path)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--bogus"]) == 2


def test_the_schema_rejects_what_the_codec_never_writes() -> None:
    message = to_json(al.AssistantMessage(content=(al.TextContent("x"),)))
    validator("AssistantMessage").validate(message)
    answered = al.AssistantMessage(content=(al.TextContent("x"),), extra={"responseModel": "m-2026-01"})
    validator("AssistantMessage").validate(to_json(answered))  # what the providers write
    for bad in (
        {**message, "extra": 1},
        {**message, "responseModel": 3},
        {k: v for k, v in message.items() if k != "usage"},
        {**message, "stopReason": "done"},
        {**message, "content": [{"type": "image", "data": "x", "mimeType": "image/png"}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator("AssistantMessage").validate(bad)
    custom = to_json(al.CustomMessage(role="memo", data={"anything": [1, {"x": None}]}))
    validator("AgentMessage").validate(custom)
    with pytest.raises(jsonschema.ValidationError):
        validator("CustomMessage").validate({**custom, "role": "user"})
    thinking = al.ThinkingContent("t", thinking_signature="sig", redacted=True)
    validator("ThinkingContent").validate(to_json(thinking))
    call = al.ToolCall("c", "n", {}, thought_signature="g", arguments_error="bad json")
    validator("ToolCall").validate(to_json(call))
    result = al.AgentToolResult(content=(al.TextContent("r"),), details=None, is_error=True, terminate=True)
    validator("AgentToolResult").validate(to_json(result))


async def test_envelopes_of_odd_text_and_numbers_are_strict_utf8_json(anyio_backend: object) -> None:
    call = al.ToolCall("c1", "echo", {"n": float("nan"), "s": "\ud800"})
    model = ScriptedModel([Response(content=[ScriptedText(["odd \udfff"])])])
    async with al.agent_loop(
        [al.UserMessage(content="go \ud800")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), stream_fn=model
    ) as events:
        envelopes = [envelope async for envelope in with_envelopes(events)]
    envelopes.append(
        EventEnvelope(
            run_id="r", seq=99, turn=1, timestamp=1, event=al.ToolExecutionStart("c1", "echo", call.arguments)
        )
    )
    for envelope in envelopes:
        text = dumps_envelope(envelope)
        text.encode("utf-8")  # a UTF-8 writer (a socket, a file) takes it
        data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
        ENVELOPE.validate(data)
    assert json.loads(dumps_envelope(envelopes[-1]))["event"]["args"] == {"n": None, "s": "\ud800"}
