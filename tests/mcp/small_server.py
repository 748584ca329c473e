"""A small MCP server made with the `mcp` SDK, for what server-everything cannot show.

Run as `python small_server.py` (stdio) or `python small_server.py http PORT` (streamable HTTP).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import SamplingMessage, TextContent, ToolListChangedNotification
from pydantic import BaseModel, Field

server = MCPServer("agentloop-test-server")
cancelled: list[str] = []


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers (a structured result)."""
    return Sum(total=a + b, terms=[a, b])


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason as the message."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Reports progress once a step, then answers."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"counted to {steps}"


@server.tool()
async def slow(label: str) -> str:
    """Sleeps for a minute unless cancelled (cancellations are counted)."""
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        cancelled.append(label)
        raise
    return "woke up"


@server.tool()
def where(variable: str) -> str:
    """The server's working directory and the value of an environment variable, on two lines."""
    return f"{os.getcwd()}\n{os.environ.get(variable, '<unset>')}"


@server.tool()
def cancellations() -> str:
    """The labels of the `slow` calls that were cancelled, comma-separated."""
    return ",".join(cancelled)


@server.tool()
def match(word: Annotated[str, Field(pattern=r"^(a+)+$")]) -> str:
    """Takes a word that must match a pattern with catastrophic backtracking in a naive engine."""
    return f"matched {word}"


@server.tool()
def huge(megabytes: int) -> str:
    """A text of `megabytes` MiB."""
    return "x" * (megabytes << 20)


@server.tool()
async def sample(times: int, ctx: Context) -> str:
    """Asks the client's model `times` times for up to a million tokens; answers the models that
    answered and the refusals, as JSON."""
    answered: list[str] = []
    refused: list[str] = []
    question = SamplingMessage(role="user", content=TextContent(type="text", text="Say hi."))
    for _ in range(times):
        try:
            result = await ctx.request_context.session.create_message(
                [question], max_tokens=1_000_000, related_request_id=ctx.request_id
            )
        except Exception as exc:
            refused.append(str(exc))
        else:
            answered.append(result.model)
    return json.dumps({"answered": answered, "refused": refused})


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and tells the client that the tool list changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"A tool added at run time: {name}")
    # The notification of protocol eras before 2026-07-28; tied to this request so that over
    # streamable HTTP it rides the request's own stream and arrives before the result.
    notification = ToolListChangedNotification()
    await ctx.request_context.session.send_notification(notification, related_request_id=ctx.request_id)
    return f"added {name}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
