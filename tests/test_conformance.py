"""The conformance scenarios: agentloop's trace must equal the reference's golden trace.

The public scenarios come from `../shared/conformance` when it is there (else the copy in
`tests/conformance/public`); `tests/conformance/extra` holds scenarios of our own whose goldens
were made with the reference runner (`ref-runner.mjs --profile`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskStatus

from tests.conformance import run as runner
from tests.conformance.compare import first_difference

HERE = Path(__file__).parent / "conformance"
SHARED = Path(os.environ.get("AGENTLOOP_CONFORMANCE_DIR", HERE.parents[2] / "shared" / "conformance"))
PUBLIC = SHARED if (SHARED / "scenarios").is_dir() else HERE / "public"
SUITES = {"public": PUBLIC, "extra": HERE / "extra"}


def _cases() -> list[object]:
    cases: list[object] = []
    for suite, root in SUITES.items():
        for path in sorted((root / "scenarios").glob("*.json")):
            for backend in ("asyncio", "trio"):
                cases.append(pytest.param(root, path.stem, backend, id=f"{suite}-{path.stem}-{backend}"))
    return cases


def _load(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize(("root", "name", "backend"), _cases())
def test_scenario_matches_golden(root: Path, name: str, backend: str) -> None:
    scenario = json.loads((root / "scenarios" / f"{name}.json").read_text(encoding="utf-8"))
    trace = runner.run(scenario, backend=backend)
    # Compare as parsed JSON, the way compare.py does (key order free, true != 1).
    golden = _load(root / "golden" / f"{name}.jsonl")
    actual = json.loads(json.dumps(trace))
    for i, (want, got) in enumerate(zip(golden, actual, strict=False)):  # the lengths are compared after
        diff = first_difference(want, got)
        assert diff is None, f"line {i + 1}: {diff}\n golden: {want}\n actual: {got}"
    assert len(actual) == len(golden), f"{len(actual)} lines, golden has {len(golden)}"


# The bare form (`async for event in agent_loop(...)`) yields a tool batch's events once the batch
# has ended, so an injection that fires on one of them (an abort on a tool's progress update)
# comes after the batch instead of during it: those scenarios cannot give the golden's trace.
_BATCH_EVENTS = ("tool_execution_start", "tool_execution_update", "tool_execution_end")


def _fires_on_a_batch_event(scenario: dict[str, object]) -> bool:
    injections = scenario.get("injections") or []
    assert isinstance(injections, list)
    return any(
        inj["on"].get("type") in _BATCH_EVENTS or inj["on"].get("message.role") == "toolResult" for inj in injections
    )


def _loop_scenarios() -> list[tuple[Path, str, dict[str, object]]]:
    found = []
    for root in SUITES.values():
        for path in sorted((root / "scenarios").glob("*.json")):
            scenario = json.loads(path.read_text(encoding="utf-8"))
            if scenario["entry"] != "agent":
                found.append((root, path.stem, scenario))
    return found


def _bare_cases() -> list[object]:
    return [
        pytest.param(root, name, backend, id=f"{name}-{backend}")
        for root, name, scenario in _loop_scenarios()
        if not _fires_on_a_batch_event(scenario)
        for backend in ("asyncio", "trio")
    ]


def _events(lines: list[object]) -> list[object]:
    """The event lines of a trace (hook, tool, model and injection lines may interleave differently)."""
    return [
        line
        for line in lines
        if isinstance(line, dict) and not str(line["type"]).startswith(("hook:", "tool:", "llm:", "inject"))
    ]


@pytest.mark.parametrize(("root", "name", "backend"), _bare_cases())
def test_scenario_in_the_bare_form_gives_the_golden_events(root: Path, name: str, backend: str) -> None:
    scenario = json.loads((root / "scenarios" / f"{name}.json").read_text(encoding="utf-8"))
    trace = runner.run(scenario, "bare", backend)
    golden = _events(_load(root / "golden" / f"{name}.jsonl"))
    actual = _events(json.loads(json.dumps(trace)))
    diff = first_difference(golden, actual)
    assert diff is None, diff


def test_few_scenarios_are_left_out_of_the_bare_form() -> None:
    """Only scenarios that inject on a tool batch's event are left out, and they are few."""
    scenarios = _loop_scenarios()
    left_out = [name for _, name, scenario in scenarios if _fires_on_a_batch_event(scenario)]
    assert len(scenarios) >= 50
    assert len(left_out) <= len(scenarios) // 10, left_out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_busy_machine_does_not_change_a_trace(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """The scenarios' delays are virtual: stalling the whole process for 60 ms before every tool
    and hook delay, as a loaded machine may, changes no trace (on the machine's clock, it would
    reorder the calls' progress updates and ends)."""
    delay = runner.sleep

    async def stalled(ms: float, signal: Any = None) -> None:
        time.sleep(0.06)  # noqa: ASYNC251 - the process held up, every task with it
        await delay(ms, signal)

    monkeypatch.setattr(runner, "sleep", stalled)
    extra = SUITES["extra"]
    for root, name in [
        (PUBLIC, "loop_parallel_completion_order"),
        (extra, "loop_parallel_updates_interleaved"),
        (extra, "loop_parallel_updates_between_ends"),
    ]:
        scenario = json.loads((root / "scenarios" / f"{name}.json").read_text(encoding="utf-8"))
        trace = json.loads(json.dumps(runner.run(scenario, backend=backend)))
        diff = first_difference(_load(root / "golden" / f"{name}.jsonl"), trace)
        assert diff is None, f"{name}: {diff}"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_virtual_clock_ignores_a_busy_machine_and_jumps_to_the_next_timer(backend: str) -> None:
    async def main() -> tuple[float, float]:
        before = anyio.current_time()
        time.sleep(0.05)  # noqa: ASYNC251 - the process held up: the virtual clock does not see it
        busy = anyio.current_time() - before
        before = anyio.current_time()
        await anyio.sleep(3600)
        return busy, anyio.current_time() - before

    busy, slept = runner.run_virtual(main, backend)
    assert busy < 0.001
    assert 3600 <= slept < 3600.001


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_timers_with_the_same_delay_fire_one_pass_each_in_the_order_set(backend: str) -> None:
    """Tasks woken together set their timers in the order the scheduler runs them (trio shuffles
    it); each timer then fires in a pass of its own, in that order: a task woken by one runs on
    until it waits before the next fires."""

    async def main() -> tuple[list[int], list[str]]:
        go = anyio.Event()
        set_order: list[int] = []
        log: list[str] = []

        async def sleeper(i: int, *, task_status: TaskStatus[None]) -> None:
            task_status.started()
            await go.wait()
            set_order.append(i)
            await anyio.sleep(0.04)
            log.append(f"woken:{i}")
            await anyio.lowlevel.checkpoint()
            log.append(f"ran on:{i}")

        async with anyio.create_task_group() as tg:
            for i in range(6):
                await tg.start(sleeper, i)
            go.set()
        return set_order, log

    for _ in range(5):
        set_order, log = runner.run_virtual(main, backend)
        assert sorted(set_order) == list(range(6))
        assert log == [entry for i in set_order for entry in (f"woken:{i}", f"ran on:{i}")]


def test_public_suite_is_complete() -> None:
    """Every public scenario has its golden (the suite cannot silently shrink)."""
    names = {p.stem for p in (PUBLIC / "scenarios").glob("*.json")}
    goldens = {p.stem for p in (PUBLIC / "golden").glob("*.jsonl")}
    assert len(names) >= 60
    assert names == goldens
