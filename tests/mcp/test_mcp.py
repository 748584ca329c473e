"""agentloop.mcp against real servers: server-everything (npm) and a small server made with the SDK."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any, TextIO

import anyio
import pytest

import agentloop as al

pytest.importorskip("mcp", reason="agentloop.mcp needs the [mcp] extra (the MCP SDK)")

from agentloop.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHTTP, mcp_result
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall, check_events

from ..support import as_tool_result
from .conftest import SDK_READERS_LEFT_OPEN, SMALL_SERVER

MODEL = al.Model(id="scripted", api="scripted")

pytestmark = SDK_READERS_LEFT_OPEN


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest, everything_js: str, devnull: TextIO) -> MCPServer:
    """server-everything over each transport."""
    if request.param == "stdio":
        return MCPServerStdio("node", [everything_js, "stdio"], errlog=devnull)
    return MCPServerStreamableHTTP(request.getfixturevalue("everything_url"))


@pytest.fixture(params=["stdio", "http"])
def small(request: pytest.FixtureRequest, devnull: TextIO) -> MCPServer:
    """The small SDK server over each transport."""
    if request.param == "stdio":
        return MCPServerStdio(sys.executable, [str(SMALL_SERVER)], errlog=devnull)
    return MCPServerStreamableHTTP(request.getfixturevalue("small_url"))


async def tools_of(server: MCPServer) -> dict[str, al.AgentTool]:
    return {tool.name: tool for tool in await server.list_tools()}


class Updates(list[al.AgentToolResult]):
    """An `on_update` that keeps what it is given."""

    async def __call__(self, partial: al.AgentToolResult) -> None:
        self.append(partial)


async def call(
    tool: al.AgentTool, arguments: dict[str, Any], signal: al.AbortSignal | None = None
) -> al.AgentToolResult:
    return as_tool_result(await tool.execute("call-1", tool.validate(arguments), signal or al.AbortSignal(), Updates()))


def texts(result: al.AgentToolResult | al.ToolResultMessage) -> list[str]:
    return [block.text for block in result.content if isinstance(block, al.TextContent)]


# --- server-everything ----------------------------------------------------------------------


async def test_everything_tools_keep_their_schemas_and_coerce_arguments(everything: MCPServer) -> None:
    async with everything:
        tools = await tools_of(everything)
        assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= set(tools)
        assert tools["echo"].parameters["properties"]["message"]["type"] == "string"
        assert tools["echo"].parameters["required"] == ["message"]
        assert texts(await call(tools["echo"], {"message": "hi"})) == ["Echo: hi"]
        # "2" -> 2 by agentloop's coercion before the request goes out (the server wants numbers)
        assert texts(await call(tools["get-sum"], {"a": "2", "b": 3})) == ["The sum of 2 and 3 is 5."]
        with pytest.raises(ValueError, match="must have required property 'message'"):
            tools["echo"].validate({})


async def test_everything_images_and_structured_content(everything: MCPServer) -> None:
    async with everything:
        tools = await tools_of(everything)
        image = await call(tools["get-tiny-image"], {})
        images = [block for block in image.content if isinstance(block, al.ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png" and len(images[0].data) > 100
        weather = await call(tools["get-structured-content"], {"location": "Chicago"})
        assert isinstance(weather.details, dict) and set(weather.details) >= {"temperature", "conditions", "humidity"}
        assert not weather.is_error


async def test_everything_progress_reaches_on_update(everything: MCPServer) -> None:
    updates = Updates()
    async with everything:
        tools = await tools_of(everything)
        tool = tools["trigger-long-running-operation"]
        result = await tool.execute("c", tool.validate({"duration": 0.2, "steps": 2}), al.AbortSignal(), updates)
    assert "Steps: 2" in texts(as_tool_result(result))[0]
    assert [u.details["progress"] for u in updates] == [1, 2]
    assert [u.details["total"] for u in updates] == [2, 2]
    assert texts(updates[0]) == ["1/2"]


async def test_an_agent_answers_through_a_tool_of_everything(everything: MCPServer) -> None:
    model = ScriptedModel(
        [Response(content=[ScriptedToolCall("c1", "echo", {"message": "ping"})]), "The server said: Echo: ping"]
    )
    async with everything:
        context = al.AgentContext(tools=await everything.list_tools())
        config = al.AgentLoopConfig(model=MODEL)
        prompt = al.UserMessage(content="Echo ping")
        async with al.agent_loop([prompt], context, config, stream_fn=model) as stream:
            events = [event async for event in stream]
    check_events(events)
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert len(ends) == 1 and not ends[0].is_error and texts(ends[0].result) == ["Echo: ping"]
    tool_message = model.calls[1].messages[-1]
    assert isinstance(tool_message, al.ToolResultMessage) and texts(tool_message) == ["Echo: ping"]
    assert events[-1].type == "agent_end"


# --- the small SDK server ---------------------------------------------------------------------


async def test_error_results_and_protocol_errors(small: MCPServer) -> None:
    async with small:
        tools = await tools_of(small)
        failed = await call(tools["fail"], {"reason": "because"})
        assert failed.is_error is True and "failed on purpose: because" in texts(failed)[0]
        unknown = await small.call_tool("no-such-tool", {})
        assert unknown.is_error is True and "no-such-tool" in texts(unknown)[0]
        ok = await call(tools["add"], {"a": 2, "b": "3"})
        assert ok.is_error is None and ok.details == {"total": 5, "terms": [2, 3]}
    small.timeout = 0.3  # a protocol error: the request times out (MCPError in the SDK)
    async with small:
        timed_out = await small.call_tool("slow", {"label": "timeout"})
    assert timed_out.is_error is True and texts(timed_out)[0].startswith("MCP error -32001")


async def test_progress_of_the_sdk_server_reaches_on_update(small: MCPServer) -> None:
    updates = Updates()
    async with small:
        tools = await tools_of(small)
        result = await tools["count"].execute("c", {"steps": 3}, al.AbortSignal(), updates)
    assert texts(as_tool_result(result)) == ["counted to 3"]
    assert [texts(u) for u in updates] == [["step 1 of 3"], ["step 2 of 3"], ["step 3 of 3"]]


async def test_abort_cancels_the_request_on_the_server(small: MCPServer) -> None:
    signal = al.AbortSignal()
    label = f"aborted-{uuid.uuid4().hex}"  # the HTTP server is shared by the tests
    async with small:
        tools = await tools_of(small)
        started = anyio.current_time()
        async with anyio.create_task_group() as tg:

            async def abort_soon() -> None:
                await anyio.sleep(0.3)
                signal.abort()

            tg.start_soon(abort_soon)
            result = await call(tools["slow"], {"label": label}, signal)
        assert anyio.current_time() - started < 5  # the tool sleeps 60 s unless cancelled
        assert result.is_error is True and texts(result) == ["Operation aborted"]
        with anyio.fail_after(10):  # the server hears `notifications/cancelled` and cancels its handler
            while label not in texts(await small.call_tool("cancellations"))[0].split(","):  # noqa: ASYNC110
                await anyio.sleep(0.05)  # polling the server: there is nothing local to wait on


async def test_the_runs_abort_cancels_an_mcp_tool_call(small: MCPServer) -> None:
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "slow", {"label": "run"})])])
    signal = al.AbortSignal()
    async with small:
        context = al.AgentContext(tools=await small.list_tools())
        config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=30)
        prompt = al.UserMessage(content="go")
        with anyio.fail_after(10):  # well under the grace: the MCP call itself ends at the abort
            async with al.agent_loop([prompt], context, config, stream_fn=model, signal=signal) as stream:
                events = []
                async for event in stream:
                    events.append(event)
                    if event.type == "tool_execution_start":
                        signal.abort()
    check_events(events)
    end = next(e for e in events if e.type == "tool_execution_end")
    assert end.is_error and texts(end.result) == ["Operation aborted"]


async def test_tool_list_changes_reach_the_next_turn(small: MCPServer) -> None:
    newt = f"newt_{uuid.uuid4().hex[:8]}"  # the HTTP server is shared by the tests
    model = ScriptedModel(
        [
            Response(content=[ScriptedToolCall("c1", "grow", {"name": newt})]),
            Response(content=[ScriptedToolCall("c2", newt, {})]),
            "done",
        ]
    )

    @al.tool
    async def local() -> str:
        """A tool that is not from the server."""
        return "local"

    async with small:
        assert small.tools_changed is False
        context = al.AgentContext(tools=[local, *await small.list_tools()])
        config = al.AgentLoopConfig(model=MODEL, prepare_next_turn=small.prepare_next_turn)
        prompt = al.UserMessage(content="grow a tool and call it")
        async with al.agent_loop([prompt], context, config, stream_fn=model) as stream:
            events = [event async for event in stream]
        assert small.tools_changed is False  # the hook read the new list
    check_events(events)
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert [texts(e.result) for e in ends] == [[f"added {newt}"], [f"I am {newt}"]]
    assert not any(e.is_error for e in ends)
    names = [[tool.name for tool in context.tools] for context in model.calls]
    assert newt not in names[0] and newt in names[1] and "local" in names[1]
    assert names[1].count("add") == 1  # the server's old tools were replaced, not duplicated


async def test_untrusted_schemas_run_no_server_regex_and_fetch_nothing(small: MCPServer) -> None:
    async with small:
        tools = await tools_of(small)
        match = tools["match"]
        assert "pattern" not in match.parameters["properties"]["word"]
        started = time.perf_counter()
        arguments = match.validate({"word": "a" * 64 + "b"})  # (a+)+$ would backtrack for ages in `re`
        assert time.perf_counter() - started < 1
        rejected = await call(match, arguments)
        assert rejected.is_error is True and "pattern" in texts(rejected)[0]  # the server checks its own
        assert texts(await call(match, {"word": "aaa"})) == ["matched aaa"]


def test_a_remote_ref_is_never_fetched() -> None:
    import mcp.types

    server = MCPServerStdio("unused")
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "http://127.0.0.1:9/never.json"}, "pattern": {"type": "string"}},
        "patternProperties": {"^(a+)+$": {"type": "string"}},
    }
    tool = server._agent_tool(mcp.types.Tool(name="remote", input_schema=schema))
    assert set(tool.parameters["properties"]) == {"x", "pattern"}  # a property called "pattern" stays
    assert "patternProperties" not in tool.parameters
    started = time.perf_counter()
    with pytest.raises(ValueError, match="cannot be resolved"):
        tool.validate({"x": 1, "pattern": "p"})
    assert time.perf_counter() - started < 1


async def test_the_session_lives_inside_the_async_with(small: MCPServer) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await small.list_tools()
    async with small:
        tools = await tools_of(small)
        with pytest.raises(RuntimeError, match="already open"):
            await small.__aenter__()
    with pytest.raises(RuntimeError, match="not open"):
        await call(tools["add"], {"a": 1, "b": 2})
    async with small:  # a closed server opens again
        assert "add" in await tools_of(small)


async def test_leaving_early_on_an_error_closes_the_server(small: MCPServer) -> None:
    with pytest.raises(KeyError):
        async with small:
            await small.list_tools()
            raise KeyError("boom")
    with pytest.raises(RuntimeError, match="not open"):
        _ = small.session


def test_mcp_result_maps_other_blocks_to_text() -> None:
    import mcp.types as t

    result = t.CallToolResult(
        content=[
            t.TextContent(type="text", text="a"),
            t.ResourceLink(type="resource_link", uri="file:///x.txt", name="x"),
            t.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        ],
        structured_content={"k": 1},
    )
    mapped = mcp_result(result)
    assert texts(mapped) == ["a", "[resource_link: file:///x.txt]", "[audio]"]
    assert mapped.details == {"k": 1} and mapped.is_error is None


def test_bad_arguments_get_clear_errors() -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        MCPServerStdio("")
    with pytest.raises(TypeError, match="sequence of str"):
        MCPServerStdio("node", "server.js")
    with pytest.raises(ValueError, match="http:// or https://"):
        MCPServerStreamableHTTP("localhost:3000")
    with pytest.raises(ValueError, match="positive number"):
        MCPServerStdio("node", timeout=0)
    with pytest.raises(ValueError, match="init_timeout must be a positive number"):
        MCPServerStdio("node", init_timeout=-1)
    with pytest.raises(TypeError, match=r"httpx2\.AsyncClient"):
        MCPServerStreamableHTTP("http://x/mcp", http_client=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not beside it"):
        import httpx2

        MCPServerStreamableHTTP("http://x/mcp", http_client=httpx2.AsyncClient(), token="t")
    with pytest.raises(TypeError, match="env must be a mapping"):
        MCPServerStdio("node", env={"A": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="sampling must be"):
        MCPServerStdio("node", sampling=MODEL)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="log_level must be one of"):
        MCPServerStdio("node", log_level="loud")  # type: ignore[arg-type]
    assert "secret" not in repr(MCPServerStreamableHTTP("http://x/mcp", token="secret"))


def test_import_agentloop_does_not_import_mcp() -> None:
    code = "import sys, agentloop; assert 'mcp' not in sys.modules and 'agentloop.mcp' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_a_tool_prefix_renames_the_tools_and_calls_the_servers_names(devnull: TextIO) -> None:
    server = MCPServerStdio(sys.executable, [str(SMALL_SERVER)], errlog=devnull, tool_prefix="calc_")
    async with server:
        tools = await tools_of(server)
        assert "calc_add" in tools and "add" not in tools
        assert tools["calc_add"].label == "add"
        result = await call(tools["calc_add"], {"a": 1, "b": 2})
    assert result.details == {"total": 3, "terms": [1, 2]}
