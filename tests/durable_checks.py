"""What the durable-engine tests (tests/temporal, tests/dbos) compare and share: the prompt, a
run in one process, transcripts without timestamps, runs as conformance traces, and worker
processes (started, killed, replaced)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

import agentloop as al
from agentloop.wire import EventEnvelope

from .conformance.run import event_line
from .support import stop

PROMPT = al.UserMessage(content="go", timestamp=1)
ROOT = Path(__file__).resolve().parents[1]


class DurableAgent(Protocol):
    """What a run in one process needs of a `TemporalAgent` or a `DBOSAgent`."""

    @property
    def model(self) -> al.Model: ...
    @property
    def tools(self) -> Sequence[al.AgentTool]: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def stream_fn(self) -> al.StreamFn | None: ...
    @property
    def options(self) -> al.LoopOptions: ...


async def in_process(agent: DurableAgent, **options: Any) -> tuple[list[al.AgentEvent], list[al.AgentMessage]]:
    """The same conversation in one process (the agent's loop options, and `options` over them):
    its events and the messages it added."""
    events: list[al.AgentEvent] = []
    config = al.AgentLoopConfig(model=agent.model, **{**agent.options.loop_options(), **options})
    context = al.AgentContext(system_prompt=agent.system_prompt, tools=list(agent.tools))
    new = await al.run_agent_loop([PROMPT], context, config, events.append, stream_fn=agent.stream_fn)
    return events, new


def normalized(value: Any) -> Any:
    """A JSON form without timestamps (the engine's clock is not the test's)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def comparable(events: Sequence[al.AgentEvent], *, ends_in_id_order: bool = False) -> list[Any]:
    """The conformance runner's trace of a run (timestamps dropped, a streaming assistant message
    as its content so far), without `message_update`: the engine's model call consumes the token
    deltas, and the workflow's stream yields `start` and `done` only. With `ends_in_id_order`
    (an engine whose parallel calls end in the order they finish, where in one process a tie goes
    by source order), consecutive `tool_execution_end` lines are put in tool call id order."""
    lines = [event_line(event) for event in events if event.type != "message_update"]
    return ends_as_sets(lines) if ends_in_id_order else lines


def ends_as_sets(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace with each run of consecutive `tool_execution_end` lines in tool call id order."""
    out: list[dict[str, Any]] = []
    ends: list[dict[str, Any]] = []
    for line in lines:
        if line["type"] == "tool_execution_end":
            ends.append(line)
            continue
        out += sorted(ends, key=lambda end: end["toolCallId"])
        ends = []
        out.append(line)
    return out + sorted(ends, key=lambda end: end["toolCallId"])


def check_envelopes(envelopes: Sequence[EventEnvelope]) -> None:
    """Every event once, in order (seq 0..n-1), of one run, and a well-formed run."""
    assert [e.seq for e in envelopes] == list(range(len(envelopes)))
    assert len({e.run_id for e in envelopes}) == 1
    al.testing.check_events([e.event for e in envelopes])


def text(message: al.AgentMessage) -> str:
    """A message's text blocks, joined."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, al.TextContent))


def lines(path: Path) -> list[str]:
    """The lines of a log file a worker writes (none before it exists)."""
    return path.read_text().splitlines() if path.exists() else []


def spawn_worker(module: str, *args: str, log: Path, tool_seconds: str) -> subprocess.Popen[str]:
    """A worker process (`python -m module args...`) logging to `log`, once it says it is ready."""
    env = {**os.environ, "AGENTLOOP_TEST_LOG": str(log), "SLOW_TOOL_SECONDS": tool_seconds}
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def run_example(script: str, env: Mapping[str, str], ready: str) -> subprocess.CompletedProcess[str]:
    """Run `examples/<script>` as written: its `worker` process (whose first line must contain
    `ready`), then its `client` process to its end; the worker is stopped after. Both get the
    environment with `env` added. Returns the client's completed process."""
    example = [sys.executable, str(ROOT / "examples" / script)]
    environment = {**os.environ, **env}
    worker = subprocess.Popen(
        [*example, "worker"], env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert worker.stdout is not None
        assert ready in worker.stdout.readline()
        return subprocess.run([*example, "client"], env=environment, capture_output=True, text=True, timeout=60)
    finally:
        stop(worker, timeout=20)
        assert worker.stdout is not None
        worker.stdout.close()


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL a worker process and wait until it is gone."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    """The worker processes a test starts, stopped at its end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            stop(process)
        assert process.stdout is not None
        process.stdout.close()
