"""One measurement in a fresh process: `python worker.py IMPL WORKLOAD BACKEND SIZE [options]`.

Runs the workload once at `--warmup` size (imports, caches, first-call costs), then `--repeat`
times at SIZE, timed by wall clock and process CPU time, and prints one JSON object:
`{"wall": s, "cpu": s, "count": items seen, "expected": SIZE * repeat, "rss_kb": ..., "peak_kb": ...}`.
The peak RSS is the high-water mark of the timed part alone (reset through /proc when possible).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

IMPLS = {
    "agentloop": "impl_agentloop",
    "limits": "impl_limits",
    "pi": "impl_pi",
    "pydantic-ai": "impl_pydantic_ai",
    "openai-agents": "impl_openai_agents",
}


def _status_kb(field: str) -> int:
    """A field of /proc/self/status in KB (VmRSS, VmHWM), or -1 where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_kb() -> int:
    peak = _status_kb("VmHWM")
    if peak < 0:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak


def measure(fn: Callable[[int], Awaitable[int]], size: int, repeat: int, warmup: int) -> Callable[[], Awaitable[dict]]:
    async def main() -> dict:
        if warmup:
            await fn(warmup)
        gc.collect()
        rss = _status_kb("VmRSS")
        peak_reset = _reset_peak()
        count = 0
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(repeat):
            count += await fn(size)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        return {
            "wall": wall,
            "cpu": cpu,
            "count": count,
            "expected": size * repeat,
            "rss_kb": rss,
            "peak_kb": _peak_kb(),
            "peak_reset": peak_reset,
        }

    return main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("impl", choices=sorted(IMPLS))
    parser.add_argument("workload")
    parser.add_argument("backend", choices=("asyncio", "trio"))
    parser.add_argument("size", type=int)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0, help="size of the warm-up call (0: none)")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    module = importlib.import_module(IMPLS[args.impl])
    if args.backend not in module.BACKENDS:
        raise SystemExit(f"{args.impl} does not run on {args.backend}")
    fn = module.WORKLOADS[args.workload]
    job = measure(fn, args.size, args.repeat, args.warmup)
    if args.impl in ("agentloop", "limits"):
        import anyio

        result = anyio.run(job, backend=args.backend)
    else:  # the peers are asyncio-only: run them the plain way
        import asyncio

        result = asyncio.run(job())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
