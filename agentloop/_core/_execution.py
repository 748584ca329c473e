"""Tool batches: preflight, parallel / sequential / barrier execution, hooks, bounded abort."""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Awaitable, Sequence
from operator import itemgetter
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._tools._tool import AgentTool, validate_tool_arguments, within_timeout
from .._types._abort import AbortCut
from .._types._constants import TOOL_ABORTED_TEXT
from .._types._events import MessageEnd, MessageStart, ToolExecutionEnd, ToolExecutionStart, ToolExecutionUpdate
from .._types._messages import (
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    error_result,
    tool_result_message,
)
from ._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolInvocation,
    call,
)
from ._run import RunState
from ._updates import DELIVERED, Delivery, UpdatePump, settle
from ._util import exception_text, single_exception

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("execute_tool_calls", "fail_truncated_tool_calls")

_TRUNCATED = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its arguments '
    "may be truncated. Re-issue the tool call with complete arguments."
)


class _Prepared:
    """A call that passed preflight: its tool and validated arguments; while it runs, what its `on_update` acts on."""

    __slots__ = ("args", "execute", "finished", "pump", "run", "tool", "tool_call")

    def __init__(self, run: RunState, tool_call: ToolCall, tool: AgentTool, args: Any) -> None:
        self.run = run
        self.tool_call = tool_call
        self.tool = tool
        self.args = args
        self.execute = tool.execute if tool._execute is None else tool._execute  # the given function itself
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


async def _emit_results(run: RunState, results: list[_Finalized]) -> list[ToolResultMessage]:
    """Emit the toolResult message (`message_start`, `message_end`) of each finalized call."""
    messages = []
    for fin in results:
        message = tool_result_message(fin.tool_call.id, fin.tool_call.name, fin.result, fin.is_error, run.clock())
        await run.emit(MessageStart(message))
        await run.emit(MessageEnd(message))
        messages.append(message)
    return messages


async def fail_truncated_tool_calls(run: RunState, tool_calls: Sequence[ToolCall]) -> list[ToolResultMessage]:
    """Fail every call of a response cut off by the token limit: its arguments may be truncated."""
    messages = []
    for tool_call in tool_calls:
        await run.emit(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))
        fin = _Finalized(tool_call, error_result(_TRUNCATED.format(name=tool_call.name)), True)
        await run.emit(_end_event(fin))
        messages += await _emit_results(run, [fin])
    return messages


async def execute_tool_calls(
    run: RunState, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> tuple[list[ToolResultMessage], bool]:
    """Run one batch; return its tool-result messages in source order and whether to terminate."""
    sequential = run.config.tool_execution == "sequential"
    if len(tool_calls) == 1:
        return await _single(run, assistant, tool_calls[0], recheck=not sequential)  # the usual batch
    if sequential:
        return await _sequential(run, assistant, tool_calls)
    return await _parallel(run, assistant, tool_calls)


async def _single(
    run: RunState, assistant: AssistantMessage, tool_call: ToolCall, *, recheck: bool
) -> tuple[list[ToolResultMessage], bool]:
    """One call from start to result: a batch of one, or a call of a sequential batch.

    With `recheck` (a parallel batch) an abort during an awaited preflight step answers the call
    "Operation aborted"; a sequential call goes on to execute with the aborted signal, as in the
    reference.
    """
    await run.emit(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))
    prepared = _preflight(run, tool_call)
    if prepared is None:
        prepared = await _prepare(run, assistant, tool_call)
    if isinstance(prepared, _Finalized):
        fin = prepared
    elif recheck and run.signal._aborted:
        fin = _Finalized(tool_call, error_result(TOOL_ABORTED_TEXT), True)
    else:
        fin = await _execute(run, prepared)
        if run.config.after_tool_call is not None:
            fin = await _finalize(run, assistant, prepared, fin)
    await run.emit(_end_event(fin))
    message = tool_result_message(tool_call.id, tool_call.name, fin.result, fin.is_error, run.clock())
    await run.emit(MessageStart(message))
    await run.emit(MessageEnd(message))
    return [message], fin.result.terminate is True


