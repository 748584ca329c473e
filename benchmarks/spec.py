"""What is measured: the jobs (one worker call each), the figures shown, and the floor agentloop keeps.

A job is one workload at one size; the runner runs it once per (implementation, backend,
repetition) in a fresh process. A figure turns a job's median result into a number with a unit.
A target compares agentloop's figures with pi-ai-python's, with the machine limits (W5), or with
agentloop's own figures at another size (W6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

AGENTLOOP = "agentloop"
LIMITS = "limits"
PI = "pi"
PYDANTIC_AI = "pydantic-ai"
OPENAI_AGENTS = "openai-agents"
PEERS = (PI, PYDANTIC_AI, OPENAI_AGENTS)
PEER_NAMES = {PI: "pi-ai-python", PYDANTIC_AI: "pydantic-ai", OPENAI_AGENTS: "openai-agents"}
PEER_MODULES = {PI: "pi_agent", PYDANTIC_AI: "pydantic_ai", OPENAI_AGENTS: "agents"}
PEER_DISTRIBUTIONS = {PI: "pi-ai-python", PYDANTIC_AI: "pydantic-ai-slim", OPENAI_AGENTS: "openai-agents"}
W6_TURNS = 21  # 20 tool turns and the final text turn


@dataclass(frozen=True)
class Size:
    size: int
    repeat: int = 1
    warmup: int = 0


@dataclass(frozen=True)
class Job:
    key: str
    workload: str
    symbol: str  # how the size reads in the table: N (deltas, items), T (turns), K (calls), C (agents), L (messages)
    impls: tuple[str, ...]
    full: Size
    quick: Size
    expect: Callable[[int], int] = lambda size: size
    """How many items the consumer must see in one call at this size (the sanity check)."""

    def size(self, quick: bool) -> Size:
        return self.quick if quick else self.full

    def describe(self, quick: bool) -> str:
        size = self.size(quick)
        text = f"{self.symbol}={size.size:,}"
        return text + (f" x{size.repeat}" if size.repeat > 1 else "")


_ALL = (AGENTLOOP, PI, PYDANTIC_AI, OPENAI_AGENTS)
_AL_PI = (AGENTLOOP, PI)

JOBS = (
    Job("W1", "w1_loop", "N", _ALL, Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W1a", "w1_agent", "N", _AL_PI, Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W1m", "w1_model", "N", _ALL, Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W1b", "w1_bare", "N", (AGENTLOOP,), Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W2", "w2_turns", "T", _ALL, Size(200, 2, 10), Size(20, 1, 5)),
    Job("W2s", "w2_turns", "T", _ALL, Size(20, 10, 10), Size(5, 1, 5)),
    Job("W2b", "w2_bare", "T", (AGENTLOOP,), Size(200, 2, 10), Size(20, 1, 5)),
    Job("W3", "w3_parallel", "K", _ALL, Size(100, 5, 10), Size(100, 1, 5)),
    Job("W4", "w4_agents", "C", _ALL, Size(1_000, 1, 10), Size(50, 1, 5)),
    Job("W4l", "w4_loops", "C", _AL_PI, Size(1_000, 1, 10), Size(50, 1, 5)),
    Job("W5gen", "async_generator", "N", (LIMITS,), Size(100_000, 1, 1_000), Size(5_000, 1, 100)),
    Job("W5s0", "stream_buffer0", "N", (LIMITS,), Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W5nw", "stream_nowait", "N", (LIMITS,), Size(100_000, 1, 1_000), Size(5_000, 1, 100)),
    Job("W5m1", "minimal_w1", "N", (LIMITS,), Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W5m2", "minimal_w2", "T", (LIMITS,), Size(200, 2, 10), Size(20, 1, 5)),
    Job("W5m3", "minimal_w3", "K", (LIMITS,), Size(100, 5, 10), Size(100, 1, 5)),
    Job("W5cs", "cancel_scopes", "N", (LIMITS,), Size(20_000, 1, 1_000), Size(2_000, 1, 100)),
    Job("W5g", "gather_sleeps", "K", (LIMITS,), Size(100, 5, 100), Size(100, 1, 100)),
    Job("W6short", "w1_loop", "N", _AL_PI, Size(2_000, 10, 1_000), Size(200, 10, 100)),
    Job("W6long", "w1_loop", "N", _AL_PI, Size(200_000, 1, 1_000), Size(20_000, 1, 100)),
    Job(
        "W6t10",
        "w6_transcript",
        "L",
        (AGENTLOOP, PI, PYDANTIC_AI),
        Size(10, 20, 10),
        Size(10, 3, 10),
        expect=lambda size: W6_TURNS,
    ),
    Job(
        "W6t1000",
        "w6_transcript",
        "L",
        (AGENTLOOP, PI, PYDANTIC_AI),
        Size(1_000, 20, 1_000),
        Size(200, 3, 200),
        expect=lambda size: W6_TURNS,
    ),
)
JOBS_BY_KEY = {job.key: job for job in JOBS}


@dataclass(frozen=True)
class Result:
    """The medians of one (job, implementation, backend) over the repetitions."""

    wall: float  # seconds, all repeats
    cpu: float
    count: int  # items seen, all repeats
    repeat: int
    peak_delta_kb: float
    reps: int


# A figure: (key, label, job, unit, how to compute it from a Result, higher is better).
@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    job: str
    unit: str
    value: Callable[[Result], float]
    higher_is_better: bool


def _rate(r: Result) -> float:
    return r.count / r.wall


def _wall_per_call(r: Result) -> float:
    return r.wall / r.repeat


def _us_per_item(r: Result) -> float:
    return r.wall / r.count * 1e6


def _cpu_per_call(r: Result) -> float:
    return r.cpu / r.repeat


def _kb_per_item(r: Result) -> float:
    return r.peak_delta_kb / (r.count / r.repeat)


FIGURES = (
    Figure("W1", "W1 streaming, `agent_loop` consumer", "W1", "deltas/s", _rate, True),
    Figure("W1a", "W1 streaming, `Agent` listener", "W1a", "deltas/s", _rate, True),
    Figure("W1m", "W1m scripted model alone", "W1m", "deltas/s", _rate, True),
    Figure("W1b", "W1b streaming, bare `async for`", "W1b", "deltas/s", _rate, True),
    Figure("W2", "W2 tool turns", "W2", "turns/s", _rate, True),
    Figure("W2s", "W2s tool turns, short run", "W2s", "turns/s", _rate, True),
    Figure("W2b", "W2b tool turns, bare `async for`", "W2b", "turns/s", _rate, True),
    Figure("W3", "W3 parallel tools sleeping 10 ms", "W3", "s", _wall_per_call, False),
    Figure("W4", "W4 concurrent agents x 5 tool turns", "W4", "s", _wall_per_call, False),
    Figure("W4cpu", "W4 CPU time", "W4", "s", _cpu_per_call, False),
    Figure("W4kb", "W4 peak RSS increase per agent", "W4", "KB", _kb_per_item, False),
    Figure("W4l", "W4l concurrent `agent_loop` runs x 5 tool turns", "W4l", "s", _wall_per_call, False),
    Figure("W4lkb", "W4l peak RSS increase per run", "W4l", "KB", _kb_per_item, False),
    Figure("W5gen", "W5 limit: plain async generator", "W5gen", "items/s", _rate, True),
    Figure("W5s0", "W5 limit: memory stream, buffer 0, await send/receive", "W5s0", "items/s", _rate, True),
    Figure("W5nw", "W5 limit: memory stream, send_nowait/receive_nowait", "W5nw", "items/s", _rate, True),
    Figure("W5m1", "W5 limit: minimal loop, W1 streaming", "W5m1", "deltas/s", _rate, True),
    Figure("W5m2", "W5 limit: minimal loop, W2 tool turns", "W5m2", "turns/s", _rate, True),
    Figure("W5m3", "W5 limit: minimal loop, W3, a cancel scope per tool call", "W5m3", "s", _wall_per_call, False),
    Figure("W5cs", "W5 limit: one anyio cancel scope (create, enter, leave)", "W5cs", "us/scope", _us_per_item, False),
    Figure("W5g", "W5 limit: task group of sleeps of 10 ms (W3 floor)", "W5g", "s", _wall_per_call, False),
    Figure("W6short", "W6 cost per delta, short answer", "W6short", "us/delta", _us_per_item, False),
    Figure("W6long", "W6 cost per delta, long answer", "W6long", "us/delta", _us_per_item, False),
    Figure("W6t10", "W6 cost per turn, short transcript", "W6t10", "us/turn", _us_per_item, False),
    Figure("W6t1000", "W6 cost per turn, long transcript", "W6t1000", "us/turn", _us_per_item, False),
)


@dataclass(frozen=True)
class Target:
    """`agentloop figure (op) reference <= / >= threshold`; the reference is a peer, a limit or a figure."""

    label: str
    figure: str
    reference: str  # "pi", "limit:<figure>", "self:<figure>", or "" (absolute)
    kind: str  # "ratio>=", "ratio<=", "value<="
    threshold: float


# The floor: set by the peers (pi-ai-python is the fastest of them) and by the minimal loop.
TARGETS = (
    Target("W1 `agent_loop` consumer >= 1.1x pi-ai-python", "W1", "pi", "ratio>=", 1.1),
    Target("W2 tool turns >= 1.1x pi-ai-python", "W2", "pi", "ratio>=", 1.1),
    Target("W3 within 2x of the minimal loop", "W3", "limit:W5m3", "ratio<=", 2.0),
    Target("W4 CPU <= 1.25x pi-ai-python's", "W4cpu", "pi", "ratio<=", 1.25),
    Target("W4 memory per agent <= 1.3x pi-ai-python's", "W4kb", "pi", "ratio<=", 1.3),
    Target("W6 long answer <= 1.3x per delta", "W6long", "self:W6short", "ratio<=", 1.3),
    Target("W6 long transcript <= 1.5x per turn", "W6t1000", "self:W6t10", "ratio<=", 1.5),
    Target("import agentloop <= 1.3x anyio + pydantic", "import", "import:base", "ratio<=", 1.3),
)
