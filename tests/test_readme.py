"""The README's and the docs' Python examples run as written, on asyncio and on trio, and pass
`mypy --strict`; the README's commands name what a fresh clone has."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in sorted(ROOT.glob("docs/**/*.md"))
}
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
"""A Python block and what follows the language on its first line."""
TAGGED = re.compile(r" \{ \.(notest|embedded|asyncio) \}")
"""A block's tag, as a class in the attribute form the docs site renders (` ```python { .notest }`):
none (runs), `notest` (needs a key or a server: type-checked only), `embedded` (needs the embedded
model: runs with the servers' tests), `asyncio` (an engine that runs on asyncio alone: run on
asyncio only)."""


def tag_of(info: str) -> str | None:
    """The tag of a block whose first line is ` ```python` + `info`; None for an unknown form."""
    if not info:
        return ""
    tagged = TAGGED.fullmatch(info)
    return tagged.group(1) if tagged else None


def blocks(text: str, *tags: str) -> list[str]:
    return [code for info, code in FENCE.findall(text) if tag_of(info) in tags]


IMPORTED_BY_EXTRA = {"opentelemetry": "otel", "temporalio": "temporal", "dbos": "dbos", "mcp": "mcp", "trio": "trio"}
"""The packages an example may import that only an extra installs."""


def missing_extras(code: str) -> list[str]:
    """The extras an example imports from that are not installed here."""
    from importlib.util import find_spec

    tops = set(re.findall(r"^\s*(?:from|import) ([a-z_]+)", code, re.M))
    return sorted({IMPORTED_BY_EXTRA[top] for top in tops & set(IMPORTED_BY_EXTRA) if find_spec(top) is None})


DEFAULT_BACKEND = """\
import anyio as _anyio
_run = _anyio.run
def _run_on(func, *args, backend={backend!r}, **kwargs):
    return _run(func, *args, backend=backend, **kwargs)
_anyio.run = _run_on
"""
"""Makes `backend` the default of `anyio.run`: a block runs as written, on that backend (a call
that names its backend keeps it)."""


def run_block(code: str, backend: str, timeout: float = 60) -> str:
    program = DEFAULT_BACKEND.format(backend=backend) + code
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", program], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


RUNNABLE = [(name, code, "") for name, code in [("README", c) for c in blocks(README, "")]]
RUNNABLE += [(name, code, "") for name, text in DOCS.items() for code in blocks(text, "")]
RUNNABLE += [(name, code, "asyncio") for name, text in DOCS.items() for code in blocks(text, "asyncio")]
TYPED = [code for text in [README, *DOCS.values()] for code in blocks(text, "", "notest", "embedded", "asyncio")]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(
    ("page", "code", "only"), RUNNABLE, ids=[f"{page}-{i}" for i, (page, _, _) in enumerate(RUNNABLE)]
)
def test_every_python_example_runs(page: str, code: str, only: str, backend: str) -> None:
    if only and backend != only:
        pytest.skip(f"this example runs on {only} alone (its engine does)")
    if missing := missing_extras(code) + (["trio"] if backend == "trio" and missing_extras("import trio") else []):
        pytest.skip(f"this example needs the {', '.join(f'[{m}]' for m in missing)} extra")
    assert run_block(code, backend).strip(), f"the example of {page} prints what it shows"


def test_the_readme_loop_runs_the_whole_script_on_asyncio_and_then_on_trio() -> None:
    (loop,) = [code for code in blocks(README, "") if "ScriptedModel" in code]
    assert 'anyio.run(main, backend="trio")' in loop
    lines = run_block(loop, "asyncio").split()
    half = len(lines) // 2
    assert lines[:half] == lines[half:], "the trio run shows the same events as the asyncio run"
    assert lines[0] == "agent_start" and lines[half - 1] == "agent_end"
    assert lines[:half].count("tool_execution_end") == 1 and lines[:half].count("turn_end") == 2


@pytest.mark.servers
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_readme_first_program_calls_a_tool_and_a_real_model_answers(backend: str) -> None:
    from .test_cli import _local_model_file

    (program,) = [code for code in blocks(README, "embedded") if "anyio.run" in code]  # not its synchronous twin
    os.environ.setdefault("AGENTLOOP_MODEL_PATH", str(_local_model_file()))
    shown = run_block(program, backend, timeout=240)
    assert "calls calculator {'expression': '17 * 23'}" in shown and "391" in shown.splitlines()[-1], shown


def test_every_python_block_is_plain_or_tagged_in_the_attribute_form() -> None:
    for page, text in [("README.md", README), *DOCS.items()]:
        for info, _ in FENCE.findall(text):
            assert tag_of(info) is not None, f"{page}: ```python{info} is neither run nor type-checked"


@pytest.mark.timeout(660)  # mypy's own bound below is 600 s: a cold cache checks agentloop and its dependencies
def test_every_python_example_passes_mypy_strict(tmp_path: Path) -> None:
    files = []
    for i, code in enumerate(code for code in TYPED if not missing_extras(code)):
        path = tmp_path / f"example{i}.py"
        path.write_text(code, encoding="utf-8")
        files.append(str(path))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), *files],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_first_command_installs_what_it_runs_and_uses_the_venv() -> None:
    setup = re.search(r"```bash\n(python3 -m venv .*?)\n```", README)
    assert setup is not None
    extras = re.search(r"-e '\.\[([a-z,]+)\]'", setup.group(1))
    assert extras is not None and {"local", "trio"} <= set(extras.group(1).split(","))
    for command in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in command.splitlines():
            assert not re.match(r"(python|agentloop|pip) ", line), f"a bare command a fresh clone lacks: {line}"


def test_the_readme_is_short_and_quotes_the_measured_rate() -> None:
    from agentloop.cli._command import LOCAL_MODEL_RATE

    flowing = " ".join(README.split())
    assert len(README) <= 10_500
    assert f"right on {LOCAL_MODEL_RATE} new prompts measured" in flowing
    assert f"answered {LOCAL_MODEL_RATE} prompts it was not tuned on right" in flowing


def test_the_readme_links_only_to_files_that_exist() -> None:
    for target in re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", README):
        assert (ROOT / target).is_file(), target


def test_every_package_an_example_imports_comes_with_the_package_or_an_extra() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    for code in TYPED:
        for top in re.findall(r"^\s*(?:from|import) ([a-z_]+)", code, re.M):
            extra = IMPORTED_BY_EXTRA.get(top)
            if extra is not None:
                wanted = "opentelemetry-sdk" if top == "opentelemetry" and "opentelemetry.sdk" in code else top
                assert any(r.startswith(wanted.replace("temporalio", "temporalio")) for r in extras[extra]), (
                    f"the [{extra}] extra lacks {wanted}, which an example imports"
                )
