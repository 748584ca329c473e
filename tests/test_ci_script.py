"""`.ci/run` can fail: each gate is a command of its own line, so `set -e` stops the script when it
fails (bash ignores a failure on the left of an `&&` or `||` list), and the docs build counts its
warnings (`--strict` without `--quiet`)."""

from __future__ import annotations

import re
from pathlib import Path

CI_RUN = Path(__file__).resolve().parent.parent / ".ci" / "run"


def gate_lines() -> list[str]:
    """The lines of `.ci/run` that run a tool of the project's virtual environments."""
    lines = [line.split("#", 1)[0].strip() for line in CI_RUN.read_text().splitlines()]
    return [line for line in lines if re.search(r"(\.venv|\.ci-cache/py\$version)/bin/", line)]


def test_the_script_stops_at_the_first_failure() -> None:
    assert CI_RUN.read_text().splitlines()[:5][-1] == "set -euo pipefail"


def test_no_gate_is_part_of_an_and_or_list() -> None:
    chained = [line for line in gate_lines() if "&&" in line or "||" in line]
    assert gate_lines(), "no gate found: has .ci/run moved its tools?"
    assert chained == []


def test_the_docs_build_counts_its_warnings() -> None:
    (build,) = [line for line in gate_lines() if "mkdocs build" in line]
    assert "--strict" in build.split()
    assert not {"--quiet", "-q"} & set(build.split())


def test_every_install_takes_the_pinned_versions() -> None:
    installs = [line for line in gate_lines() if re.search(r'/pip"? install', line) and "pip==" not in line]
    assert len(installs) == 2
    assert all('"${PINNED[@]}"' in line for line in installs)
    assert "-c .ci/constraints.txt" in CI_RUN.read_text()
