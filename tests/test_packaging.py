"""The wheel a user installs: every file of the package (data files too) and the command line."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_wheel_holds_every_file_of_the_package_and_the_agentloop_script(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
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
