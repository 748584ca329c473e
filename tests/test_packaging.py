"""The wheel a user installs: every file of the package (data files too) and the command line."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def built_wheel(directory: Path) -> Path:
    """The wheel pip builds from the repository into `directory`."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(directory), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = directory.glob("*.whl")
    return wheel


def test_the_wheel_holds_every_file_of_the_package_and_the_agentloop_script(tmp_path: Path) -> None:
    wheel = built_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    package = ROOT / "agentloop"
    files = {
        path.relative_to(ROOT).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {"agentloop/cli/chatml-think.jinja", "agentloop/event-schema.json", "agentloop/py.typed"} <= files
    assert files - names == set()
    assert "agentloop = agentloop.cli:main" in scripts


def test_the_metadata_is_complete_and_the_test_tools_are_no_extra() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    assert project["license"] == "MIT" and (ROOT / "LICENSE").is_file()
    assert project["readme"] == "README.md" and project["requires-python"] == ">=3.10"
    assert {"Homepage", "Documentation", "Source", "Changelog"} <= set(project["urls"])
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in project["classifiers"]
    assert "test" not in project["optional-dependencies"]
    assert {"test", "lint", "docs", "release"} <= set(pyproject["dependency-groups"])
    assert "version" not in project and project["dynamic"] == ["version"]  # one string: agentloop.__version__
    assert pyproject["tool"]["hatch"]["version"]["path"] == "agentloop/__init__.py"


@pytest.mark.servers
@pytest.mark.timeout(900)  # a fresh venv installs every dependency
def test_the_built_wheel_in_a_fresh_venv_runs_the_first_command_and_the_readme_program(tmp_path: Path) -> None:
    """What a user gets: the wheel, installed with its [local] extra into an empty venv, answers
    the README's first command (the answer alone on stdout) and runs the README's first program."""
    import os
    import re

    from .test_cli import _local_model_file

    wheel = built_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[local]"], capture_output=True, text=True, timeout=600
    )
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["AGENTLOOP_MODEL_PATH"] = str(_local_model_file())

    def in_venv(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)

    first = in_venv(str(venv / "bin" / "agentloop"), "run", "What is 17 * 23?")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("\n") == 1 and "391" in first.stdout, first.stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    program, twin = re.findall(r"```python \{ \.embedded \}\n(.*?)```", readme, re.S)  # async, then sync
    for code in (program, twin):
        ran = in_venv(str(venv / "bin" / "python"), "-c", code)
        assert ran.returncode == 0, ran.stderr
        assert "391" in ran.stdout.splitlines()[-1], ran.stdout
        assert code is twin or "calls calculator" in ran.stdout, ran.stdout
