"""How often the embedded model gives a right typed result, in each mode of `prompt_typed`.

    .venv/bin/python benchmarks/embedded_typed.py            # 20 prompts, seed 7, both modes
    .venv/bin/python benchmarks/embedded_typed.py -n 40 --seed 3 -v

The output type is `Sum(a: int, b: int, total: int)`; each prompt asks for the sum of two random
numbers from 2 to 99 (the seed chooses them; the tests never use these prompts), worded one of four
ways. A result counts as valid when `prompt_typed` returns one (within its two retries), as read
when `a` and `b` are the numbers asked for (in either order), and as right when `total` is their
sum too. The model is the command
line's embedded SmolLM2-135M (the `local` extra), served by llama.cpp with its defaults, greedy
decoding (`temperature=0`), the agent's default system prompt, one prompt after another:

- `native`: the provider's schema-constrained output (llama.cpp's `response_format`).
- `tool`: the final tool, through llama.cpp's own tool calling under the model's chat template.

Measured on the shared 2-core machine (load average about 5), 20 prompts, seed 7:

| mode | valid | read | right | median s |
|---|---|---|---|---|
| native | 20/20 | 17/20 | 0/20 | 1.5 |
| tool | 0/20 | 0/20 | 0/20 | 2.9 |

In native mode the 135M model always follows the schema (the server constrains its output) and
mostly reads the numbers, but it copies one of them as the total instead of adding. In tool mode
it never calls the final tool (it answers in text). Use the embedded model to try the API offline,
and a real model for real results.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import anyio
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agentloop as al
from agentloop import providers
from agentloop.cli._local_model import local_model_server
from agentloop.output import OutputError, prompt_typed

WORDINGS = (
    "Add {a} and {b}.",
    "What is {a} + {b}?",
    "Compute the sum of {a} and {b}.",
    "I have {a} apples and buy {b} more. How many in total?",
)


class Sum(BaseModel):
    a: int
    b: int
    total: int


async def measure(count: int, seed: int, verbose: bool) -> None:
    rng = random.Random(seed)
    prompts = [(rng.randint(2, 99), rng.randint(2, 99), rng.choice(WORDINGS)) for _ in range(count)]
    async with local_model_server(say=lambda line: None) as url:
        model = providers.local_model(url)
        print("| mode | valid | read | right | median s |\n|---|---|---|---|---|")
        for mode in ("native", "tool"):
            valid = read = right = 0
            seconds: list[float] = []
            for a, b, wording in prompts:
                agent = al.Agent(model=model, temperature=0.0)
                started = time.perf_counter()
                try:
                    result = await prompt_typed(agent, wording.format(a=a, b=b), Sum, mode=mode)
                except OutputError as exc:
                    result = None
                    if verbose:
                        print(f"  {mode} {a}+{b}: no result ({str(exc)[:80]})")
                seconds.append(time.perf_counter() - started)
                if result is not None:
                    valid += 1
                    read += {result.a, result.b} == {a, b}
                    ok = {result.a, result.b} == {a, b} and result.total == a + b
                    right += ok
                    if verbose:
                        print(f"  {mode} {a}+{b}: {result!r} {'right' if ok else 'wrong'}")
            median = statistics.median(seconds)
            print(f"| {mode} | {valid}/{count} | {read}/{count} | {right}/{count} | {median:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20, help="how many prompts (default 20)")
    parser.add_argument("--seed", type=int, default=7, help="the seed that chooses the numbers (default 7)")
    parser.add_argument("-v", action="store_true", help="show each result")
    args = parser.parse_args()
    anyio.run(measure, args.n, args.seed, args.v)


if __name__ == "__main__":
    main()
