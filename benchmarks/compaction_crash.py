"""SIGKILL during compactions, many times: every reload must be a consistent context.

    python benchmarks/compaction_crash.py [--kills 100] [--backend asyncio|trio]

Runs `tests/sessions/test_compaction.py::test_sigkill_during_compactions_leaves_a_consistent_session`
for both session stores (SQLite and JSONL) with `--kills` kills each (the test itself does 10).
A child process compacts its agent's context again and again (a model with a 2,048-token window,
large tool results) while recording into a session; the parent kills it with SIGKILL at a random
moment after a compaction started, then loads the session and checks the whole history is a
valid transcript and the context rebuilt from it has every tool call with its result and the
summary whole or absent. Prints the test's figures for each store.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args()
    env = {**os.environ, "AGENTLOOP_COMPACTION_KILLS": str(args.kills)}
    test = "tests/sessions/test_compaction.py::test_sigkill_during_compactions_leaves_a_consistent_session"
    command = [sys.executable, "-m", "pytest", test, "-k", args.backend, "-q", "-s", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if "figures" in line or "passed" in line or "failed" in line:
            print(line)
    if done.returncode:
        print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
