"""The command line as a person sees it: driven in a pseudo-terminal (pexpect) or a pipe, against a
small OpenAI-compatible server on loopback that streams a scripted answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pexpect = pytest.importorskip("pexpect")


@dataclass
class FakeServer:
    """Streams `chunks` as Chat Completions SSE, `first_delay` s before the first one."""

    chunks: list[str] = field(default_factory=lambda: ["Hello", " there", "."])
    first_delay: float = 0.0
    chunk_delay: float = 0.0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            fake.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            time.sleep(fake.first_delay)
            try:
                for i, chunk in enumerate(fake.chunks):
                    if i:
                        time.sleep(fake.chunk_delay)
                    delta = {"choices": [{"index": 0, "delta": {"content": chunk}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
                    self.wfile.flush()
                usage = {"prompt_tokens": 11, "completion_tokens": len(fake.chunks), "total_tokens": 0}
                end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            except OSError:  # the client went away (Ctrl-C, a closed pipe)
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield fake
    httpd.shutdown()
    httpd.server_close()


def env() -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return {**values, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}


def spawn(*args: str) -> Any:
    return pexpect.spawn(
        sys.executable, ["-m", "agentloop", *args], env=env(), encoding="utf-8", timeout=20, dimensions=(40, 120)
    )


def screen(raw: str) -> list[str]:
    """What a terminal shows for `raw`: carriage returns, erase-to-end-of-line, colours ignored."""
    lines, row, col = [""], 0, 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|.", raw, re.S):
        if token == "\r":
            col = 0
        elif token == "\n":
            row += 1
            col = 0
            if row == len(lines):
                lines.append("")
        elif token == "\x1b[K":
            lines[row] = lines[row][:col]
        elif token.startswith("\x1b"):
            continue
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + 1 :]
            col += 1
    return [line.rstrip() for line in lines]


def test_the_first_chunk_of_the_answer_stays_on_screen_and_the_spinner_leaves_nothing(server: FakeServer) -> None:
    server.first_delay = 0.6  # long enough for the spinner to show
    child = spawn("run", "hi", "--base-url", server.url, "--model", "fake")
    child.expect(pexpect.EOF)
    raw = child.before
    child.close()
    assert "waiting for the model" in raw  # the spinner was drawn...
    shown = screen(raw)
    assert not any("waiting for the model" in line for line in shown), shown  # ...and erased
    assert "Hello there." in shown, shown  # no chunk drawn over
    assert child.exitstatus == 0


def test_ctrl_c_at_the_idle_chat_prompt_quits_at_once_with_the_summary(server: FakeServer) -> None:
    child = spawn("chat", "--base-url", server.url, "--model", "fake")
    child.expect_exact("> ")
    child.sendline("hi")
    child.expect_exact("Hello there.")
    child.expect_exact("> ")
    started = time.monotonic()
    child.sendintr()
    child.expect(r"1 turn, 11 tokens in, 3 out, \$0\.0000, [0-9.]+ s")
    child.expect(pexpect.EOF, timeout=3)
    child.close()
    assert time.monotonic() - started < 3
    assert "Traceback" not in child.before
    assert child.exitstatus == 130


def test_ctrl_d_at_the_chat_prompt_quits_with_the_summary_and_exit_0(server: FakeServer) -> None:
    child = spawn("chat", "--base-url", server.url, "--model", "fake")
    child.expect_exact("> ")
    child.sendeof()
    child.expect(pexpect.EOF, timeout=5)
    child.close()
    assert screen(child.before)[-2].startswith("0 turns, 0 tokens in, 0 out")
    assert child.exitstatus == 0


def test_ctrl_c_mid_answer_counts_the_streamed_tokens(server: FakeServer) -> None:
    server.chunks = ["word "] * 200
    server.chunk_delay = 0.02
    child = spawn("run", "hi", "--base-url", server.url, "--model", "fake")
    child.expect_exact("word word word")
    child.sendintr()
    child.expect(r"1 turn, 0 tokens in, ~(\d+) out")
    assert int(child.match.group(1)) >= 3
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130


def test_jsonl_into_head_exits_quietly(server: FakeServer) -> None:
    server.chunks = ["word "] * 300
    server.chunk_delay = 0.005
    process = subprocess.Popen(
        [sys.executable, "-m", "agentloop", "run", "hi", "--base-url", server.url, "--model", "fake", "--jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # what `| head -1` does
    code = process.wait(timeout=20)
    err = process.stderr.read().decode()
    process.stderr.close()
    assert json.loads(first)["type"] == "agent_start"
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 141


def test_base_url_sends_the_named_model(server: FakeServer) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "run", "hi", "--base-url", server.url, "--model", "openai:llama3.2"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert server.bodies[0]["model"] == "llama3.2"
    assert "authorization" not in done.stdout.lower()


def test_an_unreachable_base_url_is_named_and_exits_1() -> None:
    url = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "run", "hi", "--base-url", url, "--model", "llama3.2"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert done.returncode == 1
    assert any(line.startswith("error: ") and url in line for line in done.stderr.splitlines()), done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "hi", "--max-tokens", "-5"], "--max-tokens must be at least 1, got -5"),
        (["run", "hi", "--max-turns", "0"], "--max-turns must be at least 1, got 0"),
        (["run", "hi", "--model", "foo:bar"], "unknown provider 'foo'"),
        (["run", "hi", "--model", "openai:nope"], "unknown model 'nope'"),
        (["run", "hi", "--model", "gpt"], "--model must be provider:model_id"),
        (["run", "hi", "--model", "openai:gpt-4o-mini"], "needs OPENAI_API_KEY"),
        (["run", "hi", "--base-url", "localhost:11434"], "--base-url must be an http:// or https:// URL"),
        (["run", "hi", "--root", "/no/such/folder"], "is not a folder"),
        (["run", "   "], "the prompt is empty"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2_before_anything_starts(args: list[str], message: str) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", *args], capture_output=True, text=True, env=env(), timeout=20
    )
    assert done.returncode == 2
    assert done.stdout == ""  # no model was announced, none started
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("agentloop: ") and message in done.stderr
    assert time.monotonic() - started < 10
