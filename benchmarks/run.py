"""Run the agentloop benchmarks side by side with the peers and the machine limits.

    python benchmarks/run.py [--quick] [--backend asyncio|trio|both] [--reps N]
                             [--peers-python PATH] [--out benchmarks/RESULTS.md]
                             [--plot benchmarks/results.png]

Every (implementation, workload, repetition) runs in a fresh process (`worker.py`) after a warm-up
call; the table shows medians of wall time over the repetitions (CPU time and peak RSS recorded
too), the ratios against pi-ai-python and the limits, and PASS/FAIL against the floor (spec.TARGETS).
`--quick` (small sizes, 1 repetition, no peers) only proves that the scripts work.
Exit status: 0 when every measurement ran and saw what it should (whatever the targets say).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402
from spec import AGENTLOOP, JOBS, LIMITS, PEER_DISTRIBUTIONS, PEER_MODULES, PEERS, Job, Result  # noqa: E402

IMPORT_CODE = "import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
HTTPX_CODE = "import sys, agentloop; print(int('httpx' in sys.modules or 'httpx_sse' in sys.modules))"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repetition, no peers (CI)")
    parser.add_argument("--backend", choices=("asyncio", "trio", "both"), default="both")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per measurement (default 3, quick 1)")
    parser.add_argument("--peers-python", default=None, help="interpreter of the venv holding the peers")
    parser.add_argument("--out", type=Path, default=None, help="write the tables to this markdown file")
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG chart (needs matplotlib)")
    parser.add_argument("--json", type=Path, default=None, help="write the raw results (default: beside --out)")
    parser.add_argument("--only", default="", help="comma-separated job keys (W1,W2,...) to run, for profiling")
    args = parser.parse_args()
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.reps < 1:
        parser.error("--reps must be >= 1")
    return args


def peer_available(python: str, peer: str) -> str | None:
    """The peer's version when its module imports in that interpreter, else None."""
    code = f"import {PEER_MODULES[peer]}, importlib.metadata as m; print(m.version({PEER_DISTRIBUTIONS[peer]!r}))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.backends = ("asyncio", "trio") if args.backend == "both" else (args.backend,)
        self.python = {AGENTLOOP: sys.executable, LIMITS: sys.executable}
        self.versions: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        if args.quick:
            self.skipped.update(dict.fromkeys(PEERS, "quick mode"))
        elif not args.peers_python:
            self.skipped.update(dict.fromkeys(PEERS, "no --peers-python"))
        else:
            for peer in PEERS:
                version = peer_available(args.peers_python, peer)
                if version is None:
                    self.skipped[peer] = f"not importable with {args.peers_python}"
                else:
                    self.python[peer] = args.peers_python
                    self.versions[peer] = version
        only = {key for key in args.only.split(",") if key}
        self.jobs = [job for job in JOBS if not only or job.key in only]
        self.raw: dict[str, list[dict]] = {}
        self.rep_loads: list[float] = []  # 1-minute load average at the start of each repetition
        self.errors: list[str] = []

    def cells(self, job: Job) -> list[tuple[str, str]]:
        """The (implementation, backend) pairs that run this job."""
        out = []
        for impl in job.impls:
            if impl not in self.python:
                continue
            backends = self.backends if impl in (AGENTLOOP, LIMITS) else ("asyncio",)
            out.extend((impl, backend) for backend in backends)
        return out

    def run_worker(self, job: Job, impl: str, backend: str) -> dict | None:
        size = job.size(self.args.quick)
        cmd = [
            self.python[impl],
            str(HERE / "worker.py"),
            impl,
            job.workload,
            backend,
            str(size.size),
            "--repeat",
            str(size.repeat),
            "--warmup",
            str(size.warmup),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        where = f"{job.key} {impl} {backend}"
        if proc.returncode != 0:
            self.errors.append(f"{where}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
            return None
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        expected = job.expect(size.size) * size.repeat
        if result["count"] != expected:
            self.errors.append(f"{where}: the consumer saw {result['count']} items, expected {expected}")
            return None
        return result

    def measure(self) -> dict[tuple[str, str, str], Result]:
        total = sum(len(self.cells(job)) for job in self.jobs) * self.args.reps
        done = 0
        started = time.perf_counter()
        for rep in range(self.args.reps):  # repetitions outermost: drift hits every cell alike
            self.rep_loads.append(os.getloadavg()[0])
            for job in self.jobs:
                for impl, backend in self.cells(job):
                    done += 1
                    if sys.stderr.isatty():
                        print(
                            f"\r[{done}/{total}] rep {rep + 1} {job.key} {impl} {backend}".ljust(60),
                            end="",
                            file=sys.stderr,
                            flush=True,
                        )
                    result = self.run_worker(job, impl, backend)
                    if result is not None:
                        self.raw.setdefault(f"{job.key}|{impl}|{backend}", []).append(result)
        print(f"\r{total} measurements in {time.perf_counter() - started:.0f} s".ljust(60), file=sys.stderr)
        results = {}
        for key, runs in self.raw.items():
            job_key, impl, backend = key.split("|")
            size = next(job for job in self.jobs if job.key == job_key).size(self.args.quick)
            results[(job_key, impl, backend)] = Result(
                wall=statistics.median(r["wall"] for r in runs),
                cpu=statistics.median(r["cpu"] for r in runs),
                count=runs[0]["count"],
                repeat=size.repeat,
                peak_delta_kb=statistics.median(r["peak_kb"] - r["rss_kb"] for r in runs),
                reps=len(runs),
            )
        return results

    def import_times(self) -> dict[str, float]:
        """Median seconds to import each module in a fresh interpreter (startup excluded)."""
        runs = 3 if self.args.quick else 7
        targets = {"base": (sys.executable, "anyio, pydantic"), AGENTLOOP: (sys.executable, "agentloop")}
        for peer in PEERS:
            if peer in self.python:
                targets[peer] = (self.python[peer], PEER_MODULES[peer])
        # Imports are timed as users meet them: with the bytecode cache written (the first run does it).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        samples: dict[str, list[float]] = {name: [] for name in targets}
        for n in range(runs + 1):
            for name, (python, modules) in targets.items():
                proc = subprocess.run(
                    [python, "-c", IMPORT_CODE.format(modules=modules)], capture_output=True, text=True, env=env
                )
                if proc.returncode != 0:
                    self.errors.append(f"import {modules}: {proc.stderr.strip()[-500:]}")
                    return {}
                if n:
                    samples[name].append(float(proc.stdout))
        times = {name: statistics.median(values) for name, values in samples.items()}
        proc = subprocess.run([sys.executable, "-c", HTTPX_CODE], capture_output=True, text=True)
        times["httpx_loaded"] = float(proc.stdout.strip() or 1)
        return times


def agentloop_commit() -> str:
    """The commit of the measured agentloop, `+dirty` when its files differ from it."""
    root = HERE.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "agentloop"], cwd=root, capture_output=True, text=True)
    except OSError:
        return "unknown"
    if commit.returncode != 0:
        return "unknown"
    return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine(load_start: tuple[float, float, float], load_end: tuple[float, float, float]) -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "load_start": " / ".join(f"{x:.2f}" for x in load_start),
        "load_end": " / ".join(f"{x:.2f}" for x in load_end),
    }


