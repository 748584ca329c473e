"""The README's Python examples run as written, on asyncio and on trio, and pass `mypy --strict`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)
"""The blocks that run (```python notest blocks need a key or a server: they are only type-checked)."""
TYPED_BLOCKS = re.findall(r"```python(?: notest)?\n(.*?)```", TEXT, re.S)

DEFAULT_BACKEND = """\
import anyio as _anyio
_run = _anyio.run
def _run_on(func, *args, backend={backend!r}, **kwargs):
    return _run(func, *args, backend=backend, **kwargs)
_anyio.run = _run_on
"""
"""Makes `backend` the default of `anyio.run`: a block runs as written, on that backend (a call
that names its backend keeps it)."""


def run_block(code: str, backend: str) -> str:
    program = DEFAULT_BACKEND.format(backend=backend) + code
    result = subprocess.run([sys.executable, "-W", "error", "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code: str, backend: str) -> None:
    assert run_block(code, backend).strip(), "the example prints what it shows"


def test_the_quickstart_runs_the_whole_script_on_asyncio_and_then_on_trio() -> None:
    quickstart = BLOCKS[0]
    assert 'anyio.run(main, backend="trio")' in quickstart
    lines = run_block(quickstart, "asyncio").split()
    half = len(lines) // 2
    assert lines[:half] == lines[half:], "the trio run shows the same events as the asyncio run"
    assert lines[0] == "agent_start" and lines[half - 1] == "agent_end"
    assert lines.count("tool_execution_end") == 2 and lines.count("turn_end") == 4


def test_readme_examples_pass_mypy_strict(tmp_path: Path) -> None:
    files = []
    for i, code in enumerate(TYPED_BLOCKS):
        path = tmp_path / f"readme_block{i}.py"
        path.write_text(code, encoding="utf-8")
        files.append(str(path))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), *files],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_setup_command_installs_what_the_quickstart_needs() -> None:
    setup = re.search(r"```bash\n(python3 -m venv .*?)\n```", TEXT)
    assert setup is not None
    extras = re.search(r"-e '\.\[([a-z,]+)\]'", setup.group(1))
    assert extras is not None and {"local", "trio"} <= set(extras.group(1).split(","))


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2
