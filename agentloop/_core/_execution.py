"""Tool batches: preflight, parallel / sequential / barrier execution, hooks, bounded abort.

A batch is one task group (`execute_tool_calls`): the calls' progress updates are delivered by
tasks of it, in the order reported (`_updates`), and a parallel batch's calls run in tasks of
their own, in the order `_tool_order` lays down. A batch of one call runs as a sequential batch
does (the two orders coincide for one call).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from .._tools._tool import AgentTool, validated_arguments, within_timeout
from .._types._abort import AbortCut
from .._types._constants import BLOCKED_TEXT, TOOL_ABORTED_TEXT
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
from ._tool_order import ParallelBatch
from ._updates import CallUpdates, Delivery, ProgressUpdates
from ._util import exception_text, single_exception

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("execute_tool_calls", "fail_truncated_tool_calls")

_TRUNCATED = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its arguments '
    "may be truncated. Re-issue the tool call with complete arguments."
)


class _Prepared:
    """A call that passed preflight: its tool and validated arguments, and its progress updates."""

    __slots__ = ("args", "index", "tool", "tool_call", "updates")

    def __init__(self, index: int, tool_call: ToolCall, tool: AgentTool, args: Any) -> None:
        self.index = index  # its place in the batch
        self.tool_call = tool_call
        self.tool = tool
        self.args = args
        self.updates: CallUpdates | None = None  # set when it begins

    def on_update(self, partial_result: AgentToolResult) -> Delivery:
        """What the tool reports progress through (`tool_execution_update`)."""
        if not isinstance(partial_result, AgentToolResult):
            raise TypeError(f"on_update expects an AgentToolResult, got {type(partial_result).__name__}")
        assert self.updates is not None, "on_update before the call began"
        tool_call = self.tool_call
        return self.updates.report(
            ToolExecutionUpdate(tool_call.id, tool_call.name, tool_call.arguments, partial_result)
        )


class _Finalized:
    """A call's outcome, ready for `tool_execution_end` and its result message."""

    __slots__ = ("is_error", "result", "tool_call")

    def __init__(self, tool_call: ToolCall, result: AgentToolResult, is_error: bool) -> None:
        self.tool_call = tool_call
        self.result = result
        self.is_error = is_error

    def end_event(self) -> ToolExecutionEnd:
        return ToolExecutionEnd(self.tool_call.id, self.tool_call.name, self.result, self.is_error)


def _aborted(tool_call: ToolCall) -> _Finalized:
    return _Finalized(tool_call, error_result(TOOL_ABORTED_TEXT), True)


async def _emit_result(run: RunState, fin: _Finalized) -> ToolResultMessage:
    """Emit a finalized call's toolResult message (`message_start`, `message_end`)."""
    tool_call = fin.tool_call
    message = tool_result_message(tool_call.id, tool_call.name, fin.result, fin.is_error, run.clock())
    await run.emit(MessageStart(message))
    await run.emit(MessageEnd(message))
    return message


async def fail_truncated_tool_calls(run: RunState, tool_calls: Sequence[ToolCall]) -> list[ToolResultMessage]:
    """Fail every call of a response cut off by the token limit: its arguments may be truncated."""
    messages = []
    for tool_call in tool_calls:
        await run.emit(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))
        fin = _Finalized(tool_call, error_result(_TRUNCATED.format(name=tool_call.name)), True)
        await run.emit(fin.end_event())
        messages.append(await _emit_result(run, fin))
    return messages


async def execute_tool_calls(
    run: RunState, assistant: AssistantMessage, tool_calls: Sequence[ToolCall]
) -> tuple[list[ToolResultMessage], bool]:
    """Run one batch; return its tool-result messages in source order and whether to terminate."""
    try:
        async with anyio.create_task_group() as tg:
            with ProgressUpdates(run.emit, tg) as updates:
                batch = _Batch(run, assistant, updates)
                if run.config.tool_execution == "sequential":
                    results = await batch.sequential(tool_calls)
                else:
                    results = await batch.parallel(tool_calls)
    except BaseExceptionGroup as group:
        raise single_exception(group) from None
    return results, batch.terminate


