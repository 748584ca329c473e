"""The default stream function reaches agentloop.providers for the built-in APIs.

Rename to test_default_stream.py once `_default_stream.default_stream_fn` dispatches the built-in
APIs to `agentloop.providers.stream_simple` (it fails before that change).
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx
import pytest

from agentloop import Agent, Model

from ..support import as_assistant


async def test_the_default_stream_function_uses_the_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentloop.providers import _http

    body = (
        'data: {"choices":[{"index":0,"delta":{"content":"Hi there"}}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    )
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    monkeypatch.setattr(_http, "_client", lambda http: httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    agent = Agent(model=Model(id="m", api="openai-completions", provider="local", base_url="http://local/v1"))
    with anyio.fail_after(10):
        await agent.prompt("hello")
    assert as_assistant(agent.state.messages[-1]).text == "Hi there"
    assert json.loads(seen[0].content)["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


def test_importing_agentloop_still_loads_no_http_stack() -> None:
    import subprocess

    code = "import sys, agentloop; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
