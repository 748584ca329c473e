"""The markdown report: machine, figures with ratios, wall/CPU, import times, targets PASS/FAIL."""

from __future__ import annotations

from spec import AGENTLOOP, FIGURES, JOBS_BY_KEY, LIMITS, PEER_NAMES, PEERS, PI, TARGETS, Figure, Result, Target

ResultMap = dict[tuple[str, str, str], Result]


def peer_label(peer: str) -> str:
    return PEER_NAMES.get(peer, peer)


def figure_value(results: ResultMap, figure: Figure, impl: str, backend: str) -> float | None:
    result = results.get((figure.job, impl, backend))
    return None if result is None else figure.value(result)


def own_value(results: ResultMap, figure: Figure, backend: str) -> float | None:
    """agentloop's figure, or the limit's for the W5 rows."""
    impl = LIMITS if figure.key.startswith("W5") else AGENTLOOP
    return figure_value(results, figure, impl, backend)


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit in ("s",):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    if unit in ("KB", "us/delta", "us/turn"):
        return f"{value:.1f}" if value < 1000 else f"{value:,.0f}"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def advantage(figure: Figure, ours: float | None, theirs: float | None) -> float | None:
    """How many times better agentloop is (> 1: better), whatever the unit's direction."""
    if ours is None or theirs is None or ours == 0 or theirs == 0:
        return None
    return ours / theirs if figure.higher_is_better else theirs / ours


LIMIT_OF = {"W1": "W5m1", "W1a": "W5m1", "W2": "W5m2", "W2s": "W5m2", "W3": "W5g"}


def vs_limit(results: ResultMap, figure: Figure, backend: str) -> str:
    limit_key = LIMIT_OF.get(figure.key)
    if limit_key is None:
        return ""
    limit = next(f for f in FIGURES if f.key == limit_key)
    ours, floor = own_value(results, figure, backend), own_value(results, limit, backend)
    if ours is None or floor is None:
        return "-"
    if figure.higher_is_better:
        return f"{ours / floor:.0%} of minimal"
    return f"{ours / floor:.2f}x floor"


def figures_table(results: ResultMap, backends: tuple[str, ...], peers: list[str], quick: bool) -> list[str]:
    head = ["figure", "size", "unit", *(f"agentloop {b}" for b in backends), *(peer_label(p) for p in peers)]
    if PI in peers:
        head += [f"vs pi ({b})" for b in backends]
    head += [f"vs limit ({b})" for b in backends]
    lines = [row(head), row(["---", "---", "---", *(["---:"] * (len(head) - 3))])]
    for figure in FIGURES:
        cells = [figure.label, JOBS_BY_KEY[figure.job].describe(quick), figure.unit]
        cells += [fmt(own_value(results, figure, b), figure.unit) for b in backends]
        cells += [fmt(figure_value(results, figure, p, "asyncio"), figure.unit) for p in peers]
        if PI in peers:
            pi = figure_value(results, figure, PI, "asyncio")
            for b in backends:
                ours = None if figure.key.startswith("W5") else own_value(results, figure, b)
                cells.append(fmt_ratio(advantage(figure, ours, pi)))
        cells += [vs_limit(results, figure, b) for b in backends]
        lines.append(row(cells))
    return lines


def cpu_table(results: ResultMap, backends: tuple[str, ...], peers: list[str]) -> list[str]:
    jobs: list[str] = []
    for figure in FIGURES:
        if figure.job not in jobs:
            jobs.append(figure.job)
    columns = [(AGENTLOOP, b) for b in backends] + [(p, "asyncio") for p in peers]
    head = ["job", *(f"agentloop {b}" if i == AGENTLOOP else peer_label(i) for i, b in columns)]
    lines = [row(head), row(["---", *(["---:"] * len(columns))])]
    for job in jobs:
        cells = [job]
        for impl, backend in columns:
            if job.startswith("W5"):
                impl = LIMITS if impl == AGENTLOOP else impl
            result = results.get((job, impl, backend))
            cells.append("-" if result is None else f"{result.wall:.3f} / {result.cpu:.3f}")
        lines.append(row(cells))
    return lines


