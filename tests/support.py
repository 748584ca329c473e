"""The scripted model's `Model`, typed accessors for tests (what a run ended with, the text of a
content block), a model stream that waits after its terminal event, loopback serving (`free_port`, `served`), and child
processes (`run_python`, `stop`)."""

from __future__ import annotations

import functools
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio

import agentloop as al

SCRIPTED = al.Model(id="scripted-1", name="Scripted", api="scripted", provider="test")
"""The `Model` of the tests' scripted runs."""


def agent_end(events: Sequence[al.AgentEvent]) -> al.AgentEnd:
    """The run's last event, which must be its `agent_end`."""
    end = events[-1]
    assert isinstance(end, al.AgentEnd), f"the run ended with {end.type}, not agent_end"
    return end


def last_assistant(events: Sequence[al.AgentEvent]) -> al.AssistantMessage:
    """The last message of the run, which must be an assistant message."""
    message = agent_end(events).messages[-1]
    assert isinstance(message, al.AssistantMessage), f"the run ended with a {message.role} message"
    return message


def as_assistant(message: al.AgentMessage) -> al.AssistantMessage:
    """`message`, which must be an assistant message."""
    assert isinstance(message, al.AssistantMessage), f"expected an assistant message, got a {message.role} message"
    return message


def tool_results(events: Sequence[al.AgentEvent]) -> list[al.ToolResultMessage]:
    """The tool-result messages the run added, in order."""
    return [m for m in agent_end(events).messages if isinstance(m, al.ToolResultMessage)]


def text(block: object) -> str:
    """The text of a content block, which must be a text block."""
    assert isinstance(block, al.TextContent), f"expected a text block, got {type(block).__name__}"
    return block.text


async def no_updates(partial: al.AgentToolResult) -> None:
    """An `on_update` for a test that calls a tool's `execute` itself and ignores its progress."""


async def run_tool(tool: al.AgentTool, arguments: Mapping[str, Any]) -> al.AgentToolResult:
    """Validate `arguments` and call the tool's `execute` directly, as the loop would (its progress
    updates are ignored); the tool must answer with an `AgentToolResult`."""
    return as_tool_result(await tool.execute("c1", tool.validate(arguments), al.AbortSignal(), no_updates))


def as_tool_result(result: al.AgentToolResult | str) -> al.AgentToolResult:
    """What a tool's `execute` returned, which must be an `AgentToolResult`, not a bare string."""
    assert isinstance(result, al.AgentToolResult), f"the tool returned a {type(result).__name__}"
    return result


@contextmanager
def logged(log: list[str], tool_call_id: str) -> Iterator[None]:
    """Log a tool call's `start`, then its `end`, or `cancelled` if it was cancelled."""
    log.append(f"start {tool_call_id}")
    try:
        yield
    except anyio.get_cancelled_exc_class():
        log.append(f"cancelled {tool_call_id}")
        raise
    log.append(f"end {tool_call_id}")


class WaitsAfterDone:
    """A model stream that is not a generator: a short answer ("hi"), then it waits for more
    forever (a queue that nobody fills); `closed` records that it was closed."""

    def __init__(self) -> None:
        builder = al.AssistantMessageBuilder(api="faux")
        script = [builder.start(), builder.text_start(), builder.text_delta("hi"), builder.text_end()]
        self._events: list[Any] = [*script, builder.done("stop")]
        self.closed = False

    def __aiter__(self) -> WaitsAfterDone:
        return self

    async def __anext__(self) -> Any:
        if self._events:
            return self._events.pop(0)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        self.closed = True


async def text_then_waits(
    model: al.Model, text: str, on_close: Callable[[], object]
) -> AsyncIterator[al.AssistantMessageEvent]:
    """A model stream that starts a text block with `text`, then waits forever; `on_close()` is
    called when it is closed."""
    builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
    try:
        yield builder.start()
        yield builder.text_start()
        yield builder.text_delta(text)
        await anyio.sleep_forever()
    finally:
        on_close()


def free_port() -> int:
    """A loopback port free at the time of the call (nothing listens there)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def served(app: Any, *, port: int = 0) -> AsyncIterator[str]:
    """Serve the ASGI `app` with hypercorn on a loopback port (a free one by default) for the block;
    yields the base URL. The socket listens before the block starts: no request races the server."""
    import sniffio
    from hypercorn.config import Config

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # connections queue until hypercorn accepts them
    port = sock.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.graceful_timeout = 1.0
    config.accesslog = None
    if sniffio.current_async_library() == "trio":
        from hypercorn.trio import serve
    else:
        from hypercorn.asyncio import serve  # type: ignore[assignment]
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(serve, app, config, shutdown_trigger=stop.wait))
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop.set()


def stop(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """End a child process: terminated, and killed if it has not exited within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_python(*args: str, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a fresh interpreter with `args` to its end; its output is captured as text."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, **kwargs)


def loaded_by_import(imports: str, modules: Sequence[str], *, before: str = "sys") -> list[str]:
    """Which of `modules` a fresh interpreter has loaded after `import {before}` and then
    `import {imports}`, not counting those `before` loaded already."""
    code = (
        f"import sys, {before}\n"
        "base = set(sys.modules)\n"
        f"import {imports}\n"
        f"print(','.join(m for m in {tuple(modules)!r} if m in sys.modules and m not in base))"
    )
    out = run_python("-c", code, check=True)
    return [m for m in out.stdout.strip().split(",") if m]
