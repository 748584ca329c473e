"""The client features against server-everything, on both transports and backends: sampling by
an agentloop model, elicitation, roots, server logs, resources, prompts, instructions, a tool
filter, a per-call hook that sets `_meta`; headers and a token over HTTP; `load_servers`."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

import agentloop as al

pytest.importorskip("mcp", reason="agentloop.mcp needs the [mcp] extra (the MCP SDK)")

import httpx2
import mcp.types as mcp_types

from agentloop.mcp import (
    MCPCall,
    MCPServer,
    MCPServers,
    MCPServerStdio,
    MCPServerStreamableHTTP,
    Sampling,
    load_servers,
)
from agentloop.testing import ScriptedModel

from .conftest import SDK_READERS_LEFT_OPEN, SMALL_SERVER

MODEL = al.Model(id="sampler", api="scripted")

pytestmark = SDK_READERS_LEFT_OPEN


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def everything(transport: str, request: pytest.FixtureRequest, **options: Any) -> MCPServer:
    if transport == "stdio":
        js = request.getfixturevalue("everything_js")
        return MCPServerStdio("node", [js, "stdio"], errlog=request.getfixturevalue("devnull"), **options)
    return MCPServerStreamableHTTP(request.getfixturevalue("everything_url"), **options)


def texts(result: al.AgentToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, al.TextContent)]


async def wait_for_tool(server: MCPServer, name: str) -> None:
    """server-everything registers its conditional tools after initialization."""
    with anyio.fail_after(10):
        while name not in [tool.name for tool in await server.list_tools()]:  # noqa: ASYNC110
            await anyio.sleep(0.05)  # the list-changed notification is the only sign


async def test_sampling_is_answered_by_an_agentloop_model(transport: str, request: pytest.FixtureRequest) -> None:
    model = ScriptedModel(["Sampled answer"])
    server = everything(transport, request, sampling=Sampling(MODEL, model, max_tokens=50))
    async with server:
        await wait_for_tool(server, "trigger-sampling-request")
        result = await server.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 80})
    assert result.is_error is None and "Sampled answer" in texts(result)[0]
    (context,) = model.calls
    assert context.system_prompt == "You are a helpful test server."
    assert isinstance(context.messages[0], al.UserMessage) and "hello" in str(context.messages[0].content)


async def test_elicitation_asks_the_callback(transport: str, request: pytest.FixtureRequest) -> None:
    asked: list[str] = []

    async def elicit(params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="decline")

    server = everything(transport, request, elicitation=elicit)
    async with server:
        await wait_for_tool(server, "trigger-elicitation-request")
        result = await server.call_tool("trigger-elicitation-request", {})
    assert len(asked) == 1 and "declined" in texts(result)[0]


async def test_roots_are_listed_to_the_server(transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    server = everything(transport, request, roots=[tmp_path])
    async with server:
        await wait_for_tool(server, "get-roots-list")
        result = await server.call_tool("get-roots-list", {})
    assert tmp_path.as_uri() in "\n".join(texts(result))


async def test_server_logs_reach_python_logging(
    transport: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentloop.mcp")
    server = everything(transport, request, log_level="debug")
    async with server:
        await server.call_tool("toggle-simulated-logging", {})
        with anyio.fail_after(10):
            while not any(r.name == "agentloop.mcp" and "message" in r.getMessage() for r in caplog.records):  # noqa: ASYNC110
                await anyio.sleep(0.05)  # the server logs on its own schedule
        await server.call_tool("toggle-simulated-logging", {})


async def test_resources_prompts_and_instructions(transport: str, request: pytest.FixtureRequest) -> None:
    async with everything(transport, request) as server:
        resources = await server.list_resources()
        assert resources, "server-everything lists resources"
        text = next(r for r in resources if (r.mime_type or "").startswith("text/"))
        blocks = await server.read_resource(text.uri)
        assert blocks and isinstance(blocks[0], al.TextContent) and blocks[0].text
        prompts = {prompt.name for prompt in await server.list_prompts()}
        assert {"simple-prompt", "args-prompt"} <= prompts
        messages = await server.get_prompt("args-prompt", {"city": "Lisbon"})
        assert messages[0][0] == "user" and "Lisbon" in messages[0][1].text  # type: ignore[union-attr]
        assert server.instructions and server.server_info.name
        with pytest.raises(ValueError, match="non-empty str"):
            await server.get_prompt("")


async def test_a_tool_filter_and_a_hook_that_sets_meta(transport: str, request: pytest.FixtureRequest) -> None:
    seen: list[MCPCall] = []

    async def wrap(call: MCPCall, proceed: Any) -> al.AgentToolResult:
        seen.append(call)
        import dataclasses

        result: al.AgentToolResult = await proceed(dataclasses.replace(call, meta={"trace": "t-1"}))
        return result

    server = everything(transport, request, tool_filter=lambda tool: tool.name in {"echo", "get-sum"}, wrap_call=wrap)
    async with server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert set(tools) == {"echo", "get-sum"}
        result = await tools["echo"].execute("id-7", {"message": "hi"}, al.AbortSignal(), _ignore)
    assert texts(result) == ["Echo: hi"]  # type: ignore[arg-type]
    assert seen == [MCPCall(name="echo", arguments={"message": "hi"}, tool_call_id="id-7")]


async def _ignore(_: al.AgentToolResult) -> None:
    pass


async def test_http_headers_and_a_token_are_sent(small_url: str) -> None:
    sent: list[httpx2.Headers] = []

    async def record(request: httpx2.Request) -> None:
        sent.append(request.headers)

    async with (
        httpx2.AsyncClient(
            headers={"X-Team": "blue", "Authorization": "Bearer tok"}, event_hooks={"request": [record]}
        ) as client,
        MCPServerStreamableHTTP(small_url, http_client=client) as server,
    ):
        assert "add" in [tool.name for tool in await server.list_tools()]
    assert sent and all(h["x-team"] == "blue" and h["authorization"] == "Bearer tok" for h in sent)
    async with MCPServerStreamableHTTP(small_url, headers={"X-Team": "red"}, token="tok2") as server:
        assert (await server.call_tool("add", {"a": 1, "b": 1})).details == {"total": 2, "terms": [1, 1]}


async def test_an_auth_flow_signs_every_request(small_url: str) -> None:
    class Signed(httpx2.Auth):  # as the SDK's OAuthClientProvider, an httpx2.Auth
        def __init__(self) -> None:
            self.signed = 0

        async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            self.signed += 1
            request.headers["Authorization"] = f"Bearer signed-{self.signed}"
            yield request

    auth = Signed()
    async with MCPServerStreamableHTTP(small_url, auth=auth) as server:
        assert (await server.call_tool("add", {"a": 2, "b": 2})).details == {"total": 4, "terms": [2, 2]}
    assert auth.signed >= 2  # initialize, then the call (and the SDK's other requests)


async def test_a_stdio_server_gets_its_cwd_and_only_the_env_it_is_given(
    tmp_path: Path, devnull: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_TEST_SECRET", "not for the server")
    env = {"AGENTLOOP_TEST_GIVEN": "given"}
    async with MCPServerStdio(sys.executable, [str(SMALL_SERVER)], env=env, cwd=tmp_path, errlog=devnull) as server:
        given = await server.call_tool("where", {"variable": "AGENTLOOP_TEST_GIVEN"})
        secret = await server.call_tool("where", {"variable": "AGENTLOOP_TEST_SECRET"})
    assert texts(given)[0].splitlines() == [str(tmp_path), "given"]
    assert texts(secret)[0].splitlines() == [str(tmp_path), "<unset>"]


async def test_load_servers_reads_an_mcp_servers_file(
    tmp_path: Path, small_url: str, devnull: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_TEST_URL", small_url)
    config = {
        "mcpServers": {
            "calc": {"command": sys.executable, "args": [str(SMALL_SERVER)], "env": {"X": "${UNSET_VAR:-1}"}},
            "web": {"url": "${AGENTLOOP_TEST_URL}", "headers": {"X-A": "b"}},
            "off": {"command": "nothing", "disabled": True},
        }
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(config))
    servers = load_servers(path)
    assert isinstance(servers, MCPServers) and list(servers.servers) == ["calc", "web"]
    assert servers.servers["calc"].params.env == {"X": "1"}  # type: ignore[attr-defined]
    async with servers:
        names = [tool.name for tool in await servers.list_tools()]
    assert "calc_add" in names and "web_add" in names


def test_load_servers_names_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    for content, message in [
        ("{", "is not JSON"),
        ("[]", '"mcpServers" object'),
        ('{"mcpServers": {"a": {}}}', 'needs a "command"'),
        ('{"mcpServers": {"a": {"url": "http://x", "type": "sse"}}}', "'sse' is not supported"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "args must be a JSON array"),
        ('{"mcpServers": {"a": {"command": "${NOPE_NOT_SET}"}}}', "NOPE_NOT_SET is not set"),
    ]:
        path.write_text(content)
        with pytest.raises(ValueError, match=message):
            load_servers(path)