def imports_table(imports: dict[str, float], peers: list[str]) -> list[str]:
    if not imports:
        return []
    base = imports.get("base")
    names = [("base", "anyio + pydantic"), (AGENTLOOP, "agentloop"), *((p, peer_label(p)) for p in peers)]
    lines = [row(["import (fresh interpreter, median)", "ms", "vs anyio + pydantic"]), row(["---", "---:", "---:"])]
    for key, label in names:
        if key in imports:
            value = imports[key]
            lines.append(row([label, f"{value * 1000:.1f}", fmt_ratio(value / base if base else None)]))
    return lines


def target_value(results: ResultMap, imports: dict[str, float], target: Target, backend: str) -> float | None:
    if target.figure == "import":
        if "base" not in imports or AGENTLOOP not in imports:
            return None
        return imports[AGENTLOOP] / imports["base"]
    figure = next(f for f in FIGURES if f.key == target.figure)
    ours = own_value(results, figure, backend)
    if ours is None:
        return None
    if target.kind == "value<=":
        return ours
    kind, _, key = target.reference.partition(":")
    if kind == PI:
        theirs = figure_value(results, figure, PI, "asyncio")
    elif kind == "limit":
        theirs = own_value(results, next(f for f in FIGURES if f.key == key), backend)
    else:  # self
        theirs = own_value(results, next(f for f in FIGURES if f.key == key), backend)
    if theirs is None or theirs == 0:
        return None
    return ours / theirs


def verdict(target: Target, value: float | None) -> str:
    if value is None:
        return "n/a"
    ok = value >= target.threshold if target.kind == "ratio>=" else value <= target.threshold
    return "PASS" if ok else "FAIL"


def targets_table(results: ResultMap, imports: dict[str, float], backends: tuple[str, ...]) -> list[str]:
    head = ["target", *(f"{b}" for b in backends), "threshold", *(f"{b} verdict" for b in backends)]
    lines = [row(head), row(["---", *(["---:"] * (len(head) - 1))])]
    for target in TARGETS:
        values = [target_value(results, imports, target, b) for b in backends]
        unit = " KB" if target.kind == "value<=" else "x"
        shown = [("-" if v is None else f"{v:.2f}{unit}") for v in values]
        op = ">=" if target.kind == "ratio>=" else "<="
        lines.append(
            row([target.label, *shown, f"{op} {target.threshold:g}{unit}", *(verdict(target, v) for v in values)])
        )
    if imports:
        lazy = "PASS" if imports.get("httpx_loaded") == 0 else "FAIL"
        lines.append(
            row(["import agentloop leaves httpx unloaded", *(["-"] * len(backends)), "lazy", *([lazy] * len(backends))])
        )
    return lines


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(results: ResultMap, imports: dict[str, float], info: dict[str, str], backends: tuple[str, ...]) -> str:
    peers = [p for p in PEERS if any(k[1] == p for k in results)]
    out = [
        "# agentloop benchmark results",
        "",
        f"- date: {info['date']}; mode: {info['mode']}, {info['reps']} repetition(s), medians; "
        f"backends: {info['backends']}",
        f"- machine: {info['cpu']}; {info['platform']}",
        f"- python: {info['python']}; agentloop commit {info['commit']}",
        f"- load average (1/5/15 min): {info['load_start']} at the start, {info['load_end']} at the end; "
        f"1-min load at the start of each repetition: {info['rep_loads']}",
        f"- peers: {info['peers']} (peers run on asyncio only)",
        "",
        "## Figures",
        "",
        "`vs pi`: how many times better agentloop is than pi-ai-python (rates: ours/theirs, times and "
        "memory: theirs/ours; the trio column compares agentloop on trio with pi-ai-python on asyncio). "
        "`vs limit`: agentloop's rate as a share of the minimal loop's (W5), and W3's wall time over "
        "the task-group floor (the minimal loop's W3, W5m3, is in the W5 rows).",
        "",
        *figures_table(results, backends, peers, info["mode"] == "quick"),
        "",
        "## The floor",
        "",
        *targets_table(results, imports, backends),
        "",
    ]
    if imports:
        out += ["## Import time", "", *imports_table(imports, peers), ""]
    out += [
        "## Wall / CPU seconds per measurement (medians, all repeats of one process)",
        "",
        *cpu_table(results, backends, peers),
        "",
    ]
    return "\n".join(out)
