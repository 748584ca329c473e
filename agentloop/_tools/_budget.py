"""The budget of one tool call's validation: every step of it counted against one set of limits.

A tool's schema may come from a third party (an MCP server, a user config) and its arguments
from the model, so what validating costs is chosen by others. Everything a validation does is
charged to one budget: the schema's own check against its meta-schema (the first time), each
keyword check, each step of the coercion, each pattern search. Past `MAX_SCHEMA_STEPS` steps or
`MAX_SCHEMA_SECONDS` of CPU, the validation stops with `TooCostly`, which the model gets as a
validation error.

A run tries each validation first on the event loop's thread with a small budget
(`FIRST_TRY_STEPS`, `FIRST_TRY_SECONDS`: most validations need far less); one that needs more is
stopped there with `NeedsMore`, and done again in a worker thread with the whole budget, so that
it cannot hold the event loop for more than a few milliseconds.

Nesting is bounded too, so that Python's recursion limit is never reached by accident (native
code turns a `RecursionError` into an exception that nothing expects): arguments may nest
`MAX_ARGUMENT_DEPTH` arrays and objects deep, and the nested checks of one validation (a schema
inside another, a `$ref`, a coercion step inside another) may go `MAX_NESTING` deep.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = (
    "FIRST_TRY_SECONDS",
    "FIRST_TRY_STEPS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_NESTING",
    "MAX_SCHEMA_SECONDS",
    "MAX_SCHEMA_STEPS",
    "NESTS_TOO_DEEPLY",
    "Budget",
    "NeedsMore",
    "TooCostly",
    "argument_depth_over",
    "budget",
    "current",
    "first_try",
    "spend",
    "value_key",
)

MAX_SCHEMA_STEPS = 100_000
"""How many steps (keyword checks, coercion steps, pattern searches) one tool call's validation
may take. A real call stays far below it: an array of 5,000 objects of ten typed properties
(about 60 KB of JSON) takes 60,000."""

MAX_SCHEMA_SECONDS = 1.0
"""How much CPU time (of the thread that validates) one tool call's validation may take: the
bound for steps that each cost more than most (a `$ref`, compiling a pattern)."""

MAX_ARGUMENT_DEPTH = 64
"""How many arrays and objects a tool call's arguments may nest; deeper arguments are refused
before anything else is checked."""

MAX_NESTING = 256
"""How deep the checks of one validation may nest (a schema inside another, a `$ref` followed, a
coercion step inside another): arguments `MAX_ARGUMENT_DEPTH` deep against a recursive schema
need about three levels per level of the arguments."""


FIRST_TRY_STEPS = 10_000
"""The steps of a validation's first try, on the event loop's thread."""

FIRST_TRY_SECONDS = 0.02
"""The CPU time of a validation's first try, on the event loop's thread."""


class TooCostly(Exception):
    """A validation used up its budget (steps, CPU time or nesting); `what` says which, as
    "more than 100000 schema checks", "more than 1 s of CPU" or "nesting more than 256 levels
    deep"; `lasting` is false for the CPU time, which another try may not use up."""

    def __init__(self, message: str, what: str, lasting: bool = True) -> None:
        super().__init__(message)
        self.what = what
        self.lasting = lasting


class NeedsMore(TooCostly):
    """A first try used up its small budget (or found the stack of its thread too deep): the
    validation is to be done again in a worker thread, with the whole budget."""


NESTS_TOO_DEEPLY = "the schema or the arguments nest too deeply"


