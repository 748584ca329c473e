"""Instructions per unit of work, side by side for several checkouts (valgrind's cachegrind).

    python benchmarks/instructions.py /path/to/old/checkout /path/to/this/checkout \\
        [--workloads w1_loop:2000:4000,w2_turns:100:200] [--backends asyncio,trio] [--jobs 2]

Each workload runs in a fresh process under `valgrind --tool=cachegrind --cache-sim=no` at two
sizes (after a warm-up call at a small size); the difference of the two counts over the
difference of the sizes is the cost of one unit (a delta, a turn, a run), with imports and
start-up cancelled out. Unlike wall or CPU time it does not move with the machine's load
(repeatable to about 1%), which makes it the figure for a before/after on a shared machine.
Workloads whose tools sleep (W3) count the scheduler passes that fit in the sleep, so theirs move.

Every checkout is driven by this checkout's `impl_agentloop.py` (the checkout comes first on
`PYTHONPATH`), and its bytecode is compiled first, so that no run pays for compiling.
Needs `valgrind` (Debian: `apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = "w1_loop:2000:4000,w1_agent:2000:4000,w2_turns:100:200,w4_agents:100:200,w4_loops:100:200"
_CHILD = """
import sys, anyio
sys.path.insert(0, {benchmarks!r})
import impl_agentloop
workload = impl_agentloop.WORKLOADS[sys.argv[1]]
size = int(sys.argv[2])

async def main() -> None:
    await workload(50)
    await workload(size)

anyio.run(main, backend=sys.argv[3])
"""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(checkout: str, workload: str, size: int, backend: str) -> int:
    """Instructions of one fresh process running `workload` at `size` on `backend`."""
    env = {**os.environ, "PYTHONPATH": checkout, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    child = _CHILD.format(benchmarks=str(HERE))
    done = subprocess.run(
        [*command, sys.executable, "-c", child, workload, str(size), backend],
        env=env,
        cwd=checkout,  # `python -c` puts the working directory first on sys.path
        capture_output=True,
        text=True,
        check=False,
    )
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{workload} at {size} on {backend} in {checkout} failed:\n{done.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="+", help="checkouts to compare; the first is the baseline")
    parser.add_argument("--workloads", default=DEFAULT, help="name:small:large,... (names of impl_agentloop)")
    parser.add_argument("--backends", default="asyncio,trio")
    parser.add_argument("--jobs", type=int, default=2, help="valgrind processes at once")
    args = parser.parse_args()
    for checkout in args.checkouts:
        if not (Path(checkout) / "agentloop" / "__init__.py").is_file():
            raise SystemExit(f"{checkout} is not a checkout of agentloop (no agentloop/__init__.py)")
        compileall.compile_dir(Path(checkout) / "agentloop", quiet=1)
    jobs = []
    for spec in args.workloads.split(","):
        name, small, large = spec.split(":")
        for backend in args.backends.split(","):
            for checkout in args.checkouts:
                jobs.append((checkout, name, int(small), int(large), backend))

    def per_unit(job: tuple[str, str, int, int, str]) -> float:
        checkout, name, small, large, backend = job
        return (instructions(checkout, name, large, backend) - instructions(checkout, name, small, backend)) / (
            large - small
        )

    with ThreadPoolExecutor(args.jobs) as pool:
        counts = dict(zip(jobs, pool.map(per_unit, jobs), strict=True))
    names = [Path(checkout).resolve().name for checkout in args.checkouts]
    ratio_names = [f"{name} / {names[0]}" for name in names[1:]]
    print("| workload | backend | " + " | ".join(names + ratio_names) + " |")
    print("|---|---|" + "---:|" * (2 * len(names) - 1))
    for job in jobs:
        checkout, name, _, _, backend = job
        if checkout != args.checkouts[0]:
            continue
        row = [counts[(c, *job[1:])] for c in args.checkouts]
        ratios = " | ".join(f"{value / row[0]:.3f}x" for value in row[1:])
        print(f"| {name} | {backend} | " + " | ".join(f"{value:,.0f}" for value in row) + f" | {ratios} |")


if __name__ == "__main__":
    main()
