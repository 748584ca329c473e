"""Fixtures and helpers of the provider tests: the real servers, the TypeScript reference, an
agent turn against aimock, and the harness that replays recorded streams through pi-ai's
providers and ours.

Tests marked `servers` talk to aimock and llama.cpp started by `tests/providers/servers.py start`
(their URLs in AGENTLOOP_AIMOCK_URL and AGENTLOOP_LLAMA_URL). They are deselected unless the `-m`
expression names them (`pytest -m servers`); once selected, an unreachable server is a failure
that says how to start it, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agentloop import (
    AbortSignal,
    Agent,
    AgentTool,
    AssistantMessageEvent,
    Context,
    Model,
    StreamFn,
    StreamOptions,
    UserMessage,
)
from agentloop.providers import HTTPOptions
from agentloop.testing import check_events
from agentloop.wire import to_json

from ..support import as_assistant, served
from .helpers import Weather as Weather  # the tool of aimock's fixtures

SERVERS_HELP = "start them with `python tests/providers/servers.py start` and source the env file it prints"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "servers: needs aimock and llama.cpp running (python tests/providers/servers.py start)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "servers" in (config.getoption("markexpr", "") or ""):
        return
    deselected = [item for item in items if item.get_closest_marker("servers") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.get_closest_marker("servers") is None]


def _env_file() -> dict[str, str]:
    cache = os.environ.get("AGENTLOOP_SERVERS_CACHE") or str(
        Path(__file__).resolve().parents[2] / ".ci-cache" / "providers"
    )
    try:
        lines = (Path(cache) / "servers.env").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _server_url(variable: str, health: str, name: str) -> str:
    url = os.environ.get(variable) or _env_file().get(variable)
    if not url:
        pytest.fail(f"{variable} is not set: the {name} tests need the server; {SERVERS_HELP}", pytrace=False)
    try:
        with urllib.request.urlopen(url.rstrip("/") + health, timeout=5) as response:
            response.read()
    except OSError as exc:
        pytest.fail(f"{name} is not reachable at {url} ({exc}); {SERVERS_HELP}", pytrace=False)
    return url.rstrip("/")


@pytest.fixture(scope="session")
def aimock_url() -> str:
    """The root URL of the aimock server (no /v1)."""
    return _server_url("AGENTLOOP_AIMOCK_URL", "/__aimock/health", "aimock")


@pytest.fixture(scope="session")
def llama_url() -> str:
    """The root URL of the llama.cpp server (no /v1)."""
    return _server_url("AGENTLOOP_LLAMA_URL", "/health", "llama.cpp")


PI_PACKAGES = (
    "@earendil-works/pi-agent-core@1.6.0",  # brings @earendil-works/pi-ai 1.6.0
    "pi-agent-core-0.73.1@npm:@mariozechner/pi-agent-core@0.73.1",
    "pi-ai-1.6.1@npm:@earendil-works/pi-ai@1.6.1",  # the providers the recorded streams are compared with
)
PI_AI = "pi-ai-1.6.1"
"""The folder (in the cache's node_modules) of the pi-ai whose providers the recordings are compared with."""
PI_CACHE = Path(os.environ.get("AGENTLOOP_PI_CACHE", Path.home() / ".cache" / "agentloop" / "pi-npm"))


@pytest.fixture(scope="session")
def pi_node_modules() -> Path:
    """The `node_modules` of the TypeScript reference (pi-agent-core 1.6.0 with pi-ai 1.6.0,
    pi-agent-core 0.73.1, and pi-ai 1.6.1 as `pi-ai-1.6.1`), installed by npm into a cache
    directory outside the repository the first time, as the MCP tests install server-everything."""
    modules = PI_CACHE / "node_modules"
    entries = [
        modules / "@earendil-works" / "pi-agent-core",
        modules / "@earendil-works" / "pi-ai",
        modules / "pi-agent-core-0.73.1",
        modules / PI_AI,
    ]
    if not all((entry / "dist" / "index.js").exists() for entry in entries):
        npm = shutil.which("npm")
        assert npm is not None, "the pi reference tests need Node 20+ and npm on PATH"
        PI_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(PI_CACHE), "--no-audit", "--no-fund", "--silent", *PI_PACKAGES],
            check=True,
            timeout=300,
        )
    assert all((entry / "dist" / "index.js").exists() for entry in entries), f"npm did not install into {PI_CACHE}"
    return modules


# --- an agent turn against aimock ------------------------------------------------------------

SERVED_APIS = ["openai-completions", "openai-responses", "anthropic-messages"]
"""The APIs both test servers (aimock and llama.cpp) answer."""
AIMOCK_HTTP = HTTPOptions(backoff=0.01, max_backoff=0.05, idle_timeout=30)
"""Quick retries, and room for a loaded machine between events."""


