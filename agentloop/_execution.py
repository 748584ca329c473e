"""Tool batches: preflight, parallel / sequential / barrier execution, hooks, bounded abort."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Awaitable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskStatus

from ._abort import AbortCut
from ._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolInvocation,
    call,
)
from ._events import MessageEnd, MessageStart, ToolExecutionEnd, ToolExecutionStart, ToolExecutionUpdate
from ._tools import AgentTool, validate_tool_arguments
from ._types import (
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    error_result,
    tool_result_message,
)
from ._updates import DELIVERED, Delivery, Flag, Flags, UpdatePump, settle
from ._util import exception_text, single_exception

if TYPE_CHECKING:
    from ._loop import _Run

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("execute_tool_calls", "fail_truncated_tool_calls")

ABORTED = "Operation aborted"
TRUNCATED = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its arguments '
    "may be truncated. Re-issue the tool call with complete arguments."
)


class _Prepared:
    """A call that passed preflight: its tool and validated arguments; while it runs, what its `on_update` acts on."""

    __slots__ = ("args", "execute", "finished", "pump", "run", "tool", "tool_call")

    def __init__(self, run: _Run, tool_call: ToolCall, tool: AgentTool, args: Any) -> None:
        self.run = run
        self.tool_call = tool_call
        self.tool = tool
        self.args = args
        self.execute = tool.execute if tool._execute is None else tool._execute  # one frame less
        self.finished = False
        self.pump: UpdatePump | None = None

    def on_update(self, partial_result: AgentToolResult) -> Delivery:
        if self.finished:
            return DELIVERED  # progress reported after the tool finished is ignored
        if not isinstance(partial_result, AgentToolResult):
            raise TypeError(f"on_update expects an AgentToolResult, got {type(partial_result).__name__}")
        run, tool_call = self.run, self.tool_call
        if self.pump is None:
            self.pump = UpdatePump(run.deliver, run.plain, run.task_group)
        return self.pump.push(ToolExecutionUpdate(tool_call.id, tool_call.name, tool_call.arguments, partial_result))


class _Finalized:
    """A call's outcome, ready for `tool_execution_end` and its result message."""

    __slots__ = ("is_error", "result", "tool_call")

    def __init__(self, tool_call: ToolCall, result: AgentToolResult, is_error: bool) -> None:
        self.tool_call = tool_call
        self.result = result
        self.is_error = is_error


def _end_event(fin: _Finalized) -> ToolExecutionEnd:
    return ToolExecutionEnd(fin.tool_call.id, fin.tool_call.name, fin.result, fin.is_error)


async def _emit_end(run: _Run, fin: _Finalized) -> None:
    if (pending := run.deliver(_end_event(fin))) is not None:
        await settle(pending)


async def _emit_results(run: _Run, results: list[_Finalized]) -> list[ToolResultMessage]:
    """Emit the toolResult message (`message_start`, `message_end`) of each finalized call."""
    messages = []
    for fin in results:
        message = tool_result_message(fin.tool_call.id, fin.tool_call.name, fin.result, fin.is_error, run.clock())
        if (pending := run.deliver(MessageStart(message))) is not None:
            await settle(pending)
        if (pending := run.deliver(MessageEnd(message))) is not None:
            await settle(pending)
        messages.append(message)
    return messages


async def fail_truncated_tool_calls(run: _Run, tool_calls: Sequence[ToolCall]) -> list[ToolResultMessage]:
    """Fail every call of a response cut off by the token limit: its arguments may be truncated."""
    messages = []
    for tool_call in tool_calls:
        if (pending := run.deliver(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))) is not None:
            await settle(pending)
        fin = _Finalized(tool_call, error_result(TRUNCATED.format(name=tool_call.name)), True)
        await _emit_end(run, fin)
        messages += await _emit_results(run, [fin])
    return messages


