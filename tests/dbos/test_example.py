"""`examples/dbos_agent.py` runs as written: a worker process and a client process on one SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_worker_and_client_run_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "DBOS_DATABASE_URL": f"sqlite:///{tmp_path}/example.sqlite", "EXAMPLE_TOOL_SECONDS": "0"}
    example = [sys.executable, str(ROOT / "examples" / "dbos_agent.py")]
    worker = subprocess.Popen(
        [*example, "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert worker.stdout is not None
        assert "worker on sqlite" in worker.stdout.readline()
        result = subprocess.run([*example, "client"], env=env, capture_output=True, text=True, timeout=60)
    finally:
        worker.terminate()
        worker.wait(20)
        assert worker.stdout is not None
        worker.stdout.close()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "add -> 5" in result.stdout and "'2 + 3 = 5.'" in result.stdout
    assert lines[-2].endswith("agent_end") and lines[-1] == "['user', 'assistant', 'toolResult', 'assistant']"
