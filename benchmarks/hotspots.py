"""Profile one agentloop workload with cProfile: where the time goes.

    python benchmarks/hotspots.py w1_loop 20000 [--backend asyncio|trio] [--impl agentloop|pi|...]
                                 [--repeat N] [--sort tottime|cumtime] [--limit 25]

Runs a warm-up call, then the workload `--repeat` times under cProfile, and prints the top
functions. cProfile adds a fixed cost per call, so read the shares, not the absolute times.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker import IMPLS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload")
    parser.add_argument("size", type=int)
    parser.add_argument("--impl", default="agentloop", choices=sorted(IMPLS))
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumtime"))
    parser.add_argument("--limit", type=int, default=25)
    args = parser.parse_args()
    fn = importlib.import_module(IMPLS[args.impl]).WORKLOADS[args.workload]
    profiler = cProfile.Profile()

    async def job() -> None:
        await fn(min(args.size, 100))
        profiler.enable()
        for _ in range(args.repeat):
            await fn(args.size)
        profiler.disable()

    if args.impl in ("agentloop", "limits"):
        import anyio

        anyio.run(job, backend=args.backend)
    else:
        import asyncio

        asyncio.run(job())
    stats = pstats.Stats(profiler)
    stats.sort_stats(args.sort).print_stats(args.limit)


if __name__ == "__main__":
    main()