def main() -> int:
    args = parse_args()
    runner = Runner(args)
    load_start = os.getloadavg()
    results = runner.measure()
    imports = runner.import_times() if not args.only else {}
    load_end = os.getloadavg()
    info = machine(load_start, load_end)
    info["mode"] = "quick" if args.quick else "full"
    info["commit"] = agentloop_commit()
    info["reps"] = str(args.reps)
    info["backends"] = ", ".join(runner.backends)
    info["rep_loads"] = ", ".join(f"{x:.2f}" for x in runner.rep_loads)
    info["peers"] = "; ".join(
        [f"{report.peer_label(p)} {v}" for p, v in runner.versions.items()]
        + [f"{report.peer_label(p)}: skipped ({why})" for p, why in runner.skipped.items()]
    )
    text = report.render(results, imports, info, runner.backends)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    json_path = args.json or (args.out.with_suffix(".json") if args.out is not None else None)
    if args.plot is not None and json_path is None:
        json_path = args.plot.with_suffix(".json")
    if json_path is not None:
        data = {
            "machine": info,
            "results": {"|".join(k): asdict(v) for k, v in results.items()},
            "imports": imports,
            "raw": runner.raw,
        }
        json_path.write_text(json.dumps(data, indent=1))
    if args.plot is not None and json_path is not None:
        plot(json_path, args.plot, args.peers_python)
    for error in runner.errors:
        print(f"ERROR {error}", file=sys.stderr)
    return 1 if runner.errors else 0


def plot(json_path: Path, png: Path, peers_python: str | None) -> None:
    """Draw the chart with the first interpreter that has matplotlib (this one, or the peers')."""
    for python in (sys.executable, peers_python):
        if python and subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            subprocess.run([python, str(HERE / "plot.py"), str(json_path), str(png)], check=True)
            print(f"chart written to {png}", file=sys.stderr)
            return
    print("no matplotlib in this interpreter or --peers-python: chart skipped", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
