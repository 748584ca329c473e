"""Shared pieces of the session tests: tools, a scripted multi-turn run, a transcript checker, a
child process to SIGKILL, and a headless Chromium whose every process ends with the test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio
import anyio.abc

import agentloop as al
from agentloop.sessions import JSONLSessionStore, SessionStore, SQLiteSessionStore
from agentloop.testing import Response, ScriptedText, ScriptedThinking, ScriptedToolCall

from ..support import SCRIPTED

ROOT = Path(__file__).parents[2]
MODEL = SCRIPTED


@al.tool
async def add(a: int, b: int) -> str:
    """Add two integers (slowly, so a crash can land while it runs)."""
    await anyio.sleep(0.02)
    return str(a + b)


@al.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    await anyio.sleep(0.01)
    return text


TOOLS = [add, echo]


def step_script(step: int, chunk_delay: float = 0.004, prefix: str = "") -> list[Response]:
    """One prompt's worth of responses: parallel tool calls, a second tool turn, a final answer."""
    return [
        Response(
            content=[
                ScriptedThinking(["Let me ", "use ", "the tools."]),
                ScriptedText([f"Step {step}: ", "adding ", "and ", "echoing."]),
                ScriptedToolCall(f"{prefix}s{step}-a", "add", args_chunks=['{"a": ', f"{step}, ", '"b": 2}']),
                ScriptedToolCall(f"{prefix}s{step}-b", "echo", {"text": f"hello {step}"}),
            ],
            chunk_delay=chunk_delay,
        ),
        Response(content=[ScriptedToolCall(f"{prefix}s{step}-c", "echo", {"text": "again"})], chunk_delay=chunk_delay),
        Response(content=[ScriptedText(["All ", "done ", f"with step {step}."])], chunk_delay=chunk_delay),
    ]


def make_store(kind: str, root: Path) -> SessionStore:
    if kind == "sqlite":
        return SQLiteSessionStore(root / "sessions.db")
    return JSONLSessionStore(root / "sessions")


def check_transcript(messages: Sequence[al.AgentMessage], *, complete: bool) -> None:
    """Assert `messages` is a valid transcript (a valid prefix of one when not `complete`).

    Every tool result answers a call of the latest assistant message before it, at most once;
    every call of an assistant message is answered before the next assistant message (and, when
    `complete`, also for the last one).
    """
    open_calls: dict[str, str] = {}
    answered: set[str] = set()
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        assert isinstance(message, (al.UserMessage, al.AssistantMessage, al.ToolResultMessage, al.CustomMessage))
        if isinstance(message, al.AssistantMessage):
            assert not open_calls, f"message {i}: calls {sorted(open_calls)} unanswered before the next response"
            if message.stop_reason not in ("error", "aborted"):
                open_calls = {c.id: c.name for c in message.tool_calls}
                for call_id in open_calls:
                    assert call_id not in seen_ids, f"message {i}: tool call id {call_id!r} reused"
                    seen_ids.add(call_id)
            answered = set()
        elif isinstance(message, al.ToolResultMessage):
            call_id = message.tool_call_id
            assert call_id not in answered, f"message {i}: tool call {call_id!r} answered twice"
            assert call_id in open_calls, f"message {i}: result for unknown or closed call {call_id!r}"
            assert open_calls.pop(call_id) == message.tool_name
            answered.add(call_id)
    if complete:
        assert not open_calls, f"calls {sorted(open_calls)} unanswered at the end"


class Child:
    """A running child process and the lines it printed (`ready ...`, then `word N` lines)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.ready = anyio.Event()
        self._printed = anyio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self.lines.append(line.decode())
                if line.startswith(b"ready"):
                    self.ready.set()
            self._printed.set()
            self._printed = anyio.Event()

    def numbers(self, word: str) -> list[int]:
        """The numbers of the child's `word N` lines, in order."""
        return [int(line.split()[1]) for line in self.lines if line.startswith(f"{word} ")]

    async def wait_for(self, word: str, n: int) -> None:
        """Wait until the child's last `word N` line has N >= n."""
        while not self.numbers(word)[-1:] or self.numbers(word)[-1] < n:
            await self._printed.wait()


