"""The load benchmark of the wire works: `benchmarks/wire_load.py load` serves the three apps and
prints a row for each at each client count (small sizes; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WIRE_LOAD = ROOT / "benchmarks" / "wire_load.py"


@pytest.mark.timeout(180)
def test_the_load_benchmark_serves_every_app_and_prints_its_table(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    args = ["load", "--server", "hypercorn", "--clients", "2,3", "--answers", "2", "--rounds", "1", "--deltas", "20"]
    proc = subprocess.run(
        [sys.executable, str(WIRE_LOAD), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    rows = {(row["app"], row["clients"]): row for row in result["rows"]}
    assert set(rows) == {(app, n) for app in ("trivial", "proxy", "sse") for n in (2, 3)}
    for row in rows.values():
        assert row["bytes_per_answer"] > 20 * len(b"data: ") and row["server_us_per_delta"] > 0
        assert row["first_event_p50_ms"] <= row["first_event_p99_ms"]
    assert rows["sse", 2]["bytes_per_answer"] > rows["proxy", 2]["bytes_per_answer"]  # envelopes, ids
    assert all(len(memory) == 4 for memory in result["memory_mb"].values())  # warm-up, 2 counts, 1 round
    table = [line for line in proc.stdout.splitlines() if line.startswith(("| trivial", "| proxy", "| sse"))]
    assert len(table) == 6 + 3  # a row per app and count, a memory row per app
