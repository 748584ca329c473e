"""Chart of a benchmark run: `python plot.py RESULTS.json results.png` (needs matplotlib).

Three panels: W1 deltas/s and W2 turns/s per implementation (log scale), and W6 growth (cost per
delta and per turn, long over short, with the targets).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spec import FIGURES, PEER_NAMES, PEERS, Result

COLUMNS = [("agentloop", "asyncio"), ("agentloop", "trio"), *((peer, "asyncio") for peer in PEERS)]
COLORS = {"agentloop": "#1f77b4", "pi": "#ff7f0e", "pydantic-ai": "#2ca02c", "openai-agents": "#d62728"}


def load(path: Path) -> tuple[dict, dict[tuple[str, str, str], Result]]:
    data = json.loads(path.read_text())
    results = {tuple(k.split("|")): Result(**v) for k, v in data["results"].items()}
    return data["machine"], results  # type: ignore[return-value]


def value(results: dict, key: str, impl: str, backend: str) -> float | None:
    figure = next(f for f in FIGURES if f.key == key)
    result = results.get((figure.job, impl, backend))
    return None if result is None else figure.value(result)


def bars(ax: plt.Axes, results: dict, keys: list[tuple[str, str]], unit: str, ceiling: str) -> None:
    width = 0.8 / len(keys)
    labels = []
    present = [(i, b) for i, b in COLUMNS if any(value(results, k, i, b) for k, _ in keys)]
    for n, (impl, backend) in enumerate(present):
        labels.append(("agentloop " + backend) if impl == "agentloop" else PEER_NAMES[impl])
        for m, (key, _) in enumerate(keys):
            v = value(results, key, impl, backend)
            if v is None:
                continue
            x = n + (m - (len(keys) - 1) / 2) * width
            bar = ax.bar(
                x,
                v,
                width * 0.95,
                color=COLORS[impl],
                alpha=1.0 if m == 0 else 0.55,
                hatch="" if backend == "asyncio" else "//",
            )
            ax.bar_label(bar, labels=[f"{v:,.0f}"], fontsize=7, rotation=90, padding=2)
    ax.set_xticks(range(len(present)), labels, rotation=20, ha="right", fontsize=8)
    limit = value(results, ceiling, "limits", "asyncio")
    if limit:
        ax.axhline(limit, color="gray", linestyle=":", linewidth=1)
        ax.annotate(
            f"minimal loop (W5, asyncio): {limit:,.0f}",
            (0.99, limit),
            xycoords=("axes fraction", "data"),
            fontsize=7,
            color="gray",
            va="bottom",
            ha="right",
        )
    ax.set_yscale("log")
    ax.set_ylabel(unit)
    ax.set_title(" / ".join(title for _, title in keys) + " (light bar: second)", fontsize=9)
    ax.margins(y=0.25)


def growth(ax: plt.Axes, results: dict) -> None:
    groups = [
        ("W6long", "W6short", "long answer\n(per delta)", 1.3),
        ("W6t1000", "W6t10", "long transcript\n(per turn)", 1.5),
    ]
    present = [(i, b) for i, b in COLUMNS if value(results, "W6short", i, b) or value(results, "W6t10", i, b)]
    width = 0.8 / max(len(present), 1)
    labelled: set[str] = set()
    for g, (long, short, _, target) in enumerate(groups):
        ax.hlines(target, g - 0.45, g + 0.45, colors="black", linestyles="dashed", linewidth=1)
        for n, (impl, backend) in enumerate(present):
            a, b = value(results, long, impl, backend), value(results, short, impl, backend)
            if not a or not b:
                continue
            x = g + (n - (len(present) - 1) / 2) * width
            label = ("agentloop " + backend) if impl == "agentloop" else PEER_NAMES[impl]
            bar = ax.bar(
                x,
                a / b,
                width * 0.95,
                color=COLORS[impl],
                hatch="" if backend == "asyncio" else "//",
                label=None if label in labelled else label,
            )
            labelled.add(label)
            ax.bar_label(bar, labels=[f"{a / b:.2f}x"], fontsize=7, padding=2)
    ax.set_xticks(range(len(groups)), [g[2] for g in groups], fontsize=8)
    ax.set_ylabel("long / short cost")
    ax.set_title("W6 growth (dashed: target)", fontsize=9)
    ax.legend(fontsize=7)
    ax.margins(y=0.2)


def main() -> None:
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    machine, results = load(source)
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.5))
    bars(axes[0], results, [("W1", "W1 agent_loop consumer"), ("W1a", "Agent listener")], "deltas/s", "W5m1")
    bars(axes[1], results, [("W2", "W2 turns/s (T=200)"), ("W2s", "W2s (T=20)")], "turns/s", "W5m2")
    growth(axes[2], results)
    fig.suptitle(
        f"agentloop benchmarks - {machine['date']}, {machine['python']}, {machine['cpu']}, "
        f"load {machine['load_start']} (hatched: trio)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main()
