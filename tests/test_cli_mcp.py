"""`agentloop run --mcp servers.json`: the tools of the file's MCP servers join the built-in ones."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al

pytest.importorskip("mcp", reason="--mcp needs the [mcp] extra (the MCP SDK)")

from agentloop.cli import _command
from agentloop.cli._command import UsageError
from agentloop.cli._mcp_servers import mcp_log
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from .mcp.conftest import SMALL_SERVER
from .support import free_port
from .test_cli_terminal import FakeServer
from .test_cli_terminal import server as server  # the fixture: an OpenAI-compatible server on loopback


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return False


def servers_file(tmp_path: Path, entry: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "servers.json"
    entry = entry or {"command": sys.executable, "args": [str(SMALL_SERVER)]}
    path.write_text(json.dumps({"mcpServers": {"calc": entry}}))
    return path


def scripted(monkeypatch: pytest.MonkeyPatch, model: ScriptedModel) -> None:
    @contextlib.asynccontextmanager
    async def open_model(args: Any, say: Any) -> AsyncIterator[Any]:
        yield al.Model(id="scripted", api="scripted"), model, False

    monkeypatch.setattr(_command, "open_model", open_model)


NOISY = (
    "import runpy, sys; print('Starting default (STDIO) server...', file=sys.stderr, flush=True); "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)
"""A stdio server that writes to its stderr as it starts, as many do."""

BROKEN: dict[str, tuple[dict[str, Any], str]] = {
    "missing command": ({"command": "no-such-command-agentloop"}, "No such file or directory"),
    "exits at once": (
        {"command": sys.executable, "args": ["-c", "import sys; print('bad config', file=sys.stderr); sys.exit(3)"]},
        "its stderr ends: bad config (all of it in ",
    ),
    "never initialises": ({"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}, "within 1 s"),
    "HTTP refuses": ({"url": "http://127.0.0.1:{port}/mcp"}, "could not start"),
}
"""Servers that cannot start, and what the line that says so must hold."""


def broken_servers_file(tmp_path: Path, case: str) -> tuple[Path, str]:
    entry, expected = BROKEN[case]
    if "url" in entry:
        entry = {"url": entry["url"].format(port=free_port())}  # nothing listens there
    return servers_file(tmp_path, entry), expected


async def test_run_uses_the_tools_of_the_mcp_servers(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "calc_add", {"a": 2, "b": 3})]), "2 + 3 = 5"])

    @contextlib.asynccontextmanager
    async def open_model(args: Any, say: Any) -> AsyncIterator[Any]:
        yield al.Model(id="scripted", api="scripted"), model, False

    monkeypatch.setattr(_command, "open_model", open_model)
    args = _command.parse_args(["run", "--mcp", str(servers_file(tmp_path)), "add 2 and 3"], io.StringIO())
    out, err = Terminal(), Terminal()
    with anyio.fail_after(30):
        code = await _command.run_cli(args, io.StringIO(), out, err)
    assert code == 0, err.getvalue()
    names = [tool.name for tool in model.calls[0].tools]
    assert "calc_add" in names and "calculator" in names
    result = model.calls[1].messages[-1]
    assert isinstance(result, al.ToolResultMessage) and not result.is_error
    assert "2 + 3 = 5" in out.getvalue()


def test_a_bad_servers_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--mcp"):
        _command.parse_args(["run", "--mcp", str(tmp_path / "missing.json"), "hi"], io.StringIO())
    (tmp_path / "bad.json").write_text('{"servers": {}}')
    with pytest.raises(UsageError, match="mcpServers"):
        _command.parse_args(["run", "--mcp", str(tmp_path / "bad.json"), "hi"], io.StringIO())


@pytest.mark.parametrize("case", list(BROKEN))
async def test_an_mcp_server_that_cannot_start_is_one_line_and_exit_1(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str
) -> None:
    monkeypatch.setenv("AGENTLOOP_CACHE", str(tmp_path / "cache"))
    model = ScriptedModel(["never asked"])
    scripted(monkeypatch, model)
    path, expected = broken_servers_file(tmp_path, case)
    args = _command.parse_args(["run", "--mcp", str(path), "hi"], io.StringIO())
    for entry in args.mcp_servers.servers.values():
        entry.init_timeout = 1  # the default is 30 s, for servers fetched on first use
    out, err = Terminal(), Terminal()
    with anyio.fail_after(60):
        code = await _command.run_cli(args, io.StringIO(), out, err)
    assert code == _command.EXIT_MODEL_ERROR and out.getvalue() == "" and not model.calls
    (line,) = err.getvalue().splitlines()
    assert line.startswith("agentloop: --mcp server 'calc': ") and expected in line, line


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_command_line_says_a_broken_server_in_one_line_with_no_traceback(backend: str, tmp_path: Path) -> None:
    path, _ = broken_servers_file(tmp_path, "exits at once")
    env = {**os.environ, "AGENTLOOP_BACKEND": backend, "AGENTLOOP_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "run", "--base-url", "http://127.0.0.1:9/v1", "--mcp", str(path), "hi"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == _command.EXIT_MODEL_ERROR and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Using "), done.stderr
    assert lines[1].startswith("agentloop: --mcp server 'calc': ") and "bad config" in lines[1]
    log = mcp_log("calc").relative_to(mcp_log("calc").parents[1])
    assert (tmp_path / "cache" / log).read_text() == "bad config\n"


async def test_the_summary_is_the_last_line_with_mcp_servers(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The servers close before the spinner stops: their closing runs in no cancelled scope."""
    monkeypatch.setenv("AGENTLOOP_CACHE", str(tmp_path / "cache"))
    scripted(
        monkeypatch, ScriptedModel([Response(content=[ScriptedToolCall("c1", "calc_add", {"a": 1, "b": 2})]), "3"])
    )
    args = _command.parse_args(["run", "--mcp", str(servers_file(tmp_path)), "add 1 and 2"], io.StringIO())
    out, err = Terminal(), Terminal()
    with anyio.fail_after(30):
        code = await _command.run_cli(args, io.StringIO(), out, err)
    assert code == 0 and out.getvalue() == "3\n"
    assert err.getvalue().splitlines()[-1].startswith("2 turns, "), err.getvalue()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_stdio_servers_stderr_goes_to_its_log_not_to_the_terminal(
    backend: str, server: FakeServer, tmp_path: Path
) -> None:
    path = servers_file(tmp_path, {"command": sys.executable, "args": ["-c", NOISY, str(SMALL_SERVER)]})
    env = {**os.environ, "AGENTLOOP_BACKEND": backend, "AGENTLOOP_CACHE": str(tmp_path / "cache")}
    argv = ["run", "--base-url", server.url, "--model", "fake", "--mcp", str(path), "hi"]
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello there.\n"
    assert "Starting default" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("1 turn, "), done.stderr
    logs = list((tmp_path / "cache").rglob("mcp-calc.log"))
    assert [log.read_text() for log in logs] == ["Starting default (STDIO) server...\n"]
