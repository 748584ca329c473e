"""The order of a parallel tool batch, as pi-agent-core 0.73.1 gives it: the rules in one place.

The batch's calls have all been preflighted (each has had its `tool_execution_start`, and those
that failed preflight their `tool_execution_end`). What is left to order is the execution of the
runnable calls and their finalization (`after_tool_call`, then `tool_execution_end`). The
reference starts every execution as a promise and finalizes each in a `.then`; in Python each call
runs in a task of its own, and these rules make the order the same whatever order the scheduler
runs ready tasks in (trio shuffles them):

1. **Calls begin in source order.** Each call's task is started with `TaskGroup.start`, which
   returns once the task has run up to its first wait: the tool's code up to its first `await`
   (a progress update it reports at once, say) runs before the next call begins, as the synchronous
   part of a JavaScript async function does.
2. **Barriers.** A call whose tool has `execution_mode="sequential"` begins only after every earlier
   call is finalized, and later calls begin only after it is finalized. The batch is cut into
   groups (`groups`): each barrier alone, the calls between barriers together; the groups run one
   after the other.
3. **Finalized in completion order**, and only once every call of its group has begun.
4. **Calls that complete in the same scheduler pass are finalized in source order** (timers due
   together fire in the order they were set, in JavaScript). After the first completion the
   batch lets scheduler passes go by until one brings no new completion, then finalizes what has
   completed by then, sorted. (One pass is not enough on trio: it runs a pass's tasks in a
   shuffled order, so the batch's own task may run between two calls that complete in the pass
   it resumes in.)
5. **`after_tool_call` runs before the call's `tool_execution_end`**, and each finalization runs up
   to its first wait before the next one begins (a `.then` callback): a slow hook or listener
   holds up only its own call.

Worked examples (t1, t2, t3 in source order; "ends" are `tool_execution_end` events):

* t1 sleeps 30 ms, t2 10 ms: begin t1, begin t2; t2 completes first: `end(t2), end(t1)`.
* t1 and t2 both return at once: they complete in the same pass: `end(t1), end(t2)` (rule 4),
  whichever task trio ran first.
* t1 (parallel), t2 (barrier), t3 (parallel): groups `[t1] [t2] [t3]`; t2 begins after `end(t1)`
  (and, through the `Agent`, after every listener of it returned), t3 after `end(t2)`.
* t1's `after_tool_call` waits 20 ms, t2's returns at once, both tools return at once: t1's
  finalization begins first and waits in its hook, t2's runs through: `end(t2), end(t1)`.

A group of one call (a barrier, a batch of one) runs in the batch's own task: with nothing beside
it, rules 1, 3 and 4 have nothing to order, and rule 5 is its finalization after its execution.

The toolResult messages are not ordered here: they follow the assistant's source order, after the
whole batch (`_execution`). Nor are the progress updates: the batch delivers them in the order
they are reported, whichever call reports them (`_updates`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from ._util import single_exception

if TYPE_CHECKING:
    from anyio.abc import TaskStatus
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("ParallelBatch", "groups")

C = TypeVar("C")
R = TypeVar("R")


def groups(calls: Sequence[C], is_barrier: Callable[[C], bool]) -> list[list[C]]:
    """The batch cut at its barriers (rule 2): each barrier alone, the calls between them together."""
    cut: list[list[C]] = []
    after_barrier = True
    for call in calls:
        barrier = is_barrier(call)
        if barrier or after_barrier:
            cut.append([call])
        else:
            cut[-1].append(call)
        after_barrier = barrier
    return cut


class ParallelBatch(Generic[C, R]):
    """Runs a batch's calls in the reference's order (see the module's docstring).

    `execute(call)` runs one call in its own task and returns its outcome, or None when
    the call was answered without running (it emitted its own end); `finalize(call, outcome)`
    runs `after_tool_call` and emits `tool_execution_end`. `slots(call)` are the semaphores the
    call holds while it executes, taken in source order before it begins.
    """

    def __init__(
        self,
        execute: Callable[[C], Awaitable[R | None]],
        finalize: Callable[[C, R], Awaitable[None]],
        is_barrier: Callable[[C], bool],
        slots: Callable[[C], Sequence[anyio.Semaphore]],
    ) -> None:
        self.execute = execute
        self.finalize = finalize
        self.is_barrier = is_barrier
        self.slots = slots

    async def run(self, calls: Sequence[C]) -> None:
        """Run every call: group after group (rule 2)."""
        try:
            for group in groups(calls, self.is_barrier):
                await self._run_group(group)
        except BaseExceptionGroup as group_failure:
            raise single_exception(group_failure) from None

    async def _run_group(self, group: list[C]) -> None:
        if len(group) == 1:
            await self._run_alone(group[0])
            return
        send, completed = anyio.create_memory_object_stream[tuple[int, R]](math.inf)
        with completed:
            async with anyio.create_task_group() as tg:
                with send:
                    for position, call in enumerate(group):  # rule 1
                        for slot in self.slots(call):
                            await slot.acquire()
                        await tg.start(self._call, position, call, send.clone())
                while ready := await _completed_in_one_pass(completed):  # rules 3 and 4
                    for position, outcome in ready:
                        await tg.start(self._finalize, group[position], outcome)  # rule 5

    async def _run_alone(self, call: C) -> None:
        slots = self.slots(call)
        for slot in slots:
            await slot.acquire()
        try:
            outcome = await self.execute(call)
        finally:
            for slot in slots:
                slot.release()
        if outcome is not None:
            await self.finalize(call, outcome)

    async def _call(
        self,
        position: int,
        call: C,
        completed: MemoryObjectSendStream[tuple[int, R]],
        *,
        task_status: TaskStatus[None],
    ) -> None:
        """A call's task: its tool runs right away; its outcome is sent to be finalized."""
        task_status.started()
        with completed:
            try:
                outcome = await self.execute(call)
            finally:
                for slot in self.slots(call):
                    slot.release()
            if outcome is not None:
                completed.send_nowait((position, outcome))

    async def _finalize(self, call: C, outcome: R, *, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await self.finalize(call, outcome)


async def _completed_in_one_pass(completed: MemoryObjectReceiveStream[tuple[int, R]]) -> list[tuple[int, R]]:
    """The calls that completed next, in source order: the first one (taken at once if it is
    already there, else waited for), and those that complete in the scheduler passes that follow
    until one pass brings none. Empty when every call of the group has ended."""
    try:
        ready = [completed.receive_nowait()]
    except anyio.WouldBlock:
        try:
            ready = [await completed.receive()]
        except anyio.EndOfStream:
            return []
    except anyio.EndOfStream:
        return []
    taken = 0
    while taken < len(ready):  # the last pass brought a completion: the next may bring its peers
        taken = len(ready)
        await anyio.lowlevel.checkpoint()  # the calls that complete in this pass line up too (rule 4)
        while True:
            try:
                ready.append(completed.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
    return sorted(ready, key=itemgetter(0))
