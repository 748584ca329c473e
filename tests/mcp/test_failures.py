"""Every MCP failure is an error result or a clear exception at `async with`, never a crash of
the run: a server that dies over HTTP, an answer the SDK cannot parse, a server that never
initializes, a server's output-schema pattern, a tool that runs only as a task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

import anyio
import pytest

import agentloop as al

pytest.importorskip("mcp", reason="agentloop.mcp needs the [mcp] extra (the MCP SDK)")

from agentloop.mcp import MCPServerStdio, MCPServerStreamableHTTP
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall, check_events

from ..support import free_port
from .conftest import SDK_READERS_LEFT_OPEN, SMALL_SERVER, _serve

HOSTILE = os.path.join(os.path.dirname(__file__), "hostile_server.py")
MODEL = al.Model(id="scripted", api="scripted")

pytestmark = SDK_READERS_LEFT_OPEN


def hostile(mode: str, devnull: TextIO, **options: object) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, [HOSTILE, mode], errlog=devnull, **options)  # type: ignore[arg-type]


def texts(result: al.AgentToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, al.TextContent)]


@pytest.fixture
def doomed_url(devnull: TextIO) -> Iterator[tuple[str, int]]:
    """The small SDK server over HTTP, of this test alone (the test kills it), and its pid."""
    port = free_port()
    served = _serve([sys.executable, str(SMALL_SERVER), "http", str(port)], port, {}, devnull)
    url = next(served)
    found = subprocess.run(["pgrep", "-n", "-f", f"small_server.py http {port}"], capture_output=True, text=True)
    yield url, int(found.stdout.split()[0])
    next(served, None)  # `_serve` stops the process if it still runs


async def test_an_http_server_that_dies_between_turns_gives_an_error_result_and_the_run_ends(
    doomed_url: tuple[str, int],
) -> None:
    url, pid = doomed_url
    model = ScriptedModel(
        [
            Response(content=[ScriptedToolCall("c1", "add", {"a": 1, "b": 2})]),
            Response(content=[ScriptedToolCall("c2", "add", {"a": 3, "b": 4})]),
            "done",
        ]
    )
    server = MCPServerStreamableHTTP(url)
    with anyio.fail_after(60):
        async with server:
            context = al.AgentContext(tools=await server.list_tools())
            config = al.AgentLoopConfig(model=MODEL)
            async with al.agent_loop([al.UserMessage(content="add twice")], context, config, stream_fn=model) as stream:
                events = []
                async for event in stream:
                    events.append(event)
                    if event.type == "turn_end" and len([e for e in events if e.type == "turn_end"]) == 1:
                        os.kill(pid, signal.SIGKILL)
                        await anyio.sleep(0.5)  # the SDK's background GET stream sees the death
            later = await server.call_tool("add", {"a": 1, "b": 1})
    check_events(events)
    assert events[-1].type == "agent_end"
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert not ends[0].is_error and ends[1].is_error
    assert later.is_error is True


async def run_killing_mid_call(tools: list[al.AgentTool], pid: Callable[[], int]) -> list[al.AgentEvent]:
    """A run whose one call of `slow` (a minute long) is in flight when the server is SIGKILLed."""
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "slow", {"label": "doomed"})]), "done"])
    config = al.AgentLoopConfig(model=MODEL)
    events: list[al.AgentEvent] = []
    prompt = al.UserMessage(content="wait")
    async with al.agent_loop([prompt], al.AgentContext(tools=tools), config, stream_fn=model) as stream:
        async for event in stream:
            events.append(event)
            if event.type == "tool_execution_start":
                await anyio.sleep(0.5)  # the request has reached the server
                os.kill(pid(), signal.SIGKILL)
    check_events(events)
    return events


async def test_an_http_server_that_dies_mid_call_gives_an_error_result_and_the_run_ends(
    doomed_url: tuple[str, int],
) -> None:
    url, pid = doomed_url
    with anyio.fail_after(30):  # a call's own timeout is 300 s: the death itself must end it
        async with MCPServerStreamableHTTP(url) as server:
            events = await run_killing_mid_call(await server.list_tools(), lambda: pid)
    (end,) = [e for e in events if e.type == "tool_execution_end"]
    assert end.is_error and events[-1].type == "agent_end"


async def test_a_stdio_server_that_dies_mid_call_gives_an_error_result_and_the_run_ends(devnull: TextIO) -> None:
    label = f"doomed-{os.getpid()}-{time.monotonic_ns()}"  # finds this test's process (pgrep -f)

    def pid() -> int:
        found = subprocess.run(["pgrep", "-n", "-f", label], capture_output=True, text=True)
        return int(found.stdout.split()[0])

    with anyio.fail_after(30):
        async with MCPServerStdio(sys.executable, [str(SMALL_SERVER), "stdio", label], errlog=devnull) as server:
            events = await run_killing_mid_call(await server.list_tools(), pid)
    (end,) = [e for e in events if e.type == "tool_execution_end"]
    assert end.is_error and events[-1].type == "agent_end"


async def test_an_answer_the_sdk_cannot_parse_ends_the_call_with_an_error(devnull: TextIO) -> None:
    async with hostile("garbage", devnull) as server:
        with anyio.fail_after(10):  # before: the SDK dropped the answer and the call waited forever
            result = await server.call_tool("plain")
    assert result.is_error is True and "not valid JSON-RPC" in texts(result)[0]


async def test_a_server_that_never_initializes_raises_timeout_error(devnull: TextIO) -> None:
    started = anyio.current_time()
    with pytest.raises(TimeoutError, match=r"did not start and initialize within 0\.5 s"):
        async with hostile("silent", devnull, init_timeout=0.5):
            pass
    assert anyio.current_time() - started < 5


async def test_a_server_that_cannot_start_raises_connection_error() -> None:
    with pytest.raises(ConnectionError, match="could not start"):
        async with MCPServerStreamableHTTP(f"http://127.0.0.1:{free_port()}/mcp", init_timeout=10):
            pass


def test_the_default_timeouts() -> None:
    server = MCPServerStdio("node")
    assert (server.init_timeout, server.timeout) == (30.0, 300.0)
    assert MCPServerStdio("node", timeout=None, init_timeout=None).timeout is None


async def test_no_output_schema_pattern_of_the_server_runs_here(devnull: TextIO) -> None:
    async with hostile("regex", devnull) as server:
        started = time.perf_counter()
        result = await server.call_tool("slow_check")  # `re` takes minutes on ^(a+)+$ and a*28 b
        assert time.perf_counter() - started < 1
    assert result.is_error is None and result.details == {"word": "a" * 28 + "b"}


async def test_a_tool_that_runs_only_as_a_task_is_not_offered(devnull: TextIO) -> None:
    async with hostile("task", devnull) as server:
        names = [tool.name for tool in await server.list_tools()]
        assert server.instructions == "Be careful."
    assert names == ["plain", "slow_check"]


async def test_everythings_task_only_tool_is_not_offered(everything_js: str, devnull: TextIO) -> None:
    from agentloop.mcp import Sampling

    sampling = Sampling(MODEL, ScriptedModel(["x"]))
    async with MCPServerStdio("node", [everything_js, "stdio"], errlog=devnull, sampling=sampling) as server:
        with anyio.fail_after(10):
            while "trigger-sampling-request" not in [t.name for t in await server.list_tools()]:  # noqa: ASYNC110
                await anyio.sleep(0.05)  # its conditional tools come after initialization
        names = [tool.name for tool in await server.list_tools()]
    assert "simulate-research-query" not in names