def execute_tool_calls(
    run: _Run, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> Awaitable[tuple[list[ToolResultMessage], bool]]:
    """Run one batch; return its tool-result messages in source order and whether to terminate.

    (A plain function returning the coroutine: one frame less for every agent waiting on a tool.)
    """
    sequential = run.config.tool_execution == "sequential"
    if len(tool_calls) == 1:
        return _single(run, assistant, tool_calls[0], recheck=not sequential)  # the usual batch
    if sequential:
        return _sequential(run, assistant, tool_calls)
    return _parallel(run, assistant, tool_calls)


async def _single(
    run: _Run, assistant: AssistantMessage, tool_call: ToolCall, *, recheck: bool
) -> tuple[list[ToolResultMessage], bool]:
    """One call from start to result: a batch of one, or a call of a sequential batch.

    With `recheck` (a parallel batch) an abort during an awaited preflight step answers the call
    "Operation aborted"; a sequential call goes on to execute with the aborted signal, as in the
    reference.
    """
    if (pending := run.deliver(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))) is not None:
        await settle(pending)
    prepared = _preflight(run, tool_call)
    if prepared is None:
        prepared = await _prepare(run, assistant, tool_call)
    if isinstance(prepared, _Finalized):
        fin = prepared
    elif recheck and run.signal._aborted:
        fin = _Finalized(tool_call, error_result(ABORTED), True)
    else:
        fin = await _execute(run, prepared)
        if run.config.after_tool_call is not None:
            fin = await _finalize(run, assistant, prepared, fin)
    if (pending := run.deliver(_end_event(fin))) is not None:
        await settle(pending)
    message = tool_result_message(tool_call.id, tool_call.name, fin.result, fin.is_error, run.clock())
    if (pending := run.deliver(MessageStart(message))) is not None:
        await settle(pending)
    if (pending := run.deliver(MessageEnd(message))) is not None:
        await settle(pending)
    return [message], fin.result.terminate is True


