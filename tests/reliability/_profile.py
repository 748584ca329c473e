"""The two profiles of the reliability tests: fast (CI, the default) and long (`AGENTLOOP_PROFILE=long`).

`examples(fast, long)` picks the number of hypothesis examples; `settings_for(n)` gives hypothesis
settings without a deadline or an example database (every run is independent and bounded by its
own `fail_after`). `Tally` counts what the generated runs did, for the long-profile report.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

LONG = os.environ.get("AGENTLOOP_PROFILE") == "long"
BACKENDS = ("asyncio", "trio")
REPORT_DIR = os.environ.get("AGENTLOOP_RELIABILITY_REPORT")
"""When set (a folder), each test module writes its tallies there as JSON (used for the README figures)."""


def examples(fast: int, long: int) -> int:
    return long if LONG else fast


def settings_for(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


class Tally:
    """Thread-safe counters of one test module (runs, faults injected, aborts, ...)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    def write(self) -> None:
        if not REPORT_DIR or not self.counts:
            return
        path = Path(REPORT_DIR)
        path.mkdir(parents=True, exist_ok=True)
        target = path / f"{self.name}.json"
        previous: dict[str, Any] = {}
        if target.exists():
            previous = json.loads(target.read_text())
        merged = Counter(previous)
        merged.update(self.counts)
        target.write_text(json.dumps(dict(sorted(merged.items())), indent=2))
        self.counts.clear()
