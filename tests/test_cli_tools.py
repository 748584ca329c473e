"""The command line's tools: root confinement (.., absolute paths, symlinks) and the safe calculator."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.cli._tools import builtin_tools, calculate, resolve_inside

from .support import run_tool, text


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "root" / "a.txt").write_text("hello", encoding="utf-8")
    (tmp_path / "root" / "sub" / "b.txt").write_text("x" * 100, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", tmp_path / "root" / "link.txt")
    os.symlink(tmp_path, tmp_path / "root" / "up")
    return tmp_path / "root"


async def call(tools: list[al.AgentTool], name: str, **args: Any) -> al.AgentToolResult:
    tool = next(t for t in tools if t.name == name)
    return await run_tool(tool, args)


async def test_file_tools_read_and_list_inside_the_root(anyio_backend: object, root: Path) -> None:
    tools = builtin_tools(root)
    with anyio.fail_after(5):
        assert text((await call(tools, "read_file", path="a.txt")).content[0]) == "hello"
        cut = text((await call(tools, "read_file", path="sub/b.txt", max_bytes=10)).content[0])
        assert cut.startswith("x" * 10) and cut.endswith("[... cut]")
        listing = text((await call(tools, "list_folder")).content[0])
        assert listing.split("\n") == ["a.txt", "link.txt@", "sub/", "up@"]  # links shown, never followed


async def test_a_folder_holding_a_symlink_loop_lists_without_an_os_error(anyio_backend: object, root: Path) -> None:
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink(root.parent / "secret.txt", root / "sub" / "out")
    tools = builtin_tools(root)
    with anyio.fail_after(5):
        assert "loop_a@" in text((await call(tools, "list_folder")).content[0]).split("\n")
        assert text((await call(tools, "list_folder", path="sub")).content[0]).split("\n") == ["b.txt", "out@"]
        with pytest.raises(al.ToolError, match="symlink loop"):
            await call(tools, "list_folder", path="loop_a")
        with pytest.raises(al.ToolError, match="outside the root folder"):
            await call(tools, "list_folder", path="up")


@pytest.mark.parametrize(("expression", "shown"), [("12 * 12 = 160", "12 * 12 = 160 = 144"), ("2 ** 3", "2 ** 3 = 8")])
async def test_a_calculator_call_written_as_an_equation_evaluates_its_left_side(
    anyio_backend: object, root: Path, expression: str, shown: str
) -> None:
    result = await call(builtin_tools(root), "calculator", expression=expression)
    assert text(result.content[0]) == shown


@pytest.mark.parametrize("expression", ["1 == 1", "1 <= 2", "= 3", "1 = 2 = 3"])
async def test_a_calculator_call_that_is_not_one_equation_is_refused(
    anyio_backend: object, root: Path, expression: str
) -> None:
    with pytest.raises(al.ToolError):
        await call(builtin_tools(root), "calculator", expression=expression)


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "link.txt", "up/secret.txt", "sub/../../secret.txt"])
async def test_paths_escaping_the_root_are_refused(anyio_backend: object, root: Path, path: str) -> None:
    tools = builtin_tools(root)
    with anyio.fail_after(5), pytest.raises(al.ToolError, match="outside the root folder"):
        await call(tools, "read_file", path=path)


def test_resolve_inside_accepts_the_root_itself_and_rejects_nul(root: Path) -> None:
    assert resolve_inside(root, ".") == root.resolve()
    with pytest.raises(al.ToolError, match="NUL"):
        resolve_inside(root, "a\x00b")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4) ** 2", 98),
        ("17 * 23", 391),
        ("-3 + 1.5", -1.5),
        ("sqrt(16)", 4.0),
        ("7 // 2 + 7 % 2", 4),
        ("round(pi, 2)", 3.14),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("__import__('os').system('echo hi')", "unsupported"),
        ("open('/etc/passwd')", "unsupported"),
        ("(1).__class__", "unsupported"),
        ("1 / 0", "division by zero"),
        ("10 ** 100000", "too large"),
        ("2 +", "not an arithmetic expression"),
        ("x" * 600, "longer than 500"),
        ("(-8) ** 0.5", "not a real number"),
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str, problem: str) -> None:
    with pytest.raises(al.ToolError, match=problem):
        calculate(expression)


async def test_time_tool_answers_iso_8601(anyio_backend: object, root: Path) -> None:
    result = await call(builtin_tools(root), "current_time")
    stamp = text(result.content[0])
    assert len(stamp) >= 19 and stamp[4] == "-" and "T" in stamp


def test_local_model_names_its_url_parameter_when_it_is_not_a_string() -> None:
    from agentloop.providers import local_model

    with pytest.raises(TypeError, match=r"url must be a str \(the llama.cpp server root\), got NoneType"):
        local_model(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="url must be the server's base URL"):
        local_model("")