async def _sequential(
    run: RunState, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> tuple[list[ToolResultMessage], bool]:
    messages: list[ToolResultMessage] = []
    terminate = True
    for tool_call in tool_calls:
        result, stop = await _single(run, assistant, tool_call, recheck=False)
        messages += result
        terminate = terminate and stop
    return messages, terminate


async def _parallel(
    run: RunState, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> tuple[list[ToolResultMessage], bool]:
    finalized: list[_Finalized | None] = [None] * len(tool_calls)
    runnable: list[tuple[int, _Prepared]] = []
    for index, tool_call in enumerate(tool_calls):
        await run.emit(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))
        prepared = _preflight(run, tool_call)
        if prepared is None:
            prepared = await _prepare(run, assistant, tool_call)
        if isinstance(prepared, _Finalized):
            await run.emit(_end_event(prepared))
            finalized[index] = prepared
        else:
            runnable.append((index, prepared))
    slots = _slots(run, runnable)
    for group in _groups(runnable):
        await _Group(run, assistant, group, slots, finalized).run()
    results = [fin for fin in finalized if fin is not None]
    messages = await _emit_results(run, results)
    return messages, bool(results) and all(fin.result.terminate is True for fin in results)


def _groups(runnable: list[tuple[int, _Prepared]]) -> list[list[tuple[int, _Prepared]]]:
    """The batch cut at its barriers: each barrier call alone, the calls between them together.

    A barrier (`execution_mode="sequential"`) begins after every earlier call is finalized and
    every later call begins after it is finalized, so the groups run one after another.
    """
    groups: list[list[tuple[int, _Prepared]]] = []
    after_barrier = True
    for entry in runnable:
        barrier = entry[1].tool.execution_mode == "sequential"
        if barrier or after_barrier:
            groups.append([entry])
        else:
            groups[-1].append(entry)
        after_barrier = barrier
    return groups


_CALL_TASK = "agentloop: a parallel tool call"


class _Group:
    """Calls of a parallel batch that run beside each other: one task per call, then finalized in order.

    The reference's order (JavaScript promise order), whatever the scheduler does (trio shuffles
    the tasks that are ready):
    * the calls begin in source order (`_execute_next`);
    * no call is finalized before every call of the group has begun;
    * calls are finalized in the order their tools finished, and those that finished in the same
      scheduler pass in source order (`_release`, the one place that orders them);
    * `after_tool_call` runs before the call's `tool_execution_end`.
    """

    def __init__(
        self,
        run: RunState,
        assistant: AssistantMessage,
        group: list[tuple[int, _Prepared]],
        slots: dict[int, tuple[anyio.Semaphore, ...]],
        finalized: list[_Finalized | None],
    ) -> None:
        self.run_ = run
        self.assistant = assistant
        self.group = group
        self.slots = slots
        self.finalized = finalized
        self.to_begin: deque[int] = deque()  # positions in the group, in source order

    async def run(self) -> None:
        send, receive = anyio.create_memory_object_stream[tuple[int, _Finalized]](math.inf)
        try:
            with send, receive:
                async with anyio.create_task_group() as tg:
                    for position, (index, _) in enumerate(self.group):
                        for slot in self.slots.get(index, ()):  # taken in source order
                            try:
                                slot.acquire_nowait()
                            except anyio.WouldBlock:
                                await slot.acquire()
                        self.to_begin.append(position)
                        tg.start_soon(self._execute_next, send.clone(), name=_CALL_TASK)
                    send.close()  # the stream ends when every call's task has ended
                    await self._release(receive, tg)
        except BaseExceptionGroup as group:
            raise single_exception(group) from None

    async def _execute_next(self, send: MemoryObjectSendStream[tuple[int, _Finalized]]) -> None:
        """A call's task: it takes the next call when it first runs, so calls begin in source order."""
        with send:
            position = self.to_begin.popleft()
            index, prepared = self.group[position]
            slots = self.slots.get(index, ())
            run = self.run_
            if run.signal._aborted:  # aborted before the call began: answered at once
                for slot in slots:
                    slot.release()
                fin = self.finalized[index] = _Finalized(prepared.tool_call, error_result(TOOL_ABORTED_TEXT), True)
                await run.emit(_end_event(fin))
                return
            try:
                fin = await _call_tool(run, prepared)
            finally:
                for slot in slots:
                    slot.release()
            if prepared.pump is not None:
                await prepared.pump.drained()  # the call is finalized after its updates (never cut short)
            send.send_nowait((position, fin))

    async def _release(self, receive: MemoryObjectReceiveStream[tuple[int, _Finalized]], tg: TaskGroup) -> None:
        """Finalize the executed calls in the reference's order (see the class docstring).

        It runs once every call has begun. A scheduler pass after a call is ready, the calls
        ready by then are finalized in source order; each finalization runs up to its first wait
        before the next one begins (as a JavaScript `.then` callback does).
        """
        while True:
            try:
                ready = [await _next_ready(receive)]
            except anyio.EndOfStream:
                return
            await anyio.lowlevel.checkpoint()  # the calls that finish in this pass line up too
            while True:
                try:
                    ready.append(receive.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            for position, fin in sorted(ready, key=itemgetter(0)):
                await self._finalize(tg, position, fin)

    async def _finalize(self, tg: TaskGroup, position: int, fin: _Finalized) -> None:
        index, prepared = self.group[position]
        run = self.run_
        if run.config.after_tool_call is not None:
            await tg.start(self._finalize_with_hook, index, prepared, fin)
            return
        self.finalized[index] = fin
        if (pending := run.deliver(_end_event(fin))) is not None:
            await tg.start(_settle_begun, pending)

    async def _finalize_with_hook(
        self, index: int, prepared: _Prepared, fin: _Finalized, *, task_status: TaskStatus[None]
    ) -> None:
        task_status.started()
        fin = self.finalized[index] = await _finalize(self.run_, self.assistant, prepared, fin)
        await self.run_.emit(_end_event(fin))


async def _next_ready(receive: MemoryObjectReceiveStream[tuple[int, _Finalized]]) -> tuple[int, _Finalized]:
    """The next executed call: without a scheduler pass when one is waiting, so that a pass is
    counted from the same point after a finalization as after the first call."""
    try:
        return receive.receive_nowait()
    except anyio.WouldBlock:
        return await receive.receive()


async def _settle_begun(pending: Awaitable[None], *, task_status: TaskStatus[None]) -> None:
    """A delivery that has to be waited for: begun before the next call's, then awaited here."""
    task_status.started()
    await settle(pending)


def _slots(run: RunState, runnable: list[tuple[int, _Prepared]]) -> dict[int, tuple[anyio.Semaphore, ...]]:
    """The semaphores each call of a parallel batch holds while its tool executes, by source index:
    the batch's (`max_parallel_tool_calls`) and its tool's (`max_concurrency`)."""
    limit = run.config.max_parallel_tool_calls
    batch = (anyio.Semaphore(limit),) if limit is not None and limit < len(runnable) else ()
    per_tool: dict[str, anyio.Semaphore] = {}
    slots: dict[int, tuple[anyio.Semaphore, ...]] = {}
    for index, prepared in runnable:
        tool = prepared.tool
        if tool.max_concurrency is not None:
            if tool.name not in per_tool:
                per_tool[tool.name] = anyio.Semaphore(tool.max_concurrency)
            slots[index] = (per_tool[tool.name], *batch)
        elif batch:
            slots[index] = batch
    return slots


def _find_tool(run: RunState, tool_call: ToolCall) -> AgentTool | None:
    name = tool_call.name
    for tool in run.tools:
        if tool.name == name:
            return tool
    return None


def _preflight(run: RunState, tool_call: ToolCall) -> _Prepared | _Finalized | None:
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


async def _prepare(run: RunState, assistant: AssistantMessage, tool_call: ToolCall) -> _Prepared | _Finalized:
    signal = run.signal
    if signal.aborted:
        return _Finalized(tool_call, error_result(TOOL_ABORTED_TEXT), True)
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
                return _Finalized(tool_call, error_result(TOOL_ABORTED_TEXT), True)
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


async def _execute(run: RunState, prepared: _Prepared) -> _Finalized:
    """Run the tool (`_call_tool`); the outcome once every progress update it reported is delivered."""
    fin = await _call_tool(run, prepared)
    if prepared.pump is not None:
        await prepared.pump.drained()  # the call is finalized after its updates (never cut short)
    return fin


async def _call_tool(run: RunState, prepared: _Prepared) -> _Finalized:
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
        failure = error_result(TOOL_ABORTED_TEXT)  # cut short by the abort's grace period
    return _outcome(prepared, value, failure)


def _run_tool(run: RunState, prepared: _Prepared) -> Awaitable[object]:
    """A prepared call's tool execution, to await: through `wrap_tool_call` if set, within the
    tool's timeout (inside `proceed`, where a wrapper sees it as `ToolTimeoutError`). Without
    either it is the tool's own awaitable: a call waiting on its tool holds
    no frame of the loop's (a thousand idle agents are that much smaller)."""
    if run.config.wrap_tool_call is None and prepared.tool.timeout is None:
        return prepared.execute(prepared.tool_call.id, prepared.args, run.signal, prepared.on_update)
    return _run_tool_wrapped(run, prepared)


async def _run_tool_wrapped(run: RunState, prepared: _Prepared) -> object:
    """The tool within its timeout (`proceed`), through `wrap_tool_call` when there is one."""

    async def proceed() -> object:
        execution = prepared.execute(prepared.tool_call.id, prepared.args, run.signal, prepared.on_update)
        return await within_timeout(prepared.tool, execution)

    wrap = run.config.wrap_tool_call
    if wrap is None:
        return await proceed()
    invocation = ToolInvocation(
        tool=prepared.tool,
        tool_call=prepared.tool_call,
        args=prepared.args,
        signal=run.signal,
        on_update=prepared.on_update,
    )
    return await call(wrap, invocation, proceed)


def _error(run: RunState, exc: Exception) -> AgentToolResult:
    """The error result of a failed step, unless its exception must propagate (`config.propagate`)."""
    if run.config.propagate and isinstance(exc, run.config.propagate):
        raise exc
    return error_result(exception_text(exc))


async def _finalize(run: RunState, assistant: AssistantMessage, prepared: _Prepared, fin: _Finalized) -> _Finalized:
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
