"""`examples/dbos_agent.py` runs as written: a worker process and a client process on one SQLite file."""

from __future__ import annotations

from pathlib import Path

from ..durable_checks import run_example


def test_the_example_worker_and_client_run_as_written(tmp_path: Path) -> None:
    env = {"DBOS_DATABASE_URL": f"sqlite:///{tmp_path}/example.sqlite", "EXAMPLE_TOOL_SECONDS": "0"}
    result = run_example("dbos_agent.py", env, ready="worker on sqlite")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "add -> 5" in result.stdout and "'2 + 3 = 5.'" in result.stdout
    assert lines[-2].endswith("agent_end") and lines[-1] == "['user', 'assistant', 'toolResult', 'assistant']"