async def _sequential(
    run: _Run, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> tuple[list[ToolResultMessage], bool]:
    messages: list[ToolResultMessage] = []
    terminate = True
    for tool_call in tool_calls:
        result, stop = await _single(run, assistant, tool_call, recheck=False)
        messages += result
        terminate = terminate and stop
    return messages, terminate


async def _parallel(
    run: _Run, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> tuple[list[ToolResultMessage], bool]:
    finalized: list[_Finalized | None] = [None] * len(tool_calls)
    runnable: list[tuple[int, _Prepared]] = []
    for index, tool_call in enumerate(tool_calls):
        if (pending := run.deliver(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))) is not None:
            await settle(pending)
        prepared = _preflight(run, tool_call)
        if prepared is None:
            prepared = await _prepare(run, assistant, tool_call)
        if isinstance(prepared, _Finalized):
            await _emit_end(run, prepared)
            finalized[index] = prepared
        else:
            runnable.append((index, prepared))
    if runnable:
        await _Batch(run, assistant, runnable, finalized).run()
    results = [fin for fin in finalized if fin is not None]
    messages = await _emit_results(run, results)
    return messages, bool(results) and all(fin.result.terminate is True for fin in results)


_CALL_TASK = "agentloop: a parallel tool call"
_CUT_TASK = "agentloop: the abort's grace period"


class _Batch:
    """Runs prepared calls concurrently, with exclusive barriers, in the reference's order.

    A barrier call (`execution_mode="sequential"`) begins after every earlier call is finalized;
    any other call begins after every earlier barrier call is finalized. Whatever the scheduler
    does (trio shuffles ready tasks), the order is the reference's (JavaScript promise) order:
    calls begin in source order; every call that may run beside a call begins before that call is
    finalized; calls whose tools finished are finalized in the order they finished, and calls
    whose tools finished in the same scheduler pass in source order (as equal JavaScript timers
    fire in the order they were set).

    The abort's grace cut needs no cancel scope per call: each call runs in a task, and a task's
    own scope (its `TaskHandle`) is cancelled if its tool still runs when the grace period ends.
    What is left of a call after its tool (updates, `after_tool_call`, `tool_execution_end`) then
    goes on in a fresh task (`finish`), since every wait of the cut task would be cancelled.
    """

    def __init__(
        self,
        run: _Run,
        assistant: AssistantMessage,
        runnable: list[tuple[int, _Prepared]],
        finalized: list[_Finalized | None],
    ) -> None:
        self.run_ = run
        self.assistant = assistant
        self.runnable = runnable
        self.finalized = finalized
        count = len(runnable)
        self.barrier = [p.tool.execution_mode == "sequential" for _, p in runnable]
        self.barriers = [k for k in range(count) if self.barrier[k]]
        self.done = Flags(count)  # finalized
        self.began = Flags(count)  # begun (or ended without beginning)
        self.in_line = run.config.after_tool_call is None  # the releaser finalizes the calls
        # With `after_tool_call` each call finalizes itself, let go by the one before it.
        self.finishing = Flags(0 if self.in_line else count)
        self.go = Flags(0 if self.in_line else count)
        self.next_to_take = 0  # the next call a task takes
        self.next_to_begin = 0
        self.waiting: list[tuple[int, anyio.Event]] = []  # calls waiting for their turn to begin
        self.ready: list[int] = []  # calls whose tools finished, waiting to be finalized
        self.executed: list[_Finalized | None] = [None] * count  # what each tool returned
        self.successor: list[int | None] = [None] * count  # who is let go after a call
        self.releasing = False
        self.task_group: Any = None
        self.handles: list[anyio.TaskHandle[None]] = []  # by task: the abort's cut cancels a task
        self.executing = [False] * count  # by task: its tool is running
        self.cut = [False] * count  # by task: the abort's grace period ended while its tool ran
        self.running = 0  # tools running
        self.idle: Flag | None = None  # set when no tool runs (made by `cut_after_grace`)
        # Execution slots: the batch's (`max_parallel_tool_calls`) and each limited tool's.
        self.slots = _slots(run, runnable)
        # The last call of each run of calls that may execute together.
        self.group_end = list(range(count))
        for k in range(count - 2, -1, -1):
            if not self.barrier[k] and not self.barrier[k + 1]:
                self.group_end[k] = self.group_end[k + 1]

    async def run(self) -> None:
        signal = self.run_.signal
        key = -1 if signal._aborted else signal._listen(self.on_abort)
        try:
            async with anyio.create_task_group() as tg:
                self.task_group = tg
                handles = self.handles
                for j in range(len(self.runnable)):
                    handles.append(tg.create_task(self.one(j), name=_CALL_TASK))  # named: anyio's default costs more
        except BaseExceptionGroup as group:
            raise single_exception(group) from None
        finally:
            signal._callbacks.pop(key, None)

    async def one(self, j: int) -> None:
        """Task `j`: a call from its turn to begin to its hand-over to `finish`."""
        # A task takes the next call when it first runs, whatever order the scheduler runs the
        # tasks in (trio runs a pass forwards or backwards): without barriers, calls begin in
        # source order with no waiting.
        k = self.next_to_take
        self.next_to_take = k + 1
        run, barrier, began = self.run_, self.barrier, self.began
        index, prepared = self.runnable[k]
        handed_over = False  # to `finish`, which finalizes the call
        try:
            for b in range(k) if barrier[k] else self.barriers:  # not O(calls) per call
                if b >= k:
                    break
                await self.done.wait(b)
            while self.next_to_begin < k:
                # After a barrier, calls begin in source order too: every begin wakes all the
                # calls waiting, in source order (an event each: trio wakes the waiters of one
                # event in no set order), so that a pass run backwards costs one more pass, not
                # one pass per call.
                turn = anyio.Event()
                self.waiting.append((k, turn))
                await turn.wait()
            slots = self.slots[k]
            for slot in slots:  # taken in source order: the next call waits for this one to begin
                try:
                    slot.acquire_nowait()
                except anyio.WouldBlock:
                    await slot.acquire()
            self.begin(k)
            if run.signal._aborted:
                for slot in slots:
                    slot.release()
                fin = _Finalized(prepared.tool_call, error_result(ABORTED), True)
                await _emit_end(run, fin)
                self.finalized[index] = fin
                return
            # The tool runs; while it does, an abort's grace period may cut it (`cut_after_grace`).
            self.executing[j] = True
            self.running += 1
            value: object = None
            failure: AgentToolResult | None = None
            try:
                value = await _run_tool(run, prepared)
            except Exception as exc:
                failure = _error(run, exc)
            except BaseException:
                if self.cut[j]:  # the abort's cut (this task's own cancel scope): answered by `finish`
                    handed_over = True
                    self.task_group.start_soon(
                        self.finish, k, _Finalized(prepared.tool_call, error_result(ABORTED), True)
                    )
                raise
            finally:
                for slot in slots:
                    slot.release()
                prepared.finished = True
                self.executing[j] = False
                self.running -= 1
                if not self.running and self.idle is not None:
                    self.idle.set()
            fin = _outcome(prepared, value, failure)
            handed_over = True
            if self.cut[j]:  # cut as the tool returned: this task's waits would be cancelled
                self.task_group.start_soon(self.finish, k, fin)
            else:
                await self.finish(k, fin)
        finally:
            if not began.is_set(k):
                self.begin(k)
            if not handed_over:
                self.pass_on(k)
                self.done.set(k)

    def on_abort(self) -> None:
        """The signal aborted: tools still running after the grace period are cut."""
        if self.running:
            self.task_group.start_soon(self.cut_after_grace, name=_CUT_TASK)

    async def cut_after_grace(self) -> None:
        """Cancel the tasks whose tools still run when the grace period ends (or none, once all return)."""
        if self.running:
            self.idle = Flag()
            with anyio.move_on_after(self.run_.config.tool_abort_grace):
                await self.idle.wait()  # every tool returned in time: nothing to cut
        for j, handle in enumerate(self.handles):
            if self.executing[j]:
                self.cut[j] = True
                handle.cancel()  # the task's own cancel scope: its tool sees a cancellation

    async def finish(self, k: int, fin: _Finalized) -> None:
        """Call k after its tool: its updates delivered, then finalized in the batch's order."""
        index, prepared = self.runnable[k]
        handed_over = False  # to the releaser, which finalizes the call
        try:
            if prepared.pump is not None:
                await prepared.pump.drained()  # the call is finalized after its updates (never cut short)
            last = self.group_end[k]
            if not self.began.is_set(last):
                await self.began.wait(last)
            self.executed[k] = fin
            self.ready.append(k)
            if not self.releasing:
                self.releasing = True
                self.task_group.start_soon(self.release)
            if self.in_line:
                handed_over = True
                return
            await self.go.wait(k)
            self.pass_on(k)
            fin = await _finalize(self.run_, self.assistant, prepared, fin)
            await _emit_end(self.run_, fin)
            self.finalized[index] = fin
        finally:
            if not handed_over:
                self.pass_on(k)
                self.done.set(k)

    def begin(self, k: int) -> None:
        """Call k begins (or ends without beginning): the next one may begin."""
        self.began.set(k)
        if self.next_to_begin == k:
            self.next_to_begin = k + 1
            if self.waiting:
                waiting = sorted(self.waiting, key=itemgetter(0))
                self.waiting = []
                for _, turn in waiting:
                    turn.set()

    def pass_on(self, k: int) -> None:
        """Call k begins its finalization (or ends): the next one in line may go after it."""
        if self.in_line:
            return
        if not self.finishing.is_set(k):
            self.finishing.set(k)
            successor = self.successor[k]
            if successor is not None:
                self.go.set(successor)  # it runs in a later pass: k first runs up to its first await

    async def release(self) -> None:
        """Finalize finished calls in the order their tools finished.

        Calls whose tools finished in the same scheduler pass line up in source order. With
        `after_tool_call`, each call finalizes itself in its task, let go by the one before it (one
        scheduler pass per call); without it, the releaser finalizes them in line.
        """
        try:
            while self.ready:
                await anyio.lowlevel.checkpoint()  # calls that finish in this pass line up too
                batch = sorted(self.ready)
                self.ready.clear()
                if self.in_line:
                    await self.finalize_in_line(batch)
                    continue
                for k, successor in itertools.pairwise(batch):
                    self.successor[k] = successor
                self.go.set(batch[0])
                await self.finishing.wait(batch[-1])
        finally:
            self.releasing = False

    async def finalize_in_line(self, batch: list[int]) -> None:
        """Finalize calls without `after_tool_call`: deliver their `tool_execution_end`s in order.

        A delivery that has to be waited for goes on in a task of its own, begun before the next
        call's delivery (as a JavaScript finalization runs up to its first await before the next
        one starts); the call is finalized when its delivery is done.
        """
        deliver = self.run_.deliver
        for k in batch:
            index = self.runnable[k][0]
            fin = self.executed[k]
            assert fin is not None
            self.finalized[index] = fin
            pending = deliver(_end_event(fin))
            if pending is None:
                self.done.set(k)
            else:
                await self.task_group.start(self.settle_end, k, pending)

    async def settle_end(self, k: int, pending: Any, *, task_status: TaskStatus[None]) -> None:  # noqa: ASYNC114 - started by the batch alone
        task_status.started()  # the delivery runs up to its first wait before the releaser goes on
        try:
            await settle(pending)
        finally:
            self.done.set(k)


def _slots(run: _Run, runnable: list[tuple[int, _Prepared]]) -> list[tuple[anyio.Semaphore, ...]]:
    """For each call of a parallel batch, the semaphores it holds while its tool executes."""
    limit = run.config.max_parallel_tool_calls
    batch = (anyio.Semaphore(limit),) if limit is not None and limit < len(runnable) else ()
    per_tool: dict[str, anyio.Semaphore] = {}
    slots: list[tuple[anyio.Semaphore, ...]] = []
    for _, prepared in runnable:
        tool = prepared.tool
        if tool.max_concurrency is None:
            slots.append(batch)
            continue
        if tool.name not in per_tool:
            per_tool[tool.name] = anyio.Semaphore(tool.max_concurrency)
        slots.append((per_tool[tool.name], *batch))
    return slots


def _find_tool(run: _Run, tool_call: ToolCall) -> AgentTool | None:
    name = tool_call.name
    for tool in run.tools:
        if tool.name == name:
            return tool
    return None


def _preflight(run: _Run, tool_call: ToolCall) -> _Prepared | _Finalized | None:
    """Preflight without a coroutine when nothing is awaited; None leaves it to `_prepare` (hooks,
    `prepare_arguments`, an unknown tool, an abort)."""
    if run.config.before_tool_call is not None or run.signal._aborted:
        return None
    tool = _find_tool(run, tool_call)
    if tool is None or tool.prepare_arguments is not None:
        return None
    try:
        return _Prepared(run, tool_call, tool, validate_tool_arguments(tool, tool_call))
    except Exception as exc:
        return _Finalized(tool_call, _error(run, exc), True)


async def _prepare(run: _Run, assistant: AssistantMessage, tool_call: ToolCall) -> _Prepared | _Finalized:
    signal = run.signal
    if signal.aborted:
        return _Finalized(tool_call, error_result(ABORTED), True)
    tool = _find_tool(run, tool_call)
    if tool is None:
        return _Finalized(tool_call, error_result(f"Tool {tool_call.name} not found"), True)
    try:
        checked = tool_call
        if tool.prepare_arguments is not None:
            arguments = await call(tool.prepare_arguments, tool_call.arguments)
            if arguments is not tool_call.arguments:
                checked = ToolCall(
                    tool_call.id,
                    tool_call.name,
                    arguments,
                    thought_signature=tool_call.thought_signature,
                    arguments_error=tool_call.arguments_error,
                )
        args = validate_tool_arguments(tool, checked)
        hook = run.config.before_tool_call
        if hook is not None:
            context = BeforeToolCallContext(
                assistant_message=assistant, tool_call=tool_call, args=args, context=run.agent_context()
            )
            decision = await call(hook, context, signal)
            if signal.aborted:
                return _Finalized(tool_call, error_result(ABORTED), True)
            if decision is not None:
                if not isinstance(decision, BeforeToolCallResult):
                    raise TypeError(
                        f"before_tool_call must return a BeforeToolCallResult or None, got {type(decision).__name__}"
                    )
                if decision.block:
                    result = error_result(decision.reason or "Tool execution was blocked")
                    if decision.terminate is True:
                        result = AgentToolResult(content=result.content, details=result.details, terminate=True)
                    return _Finalized(tool_call, result, True)
        return _Prepared(run, tool_call, tool, args)
    except Exception as exc:
        return _Finalized(tool_call, _error(run, exc), True)


def _outcome(prepared: _Prepared, value: object, failure: AgentToolResult | None) -> _Finalized:
    """What the tool gave: its result (a str becomes one), or the failure it raised."""
    tool_call = prepared.tool_call
    if failure is not None:
        return _Finalized(tool_call, failure, True)
    if type(value) is not AgentToolResult:
        try:
            value = _check_result(prepared.tool, value)
        except Exception as exc:
            return _Finalized(tool_call, error_result(exception_text(exc)), True)
    return _Finalized(tool_call, value, value.is_error is True)


async def _execute(run: _Run, prepared: _Prepared) -> _Finalized:
    """Run the tool in an abort cut: it sees an abort at once and is cut after the grace period."""
    value: object = None
    failure: AgentToolResult | None = None
    try:
        with AbortCut(run.signal, run.config.tool_abort_grace) as cut:
            value = await _run_tool(run, prepared)
    except Exception as exc:
        failure = _error(run, exc)
    finally:
        prepared.finished = True
    if cut.cancelled_caught:
        failure = error_result(ABORTED)  # cut short by the abort's grace period
    if prepared.pump is not None:
        await prepared.pump.drained()  # the call is finalized after its updates (never cut short)
    return _outcome(prepared, value, failure)


def _run_tool(run: _Run, prepared: _Prepared) -> Awaitable[object]:
    """A prepared call's tool execution, to await: through `wrap_tool_call` if set, within the
    tool's timeout. Without either it is the tool's own awaitable: a call waiting on its tool holds
    no frame of the loop's (a thousand idle agents are that much smaller)."""
    if run.config.wrap_tool_call is None and prepared.tool.timeout is None:
        return prepared.execute(prepared.tool_call.id, prepared.args, run.signal, prepared.on_update)
    return _run_tool_wrapped(run, prepared)


async def _run_tool_wrapped(run: _Run, prepared: _Prepared) -> object:
    tool = prepared.tool
    wrap = run.config.wrap_tool_call

    async def proceed() -> object:
        return await prepared.execute(prepared.tool_call.id, prepared.args, run.signal, prepared.on_update)

    def outcome() -> Awaitable[object]:
        if wrap is None:
            return proceed()
        invocation = ToolInvocation(
            tool=tool, tool_call=prepared.tool_call, args=prepared.args, signal=run.signal, on_update=prepared.on_update
        )
        return call(wrap, invocation, proceed)

    if tool.timeout is None:
        return await outcome()
    with anyio.move_on_after(tool.timeout):
        return await outcome()
    raise TimeoutError(f"Tool {tool.name} timed out after {tool.timeout:g} s")


def _error(run: _Run, exc: Exception) -> AgentToolResult:
    """The error result of a failed step, unless its exception must propagate (`config.propagate`)."""
    if run.config.propagate and isinstance(exc, run.config.propagate):
        raise exc
    return error_result(exception_text(exc))


async def _finalize(run: _Run, assistant: AssistantMessage, prepared: _Prepared, fin: _Finalized) -> _Finalized:
    """Run `after_tool_call` (there is one) on an executed call."""
    tool_call = prepared.tool_call
    signal = run.signal
    hook = run.config.after_tool_call
    assert hook is not None
    result, is_error = fin.result, fin.is_error
    try:
        context = AfterToolCallContext(
            assistant_message=assistant,
            tool_call=tool_call,
            args=prepared.args,
            result=result,
            is_error=is_error,
            context=run.agent_context(),
        )
        override = await call(hook, context, signal)
        if override is None:
            return fin
        if not isinstance(override, AfterToolCallResult):
            raise TypeError(
                f"after_tool_call must return an AfterToolCallResult or None, got {type(override).__name__}"
            )
        result = AgentToolResult(
            content=tuple(override.content) if override.content is not None else result.content,
            details=override.details if override.details is not None else result.details,
            is_error=result.is_error,
            terminate=override.terminate if override.terminate is not None else result.terminate,
        )
        if override.is_error is not None:
            is_error = override.is_error
    except Exception as exc:
        result, is_error = _error(run, exc), True
    return _Finalized(tool_call, result, is_error)


def _check_result(tool: AgentTool, result: object) -> AgentToolResult:
    if isinstance(result, AgentToolResult):
        return result
    if isinstance(result, str):
        return AgentToolResult(content=(TextContent(result),))
    raise TypeError(f"tool {tool.name!r} returned {type(result).__name__}, expected an AgentToolResult or a str")
