"""The command line's terminal output: the answer on stdout, everything for the person on stderr.

`Printer` turns the agent's events into that output (or JSON lines), with a spinner while the
agent waits and a summary at the end.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

import anyio

from .._types._abort import AbortSignal
from .._types._events import (
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnStart,
)
from .._types._messages import AssistantMessage, TextContent
from .._wire._encode import dumps

__all__ = ("PROMPT_MARKER", "Printer", "one_line", "spinner")

PROMPT_MARKER = "> "

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab: model text, tool results and error messages are shown
without them, so none can move the cursor, erase the screen or send an escape sequence (OSC 52
writes the clipboard). The printer's own colours and spinner are added after."""


@dataclass
class Printer:
    """Turns events into terminal output (or JSON lines), a spinner and a summary.

    `out` gets the answer's text alone (or, with `jsonl`, every event as a JSON line); `err` gets
    everything for the person: the banner, the spinner, reasoning, tool lines, notes and the
    summary. Everything runs in the event loop's thread, so the spinner line is erased before
    anything else is written: no chunk of the answer is drawn over. A closed `out` (a reader such
    as `head` stopped) stops the output quietly and calls `on_closed`.
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
    tokens_cached: int = 0
    tokens_out: int = 0
    estimated: bool = False
    cost: float = 0.0
    tools_used: int = 0
    closed: bool = False
    started: float = field(default_factory=time.monotonic)
    status: str = ""
    context: str = ""
    """How full the model's context is (`context 2.1k/4.1k (52%)`), shown beside the status."""
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
        elif isinstance(event, TurnStart) or (isinstance(event, MessageStart) and event.message.role == "assistant"):
            self.status = "waiting for the model"  # from the turn's start: a stream may wait before its start
            self._chunks = 0
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            self._end_line()
            message = event.message
            self.turns += 1
            self.tokens_in += message.usage.input + message.usage.cache_read + message.usage.cache_write
            self.tokens_cached += message.usage.cache_read
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
        """A line for the person, on stderr."""
        self._human(line)

    def prompt_marker(self) -> None:
        """Show that the chat waits for a line (the person's Enter ends the line)."""
        self._write(self.err, PROMPT_MARKER)

    def spin(self) -> None:
        """Draw the next spinner frame, if the agent is waiting and the cursor is at a line start."""
        if self.status and self._column == 0 and not self.closed:
            frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            line = f"{self.status} · {self.context}" if self.context else self.status
            self._raw_err(f"\r\x1b[2m{frames[self._frame % len(frames)]} {line}\x1b[0m\x1b[K")
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
        """The answer's text on `out`, the reasoning on `err`, each block starting on a line of its own."""
        if self.jsonl:
            return
        text = _CONTROLS.sub("", text)
        if kind != self._block:
            self._end_line()
        if self._column == 0:  # the model's leading newlines would leave blank lines
            text = text.lstrip("\n")
            if not text:
                return
        if kind != self._block:
            self._block = kind
            if kind == "thinking" and not self.color:
                text = "(thinking) " + text
        if kind == "thinking" and self.color:
            text = f"\x1b[2m{text}\x1b[0m"
        self._write(self.err if kind == "thinking" else self.out, text)
        self._column += len(text)

    def _end_line(self) -> None:
        if self._column and not self.jsonl:
            self._write(self.err if self._block == "thinking" else self.out, "\n")
        self._column = 0
        self._block = ""

    def _human(self, line: str, style: str = "") -> None:
        line = _CONTROLS.sub("", line)
        self._end_line()
        if self.color and style:
            line = f"\x1b[{style}m{line}\x1b[0m"
        self._write(self.err, line + "\n")

    def summary(self) -> str:
        seconds = time.monotonic() - self.started
        cached = f" ({self.tokens_cached} cached)" if self.tokens_cached else ""
        context = f", {self.context}" if self.context else ""
        return (
            f"{self.turns} turn{'s' if self.turns != 1 else ''}, {self.tokens_in} tokens in{cached}, "
            f"{'~' if self.estimated else ''}{self.tokens_out} out, ${self.cost:.4f}, {seconds:.1f} s{context}"
        )


async def spinner(printer: Printer) -> None:
    """A one-line progress indicator on the terminal while the agent waits (model or tool)."""
    while True:
        await anyio.sleep(0.1)
        printer.spin()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: str) -> str:
    """`text` with every run of whitespace (newlines too) one space."""
    return " ".join(text.split())
