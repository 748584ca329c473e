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

from .support import text


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
    code, out, _ = await cli(["run", "What do my notes say?", "--root", str(tmp_path)])
    assert code == _command.EXIT_OK
    assert "(thinking) let me read" in out
    assert '→ read_file({"path": "notes.txt"})' in out
    assert "← the answer is 42" in out
    assert "It says 42." in out
    assert "2 turns" in out.splitlines()[-1]


async def test_thinking_can_be_hidden(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(monkeypatch, ScriptedModel([Response(content=[ScriptedThinking("secret"), ScriptedText("shown")])]))
    code, out, _ = await cli(["run", "hi", "--thinking", "hide"])
    assert code == 0 and "secret" not in out and "shown" in out


async def test_jsonl_writes_every_event_for_the_codec(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(
        monkeypatch,
        ScriptedModel([Response(content=[ScriptedToolCall("c1", "calculator", {"expression": "17*23"})]), "391"]),
    )
    code, out, err = await cli(["run", "17*23?", "--jsonl"])
    events = [al.loads(line) for line in out.splitlines()]
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
    code, out, _ = await cli(["run", "read it", "--root", str(tmp_path / "root")])
    assert code == 0
    assert "✗ '../secret.txt' is outside the root folder" in out


async def test_model_error_exit_code(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(monkeypatch, ScriptedModel([Response(stop_reason="error", error_message="quota exceeded")]))
    code, out, _ = await cli(["run", "hi"])
    assert code == _command.EXIT_MODEL_ERROR and "error: quota exceeded" in out


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
    code, out, _ = await cli(["chat"], stdin=TypedInput("first\nsteer now\n", pause=0.15))
    assert code == 0
    assert "(steering the current run)" in out
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
    code, out, _ = await cli(["run", "wait", "--max-turns", "2"])
    assert code == _command.EXIT_ABORTED
    assert "aborting (press Ctrl-C again to quit)" in out
    assert "✗ Operation aborted" in out


@pytest.mark.servers
def test_the_embedded_local_model_calls_the_calculator_and_answers(tmp_path: Path) -> None:
    """A real run of the README's first command: llama.cpp with SmolLM2 (the `local` extra and the
    GGUF, as .ci/run installs them, or the command line's own cache)."""
    caches = [Path(__file__).parents[1] / ".ci-cache" / "providers", _local_model.cache_dir()]
    gguf = next((path for cache in caches if cache.is_dir() for path in cache.rglob("*.gguf")), None)
    assert gguf is not None, "run `python tests/providers/servers.py start` first (it fetches the model)"
    env = {**os.environ, "AGENTLOOP_MODEL_PATH": str(gguf)}
    env.pop("OPENAI_API_KEY", None)
    env.pop("ANTHROPIC_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "run", "Calculate 17 * 23", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "SmolLM2-135M-Instruct" in done.stdout
    assert '→ calculator({"expression": "17 * 23"})' in done.stdout
    assert "← 17 * 23 = 391" in done.stdout
    answer = done.stdout.split("← 17 * 23 = 391", 1)[1].strip().splitlines()
    assert "391" in answer[0], done.stdout
    assert "2 turns" in answer[-1]


async def test_run_dash_reads_the_prompt_from_stdin(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel(["ok"])
    use_model(monkeypatch, model)
    code, out, _ = await cli(["run", "-"], stdin="What is in\nthese two lines?\n")
    assert code == 0 and "ok" in out
    assert text(model.calls[0].messages[0].content[0]) == "What is in\nthese two lines?"


async def test_piped_lines_are_prompts_of_their_own(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel([Response(content=[ScriptedText("first answer")], delay=0.2), "second answer"])
    use_model(monkeypatch, model)
    code, out, _ = await cli(["chat"], stdin="one\ntwo\n")
    assert code == 0
    assert "steering" not in out and "first answer" in out and "second answer" in out
    assert [text(c.messages[-1].content[0]) for c in model.calls] == ["one", "two"]
    assert _command.PROMPT_MARKER not in out  # not a terminal: no prompt marker


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
        "anthropic, openai",
    ):
        assert expected in shown


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
    shown = out.getvalue()
    for control in ("\x1b]", "\x07", "\x1b[2J", "\r", "\x9b"):
        assert control not in shown
    assert "ok]52;c;aGk= [2Jgone31m" in shown  # the text is kept, without its controls
    assert "\x1b[2m" in shown or "\x1b[36m" in shown  # the printer's own colours still apply
