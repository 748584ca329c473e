"""An agent answering through the tools of an MCP server (the reference server-everything).

    python examples/mcp_everything.py          # stdio: `npx -y @modelcontextprotocol/server-everything`
    python examples/mcp_everything.py --url http://127.0.0.1:3001/mcp   # a server already listening
    python examples/mcp_everything.py --command node --args path/to/server-everything/dist/index.js stdio

Needs the `[mcp]` extra (`pip install 'anyio-agentloop[mcp]'`) and, for the default, Node with
npx. A scripted model stands in for an LLM (it calls `get-sum`, then answers with what the tool
said); pass a provider's stream function in real code.
"""

from __future__ import annotations

import argparse
import sys

import anyio

import agentloop as al
from agentloop.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHTTP
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall


async def main(server: MCPServer) -> None:
    model = ScriptedModel(
        [
            Response(content=[ScriptedToolCall("call-1", "get-sum", {"a": 2, "b": "3"})]),
            "The server says 2 + 3 = 5.",
        ]
    )
    async with server:
        tools = await server.list_tools()
        print(f"{server!r}: {len(tools)} tools ({', '.join(tool.name for tool in tools)})")
        context = al.AgentContext(system_prompt="Use the tools.", tools=tools)
        config = al.AgentLoopConfig(
            model=al.Model(id="scripted", api="scripted"),
            prepare_next_turn=server.prepare_next_turn,  # the server's tool-list changes reach the next turn
        )
        prompt = al.UserMessage(content="What is 2 + 3? Ask the server.")
        async with al.agent_loop([prompt], context, config, stream_fn=model) as events:
            async for event in events:
                if event.type == "tool_execution_end":
                    text = " ".join(block.text for block in event.result.content if isinstance(block, al.TextContent))
                    print(f"tool {event.tool_name}: {text}")
                elif event.type == "message_end" and isinstance(event.message, al.AssistantMessage):
                    answer = " ".join(b.text for b in event.message.content if isinstance(b, al.TextContent))
                    if answer:
                        print(f"assistant: {answer}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a streamable HTTP MCP endpoint")
    parser.add_argument("--command", default="npx")
    parser.add_argument("--args", nargs="*", default=["-y", "@modelcontextprotocol/server-everything", "stdio"])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    options = parser.parse_args()
    if options.url:
        server: MCPServer = MCPServerStreamableHTTP(options.url)
    else:
        server = MCPServerStdio(options.command, options.args, errlog=sys.stderr)
    anyio.run(main, server, backend=options.backend)
