"""Tools: `AgentTool`, and the validation of a call's arguments at the untrusted boundary (the checks
themselves are in `_checks`, the `@tool` decorator in `_decorator`)."""

from __future__ import annotations

import contextlib
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from .._types._abort import AbortSignal
from .._types._errors import ToolTimeoutError
from .._types._messages import AgentToolResult, ToolCall
from ._checks import failure, first_line, validate_with_model, validate_with_schema

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "AgentTool",
    "ExecutionMode",
    "OnUpdate",
    "ToolExecute",
    "validate_tool_arguments",
    "validated_arguments",
    "validation_in_line",
    "within_timeout",
)

ExecutionMode: TypeAlias = Literal["sequential", "parallel"]
"""`sequential` makes a tool an exclusive barrier inside a parallel batch."""

OnUpdate: TypeAlias = Callable[[AgentToolResult], Awaitable[None]]
"""Report progress from a running tool: `await on_update(partial_result)`."""


class ToolExecute(Protocol):
    """The signature of a tool's `execute`."""

    def __call__(
        self, tool_call_id: str, params: Any, signal: AbortSignal, on_update: OnUpdate, /
    ) -> Awaitable[AgentToolResult | str]: ...


_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class AgentTool:
    """A tool the model can call.

    Args:
        name: What the model calls it (letters, digits, `_.:-`).
        description: What it does, for the model.
        parameters: A JSON schema (dict) for the arguments, or a pydantic model class.
        execute: `async (tool_call_id, params, signal, on_update) -> AgentToolResult`; may also
            return a `str`. Raising fails the call with the exception's message. Subclasses may
            override `execute` instead.
        label: A human-readable name for UIs (defaults to `name`).
        execution_mode: `"sequential"` makes this tool an exclusive barrier in a parallel batch.
        prepare_arguments: `(raw_arguments) -> arguments`, run before validation (a
            compatibility shim for argument shapes older models send).
        timeout: Seconds a call may run; a call still running then is cancelled and answered
            with an error result ("Tool NAME timed out after N s"), and the run goes on.
        max_concurrency: At most this many calls of this tool execute at once in a parallel
            batch; the others wait their turn, in source order.

    `params` given to `execute` are the validated arguments: a dict coerced to the JSON schema,
    or an instance of the pydantic model. The loop validates a call's arguments with `validate`,
    and again in a worker thread when that takes more than a few milliseconds, so a subclass
    that overrides it must not touch the event loop.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | type[Any],
        execute: ToolExecute | None = None,
        label: str | None = None,
        execution_mode: ExecutionMode | None = None,
        prepare_arguments: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
        timeout: float | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"tool name must be 1-128 letters, digits or '_.:-', got {name!r}")
        if not isinstance(description, str):
            raise TypeError(f"tool description must be a str, got {type(description).__name__}")
        if execution_mode not in (None, "sequential", "parallel"):
            raise ValueError(f"execution_mode must be 'sequential', 'parallel' or None, got {execution_mode!r}")
        if label is not None and not isinstance(label, str):
            raise TypeError(f"tool label must be a str or None, got {type(label).__name__}")
        if prepare_arguments is not None and not callable(prepare_arguments):
            raise TypeError(f"tool prepare_arguments must be callable or None, got {prepare_arguments!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf
        ):
            raise ValueError(f"tool timeout must be a number of seconds > 0 or None, got {timeout!r}")
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1
        ):
            raise ValueError(f"tool max_concurrency must be a positive int or None, got {max_concurrency!r}")
        self.name = name
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.label = label if label is not None else name
        self.description = description
        self.execution_mode: ExecutionMode | None = execution_mode
        self.prepare_arguments = prepare_arguments
        self._model: Any = None
        if isinstance(parameters, Mapping):
            self.parameters: Mapping[str, Any] = parameters
        elif isinstance(parameters, type) and hasattr(parameters, "model_validate"):
            self._model = parameters
            self.parameters = parameters.model_json_schema()
        else:
            raise TypeError(f"tool parameters must be a JSON schema dict or a pydantic model class, got {parameters!r}")
        if execute is not None:
            if not callable(execute):
                raise TypeError(f"tool execute must be callable, got {execute!r}")
            self._execute: ToolExecute | None = execute
        elif type(self).execute is AgentTool.execute:
            raise TypeError(f"tool {name!r} needs an execute function (or a subclass overriding execute)")
        else:
            self._execute = None
        self._validator: Any = None
        self._empty_ok: bool | None = None
        self._memo_safe = False

    async def execute(
        self, tool_call_id: str, params: Any, signal: AbortSignal, on_update: OnUpdate
    ) -> AgentToolResult | str:
        """Run the tool. Override in a subclass, or pass `execute=` to the constructor."""
        assert self._execute is not None
        return await self._execute(tool_call_id, params, signal, on_update)

    def validate(self, arguments: Mapping[str, Any]) -> Any:
        """Coerce and validate raw arguments; raise `ValueError` naming every failing field.

        Whatever the schema and the arguments, nothing else comes out: the work has one budget
        (100,000 steps or 1 s of CPU, and bounded nesting), and arguments that nest more than
        64 arrays and objects are refused at once.
        """
        from ._budget import MAX_ARGUMENT_DEPTH, NeedsMore, TooCostly, argument_depth_over, budget

        if argument_depth_over(arguments, MAX_ARGUMENT_DEPTH):
            line = f"  - root: the arguments nest more than {MAX_ARGUMENT_DEPTH} arrays and objects deep"
            raise failure(self.name, [line], arguments)
        from . import _schema_checks  # noqa: F401 - jsonschema's import is not the validation's cost

        try:
            with budget():
                if self._model is not None:
                    return validate_with_model(self, arguments)
                return validate_with_schema(self, arguments)
        except NeedsMore:
            raise  # a first try: done again in a worker thread
        except TooCostly as exc:  # a schema whose checks multiply or nest, or arguments too large for it
            raise failure(self.name, [f"  - root: {exc}"], arguments) from None
        except RecursionError:  # not reached with the nesting limits; kept as the last resort
            raise failure(self.name, ["  - root: the schema or the arguments nest too deeply"], arguments) from None
        except Exception:
            raise
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # native code's panics (pyo3's PanicException) are not Exceptions
            line = f"  - root: the validator failed ({type(exc).__name__}: {first_line(exc)})"
            raise failure(self.name, [line], arguments) from None

    def __repr__(self) -> str:
        return f"AgentTool(name={self.name!r})"


_BASE_VALIDATE = AgentTool.validate


async def within_timeout(tool: AgentTool, execution: Awaitable[object]) -> object:
    """Await a tool's execution, cut after its `timeout` if it has one (`ToolTimeoutError`).

    What `proceed()` runs for a `wrap_tool_call`, and what a durable engine runs where the tool
    really executes, so that the outcome is recorded where the tool ran.
    """
    if not isinstance(tool, AgentTool):
        if inspect.iscoroutine(execution):
            execution.close()  # never started: no "never awaited" warning
        raise TypeError(f"within_timeout's tool must be an AgentTool, got {type(tool).__name__}")
    timeout = tool.timeout
    if timeout is None:
        return await execution
    with anyio.move_on_after(timeout):
        return await execution
    raise ToolTimeoutError(f"Tool {tool.name} timed out after {timeout:g} s")


def validate_tool_arguments(tool: AgentTool, tool_call: ToolCall) -> Any:
    """The validated arguments of `tool_call` for `tool`, or `ValueError` with the model-facing text."""
    if tool_call.arguments_error:
        raise ValueError(f'Invalid arguments for tool "{tool_call.name}": {tool_call.arguments_error}')
    arguments = tool_call.arguments
    if _known_empty(tool, arguments):
        return {}  # a call without arguments, to a tool known to accept none
    return tool.validate(arguments)


_VALIDATE_IN_A_THREAD: ContextVar[bool] = ContextVar("agentloop_validate_in_a_thread", default=True)


@contextlib.contextmanager
def validation_in_line() -> Iterator[None]:
    """Within this block (and the tasks started in it) tool arguments are validated in the calling
    task, not in a worker thread: for an event loop that runs no threads, as a Temporal workflow's
    (which must stay deterministic; its tools run as activities, which validate in a thread)."""
    token = _VALIDATE_IN_A_THREAD.set(False)
    try:
        yield
    finally:
        _VALIDATE_IN_A_THREAD.reset(token)


async def validated_arguments(tool: AgentTool, tool_call: ToolCall) -> Any:
    """`validate_tool_arguments`, first on the event loop's thread with a small budget (20 ms of
    CPU: most validations need far less); one that needs more is done again in a worker thread,
    with the whole budget (a second of CPU), while the event loop's other tasks keep their turns.
    Cancelling the wait leaves the thread to end within its budget, its answer dropped. In a
    `validation_in_line()` block it is done in the calling task, with the whole budget."""
    if not _VALIDATE_IN_A_THREAD.get():
        return validate_tool_arguments(tool, tool_call)
    from ._budget import NeedsMore, first_try

    try:
        with first_try():
            return validate_tool_arguments(tool, tool_call)
    except NeedsMore:
        pass
    import anyio.to_thread

    return await anyio.to_thread.run_sync(validate_tool_arguments, tool, tool_call, abandon_on_cancel=True)


def _known_empty(tool: AgentTool, arguments: Mapping[str, Any]) -> bool:
    return not arguments and bool(tool._empty_ok) and type(tool).validate is _BASE_VALIDATE
