"""`agentloop.sync.SyncAgent`: blocking runs in a plain script, inside a running asyncio or trio
loop, on either portal backend, and Ctrl-C in a pseudo-terminal ending the run cleanly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio

import agentloop as al
from agentloop.sync import SyncAgent, sync_context
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall, check_events

ROOT = Path(__file__).resolve().parents[1]
MODEL = al.Model(id="scripted", api="scripted")


@al.tool
async def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def scripted_agent() -> tuple[SyncAgent, list[al.AgentEvent]]:
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "add", {"a": 2, "b": 3})]), "2 + 3 = 5"])
    agent = al.Agent(model=MODEL, stream_fn=model, tools=[add])
    events: list[al.AgentEvent] = []
    agent.subscribe(lambda event, signal: events.append(event))
    return SyncAgent(agent), events


def assert_answered(answer: al.AssistantMessage, events: list[al.AgentEvent]) -> None:
    assert answer.text == "2 + 3 = 5"
    assert answer.stop_reason == "stop"
    check_events(events)
    results = [e.result for e in events if isinstance(e, al.ToolExecutionEnd)]
    assert [r.content[0].text for r in results] == ["5"]  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_plain_call_runs_the_agent_to_its_answer_on_either_portal_backend(backend: Any) -> None:
    agent, events = scripted_agent()
    agent = SyncAgent(agent.agent, backend=backend)
    assert_answered(agent.prompt("What is 2 + 3?"), events)
    assert len(agent.state.messages) == 4  # user, tool call, tool result, answer


def test_it_works_inside_a_running_asyncio_loop_as_in_a_notebook_cell() -> None:
    async def cell() -> al.AssistantMessage:
        asyncio.get_running_loop()  # as in Jupyter: a loop is running in this thread
        agent, events = scripted_agent()
        answer = agent.prompt("What is 2 + 3?")
        check_events(events)
        return answer

    assert asyncio.run(cell()).text == "2 + 3 = 5"


def test_it_works_inside_trio() -> None:
    async def main() -> al.AssistantMessage:
        await trio.lowlevel.checkpoint()
        agent, events = scripted_agent()
        answer = agent.prompt("What is 2 + 3?")
        check_events(events)
        return answer

    assert trio.run(main).text == "2 + 3 = 5"


@pytest.mark.anyio
async def test_it_works_inside_the_test_loop_on_both_backends() -> None:
    agent, events = scripted_agent()
    assert_answered(agent.prompt("What is 2 + 3?"), events)


def test_continue_and_run_block_like_prompt() -> None:
    model = ScriptedModel([Response(stop_reason="error", error_message="overloaded"), "back"])
    agent = SyncAgent(al.Agent(model=MODEL, stream_fn=model))
    failed = agent.prompt("hi")
    assert (failed.stop_reason, failed.error_message) == ("error", "overloaded")
    agent.agent.follow_up(al.UserMessage(content="again"))
    assert agent.continue_().text == "back"

    async def count() -> int:
        await anyio.lowlevel.checkpoint()
        return len(agent.state.messages)

    assert agent.run(count) == 4


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match=r"agent must be an agentloop\.Agent"):
        SyncAgent(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend must be"):
        SyncAgent(al.Agent(), backend="curio")  # type: ignore[arg-type]


def failing_listener(event: al.AgentEvent, signal: object) -> None:
    if isinstance(event, al.AgentEnd):
        try:
            raise KeyError("the inner failure")
        except KeyError as exc:
            raise RuntimeError("the outer failure") from exc


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_exception_comes_out_as_it_was_raised_with_its_cause_and_traceback(backend: Any) -> None:
    inner = al.Agent(model=MODEL, stream_fn=ScriptedModel(["Hello."]))
    inner.subscribe(failing_listener)
    with pytest.raises(RuntimeError, match="the outer failure") as caught:
        SyncAgent(inner, backend=backend).prompt("Hi.")
    cause = caught.value.__cause__
    assert isinstance(cause, KeyError) and cause.args == ("the inner failure",)
    assert caught.value.__context__ is cause
    assert caught.traceback[-1].name == "failing_listener"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sync_context_keeps_what_it_entered_running_for_the_whole_block(backend: Any) -> None:
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    seen: list[str] = []

    @asynccontextmanager
    async def server() -> AsyncIterator[str]:
        ticks = anyio.Event()
        async with anyio.create_task_group() as group:

            async def serve() -> None:
                ticks.set()  # a task of the manager's loop, alive across the block
                await anyio.sleep_forever()

            group.start_soon(serve)
            await ticks.wait()
            seen.append("entered")
            try:
                yield "url"
            finally:
                seen.append("exiting")
                group.cancel_scope.cancel()

    async def notebook_cell() -> None:
        with sync_context(server(), backend=backend) as url:
            assert url == "url" and seen == ["entered"]
            agent, events = scripted_agent()
            assert_answered(agent.prompt("What is 2 + 3?"), events)
        assert seen == ["entered", "exiting"]

    asyncio.run(notebook_cell())  # inside a running loop, as in a notebook
    with pytest.raises(TypeError, match="manager must be an async context manager"), sync_context(object()):  # type: ignore[arg-type]
        pass


SCRIPT = textwrap.dedent(
    """
    import sys

    import anyio

    import agentloop as al
    from agentloop.sync import SyncAgent
    from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

    @al.tool
    async def wait() -> str:
        \"\"\"Wait until cancelled.\"\"\"
        print("tool started", flush=True)
        await anyio.sleep_forever()
        return "never"

    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "wait", {})]), "(aborted)", "resumed"])
    agent = SyncAgent(al.Agent(model=al.Model(id="s", api="s"), stream_fn=model, tools=[wait]))
    mode = sys.argv[1]
    if mode == "answer":
        agent = SyncAgent(al.Agent(model=al.Model(id="s", api="s"), stream_fn=ScriptedModel(["plain"])))
        print("answer:", agent.prompt("hi").text)
        sys.exit(0)
    try:
        if mode == "inside-trio":
            import trio

            async def main():
                await trio.lowlevel.checkpoint()
                agent.prompt("wait")

            trio.run(main)
        else:
            agent.prompt("wait")
    except KeyboardInterrupt:
        last = agent.state.messages[-1]
        print("interrupted:", last.role, last.stop_reason, agent.agent.signal is None, flush=True)
        print("roles:", " ".join(m.role for m in agent.state.messages), flush=True)
        agent.agent.follow_up(al.UserMessage(content="go on"))
        print("continued:", agent.continue_().text, flush=True)
        sys.exit(3)
    """
)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_it_works_in_a_plain_script(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), "answer"], capture_output=True, text=True, env=child_env(), check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "answer: plain\n", "")


@pytest.mark.parametrize("mode", ["plain", "inside-trio"])
def test_ctrl_c_in_a_terminal_aborts_the_run_cleanly_and_the_agent_can_continue(tmp_path: Path, mode: str) -> None:
    pexpect = pytest.importorskip("pexpect")
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    child = pexpect.spawn(sys.executable, [str(script), mode], env=child_env(), encoding="utf-8", timeout=60)
    child.expect("tool started")
    child.sendintr()  # Ctrl-C, as the terminal sends it
    child.expect(pexpect.EOF)
    output = child.before
    child.close()
    assert "interrupted: assistant aborted True" in output
    # the tool call got its (aborted) result before the aborted answer: a transcript to resume from
    assert "roles: user assistant toolResult assistant" in output
    assert "continued: resumed" in output
    assert child.exitstatus == 3


@pytest.mark.servers
@pytest.mark.timeout(300)
def test_the_readme_synchronous_twin_runs_the_embedded_model_to_its_answer() -> None:
    from .test_cli import _local_model_file
    from .test_readme import README, blocks, run_block

    (twin,) = [code for code in blocks(README, "embedded") if "SyncAgent" in code]
    assert len(twin.strip().splitlines()) <= 10
    os.environ.setdefault("AGENTLOOP_MODEL_PATH", str(_local_model_file()))
    shown = run_block(twin, "asyncio", timeout=240)
    assert "391" in shown.splitlines()[-1], shown