class _Batch:
    """One batch of tool calls: preflight, execution and finalization, the hooks, the results."""

    def __init__(self, run: RunState, assistant: AssistantMessage, updates: ProgressUpdates) -> None:
        self.run = run
        self.assistant = assistant
        self.updates = updates
        self.terminate = False

    async def sequential(self, tool_calls: Sequence[ToolCall]) -> list[ToolResultMessage]:
        """One call at a time: start, preflight, execute, `after_tool_call`, end, its result message.

        A sequential call executes even after an abort during its preflight (the tool sees the
        aborted signal), as in the reference; a parallel call that has not begun is answered
        "Operation aborted" instead.
        """
        run = self.run
        messages = []
        self.terminate = True
        for index, tool_call in enumerate(tool_calls):
            await run.emit(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))
            prepared = await self.prepare(index, tool_call)
            if isinstance(prepared, _Finalized):
                fin = prepared
            else:
                fin = await self.after_tool_call(prepared, await self.execute(prepared))
            await run.emit(fin.end_event())
            messages.append(await _emit_result(run, fin))
            self.terminate = self.terminate and fin.result.terminate is True
        return messages

    async def parallel(self, tool_calls: Sequence[ToolCall]) -> list[ToolResultMessage]:
        """Preflight every call in source order, run the runnable ones (`_tool_order`), then emit
        the result messages in source order."""
        run = self.run
        runnable: list[_Prepared] = []
        by_index: dict[int, _Finalized] = {}
        for index, tool_call in enumerate(tool_calls):
            await run.emit(ToolExecutionStart(tool_call.id, tool_call.name, tool_call.arguments))
            prepared = await self.prepare(index, tool_call)
            if isinstance(prepared, _Finalized):
                by_index[index] = prepared
                await run.emit(prepared.end_event())
            else:
                runnable.append(prepared)

        async def execute(prepared: _Prepared) -> _Finalized | None:
            if run.signal.aborted:  # aborted before the call began: answered at once
                fin = by_index[prepared.index] = _aborted(prepared.tool_call)
                await run.emit(fin.end_event())
                return None
            return await self.execute(prepared)

        async def finalize(prepared: _Prepared, fin: _Finalized) -> None:
            fin = by_index[prepared.index] = await self.after_tool_call(prepared, fin)
            await run.emit(fin.end_event())

        await ParallelBatch(execute, finalize, _is_barrier, _slots(run, runnable)).run(runnable)
        self.terminate = bool(by_index) and all(fin.result.terminate is True for fin in by_index.values())
        return [await _emit_result(run, by_index[index]) for index in sorted(by_index)]

    async def prepare(self, index: int, tool_call: ToolCall) -> _Prepared | _Finalized:
        """Preflight: find the tool, `prepare_arguments`, validate, `before_tool_call`."""
        run = self.run
        signal = run.signal
        if signal.aborted:
            return _aborted(tool_call)
        tool = run.find_tool(tool_call.name)
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
            args = await validated_arguments(tool, checked)
            hook = run.config.before_tool_call
            if hook is not None:
                context = BeforeToolCallContext(
                    assistant_message=self.assistant, tool_call=tool_call, args=args, context=run.agent_context()
                )
                decision = await call(hook, context, signal)
                if signal.aborted:
                    return _aborted(tool_call)
                if decision is not None:
                    if not isinstance(decision, BeforeToolCallResult):
                        raise TypeError(
                            "before_tool_call must return a BeforeToolCallResult or None, "
                            f"got {type(decision).__name__}"
                        )
                    if decision.block:
                        result = error_result(decision.reason or BLOCKED_TEXT)
                        if decision.terminate is True:
                            result = AgentToolResult(content=result.content, details=result.details, terminate=True)
                        return _Finalized(tool_call, result, True)
            return _Prepared(index, tool_call, tool, args)
        except Exception as exc:
            return _Finalized(tool_call, _error(run, exc), True)

    async def execute(self, prepared: _Prepared) -> _Finalized:
        """Run the tool in an abort cut (it sees an abort at once and is cut after the grace period);
        its outcome once every progress update it reported is delivered."""
        run = self.run
        updates = prepared.updates = self.updates.call()
        value: object = None
        failure: AgentToolResult | None = None
        try:
            with AbortCut(run.signal, run.config.tool_abort_grace) as cut:
                value = await self._run_tool(prepared)
        except Exception as exc:
            failure = _error(run, exc)
        finally:
            updates.close()
        await updates.delivered()
        if cut.cancelled_caught:
            failure = error_result(TOOL_ABORTED_TEXT)  # cut short by the abort's grace period
        tool_call = prepared.tool_call
        if failure is not None:
            return _Finalized(tool_call, failure, True)
        try:
            result = _check_result(prepared.tool, value)
        except Exception as exc:
            return _Finalized(tool_call, error_result(exception_text(exc)), True)
        return _Finalized(tool_call, result, result.is_error is True)

    async def _run_tool(self, prepared: _Prepared) -> object:
        """The tool within its timeout (`proceed`), through `wrap_tool_call` when there is one."""
        run = self.run

        async def proceed() -> object:
            execution = prepared.tool.execute(prepared.tool_call.id, prepared.args, run.signal, prepared.on_update)
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

    async def after_tool_call(self, prepared: _Prepared, fin: _Finalized) -> _Finalized:
        """Run `after_tool_call` (when there is one) on an executed call: the outcome it leaves."""
        run = self.run
        hook = run.config.after_tool_call
        if hook is None:
            return fin
        tool_call = prepared.tool_call
        result, is_error = fin.result, fin.is_error
        try:
            context = AfterToolCallContext(
                assistant_message=self.assistant,
                tool_call=tool_call,
                args=prepared.args,
                result=result,
                is_error=is_error,
                context=run.agent_context(),
            )
            override = await call(hook, context, run.signal)
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


