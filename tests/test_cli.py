"""The command line: one-shot, chat with steering, --jsonl, Ctrl-C, root confinement, exit codes."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.cli import _command, _local_model, _tools
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedThinking, ScriptedToolCall, check_events
from agentloop.wire import loads

from .support import run_python, text


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return False


def use_model(monkeypatch: pytest.MonkeyPatch, model: Any, local: bool = False) -> None:
    @contextlib.asynccontextmanager
    async def open_model(args: Any, say: Any) -> AsyncIterator[Any]:
        yield al.Model(id="scripted", api="scripted"), model, local

    monkeypatch.setattr(_command, "open_model", open_model)


class TypedInput(io.StringIO):
    """Lines a person types: a terminal, each line after the first typed `pause` seconds later."""

    def __init__(self, text: str, pause: float) -> None:
        super().__init__(text)
        self.pause = pause
        self.first = True

    def isatty(self) -> bool:
        return True

    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        if not self.first:
            time.sleep(self.pause)
        self.first = False
        return super().readline(size)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)


async def cli(argv: list[str], stdin: str | io.StringIO = "") -> tuple[int, str, str]:
    source = io.StringIO(stdin) if isinstance(stdin, str) else stdin
    args = _command.parse_args(argv, source)
    out, err = Terminal(), Terminal()
    with anyio.fail_after(10):
        code = await _command.run_cli(args, source, out, err)
    return code, out.getvalue(), err.getvalue()


async def test_one_shot_streams_text_tools_and_a_summary(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42", encoding="utf-8")
    model = ScriptedModel(
        [
            Response(
                content=[ScriptedThinking("let me read"), ScriptedToolCall("c1", "read_file", {"path": "notes.txt"})]
            ),
            Response(content=[ScriptedText(["It says ", "42."])]),
        ]
    )
    use_model(monkeypatch, model)
    code, out, err = await cli(["run", "What do my notes say?", "--root", str(tmp_path)])
    assert code == _command.EXIT_OK
    assert out == "It says 42.\n"  # the answer alone on stdout
    assert "(thinking) let me read" in err
    assert '→ read_file({"path": "notes.txt"})' in err
    assert "← the answer is 42" in err
    assert "2 turns" in err.splitlines()[-1]


async def test_thinking_can_be_hidden(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(monkeypatch, ScriptedModel([Response(content=[ScriptedThinking("secret"), ScriptedText("shown")])]))
    code, out, err = await cli(["run", "hi", "--thinking", "hide"])
    assert code == 0 and "secret" not in out + err and out == "shown\n"


async def test_jsonl_writes_every_event_for_the_codec(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(
        monkeypatch,
        ScriptedModel([Response(content=[ScriptedToolCall("c1", "calculator", {"expression": "17*23"})]), "391"]),
    )
    code, out, err = await cli(["run", "17*23?", "--jsonl"])
    events = [loads(line) for line in out.splitlines()]
    check_events(events)
    end = next(e for e in events if isinstance(e, al.ToolExecutionEnd))
    assert text(end.result.content[0]) == "17*23 = 391"
    assert code == 0 and "1 turn" not in out and "2 turns" in err


async def test_a_path_escaping_the_root_is_refused(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "secret.txt").write_text("no", encoding="utf-8")
    use_model(
        monkeypatch,
        ScriptedModel([Response(content=[ScriptedToolCall("c1", "read_file", {"path": "../secret.txt"})]), "ok"]),
    )
    code, _, err = await cli(["run", "read it", "--root", str(tmp_path / "root")])
    assert code == 0
    assert "✗ '../secret.txt' is outside the root folder" in err


async def test_model_error_exit_code(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(monkeypatch, ScriptedModel([Response(stop_reason="error", error_message="quota exceeded")]))
    code, out, err = await cli(["run", "hi"])
    assert code == _command.EXIT_MODEL_ERROR and "error: quota exceeded" in err and out == ""


async def test_chat_prompts_then_steers_while_the_agent_works(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    steered: list[str] = []

    class Slow(ScriptedModel):
        def __call__(self, model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
            steered.extend(m.content for m in context.messages if m.role == "user")  # type: ignore[misc]
            return super().__call__(model, context, options)

    model = Slow([Response(content=[ScriptedText(["one ", "two"])], delay=0.3), "after steering", "second prompt"])
    use_model(monkeypatch, model)
    code, out, err = await cli(["chat"], stdin=TypedInput("first\nsteer now\n", pause=0.15))
    assert code == 0
    assert "(steering the current run)" in err
    assert "one two" in out
    assert len(model.calls) == 2 and steered[-1] == "steer now"


async def test_ctrl_c_aborts_the_run_and_answers_every_tool(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    @al.tool
    async def wait() -> str:
        """Wait."""
        os.kill(os.getpid(), signal.SIGINT)
        await anyio.sleep(5)
        return "done"

    original = _tools.builtin_tools  # what _command imports
    monkeypatch.setattr(_command, "builtin_tools", lambda root: [*original(root), wait])
    use_model(monkeypatch, ScriptedModel([Response(content=[ScriptedToolCall("c1", "wait", {})]), "never"]))
    code, _, err = await cli(["run", "wait", "--max-turns", "2"])
    assert code == _command.EXIT_ABORTED
    assert "aborting (press Ctrl-C again to quit)" in err
    assert "✗ Operation aborted" in err


def _local_model_file() -> Path:
    caches = [Path(__file__).parents[1] / ".ci-cache" / "providers", _local_model.cache_dir()]
    gguf = next((path for cache in caches if cache.is_dir() for path in cache.rglob("*.gguf")), None)
    assert gguf is not None, "run `python tests/providers/servers.py start` first (it fetches the model)"
    return gguf


@pytest.mark.servers
def test_the_embedded_local_model_calls_the_calculator_and_only_the_answer_is_on_stdout(tmp_path: Path) -> None:
    """A real run of the README's first command: llama.cpp with SmolLM2 (the `local` extra and the
    GGUF, as .ci/run installs them, or the command line's own cache)."""
    env = {**os.environ, "AGENTLOOP_MODEL_PATH": str(_local_model_file())}
    env.pop("OPENAI_API_KEY", None)
    env.pop("ANTHROPIC_API_KEY", None)
    done = run_python("-m", "agentloop", "run", "What is 17 * 23?", "--root", str(tmp_path), timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    assert "SmolLM2-135M-Instruct" in done.stderr
    assert f"right on {_command.LOCAL_MODEL_RATE} new prompts measured" in done.stderr
    assert '→ calculator({"expression": "17 * 23"})' in done.stderr
    assert "← 17 * 23 = 391" in done.stderr
    assert "2 turns" in done.stderr.splitlines()[-1]
    assert done.stdout.count("\n") == 1 and "391" in done.stdout, done.stdout  # the answer alone


ARITHMETIC = [
    ("What is 17 * 23?", 391), ("What is 2 ** 10?", 1024), ("What is 3.5 * 4?", 14), ("Compute 2**16", 65536),
    ("What is 12 * 12?", 144), ("Calculate 45 + 67", 112), ("What is 1000 - 357?", 643), ("What is 144 / 12?", 12),
    ("How much is 19 * 21?", 399), ("What is the square root of 81?", 9), ("What is 7 + 8 * 2?", 23),
    ("Calculate (4 + 6) * 3", 30), ("What is 99 * 99?", 9801), ("What is 256 / 8?", 32),
    ("What is 15% of 200?", 30), ("What is 123 + 456?", 579), ("What is 9 ** 3?", 729), ("What is 50 - 75?", -25),
    ("What is 36 * 11?", 396), ("Calculate 1234 * 5", 6170), ("What is 17 mod 5?", 2), ("What is 2.5 + 2.5?", 5),
    ("Divide 100 by 4", 25), ("What is 13 squared?", 169),
]  # fmt: skip
"""Arithmetic prompts for the embedded model: an answer is right when the last number it writes is
the value. (The rate the command line quotes, `_command.LOCAL_MODEL_RATE`, is measured by
`benchmarks/embedded_model.py` on prompts of its own that no test uses.)"""
ARITHMETIC_RIGHT = 15
"""How many of `ARITHMETIC` the embedded model answered right when measured (greedy decoding: the
same answers each time, give or take a prompt)."""

COMMON = [
    ("Hi there!", None, None),
    ("Say hi to me.", None, None),
    ("What is the capital of Italy?", None, None),
    ("What is in this folder?", "list_folder", "."),
    ("List the photos folder", "list_folder", "photos"),
    ("Read shopping.txt", "read_file", "shopping.txt"),
    ("What does plan.md say?", "read_file", "plan.md"),
    ("What time is it now?", "current_time", None),
]
"""Everyday prompts and the tool (and path) each should use; None: an answer without a tool."""


def _last_number_is(answer: str, value: float) -> bool:
    import re

    numbers = re.findall(r"-?\d+(?:\.\d+)?", answer.replace(",", ""))
    return bool(numbers) and float(numbers[-1]) == value


@contextlib.asynccontextmanager
async def _embedded_agents(monkeypatch: pytest.MonkeyPatch, root: Path) -> AsyncIterator[Any]:
    """A function making an agent as the command line makes it, on the embedded model."""
    from agentloop import providers
    from agentloop.cli._constrained_tools import constrained_tool_stream

    monkeypatch.setenv("AGENTLOOP_MODEL_PATH", str(_local_model_file()))
    async with _local_model.local_model_server(say=lambda line: None) as url:
        yield lambda: al.Agent(
            model=providers.local_model(url),
            system_prompt=_command.SYSTEM_PROMPT,
            tools=_tools.builtin_tools(root),
            stream_fn=constrained_tool_stream,
            max_tokens=160,
        )


@pytest.mark.servers
@pytest.mark.timeout(900)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a measure of the model, not of the backend
async def test_the_embedded_model_answers_the_arithmetic_prompts_at_its_measured_rate(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    right = 0
    with anyio.fail_after(840):
        async with _embedded_agents(monkeypatch, tmp_path) as make_agent:
            for prompt, value in ARITHMETIC:
                agent = make_agent()
                await agent.prompt(prompt)
                last = agent.state.messages[-1]
                right += isinstance(last, al.AssistantMessage) and _last_number_is(last.text, value)
    assert len(ARITHMETIC) >= 20 and right >= ARITHMETIC_RIGHT - 2, f"{right} of {len(ARITHMETIC)} right"


@pytest.mark.servers
@pytest.mark.timeout(600)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a measure of the model, not of the backend
async def test_the_embedded_model_greets_answers_and_lists_and_reads_the_right_path(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "shopping.txt").write_text("milk, eggs\n", encoding="utf-8")
    (tmp_path / "plan.md").write_text("1. rest\n", encoding="utf-8")
    (tmp_path / "photos").mkdir()
    wrong = []
    with anyio.fail_after(540):
        async with _embedded_agents(monkeypatch, tmp_path) as make_agent:
            for prompt, tool, path in COMMON:
                agent = make_agent()
                await agent.prompt(prompt)
                calls = [c for m in agent.state.messages if isinstance(m, al.AssistantMessage) for c in m.tool_calls]
                used = [(c.name, c.arguments.get("path")) for c in calls]
                last = agent.state.messages[-1]
                answered = isinstance(last, al.AssistantMessage) and last.stop_reason != "error" and last.text.strip()
                if used != ([(tool, path)] if tool else []) or not answered:
                    wrong.append((prompt, used, last.text if isinstance(last, al.AssistantMessage) else last))
    assert not wrong, wrong


async def test_the_answer_alone_is_on_stdout_and_everything_else_on_stderr(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_model(
        monkeypatch,
        ScriptedModel([Response(content=[ScriptedToolCall("c1", "calculator", {"expression": "17 * 23"})]), "391"]),
    )
    code, out, err = await cli(["run", "What is 17 * 23?"])
    assert code == 0 and out == "391\n"
    assert "→ calculator" in err and "← 17 * 23 = 391" in err and "2 turns" in err


async def test_a_run_ended_by_max_turns_says_so(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(
        monkeypatch,
        ScriptedModel([Response(content=[ScriptedToolCall("c1", "calculator", {"expression": "1 + 1"})]), "2"]),
    )
    code, out, err = await cli(["run", "What is 1 + 1?", "--max-turns", "1"])
    assert code == 0 and out == ""
    assert "(stopped after 1 turn by --max-turns 1, before the model answered the tool results)" in err


async def test_a_run_that_answers_within_max_turns_has_no_note(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_model(monkeypatch, ScriptedModel(["2"]))
    code, _, err = await cli(["run", "What is 1 + 1?", "--max-turns", "1"])
    assert code == 0 and "--max-turns" not in err


async def test_the_summary_counts_cached_prompt_tokens(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = al.Usage(input=47, output=12, cache_read=42, total_tokens=101)
    use_model(monkeypatch, ScriptedModel([Response(content=[ScriptedText("ok")], usage=usage)]))
    code, _, err = await cli(["run", "hi"])
    assert code == 0 and "1 turn, 89 tokens in (42 cached), 12 out" in err


async def test_a_spinner_shows_while_a_stream_waits_before_its_start(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded model's first request (the constrained choice) runs before its stream starts:
    the spinner shows from the turn's start."""

    class Terminal_(Terminal):
        def isatty(self) -> bool:
            return True

    async def late(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        await anyio.sleep(0.5)
        return ScriptedModel(["late"])(model, context, options)

    use_model(monkeypatch, late)
    args = _command.parse_args(["run", "hi"], io.StringIO())
    out, err = Terminal(), Terminal_()
    with anyio.fail_after(10):
        code = await _command.run_cli(args, io.StringIO(), out, err)
    assert code == 0 and out.getvalue() == "late\n"
    assert "waiting for the model" in err.getvalue()


async def test_a_piped_chat_does_not_promise_steering(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(monkeypatch, ScriptedModel(["ok"]))
    code, _, err = await cli(["chat"], stdin="one\n")
    assert code == 0 and "steer" not in err and "each line read is a prompt" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run"], "the following arguments are required: prompt (see agentloop run --help)"),
        (["run", "hi", "--bogus"], "unrecognized arguments: --bogus (see agentloop --help)"),
        (["run", "hi", "--thinking", "loud"], "argument --thinking: invalid choice: 'loud'"),
        ([], "the following arguments are required"),
    ],
)
def test_argparse_usage_errors_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _command.main(argv) == _command.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("agentloop: ") and message in captured.err


async def test_run_dash_reads_the_prompt_from_stdin(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel(["ok"])
    use_model(monkeypatch, model)
    code, out, _ = await cli(["run", "-"], stdin="What is in\nthese two lines?\n")
    assert code == 0 and "ok" in out
    assert text(model.calls[0].messages[0].content[0]) == "What is in\nthese two lines?"


async def test_piped_lines_are_prompts_of_their_own(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel([Response(content=[ScriptedText("first answer")], delay=0.2), "second answer"])
    use_model(monkeypatch, model)
    code, out, err = await cli(["chat"], stdin="one\ntwo\n")
    assert code == 0
    assert "steer" not in out + err and out == "first answer\nsecond answer\n"
    assert [text(c.messages[-1].content[0]) for c in model.calls] == ["one", "two"]
    assert _command.PROMPT_MARKER not in out + err  # not a terminal: no prompt marker


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _command.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("agentloop ")
    with pytest.raises(SystemExit) as exc:
        _command.main(["run", "--help"])
    shown = capsys.readouterr().out
    assert exc.value.code == 0
    for expected in (
        "exit codes:",
        "2 bad usage",
        "130 aborted",
        "OPENAI_API_KEY",
        "AGENTLOOP_BACKEND",
        "providers: amazon-bedrock, anthropic, azure, google, google-vertex, mistral, openai",
    ):
        assert expected in shown
    from agentloop.providers import get_providers

    assert f"providers: {', '.join(get_providers())}" in shown  # every registered provider


def test_base_url_with_a_model_name_makes_an_openai_compatible_model_without_a_key() -> None:
    model = _command.choose_model("openai:llama3.2", "http://127.0.0.1:11434/v1")
    assert model is not None
    assert (model.id, model.api, model.provider, model.base_url) == (
        "llama3.2",
        "openai-completions",
        "openai-compatible",
        "http://127.0.0.1:11434/v1",
    )
    registered = _command.choose_model("openai:gpt-4o-mini", "http://proxy.example/v1")
    assert (
        registered is not None and registered.provider == "openai" and registered.base_url == "http://proxy.example/v1"
    )


def test_the_printer_strips_control_sequences_from_model_text_and_tool_results() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = _command.Printer(out=out, err=err, color=True)
    hostile = "ok\x1b]52;c;aGk=\x07 \x1b[2J\rgone\x9b31m"
    partial = al.AssistantMessage(content=(al.TextContent(hostile),))
    printer.listener(al.MessageUpdate(partial, al.TextDeltaEvent(0, hostile, partial)), al.AbortSignal())
    result = al.AgentToolResult(content=(al.TextContent(hostile),))
    printer.listener(al.ToolExecutionStart("c1", "read\x1b[2Jfile", {"path": hostile}), al.AbortSignal())
    printer.listener(al.ToolExecutionEnd("c1", "read_file", result, False), al.AbortSignal())
    shown = out.getvalue() + err.getvalue()
    for control in ("\x1b]", "\x07", "\x1b[2J", "\r", "\x9b"):
        assert control not in shown
    assert "ok]52;c;aGk= [2Jgone31m" in shown  # the text is kept, without its controls
    assert "\x1b[2m" in shown or "\x1b[36m" in shown  # the printer's own colours still apply


OWNER = """\
import sys

import anyio

from agentloop.cli import embedded_model


async def main() -> None:
    async with embedded_model():
        print("READY", flush=True)
        await anyio.sleep_forever()


anyio.run(main, backend=sys.argv[1])
"""
"""A program of one's own that holds the embedded model open until it is killed."""


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, exited but not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_until(condition: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout  # an upper bound for a failing test, not a margin
    while not condition():
        assert time.monotonic() < deadline, f"still waiting, after {timeout} s, for {what}"
        time.sleep(0.1)


@pytest.mark.servers
@pytest.mark.parametrize(
    ("owner", "backend", "signum"),
    [
        ("program", "asyncio", signal.SIGTERM),
        ("program", "trio", signal.SIGHUP),
        ("program", "asyncio", signal.SIGKILL),
        ("program", "trio", signal.SIGKILL),
        ("command", "asyncio", signal.SIGHUP),
        ("command", "trio", signal.SIGTERM),
    ],
)
def test_the_embedded_models_server_dies_with_the_process_that_started_it(
    owner: str, backend: str, signum: signal.Signals, tmp_path: Path
) -> None:
    """Killed by any signal, SIGKILL included, the owner of `embedded_model()` (or the command
    line) leaves no llama.cpp server behind: the server's stdin closes with its parent."""
    env = {**os.environ, "AGENTLOOP_MODEL_PATH": str(_local_model_file()), "AGENTLOOP_BACKEND": backend}
    env.pop("OPENAI_API_KEY", None)
    env.pop("ANTHROPIC_API_KEY", None)
    if owner == "program":
        command = [sys.executable, "-c", OWNER, backend]
        ready = b"READY"
    else:
        command = [sys.executable, "-m", "agentloop", "chat", "--root", str(tmp_path)]
        ready = b"Chat with the agent"
    reader, writer = os.pipe()  # the chat's stdin, held open so it waits for a line
    with subprocess.Popen(command, stdin=reader, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) as process:
        os.close(reader)
        try:
            assert process.stdout is not None
            seen = b""
            while ready not in seen:
                line = process.stdout.readline()
                assert line, f"the owner exited before the model was ready: {seen.decode()}"
                seen += line
            (server,) = _children(process.pid)
            assert _running(server)
            process.send_signal(signum)
            assert process.wait(timeout=60) != 0
            try:
                _wait_until(lambda: not _running(server), f"the server (pid {server}) to exit after {signum.name}")
            finally:
                if _running(server):  # the test failed: leave no server behind
                    os.kill(server, signal.SIGKILL)
        finally:
            os.close(writer)
            if process.poll() is None:
                process.kill()


async def test_an_embedded_model_that_cannot_start_is_one_line_and_exit_1(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextlib.asynccontextmanager
    async def missing(**kwargs: Any) -> AsyncIterator[str]:
        raise RuntimeError("the embedded model needs the 'local' extra")
        yield "never"

    monkeypatch.setattr(_local_model, "local_model_server", missing)
    code, out, err = await cli(["run", "hi"])
    assert code == _command.EXIT_MODEL_ERROR and out == ""
    assert err.splitlines()[-1] == "agentloop: the embedded model needs the 'local' extra"


ROOT = Path(__file__).parents[1]
FIRST_PROGRAM_PAGES = ["README.md", "docs/getting-started.md"]


def _first_program(page: str) -> str:
    import re

    blocks: list[str] = re.findall(
        r"^```python[^\n]*\n(.*?)^```", (ROOT / page).read_text(encoding="utf-8"), re.S | re.M
    )
    return next(block for block in blocks if "embedded_model()" in block)


def _run_fresh(program: str) -> subprocess.CompletedProcess[str]:
    """`program` in a fresh interpreter: only what `import agentloop` loads is loaded."""
    return run_python("-W", "error", "-c", program)


@pytest.mark.parametrize("page", FIRST_PROGRAM_PAGES)
def test_the_first_programs_other_model_runs_as_written(page: str) -> None:
    """The first program names a server of one's own in a comment (`#     code`): that code runs
    with the program's imports, in a fresh interpreter."""
    import re

    block = _first_program(page)
    alternative = re.findall(r"^\s*#     (.+)$", block, re.M)
    assert any("openai_compatible_model(" in line for line in alternative), block
    imports = [line for line in block.splitlines() if line.startswith(("import ", "from "))]
    done = _run_fresh("\n".join([*imports, *alternative, "print(model.id, model.base_url)"]))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "llama3.2 http://127.0.0.1:11434/v1\n"


@pytest.mark.parametrize("page", FIRST_PROGRAM_PAGES)
def test_every_al_attribute_the_page_names_exists_after_import_agentloop(page: str) -> None:
    """`al.NAME` in the page's text, code or comments is an attribute of `agentloop` as imported
    (subpackages such as `agentloop.providers` are imported by name, not reached as attributes)."""
    import re

    names = sorted(set(re.findall(r"\bal\.([A-Za-z_]\w*)", (ROOT / page).read_text(encoding="utf-8"))))
    assert names
    done = _run_fresh(f"import agentloop\nprint([n for n in {names!r} if not hasattr(agentloop, n)])")
    assert done.returncode == 0 and done.stdout == "[]\n", done.stdout + done.stderr


def test_the_install_hint_installs_the_extra_where_agentloop_came_from(tmp_path: Path) -> None:
    import json

    from agentloop.cli._install import install_target

    clone, wheel = tmp_path / "clone", tmp_path / "anyio_agentloop-0.1.0-py3-none-any.whl"
    clone.mkdir()
    wheel.write_bytes(b"")
    editable = json.dumps({"url": clone.as_uri(), "dir_info": {"editable": True}})
    assert install_target("local", editable, None) == (f"{clone}[local]", True)
    from_wheel = json.dumps({"url": wheel.as_uri(), "archive_info": {}})
    assert install_target("mcp", from_wheel, None) == (f"{wheel}[mcp]", False)
    gone = json.dumps({"url": (tmp_path / "gone").as_uri(), "dir_info": {}})
    assert install_target("otel", gone, None) == ("anyio-agentloop[otel]", False)
    assert install_target("trio", None, clone) == (f"{clone}[trio]", True)  # run from a checkout
    assert install_target("trio", None, None) == ("anyio-agentloop[trio]", False)  # from an index
    assert install_target("trio", "not json", None) == ("anyio-agentloop[trio]", False)


def test_the_install_hint_of_this_environment_names_a_source_that_has_the_extra() -> None:
    """Here agentloop is installed from a clone (or run from one): the hint names that clone, whose
    pyproject.toml declares every extra the command line asks for."""
    import re
    import shlex

    from agentloop.cli._install import install_command

    for extra in ("local", "mcp", "trio", "otel"):
        words = shlex.split(install_command(extra))
        assert words[:4] == [sys.executable, "-m", "pip", "install"] or words[:2] == ["uv", "pip"], words
        target = words[-1]
        assert target.endswith(f"[{extra}]"), words
        source = Path(target.removesuffix(f"[{extra}]"))
        assert source.is_dir() and "-e" in words, words
        pyproject = (source / "pyproject.toml").read_text(encoding="utf-8")
        extras = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        assert re.search(rf"^{extra} = \[", extras, re.M), (extra, extras)


async def test_a_missing_local_extra_names_the_install_command(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.cli._install import install_command

    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # not installed
    code, out, err = await cli(["run", "hi"])
    assert code == _command.EXIT_MODEL_ERROR and out == ""
    assert f"needs the 'local' extra: {install_command('local')} (or pass --model" in err.splitlines()[-1]
