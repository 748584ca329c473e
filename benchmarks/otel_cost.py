"""What tracing costs: W1 and W2 of agentloop with tracing off, on but recording nothing, and on.

    .venv/bin/python benchmarks/otel_cost.py [--reps 5] [--backend asyncio|trio|both] [--quick]

Variants (each measured in fresh processes, repetitions interleaved; each process times 5 runs in
process CPU time and keeps the median; the table shows the median over processes):

- `off`: no `instrument` (what every run costs unless tracing is asked for: `agentloop.otel` is
  not even imported);
- `api-noop`: `instrument` with the OpenTelemetry API's default tracer (no SDK installed: a
  non-recording tracer);
- `sampled-out`: `instrument` with the SDK and a sampler that records nothing (ALWAYS_OFF);
- `in-memory`: `instrument` with the SDK, every span recorded and exported to an
  `InMemorySpanExporter` through a `SimpleSpanProcessor` (the exporter is cleared between runs).

W1 is one answer of N=20,000 text deltas consumed by `async with agent_loop(...)`; W2 is T=200
turns of one tool call then a text turn (the workloads of benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VARIANTS = ("off", "api-noop", "sampled-out", "in-memory")
WORKLOADS = {"W1": ("w1", 20_000, "deltas/s"), "W2": ("w2", 200, "turns/s")}
REPEAT = 5  # timed runs per process (CPU time: the machine is shared), their median kept


def _setup(variant: str) -> tuple[Any, Any, Any]:
    """The config, stream-function maker and exporter (or None) of one variant."""
    import impl_agentloop as impl

    if variant == "off":
        return impl.CONFIG, None, None
    from agentloop.otel import Tracing

    exporter = None
    if variant == "api-noop":
        from opentelemetry.trace import NoOpTracerProvider

        provider: Any = NoOpTracerProvider()
    else:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

        provider = TracerProvider(sampler=ALWAYS_OFF if variant == "sampled-out" else ALWAYS_ON)
        if variant == "in-memory":
            exporter = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
    return impl.CONFIG, Tracing(tracer_provider=provider), exporter


def _one(variant: str, workload: str, backend: str, size: int) -> dict[str, float]:
    """Run in this process: a warm-up, then one timed run; returns items/s and the item count."""
    sys.path.insert(0, str(HERE))
    import anyio
    import impl_agentloop as impl

    from agentloop import AgentContext, MessageUpdate, TurnEnd, UserMessage, agent_loop

    config, tracing, exporter = _setup(variant)
    if tracing is not None:
        config, _ = tracing.instrument(config, None)

    async def run(n: int) -> int:
        if workload == "w1":
            stream_fn, tools, kind = impl.scripted_model(deltas=n), (), MessageUpdate
        else:
            stream_fn, tools, kind = impl.scripted_model(turns=n), (impl.OK,), TurnEnd
        if tracing is not None:
            stream_fn = tracing.wrap_stream_fn(stream_fn)
        seen = 0
        context = AgentContext(tools=tools)
        async with agent_loop([UserMessage(content="go")], context, config, stream_fn=stream_fn) as events:
            async for event in events:
                if type(event) is kind:
                    seen += 1
        if exporter is not None:
            exporter.clear()
        return seen - (2 if workload == "w1" else 1)

    async def main() -> dict[str, float]:
        await run(max(size // 20, 2))
        rates = []
        for _ in range(REPEAT):
            start = time.process_time()
            count = await run(size)
            rates.append(count / (time.process_time() - start))
        return {"rate": statistics.median(rates), "count": count}

    return anyio.run(main, backend=backend)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--backend", default="both", choices=("asyncio", "trio", "both"))
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repetition")
    parser.add_argument("--one", nargs=4, metavar=("VARIANT", "WORKLOAD", "BACKEND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        variant, workload, backend, size = args.one
        print(json.dumps(_one(variant, workload, backend, int(size))))
        return 0
    backends = ("asyncio", "trio") if args.backend == "both" else (args.backend,)
    reps = 1 if args.quick else args.reps
    rates: dict[tuple[str, str, str], list[float]] = {}
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}
    for _ in range(reps):
        for key, (workload, size, _unit) in WORKLOADS.items():
            size = size // 10 if args.quick else size
            for backend in backends:
                for variant in VARIANTS:
                    out = subprocess.run(
                        [sys.executable, __file__, "--one", variant, workload, backend, str(size)],
                        capture_output=True,
                        text=True,
                        check=True,
                        env=env,
                    ).stdout
                    result = json.loads(out)
                    if result["count"] != size:
                        raise SystemExit(f"{key} {variant} {backend}: saw {result['count']} items, expected {size}")
                    rates.setdefault((key, backend, variant), []).append(result["rate"])
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {reps} processes x {REPEAT} runs (CPU time)")
    print(f"| workload | backend | {' | '.join(VARIANTS)} |")
    print("|---|---|" + "---|" * len(VARIANTS))
    for key, (_workload, _size, unit) in WORKLOADS.items():
        for backend in backends:
            base = statistics.median(rates[(key, backend, "off")])
            cells = []
            for variant in VARIANTS:
                rate = statistics.median(rates[(key, backend, variant)])
                cells.append(f"{rate:,.0f}" + ("" if variant == "off" else f" ({rate / base - 1:+.1%})"))
            print(f"| {key} ({unit}) | {backend} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
