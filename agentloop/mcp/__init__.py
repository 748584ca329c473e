"""Tools from MCP servers (the `[mcp]` extra: `pip install 'anyio-agentloop[mcp]'`).

    async with MCPServerStdio("npx", ["-y", "@modelcontextprotocol/server-everything"]) as server:
        context = AgentContext(tools=await server.list_tools())
        config = AgentLoopConfig(model=model, prepare_next_turn=server.prepare_next_turn)
        async with agent_loop([prompt], context, config) as events: ...

A server is an async context manager: entering it starts the transport (a subprocess for
`MCPServerStdio`, an HTTP session for `MCPServerStreamableHTTP`) and initializes the MCP
session, within `init_timeout` (30 s; TimeoutError after it, ConnectionError when the server
cannot be started or reached); leaving it closes both. Use its tools only inside that block.
`load_servers(path)` reads several from an `mcpServers` JSON file (`MCPServers`).

What the tools do:

* the tool's `inputSchema` becomes the `AgentTool`'s JSON schema and arguments are coerced and
  validated with agentloop's rules before the request is sent. The schema comes from the server,
  so it is untrusted: a `$ref` to anything outside the schema is never fetched (it is reported as
  unresolvable), and `pattern` / `patternProperties` keywords are left out of the local check
  (no regular expression from a server runs here; the server still checks its own patterns).
  Nor is a result's `structuredContent` checked against the tool's `outputSchema`;
* results map to content blocks: text and images as they are, other blocks (audio, resources,
  links) as a line of text; `structuredContent` becomes the result's `details`;
* every failure is an error result, never an exception out of the run: an `isError` result, a
  protocol error, no answer within `timeout` (300 s), an answer the SDK cannot parse (it drops
  it: the calls in flight on that server end with an error saying so), an answer too long (over
  `max_message_bytes` on stdio, 16 MiB by default; over the SDK's 1 MiB per server-sent event on
  HTTP), a server that dies or a
  connection that breaks, mid-call or between calls (this call and the later ones say the
  connection was lost; open the server again to reconnect);
* progress notifications become `on_update` calls (the text is the progress message, the
  details `{"progress", "total", "message"}`);
* an abort of the run cancels the request at once (the SDK then tells the server with
  `notifications/cancelled`), and the call ends with "Operation aborted";
* tools the server runs only as tasks (`execution.taskSupport: "required"`) are not offered;
  `tool_filter` leaves out others, and `wrap_call` runs around each call (it can set the
  request's `_meta`).

What the server may ask of the client, each offered only when given: `sampling` (a `Sampling`:
an agentloop model and stream function answer `sampling/createMessage`, at most `max_calls`
requests per connection, 50 by default, each capped at `max_tokens`, 4096 by default),
`elicitation` (a callback that asks the user), `roots` (directories). Its log messages go to the `agentloop.mcp`
logger. `instructions`, `list_resources` / `read_resource` and `list_prompts` / `get_prompt`
read the rest; `session` is the SDK's session for anything else.

Tool-list changes: when the server sends `notifications/tools/list_changed`, `tools_changed`
becomes true and the next `list_tools()` asks the server again (otherwise it returns the list it
already has). A run reads its tools from its context, so a change reaches the model between
turns: pass `prepare_next_turn=server.prepare_next_turn` (it swaps this server's tools in the
next turn's context), or read `list_tools()` again between runs.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("agentloop.mcp needs the MCP SDK: pip install 'anyio-agentloop[mcp]'") from exc

from ._config import MCPServers, load_servers
from ._results import mcp_result
from ._sampling import Sampling
from ._server import DEFAULT_INIT_TIMEOUT, DEFAULT_TIMEOUT, MCPCall, MCPServer, WrapCall
from ._transports import DEFAULT_MAX_MESSAGE_BYTES, MCPServerStdio, MCPServerStreamableHTTP

__all__ = (
    "DEFAULT_INIT_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT",
    "MCPCall",
    "MCPServer",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "MCPServers",
    "Sampling",
    "WrapCall",
    "load_servers",
    "mcp_result",
)
