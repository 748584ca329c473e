"""`agentloop run --mcp servers.json`: the tools of the file's MCP servers join the built-in ones."""

from __future__ import annotations

import contextlib
import io
import json
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
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from .mcp.conftest import SMALL_SERVER


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return False


def servers_file(tmp_path: Path) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"calc": {"command": sys.executable, "args": [str(SMALL_SERVER)]}}}))
    return path


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
