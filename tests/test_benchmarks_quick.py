"""The benchmark scripts work: `benchmarks/run.py --quick --backend both` exits 0 with a full table.

No timing is asserted: CI machines are shared and drift; the figures are read by people.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"

FIGURE_ROWS = (
    "W1 streaming, `agent_loop` consumer",
    "W1 streaming, `Agent` listener",
    "W1m scripted model alone",
    "W2 tool turns",
    "W2s tool turns, short run",
    "W3 parallel tools sleeping 10 ms",
    "W4 concurrent agents x 5 tool turns",
    "W4 CPU time",
    "W4 peak RSS increase per agent",
    "W5 limit: plain async generator",
    "W5 limit: memory stream, buffer 0, await send/receive",
    "W5 limit: memory stream, send_nowait/receive_nowait",
    "W5 limit: minimal loop, W1 streaming",
    "W5 limit: minimal loop, W2 tool turns",
    "W5 limit: minimal loop, W3, a cancel scope per tool call",
    "W5 limit: one anyio cancel scope (create, enter, leave)",
    "W5 limit: task group of sleeps of 10 ms (W3 floor)",
    "W6 cost per delta, short answer",
    "W6 cost per delta, long answer",
    "W6 cost per turn, short transcript",
    "W6 cost per turn, long transcript",
)
IMPORT_ROWS = ("anyio + pydantic", "agentloop")
TARGET_ROWS = (
    "W1 `agent_loop` consumer >=",
    "W2 tool turns >=",
    "W3 within",
    "W4 CPU <=",
    "W4 memory per agent <=",
    "W6 long answer",
    "W6 long transcript",
    "import agentloop <=",
    "import agentloop leaves httpx",
)


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@pytest.mark.timeout(180)
def test_quick_benchmark_runs_and_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--backend", "both", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {cells(line)[0]: cells(line) for line in proc.stdout.splitlines() if line.startswith("| ")}
    header = rows["figure"]
    assert header[3:5] == ["agentloop asyncio", "agentloop trio"], header
    for label in FIGURE_ROWS:
        assert label in rows, f"no row for {label!r} in:\n{proc.stdout}"
        asyncio_value, trio_value = rows[label][3:5]
        assert asyncio_value != "-" and trio_value != "-", rows[label]
    for label in IMPORT_ROWS:
        assert label in rows and rows[label][1] != "-", label
    for prefix in TARGET_ROWS:
        assert any(label.startswith(prefix) for label in rows), prefix
    assert out.read_text().strip() == proc.stdout.strip()