async def _weather(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> str:
    return f"sunny in {params['location']}"


async def aimock_weather_turn(model: Model, stream_fn: StreamFn, api_key: str, **agent_options: Any) -> Agent:
    """An agent with the weather tool asks aimock for the weather in Paris: the events keep the
    contract, both calls are answered and the turn ends with aimock's closing text. Returns the
    agent for the caller's own checks."""
    tool = AgentTool(
        name=Weather.name, description=Weather.description, parameters=Weather.parameters, execute=_weather
    )
    events: list[Any] = []
    agent = Agent(model=model, tools=[tool], stream_fn=stream_fn, get_api_key=lambda provider: api_key, **agent_options)
    agent.subscribe(lambda event, signal: events.append(event))
    with anyio.fail_after(30):
        await agent.prompt("What is the weather in Paris?")
    check_events(events)
    roles = [m.role for m in agent.state.messages]
    assert roles == ["user", "assistant", "toolResult", "toolResult", "assistant"], agent.state.error_message
    assert as_assistant(agent.state.messages[-1]).text == "It is sunny in both places."
    return agent


# --- recorded streams through pi-ai's providers and ours ------------------------------------

Result = tuple[str, bool, bool, list[dict[str, Any]], list[dict[str, Any]]]
"""(recording id, final messages equal, event sequences equal, pi-ai's events, ours)."""
REPLAY_CONTEXT = Context(system_prompt="You are terse.", messages=[UserMessage(content="hello", timestamp=0)])
"""The context every recording is replayed with, on both sides."""


def replay_model(api: str, **changes: Any) -> Model:
    """The model a recording is replayed with through our providers (its requests never leave
    the process: `our_events` answers them)."""
    return Model(
        id="replay", name="replay", api=api, provider="replay", base_url="http://replay/v1", reasoning=True, **changes
    )


def event_data(event: AssistantMessageEvent) -> dict[str, Any]:
    """An event as JSON without its partial message, a tool call's arguments so far kept (as
    pi-ai's replay script writes its events)."""
    data = to_json(event)
    partial = data.pop("partial", None)
    if data["type"] == "toolcall_delta":
        data["partialArguments"] = partial["content"][data["contentIndex"]]["arguments"]
    return data


async def our_events(
    stream_fn: Callable[..., Any], model: Model, body: bytes, content_type: str = "text/event-stream"
) -> list[dict[str, Any]]:
    """What one of our stream functions emits for a recorded body (`event_data` of each event)."""
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": content_type}, content=body)
    )
    options = StreamOptions(signal=AbortSignal(), api_key="sk-replay")
    async with httpx.AsyncClient(transport=transport) as client:
        stream = stream_fn(model, REPLAY_CONTEXT, options, http=HTTPOptions(max_retries=0), client=client)
        async with stream as events:
            return [event_data(event) async for event in events]


def _replay_app(bodies: Mapping[str, bytes], content_type: bytes) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        while (await receive()).get("more_body"):
            pass
        body = bodies.get(scope["path"].strip("/").split("/")[0])
        status = 200 if body is not None else 404
        headers = [(b"content-type", content_type if body is not None else b"text/plain")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body or b"no such recording"})

    return app


def replay_server(bodies: Mapping[str, bytes], content_type: bytes = b"text/event-stream") -> Any:
    """A loopback server answering `/{id}/...` with the body of recording `id` (an async context
    manager yielding its URL)."""
    return served(_replay_app(bodies, content_type))


async def pi_events(
    script: Path,
    bodies: Mapping[str, bytes],
    requests: Callable[[str], list[dict[str, Any]]],
    node_modules: Path,
    content_type: bytes = b"text/event-stream",
) -> dict[str, list[dict[str, Any]]]:
    """What pi-ai's providers emit for each recording: `script` (Node) reads `requests(url)` (the
    replay server's URL) on stdin and writes one line of events per recording."""
    async with replay_server(bodies, content_type) as url:
        done = await anyio.run_process(
            ["node", str(script)],
            input=json.dumps(requests(url)).encode(),
            env={**os.environ, "PI_AI": PI_AI, "NODE_PATH": str(node_modules)},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    return {line["id"]: line["events"] for line in lines}


def agreement(
    case_id: str,
    theirs: list[dict[str, Any]],
    ours: list[dict[str, Any]],
    final: Callable[[list[dict[str, Any]]], Any],
    sequence: Callable[[list[dict[str, Any]]], Any],
) -> Result:
    """How one recording's events compare: final messages and event sequences."""
    return (case_id, final(theirs) == final(ours), sequence(theirs) == sequence(ours), theirs, ours)


def print_differences(
    results: Sequence[Result],
    final: Callable[[list[dict[str, Any]]], Any],
    sequence: Callable[[list[dict[str, Any]]], Any],
) -> None:
    """The measurement a differential module prints when run: counts, then every difference."""
    finals = sum(r[1] for r in results)
    sequences = sum(r[2] for r in results)
    print(f"{len(results)} recordings: final messages agree on {finals}, event sequences on {sequences}")
    for case_id, same_final, same_events, theirs, ours in results:
        if same_final and same_events:
            continue
        print(f"\n== {case_id} (final {'=' if same_final else '!='}, events {'=' if same_events else '!='})")
        if not same_final:
            print("  pi-ai:", json.dumps(final(theirs))[:700])
            print("  ours: ", json.dumps(final(ours))[:700])
        if not same_events:
            a, b = sequence(theirs), sequence(ours)
            for i in range(max(len(a), len(b))):
                x = a[i] if i < len(a) else None
                y = b[i] if i < len(b) else None
                if x != y:
                    print(f"  first difference at event {i}:")
                    print(f"    pi-ai: {json.dumps(x)[:300]}\n    ours:  {json.dumps(y)[:300]}")
                    print(f"  pi-ai types: {[e['type'] for e in a]}\n  our types:   {[e['type'] for e in b]}")
                    break
