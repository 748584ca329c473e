"""A browser chat with an agent over Server-Sent Events (agentloop's AgentSSEApp).

    python examples/sse_chat.py [--port 8000] [--backend asyncio|trio]

then open http://127.0.0.1:8000/ . A scripted model stands in for an LLM (it streams text and
calls the `add` tool); pass a provider's stream function to `Agent` in real code. Serving needs
an ASGI server: hypercorn is used here (`pip install hypercorn`); uvicorn works as well
(`uvicorn examples.sse_chat:app`). `/report` collects what the page saw (for the browser test).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
from agentloop.serve import AgentSSEApp
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall

PAGE = Path(__file__).with_name("sse_chat.html")
MODEL = al.Model(id="scripted-demo", api="scripted", provider="demo")


@al.tool
async def add(a: int, b: int) -> str:
    """Add two integers."""
    await anyio.sleep(0.2)
    return str(a + b)


def demo_stream() -> al.StreamFn:
    """A scripted model: first a streamed thought and an `add` call, then a streamed answer."""
    script = [
        Response(
            content=[
                ScriptedText(["Let me ", "add ", "those ", "up."]),
                ScriptedToolCall("call-1", "add", {"a": 2, "b": 3}),
            ],
            chunk_delay=0.05,
        ),
        Response(content=[ScriptedText(["2 ", "+ ", "3 ", "= ", "5"])], chunk_delay=0.05),
    ]
    calls = [0]

    def stream(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        response = script[calls[0] % len(script)]
        calls[0] += 1
        return ScriptedModel([response])(model, context, options)

    return stream


def demo_agent(session_id: str) -> al.Agent:
    return al.Agent(model=MODEL, system_prompt="You add numbers.", tools=[add], stream_fn=demo_stream())


def build_app(
    on_report: Callable[[Any], None] | None = None,
) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """The page at `/`, `/report` for the test, everything else served by an AgentSSEApp."""
    agents = AgentSSEApp(demo_agent)
    page = PAGE.read_bytes()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in ("/", "/index.html"):
            headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(page)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": page})
        elif scope["type"] == "http" and scope["path"] == "/report":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            if on_report is not None:
                on_report(json.loads(body))
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
        else:
            await agents(scope, receive, send)

    return app


app = build_app()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    try:
        from hypercorn.config import Config
    except ImportError:
        raise SystemExit(
            "serving needs an ASGI server: pip install hypercorn (or run uvicorn examples.sse_chat:app)"
        ) from None
    config = Config()
    config.bind = [f"127.0.0.1:{args.port}"]
    if args.backend == "trio":
        from hypercorn.trio import serve
    else:
        from hypercorn.asyncio import serve  # type: ignore[assignment]
    print(f"open http://127.0.0.1:{args.port}/")
    anyio.run(functools.partial(serve, app, config), backend=args.backend)


if __name__ == "__main__":
    main()