def _is_barrier(prepared: _Prepared) -> bool:
    return prepared.tool.execution_mode == "sequential"


def _slots(run: RunState, runnable: list[_Prepared]) -> Callable[[_Prepared], tuple[anyio.Semaphore, ...]]:
    """The semaphores each call of a parallel batch holds while its tool executes: the batch's
    (`max_parallel_tool_calls`) and its tool's (`max_concurrency`)."""
    limit = run.config.max_parallel_tool_calls
    batch = (anyio.Semaphore(limit),) if limit is not None and limit < len(runnable) else ()
    per_tool: dict[str, anyio.Semaphore] = {}
    for prepared in runnable:
        tool = prepared.tool
        if tool.max_concurrency is not None and tool.name not in per_tool:
            per_tool[tool.name] = anyio.Semaphore(tool.max_concurrency)

    def slots(prepared: _Prepared) -> tuple[anyio.Semaphore, ...]:
        own = per_tool.get(prepared.tool.name)
        return batch if own is None else (own, *batch)

    return slots


def _error(run: RunState, exc: Exception) -> AgentToolResult:
    """The error result of a failed step, unless its exception must propagate (`config.propagate`)."""
    if run.config.propagate and isinstance(exc, run.config.propagate):
        raise exc
    return error_result(exception_text(exc))


def _check_result(tool: AgentTool, result: object) -> AgentToolResult:
    if isinstance(result, AgentToolResult):
        return result
    if isinstance(result, str):
        return AgentToolResult(content=(TextContent(result),))
    raise TypeError(f"tool {tool.name!r} returned {type(result).__name__}, expected an AgentToolResult or a str")