async def kill_child(
    module: str, *args: str, within: float, delay: float, until: tuple[str, int] | None = None
) -> Child:
    """Run `python -m module args`; once it is ready (and has printed `until`'s `word N` with N at
    least n), within `within` seconds, let it run `delay` seconds more and SIGKILL it."""
    command = [sys.executable, "-m", module, *args]
    async with await anyio.open_process(command, cwd=ROOT) as process:
        child = Child(process)
        async with anyio.create_task_group() as tg:
            tg.start_soon(child.read)
            with anyio.fail_after(within):
                await child.ready.wait()
                if until is not None:
                    await child.wait_for(*until)
            await anyio.sleep(delay)
            assert process.returncode is None, f"the child stopped by itself: {child.lines[-3:]}"
            process.send_signal(signal.SIGKILL)
            await process.wait()
    assert process.returncode == -signal.SIGKILL
    return child


def users(*texts: str) -> list[al.AgentMessage]:
    """A user message for each text."""
    return [al.UserMessage(content=text) for text in texts]


def texts(messages: Sequence[al.AgentMessage]) -> list[str]:
    """The texts of `messages`, each a user message with text content."""
    found: list[str] = []
    for message in messages:
        assert isinstance(message, al.UserMessage) and isinstance(message.content, str), message
        found.append(message.content)
    return found


async def stored_texts(store: SessionStore, session_id: str) -> list[str]:
    """The texts of the stored session's messages (see `texts`)."""
    return texts((await store.load(session_id)).messages)


async def append_texts(store: SessionStore, session_id: str, *appended: str) -> None:
    """Open the session, append a user message for each text, and close it."""
    async with store.open(session_id) as session:
        await session.append(users(*appended))


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@asynccontextmanager
async def chromium(url: str, home: Path) -> AsyncIterator[anyio.abc.Process]:
    """Headless Chromium showing `url`, its profile and crash database under `home`.

    On the way out every process of it is killed and waited for: the browser's process group
    (its zygotes, renderers, GPU and utility processes) and its crash handlers, which start
    sessions of their own but name `home` in their command lines.
    """
    assert CHROMIUM is not None, "needs Chromium: apt-get install chromium (.ci/run does it)"
    command = [
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={home / 'profile'}",
        url,
    ]
    env = {**os.environ, "XDG_CONFIG_HOME": str(home / "config")}  # the crash database's home
    async with await anyio.open_process(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    ) as browser:
        try:
            yield browser
        finally:
            with anyio.CancelScope(shield=True):  # also when the test failed or timed out
                await end_all(browser, str(home))


async def end_all(browser: anyio.abc.Process, home: str) -> None:
    """Kill the browser's process group and its crash handlers; wait until each has exited."""
    with suppress(ProcessLookupError):
        os.killpg(browser.pid, signal.SIGKILL)
    await browser.wait()
    pidfds: list[int] = []
    try:
        for pid, group, command in processes():
            if group != browser.pid and home not in command:
                continue
            with suppress(ProcessLookupError):
                pidfds.append(os.pidfd_open(pid))
                signal.pidfd_send_signal(pidfds[-1], signal.SIGKILL)
        for pidfd in pidfds:
            await anyio.wait_readable(pidfd)  # readable once the process has exited
    finally:
        for pidfd in pidfds:
            os.close(pidfd)


def processes() -> list[tuple[int, int, str]]:
    """Each process's id, process group and command line (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it has exited meanwhile
            continue
        group = int(stat[stat.rindex(")") + 2 :].split()[2])  # after "pid (name) ": state, ppid, pgrp
        found.append((int(entry.name), group, command))
    return found