class Budget:
    """What one validation may still spend: steps, CPU time (`time.thread_time`), nesting.

    `memo`, when the validation sets it, holds what each keyword check answered (see
    `_schema_checks`), so that a schema node reached many times over is checked once per value.
    """

    __slots__ = ("deadline", "depth", "first_try", "left", "memo", "pause", "seconds", "steps")

    def __init__(self, steps: int, seconds: float, first_try: bool = False) -> None:
        self.first_try = first_try
        self.steps = steps
        self.left = steps
        self.seconds = seconds
        now = time.thread_time()
        self.deadline = now + seconds
        self.pause = now + _TURN
        self.depth = 0
        self.memo: dict[Any, Any] | None = None

    def spend(self, steps: int) -> None:
        """Count `steps`; `TooCostly` once the steps or the time are used up."""
        self.left -= steps
        if self.left < 0:
            what = f"more than {self.steps} schema checks"
            raise self._used_up(f"the arguments take {what} against this schema", what, True)
        now = time.thread_time()
        if now > self.deadline:
            what = f"more than {self.seconds:g} s of CPU"
            raise self._used_up(f"the arguments take {what} to check against this schema", what, False)
        if now > self.pause:  # let the other threads (the event loop's) have the interpreter
            time.sleep(_A_MICROSECOND)
            self.pause = now + _TURN

    def enter(self) -> None:
        """Count one step, one level deeper; `TooCostly` past `MAX_NESTING` levels, or when the
        thread's stack comes near Python's recursion limit (`leave` undoes the level)."""
        self.spend(1)
        if self.depth >= MAX_NESTING or (self.depth % 8 == 0 and _stack_near_its_limit()):
            raise self._used_up(NESTS_TOO_DEEPLY, f"nesting more than {MAX_NESTING} levels deep", True)
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1

    def _used_up(self, message: str, what: str, lasting: bool) -> TooCostly:
        if self.first_try:
            return NeedsMore(message, what, lasting=False)
        return TooCostly(message, what, lasting)


_TURN = 0.002
"""Seconds of CPU after which a validation lets the other threads run: it sleeps for a
microsecond, so that the event loop's thread, waiting for the interpreter, gets it every few
milliseconds. (`time.sleep(0)` is not enough: on Python 3.10 the thread that gives the interpreter
up that way takes it back before the waiting one wakes, again and again, and the event loop waits
for the whole validation.)"""


_A_MICROSECOND = 1e-6

_STACK_MARGIN = 150
"""Frames kept free below Python's recursion limit: what a few more levels, an error's way out
and native code calling back into Python (a `$ref` lookup compares keys in Python) may use."""


def _stack_near_its_limit() -> bool:
    """Whether this thread's stack is within `_STACK_MARGIN` frames of the recursion limit (the
    validation may be called from deep in a program, and each level takes a few frames)."""
    try:
        sys._getframe(max(sys.getrecursionlimit() - _STACK_MARGIN, 1))
    except ValueError:
        return False
    return True


_BUDGET: ContextVar[Budget | None] = ContextVar("agentloop_schema_budget", default=None)


_FIRST_TRY: ContextVar[bool] = ContextVar("agentloop_schema_first_try", default=False)


@contextmanager
def budget(steps: int | None = None, seconds: float | None = None) -> Iterator[None]:
    """Charge what validation does in this block to a new budget (the module's limits by default,
    the first try's within `first_try`)."""
    steps = MAX_SCHEMA_STEPS if steps is None else steps
    seconds = MAX_SCHEMA_SECONDS if seconds is None else seconds
    if _FIRST_TRY.get():
        made = Budget(min(steps, FIRST_TRY_STEPS), min(seconds, FIRST_TRY_SECONDS), first_try=True)
    else:
        made = Budget(steps, seconds)
    token = _BUDGET.set(made)
    try:
        yield
    finally:
        _BUDGET.reset(token)


@contextmanager
def first_try() -> Iterator[None]:
    """The validations in this block have the first try's budget, and end with `NeedsMore` past it."""
    token = _FIRST_TRY.set(True)
    try:
        yield
    finally:
        _FIRST_TRY.reset(token)


def current() -> Budget | None:
    """The budget of the validation going on in this context, if any."""
    return _BUDGET.get()


def spend(steps: int = 1) -> None:
    """Count `steps` against the current budget (nothing outside one); `TooCostly` once it is used up."""
    current = _BUDGET.get()
    if current is not None:
        current.spend(steps)


def argument_depth_over(value: Any, limit: int) -> bool:
    """Whether a JSON value nests more than `limit` arrays and objects (without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def value_key(value: object) -> object:
    """What a value is known by in a memo: a scalar by its type and value, anything else by its
    identity (the memo keeps the value alive, so the identity is not reused)."""
    if value is None or isinstance(value, (str, int, float)):
        return (type(value), value)
    return id(value)
