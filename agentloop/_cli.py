"""`python -m agentloop`: a real agent in the terminal, offline by default.

    python -m agentloop run "What is 17 * 23?"      one prompt, then exit
    python -m agentloop chat                         a conversation; a line typed while the agent
                                                     works steers it, lines queue as follow-ups
    --model provider:id  --base-url URL  --root DIR  --jsonl  --thinking show|hide  --max-turns N

With no model and no API key, the embedded model runs: llama.cpp's server (the `local` extra) with
SmolLM2-135M-Instruct on loopback, started and stopped by the command. Exit codes: 0 success,
1 the model failed, 2 bad usage, 130 aborted (Ctrl-C; a second Ctrl-C quits at once).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import anyio
from anyio.abc import TaskStatus

from ._abort import AbortSignal
from ._agent import Agent
from ._cli_tools import builtin_tools
from ._codec import dumps
from ._config import StreamFn
from ._events import (
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from ._types import AssistantMessage, Model, TextContent

__all__ = ("main",)

EXIT_OK, EXIT_MODEL_ERROR, EXIT_USAGE, EXIT_ABORTED = 0, 1, 2, 130
SYSTEM_PROMPT = (
    "You are a helpful assistant running in a terminal. Answer briefly. You can read files and list "
    "folders inside the user's root folder, calculate, and tell the time with your tools."
)
DEFAULT_MODELS = {"OPENAI_API_KEY": "openai:gpt-4o-mini", "ANTHROPIC_API_KEY": "anthropic:claude-haiku-4-5"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentloop", description="Run an LLM agent with file, calculator and clock tools."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="answer one prompt and exit")
    run.add_argument("prompt", help="what to ask")
    commands.add_parser("chat", help="a conversation (type while the agent works to steer it)")
    for sub in (run, commands.choices["chat"]):
        sub.add_argument("--model", help="provider:model_id (default: the embedded local model)")
        sub.add_argument("--base-url", help="base URL of an OpenAI-compatible server (vLLM, Ollama, ...)")
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


@dataclass
class Printer:
    """Turns events into terminal output (or JSON lines) and a summary."""

    out: TextIO
    err: TextIO
    jsonl: bool = False
    show_thinking: bool = True
    color: bool = False
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    tools_used: int = 0
    started: float = field(default_factory=time.monotonic)
    status: str = ""
    _column: int = 0
    _block: str = ""

    def listener(self, event: AgentEvent, signal: AbortSignal) -> None:
        if self.jsonl:
            self.out.write(dumps(event) + "\n")
            self.out.flush()
        if isinstance(event, MessageUpdate):
            inner = event.assistant_message_event
            if inner.type == "text_delta":
                self._write_block("text", inner.delta)
            elif inner.type == "thinking_delta" and self.show_thinking:
                self._write_block("thinking", inner.delta)
            self.status = ""
        elif isinstance(event, MessageStart) and event.message.role == "assistant":
            self.status = "waiting for the model"
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            self._end_line()
            message = event.message
            self.turns += 1
            self.tokens_in += message.usage.input
            self.tokens_out += message.usage.output
            self.cost += message.usage.cost.total
            if message.stop_reason == "error":
                self._human(f"error: {message.error_message}", style="31")
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

    def _write_block(self, kind: str, text: str) -> None:
        if self.jsonl:
            return
        if kind != self._block:
            self._end_line()
            self._block = kind
            if kind == "thinking" and not self.color:
                text = "(thinking) " + text
        if kind == "thinking" and self.color:
            text = f"\x1b[2m{text}\x1b[0m"
        self.out.write(text)
        self.out.flush()
        self._column += len(text)

    def _end_line(self) -> None:
        if self._column and not self.jsonl:
            self.out.write("\n")
            self.out.flush()
        self._column = 0
        self._block = ""

    def _human(self, line: str, style: str = "") -> None:
        stream = self.err if self.jsonl else self.out
        self._end_line()
        if self.color and style:
            line = f"\x1b[{style}m{line}\x1b[0m"
        stream.write(line + "\n")
        stream.flush()

    def summary(self) -> str:
        seconds = time.monotonic() - self.started
        return (
            f"{self.turns} turn{'s' if self.turns != 1 else ''}, {self.tokens_in} tokens in, "
            f"{self.tokens_out} out, ${self.cost:.4f}, {seconds:.1f} s"
        )


async def spinner(printer: Printer, stream: TextIO) -> None:
    """A one-line progress indicator on the terminal while the agent waits (model or tool)."""
    frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    shown = False
    i = 0
    while True:
        await anyio.sleep(0.1)
        if printer.status and printer._column == 0:
            stream.write(f"\r\x1b[2m{frames[i % len(frames)]} {printer.status}\x1b[0m\x1b[K")
            stream.flush()
            shown = True
            i += 1
        elif shown:
            stream.write("\r\x1b[K")
            stream.flush()
            shown = False


@contextlib.asynccontextmanager
async def open_model(
    args: argparse.Namespace, say: Callable[[str], None]
) -> AsyncIterator[tuple[Model, StreamFn, bool]]:
    """The model, its stream function, and whether it is the embedded local model."""
    from . import providers

    spec = args.model
    if spec is None and args.base_url is None:
        spec = next((model for key, model in DEFAULT_MODELS.items() if os.environ.get(key)), None)
    if spec is None and args.base_url is None:
        from ._local_model import local_model_server

        say("Using the embedded local model SmolLM2-135M-Instruct (llama.cpp on loopback).")
        say("It is tiny: expect tiny answers, and it does not call tools reliably.")
        async with local_model_server(say=say) as url:
            yield providers.local_model(url), providers.stream_simple, True
        return
    if spec is None:
        yield providers.openai_compatible_model("default", args.base_url), providers.stream_simple, False
        return
    if ":" not in spec:
        raise SystemExit(f"agentloop: --model must be provider:model_id, got {spec!r}")
    provider, model_id = spec.split(":", 1)
    model = providers.get_model(provider, model_id)
    if args.base_url:
        from dataclasses import replace

        model = replace(model, base_url=args.base_url)
    say(f"Using {provider}:{model.id}.")
    yield model, providers.stream_simple, False


async def run_cli(args: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    printer = Printer(out, err, jsonl=args.jsonl, show_thinking=args.thinking != "hide", color=out.isatty())

    def say(line: str) -> None:
        (err if args.jsonl else out).write(line + "\n")
        (err if args.jsonl else out).flush()

    root = Path(args.root)
    if not await anyio.Path(root).is_dir():
        err.write(f"agentloop: --root {args.root!r} is not a folder\n")
        return EXIT_USAGE
    code = EXIT_OK
    async with open_model(args, say) as (model, stream_fn, local):
        agent = Agent(
            model=model,
            system_prompt=SYSTEM_PROMPT,
            tools=builtin_tools(root),
            stream_fn=stream_fn,
            max_turns=args.max_turns,
            max_tokens=args.max_tokens or (160 if local else None),
            # The tiny embedded model often stops after reasoning: it reasons only when asked to.
            thinking_level="low" if local and args.thinking == "show" else "off",
            thinking_budgets={"low": 24} if local else None,
        )
        agent.subscribe(printer.listener)
        interrupts = Interrupts(agent, say)
        async with anyio.create_task_group() as tg:
            await tg.start(interrupts.watch, tg.cancel_scope)
            if err.isatty() and not args.jsonl:
                tg.start_soon(spinner, printer, err)
            if args.command == "run":
                await agent.prompt(args.prompt)
                code = _exit_code(agent, interrupts)
            else:
                code = await chat(agent, stdin, say, interrupts)
            tg.cancel_scope.cancel()
        if interrupts.quit:
            return EXIT_ABORTED
        if local and printer.tools_used == 0:
            say("(The tiny local model used no tool. With a real model, --model provider:id, the command uses them.)")
        say(printer.summary())
    return code


class Interrupts:
    """Ctrl-C aborts the run in progress (every tool answered); a second Ctrl-C quits."""

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
                    self.say("\n^C aborting (press Ctrl-C again to quit)")
                    self.agent.abort()
                else:
                    self.aborted = self.quit = True
                    scope.cancel()
                    return


async def chat(agent: Agent, stdin: TextIO, say: Callable[[str], None], interrupts: Interrupts) -> int:
    """Read lines: idle, a line is a prompt; while the agent works, it steers the current run."""
    say("Chat with the agent. A line typed while it works steers it. Ctrl-D quits.")
    code = EXIT_OK
    async with anyio.create_task_group() as tg:
        lines: list[str] = []
        wake = anyio.Event()
        finished = False

        async def read() -> None:
            nonlocal wake, finished
            while True:
                line = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
                if not line:
                    finished = True
                    wake.set()
                    return
                text = line.strip()
                if not text:
                    continue
                if agent.state.is_streaming:
                    from ._types import UserMessage

                    agent.steer(UserMessage(content=text))
                    say("(steering the current run)")
                else:
                    lines.append(text)
                    wake.set()

        tg.start_soon(read)
        while True:
            if not lines:
                if finished:
                    break
                await wake.wait()
                wake = anyio.Event()
                continue
            interrupts.aborted = False
            await agent.prompt(lines.pop(0))
            code = _exit_code(agent, interrupts)
        tg.cancel_scope.cancel()
    return code


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
    args = build_parser().parse_args(argv)
    if args.max_turns is not None and args.max_turns < 1:
        print("agentloop: --max-turns must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    backend = os.environ.get("AGENTLOOP_BACKEND", "asyncio")
    try:
        return anyio.run(run_cli, args, sys.stdin, sys.stdout, sys.stderr, backend=backend)
    except KeyboardInterrupt:
        return EXIT_ABORTED
    except RuntimeError as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return EXIT_MODEL_ERROR
