"""agentloop.temporal without a server: bad input gets clear errors, payloads round-trip."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import RPCTimeoutOrCancelledError, WorkflowExecutionStatus
from temporalio.common import RetryPolicy

import agentloop as al
from agentloop.temporal import ActivityOptions, AgentLoopPayloadConverter, AgentRun, TemporalAgent, idempotency_key
from agentloop.temporal._payload import CarriedState
from agentloop.wire import EventEnvelope, envelope_from_json, envelope_to_json
from tests import durable_scripts as scripts


def test_temporal_agent_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="TemporalAgent name must be letters, digits"):
        TemporalAgent("no spaces", model=scripts.MODEL)
    with pytest.raises(TypeError, match=r"model must be an agentloop\.Model, got str"):
        TemporalAgent("a", model="gpt")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tools\[0\] must be an AgentTool, got builtin_function_or_method"):
        TemporalAgent("a", model=scripts.MODEL, tools=[print])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="tools must have distinct names"):
        TemporalAgent("a", model=scripts.MODEL, tools=[scripts.lookup, scripts.lookup])
    with pytest.raises(ValueError, match="tool_activities names 'nope', which is not one of the tools"):
        TemporalAgent("a", model=scripts.MODEL, tools=[scripts.lookup], tool_activities={"nope": ActivityOptions()})
    with pytest.raises(ValueError, match="turns_per_history must be a positive int, got 0"):
        TemporalAgent("a", model=scripts.MODEL, turns_per_history=0)
    with pytest.raises(TypeError, match=r"TemporalAgent does not take observe, wrap_tool_call; its loop options are"):
        TemporalAgent("a", model=scripts.MODEL, observe=print, wrap_tool_call=print)
    with pytest.raises(ValueError, match="tool_abort_grace must be"):
        TemporalAgent("a", model=scripts.MODEL, tool_abort_grace=-1)
    agent = TemporalAgent("a", model=scripts.MODEL, max_turns=3, api_key="k")
    assert agent.options == al.LoopOptions(max_turns=3, api_key="k") and "'k'" not in repr(agent.options)
    with pytest.raises(TypeError, match="start_to_close_timeout must be a positive timedelta, got 5"):
        ActivityOptions(start_to_close_timeout=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="heartbeat_timeout must be a positive timedelta"):
        ActivityOptions(heartbeat_timeout=timedelta(0))


def test_custom_activity_options_without_a_retry_policy_keep_the_agents_default_attempts() -> None:
    custom = ActivityOptions(start_to_close_timeout=timedelta(seconds=5))
    agent = TemporalAgent(
        "a",
        model=scripts.MODEL,
        tools=[scripts.lookup, scripts.barrier],
        model_activity=custom,
        tool_activities={"lookup": custom},
        default_tool_activity=custom,
    )
    for tool in ("lookup", "barrier"):
        options = agent.tool_activity_options(tool)
        assert options.retry_policy is not None and options.retry_policy.maximum_attempts == 3
        assert options.start_to_close_timeout == timedelta(seconds=5)
    assert agent.model_activity.retry_policy is not None and agent.model_activity.retry_policy.maximum_attempts == 5
    unlimited = ActivityOptions(retry_policy=RetryPolicy())  # Temporal's own default, asked for
    kept = TemporalAgent("b", model=scripts.MODEL, model_activity=unlimited)
    assert kept.model_activity.retry_policy == RetryPolicy()


def test_agent_run_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match=r"AgentRun\.agent must be the name of a TemporalAgent"):
        AgentRun(agent="")
    with pytest.raises(TypeError, match=r"AgentRun\.prompts must be a sequence of messages, got str"):
        AgentRun(agent="a", prompts="hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AgentRun.messages\[0\] must be an agentloop message, got dict"):
        AgentRun(agent="a", messages=[{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"AgentRun\.state is the workflow's own: leave it None, got dict"):
        AgentRun(agent="a", state={"seq": 3})  # type: ignore[arg-type]


def test_idempotency_key_outside_a_tool_activity_says_where_it_works() -> None:
    with pytest.raises(RuntimeError, match="only available in a tool running as a Temporal activity"):
        idempotency_key()


def test_the_payload_converter_round_trips_agentloop_values_and_leaves_the_rest_to_temporal() -> None:
    converter = AgentLoopPayloadConverter()
    message = al.AssistantMessage(
        content=(al.TextContent("hi"), al.ToolCall("c1", "lookup", {"key": "x"})), timestamp=5
    )
    state = CarriedState(run_id="r", seq=3, steering=(al.UserMessage(content="s", timestamp=3),), context_key="k")
    run = AgentRun(agent="a", prompts=[al.UserMessage(content="go", timestamp=1)], messages=[message], state=state)
    values = [message, [message, al.UserMessage(content="u", timestamp=2)], run, al.TurnEnd(message, ())]
    payloads = converter.to_payloads(values)
    assert all(p.metadata["encoding"] == b"json/agentloop" for p in payloads)
    assert converter.from_payloads(payloads) == values
    plain = converter.to_payloads([{"a": 1}, 3, None, []])
    assert [p.metadata["encoding"] for p in plain] == [b"json/plain", b"json/plain", b"binary/null", b"json/plain"]
    with pytest.raises(Exception, match="not an agentloop payload"):
        converter.from_payloads([Payload(metadata={"encoding": b"json/agentloop"}, data=b'{"kind": "x"}')])


@pytest.mark.parametrize("bad", [-2, 1.5, True, "3"])
async def test_stream_events_checks_after_seq_before_asking(bad: object) -> None:
    from agentloop.temporal import stream_events

    with pytest.raises(ValueError, match="after_seq must be the seq of an event already seen, or -1"):
        await stream_events(None, after_seq=bad).__anext__()  # type: ignore[arg-type]


class _BusyServer:
    """A workflow handle whose server cannot answer at first: an update past its deadline, then a
    workflow task in failed state (a worker died with it), then a page with nothing new from a
    workflow still running; then the events."""

    def __init__(self) -> None:
        from temporalio.service import RPCError, RPCStatusCode

        self.id = "busy"
        start = EventEnvelope(event=al.AgentStart(), run_id="busy", seq=0, turn=0, timestamp=1)
        end = EventEnvelope(event=al.AgentEnd(()), run_id="busy", seq=1, turn=0, timestamp=2)
        nothing = {"envelopes": [], "firstSeq": 0, "finished": False, "continuing": False}
        events = {**nothing, "envelopes": [envelope_to_json(start), envelope_to_json(end)]}
        not_found = RPCError("workflow task not found", RPCStatusCode.NOT_FOUND, b"")
        self.updates: list[Any] = [RPCTimeoutOrCancelledError(), not_found, not_found, events]
        self.queries: list[Any] = [RPCError("failed state", RPCStatusCode.FAILED_PRECONDITION, b""), nothing]
        self.asked: list[str] = []

    @staticmethod
    def _answer(answers: list[Any]) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def execute_update(self, name: str, args: list[int], result_type: type) -> Any:
        self.asked.append(name)
        return self._answer(self.updates)

    async def query(self, name: str, args: list[int], result_type: type) -> Any:
        self.asked.append(name)
        return self._answer(self.queries)

    async def describe(self) -> Any:
        self.asked.append("describe")
        return SimpleNamespace(status=WorkflowExecutionStatus.RUNNING)


async def test_stream_events_asks_again_while_the_server_cannot_answer() -> None:
    from agentloop.temporal import stream_events

    handle = _BusyServer()
    with anyio.fail_after(10):
        envelopes = [e async for e in stream_events(handle)]  # type: ignore[arg-type]
    assert [e.type for e in envelopes] == ["agent_start", "agent_end"]
    assert handle.asked == ["events", "events", "events_now", "events", "events_now", "describe", "events"]


EVENT_TEXTS = {
    "ascii": "x" * 1_000_000,
    "escapes": 'say "hi" \\ ' * 80_000,
    "emoji": "😀" * 100_000,
    "cjk": "日本語" * 100_000,
}


@pytest.mark.parametrize("kind", EVENT_TEXTS)
def test_every_answer_to_events_fits_a_page_and_the_parts_rebuild_the_events(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer is Temporal's JSON (non-ASCII as `\\u` escapes): it stays under the size a
    context store would keep (a caller without the store reads it), and a large event comes in
    as few parts as fit."""
    from agentloop.temporal import _workflow
    from agentloop.temporal._context import STORED_THRESHOLD

    monkeypatch.setattr(_workflow, "workflow_ms", lambda: 0)
    text = EVENT_TEXTS[kind]
    medium = text[: len(text) // 16]  # a page holds one or more
    events: list[al.AgentEvent] = [
        al.AgentStart(),
        al.ToolExecutionEnd("c1", "blob", al.AgentToolResult.from_text(text), False),
        *(al.ToolExecutionEnd(f"m{i}", "blob", al.AgentToolResult.from_text(medium), False) for i in range(4)),
    ]
    workflow = _workflow.AgentWorkflow()
    for event in events:
        workflow._record(event)

    def answer_size(data: object) -> int:
        return len(json.dumps(data, separators=(",", ":")))  # as Temporal's JSON converter writes it

    got: list[dict[str, Any]] = []
    parts: list[str] = []
    answers = 0
    while len(got) < len(events):
        page = workflow._page(got[-1]["seq"] if got else -1, len(parts))
        answers += 1
        assert answer_size(page) < STORED_THRESHOLD
        if "part" in page:
            parts.append(page["part"])
            if len(parts) == page["parts"]:
                got.append(json.loads("".join(parts)))
                parts = []
        else:
            got += page["envelopes"]
    assert [envelope_from_json(data).event for data in got] == events
    # the large event's JSON text, as strings in answers, fills about as many pages as it must
    as_parts = answer_size(json.dumps(got[1], ensure_ascii=False, separators=(",", ":")))
    assert answers <= as_parts // _workflow._PAGE_BYTES + 2 + 5  # its parts (one more at most), the rest


@pytest.mark.parametrize(
    ("module", "package", "extra"),
    [("agentloop.temporal", "temporalio", "temporal"), ("agentloop.dbos", "dbos", "dbos")],
)
def test_without_their_engine_the_durable_packages_say_how_to_install_it(module: str, package: str, extra: str) -> None:
    code = f"import sys; sys.modules[{package!r}] = None\n"
    code += f"try:\n    import {module}\nexcept ImportError as exc:\n    print(exc)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    from agentloop.cli._install import install_command

    assert out.strip() == f"{module} needs the {package} package, the {extra!r} extra: {install_command(extra)}"
