"""Tools: `AgentTool`, the `@tool` decorator, and argument validation at the untrusted boundary."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload

import anyio

from .._types._abort import AbortSignal
from .._types._errors import ToolTimeoutError
from .._types._messages import AgentToolResult, TextContent, ToolCall

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "AgentTool",
    "ExecutionMode",
    "OnUpdate",
    "ToolExecute",
    "tool",
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
            raise _failure(self.name, [line], arguments)
        from . import _schema_checks  # noqa: F401 - jsonschema's import is not the validation's cost

        try:
            with budget():
                if self._model is not None:
                    return _validate_with_model(self, arguments)
                return _validate_with_schema(self, arguments)
        except NeedsMore:
            raise  # a first try: done again in a worker thread
        except TooCostly as exc:  # a schema whose checks multiply or nest, or arguments too large for it
            raise _failure(self.name, [f"  - root: {exc}"], arguments) from None
        except RecursionError:  # not reached with the nesting limits; kept as the last resort
            raise _failure(self.name, ["  - root: the schema or the arguments nest too deeply"], arguments) from None
        except Exception:
            raise
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # native code's panics (pyo3's PanicException) are not Exceptions
            line = f"  - root: the validator failed ({type(exc).__name__}: {_first_line(exc)})"
            raise _failure(self.name, [line], arguments) from None

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


def _failure(name: str, lines: list[str], arguments: Any) -> ValueError:
    import json

    from ._budget import MAX_ARGUMENT_DEPTH, argument_depth_over

    if argument_depth_over(arguments, MAX_ARGUMENT_DEPTH):
        received = f"(not shown: they nest more than {MAX_ARGUMENT_DEPTH} arrays and objects deep)"
    else:
        received = json.dumps(arguments, indent=2, ensure_ascii=False, default=repr)
    body = "\n".join(lines) or "  - root: Unknown validation error"
    return ValueError(f'Validation failed for tool "{name}":\n{body}\n\nReceived arguments:\n{received}')


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


def _validator(tool: AgentTool) -> Any:
    """The tool's JSON-schema validator, built once (jsonschema is imported on first use).

    Schemas may come from third parties and arguments from the model, so validating never
    reaches the network (`$ref`s resolve within the schema and the JSON-schema meta-schemas
    only), never runs a backtracking regular expression, and stops when the validation's budget
    is used up (`_schema_checks`, `_budget`). Checking the schema against its meta-schema is
    part of the first validation's budget; a schema found invalid, or to need more checks (or
    nesting) than the budget has, stays so (every call gets the same error at once).
    """
    validator = tool._validator
    if isinstance(validator, str):
        raise ValueError(validator)
    if validator is None:
        import jsonschema

        from ._budget import NeedsMore, TooCostly
        from ._schema_checks import bounded_validator_class, check_schema, local_registry, memo_safe

        schema = dict(tool.parameters)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            check_schema(cls, schema)
        except jsonschema.SchemaError as exc:
            tool._validator = f'tool "{tool.name}" has an invalid JSON schema: {exc.message}'
            raise ValueError(tool._validator) from None
        except TooCostly as exc:
            if isinstance(exc, NeedsMore):
                raise
            message = f'tool "{tool.name}" has a JSON schema that takes {exc.what} to check'
            if exc.lasting:  # too many checks, too deep: so it will be each time
                tool._validator = message
            raise ValueError(message) from None
        tool._memo_safe = memo_safe(schema)
        validator = tool._validator = bounded_validator_class(cls)(schema, registry=local_registry())
    return validator


def _json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (tools may change their arguments; the transcript's stay)."""
    if type(value) is dict:
        return {key: _json_copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_json_copy(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return copy.deepcopy(value)


def _coerced(tool: AgentTool, arguments: Mapping[str, Any]) -> tuple[Any, bool]:
    """A copy of the arguments with the reference's coercions applied, and whether it was valid as sent."""
    from ._budget import TooCostly, current

    validator = _validator(tool)
    budget = current()
    if budget is not None and tool._memo_safe:
        budget.memo = {}  # the schema check is done: from here on, what a node found for a value is kept
    if not arguments:  # a call without arguments: whether {} is valid is known once per tool
        empty_ok = tool._empty_ok
        if empty_ok is None:
            try:
                empty_ok = tool._empty_ok = bool(validator.is_valid({}))
            except TooCostly:
                raise
            except Exception:
                empty_ok = tool._empty_ok = False
        if empty_ok:
            return {}, True
    args = _json_copy(dict(arguments))
    try:
        if validator.is_valid(args):
            return args, True  # nothing to coerce: a valid value converts to itself
    except TooCostly:
        raise
    except Exception:  # an unresolvable $ref: coerce what can be, the validation reports the rest
        pass

    from ._budget import value_key
    from ._coerce import coerce_arguments  # only arguments that need converting pay for it

    nodes: dict[int, Any] = {}
    answers: dict[tuple[int, object], tuple[Any, bool | None]] = {}

    def passes(node: Any, value: Any) -> bool | None:
        if not isinstance(node, dict):
            return None
        key = (id(node), value_key(value))
        known = answers.get(key)
        if known is not None:
            return known[1]
        sub = nodes.get(id(node))
        if sub is None:
            sub = nodes[id(node)] = validator.evolve(schema=node)
        try:
            answer: bool | None = bool(sub.is_valid(value))
        except TooCostly:
            raise
        except Exception:
            answer = None
        answers[key] = (value, answer)  # the value kept alive: its id stays its own
        return answer

    return coerce_arguments(validator.schema, args, passes), False


def _validate_with_schema(tool: AgentTool, arguments: Mapping[str, Any]) -> Any:
    validator = _validator(tool)
    args, valid = _coerced(tool, arguments)
    if valid:
        return args
    schema = validator.schema
    found: list[tuple[list[tuple[int, ...]], str]] = []
    reported: set[tuple[Any, ...]] = set()
    for error in _errors(validator, args):
        at = list(error.absolute_path)
        base = ".".join(str(p) for p in at)
        if error.validator == "required" and isinstance(error.instance, dict):
            required = list(error.validator_value)
            for missing in required:
                if missing not in error.instance and (*at, missing) not in reported:
                    reported.add((*at, missing))
                    path = f"{base}.{missing}" if base else str(missing)
                    key = [*_error_order(schema, at), (1, required.index(missing))]
                    found.append((key, f"  - {path}: must have required property '{missing}'"))
            continue
        found.append(([*_error_order(schema, at), (0,)], f"  - {base or 'root'}: {error.message}"))
    if found:
        found.sort(key=lambda item: item[0])
        raise _failure(tool.name, [line for _, line in found], arguments)
    return args


def _errors(validator: Any, args: Any) -> list[Any]:
    """Every validation error; a `$ref` that names nothing is an error, not a crash."""
    import jsonschema
    import referencing.exceptions

    try:
        return list(validator.iter_errors(args))
    except referencing.exceptions.Unresolvable as exc:
        error = jsonschema.ValidationError(
            f"the schema has a $ref that cannot be resolved ({exc}; references outside the schema are not fetched)"
        )
        return [error]


def _error_order(schema: Any, path: list[Any]) -> list[tuple[int, ...]]:
    """Where an error sorts, as the reference lists them: at each object, the value's own
    problems first, then its missing required properties, then its properties in schema order
    (depth first); array items by index."""
    key: list[tuple[int, ...]] = []
    node = schema
    for part in path:
        node = node if isinstance(node, dict) else {}
        if isinstance(part, int):
            key.append((2, part))
            items = node.get("items", node.get("prefixItems"))
            node = items[part] if isinstance(items, list) and part < len(items) else items
        else:
            found = node.get("properties")
            properties: dict[str, Any] = found if isinstance(found, dict) else {}
            names = list(properties)
            key.append((2, names.index(part) if part in properties else len(names)))
            node = properties.get(part)
    return key


def _validate_with_model(tool: AgentTool, arguments: Mapping[str, Any]) -> Any:
    import pydantic

    # The reference's coercions first (7 -> "7", null for optional fields...), then the model.
    args, _ = _coerced(tool, arguments)
    try:
        return tool._model.model_validate(args)
    except pydantic.ValidationError as exc:
        lines = [f"  - {'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}" for err in exc.errors()]
        raise _failure(tool.name, lines, arguments) from None


# --- @tool ----------------------------------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
_INJECTED = ("tool_call_id", "signal", "on_update")


@overload
def tool(fn: Callable[..., Any], /) -> AgentTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    execution_mode: ExecutionMode | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
) -> Callable[[Callable[..., Any]], AgentTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    execution_mode: ExecutionMode | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Build an `AgentTool` from a typed function: `async def`, or a plain `def` run in a worker thread.

    The schema and validation come from the signature (through pydantic, with lax coercion and
    numbers accepted for strings), the description from the docstring's first paragraph, and each
    parameter's description from its `Args:` entry. Parameters named `tool_call_id`, `signal` and
    `on_update` are not arguments for the model: the loop passes them in. The function may return
    a `str` (one text block), an `AgentToolResult`, or any JSON-serialisable value (sent as JSON
    text, kept as `details`).

    A plain `def` runs in a worker thread (`anyio.to_thread.run_sync`), so blocking code does not
    stall the event loop; its `on_update` may be called from the thread. A thread cannot be
    cancelled: when the abort's grace period ends (or the tool's timeout), the call is answered at
    once and the thread is left to finish on its own, its result dropped. A long-running sync
    tool should check `signal.aborted` now and then.

    `name`, `description`, `label`, `execution_mode`, `timeout` and `max_concurrency` are those
    of `AgentTool`.

    Example:
        ```python
        @tool
        async def add(a: int, b: int) -> str:
            '''Add two integers.'''
            return str(a + b)
        ```
    """

    def build(func: Callable[..., Any]) -> AgentTool:
        if not callable(func) or inspect.isclass(func):
            raise TypeError(f"@tool needs a function, got {func!r}")
        return _tool_from_function(func, name, description, label, execution_mode, timeout, max_concurrency)

    return build(fn) if fn is not None else build


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(doc)
    summary = doc.split("\n\n", 1)[0].strip()
    params: dict[str, str] = {}
    match = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?|\s*\n)+)", doc, re.M)
    if match:
        current = None
        for line in match.group(1).splitlines():
            item = re.match(r"^\s{1,8}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if item:
                current = item.group(1)
                params[current] = item.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
    return summary, params


def _tool_from_function(
    func: Callable[..., Any],
    name: str | None,
    description: str | None,
    label: str | None,
    execution_mode: ExecutionMode | None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
) -> AgentTool:
    import pydantic

    summary, param_docs = _docstring_parts(func.__doc__ or "")
    hints = _resolved_hints(func)
    fields: dict[str, Any] = {}
    injected = []
    for param in inspect.signature(func).parameters.values():
        if param.name in _INJECTED:
            injected.append(param.name)
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool function {func.__name__!r} cannot take *args or **kwargs")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            annotation,
            pydantic.Field(default, description=param_docs.get(param.name)),
        )
    model = pydantic.create_model(
        f"{func.__name__}_arguments",
        __config__=pydantic.ConfigDict(coerce_numbers_to_str=True, extra="ignore"),
        **fields,
    )

    in_thread = not inspect.iscoroutinefunction(func)

    async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: OnUpdate) -> AgentToolResult:
        kwargs = {key: getattr(params, key) for key in fields}
        update: object = functools.partial(_update_from_thread, on_update) if in_thread else on_update
        extra = {"tool_call_id": tool_call_id, "signal": signal, "on_update": update}
        kwargs.update({key: extra[key] for key in injected})
        if in_thread:
            import anyio.to_thread

            return _as_result(await anyio.to_thread.run_sync(functools.partial(func, **kwargs), abandon_on_cancel=True))
        return _as_result(await func(**kwargs))

    return AgentTool(
        name=name or func.__name__,
        description=description if description is not None else summary,
        parameters=model,
        execute=execute,
        label=label,
        execution_mode=execution_mode,
        timeout=timeout,
        max_concurrency=max_concurrency,
    )


def _update_from_thread(on_update: OnUpdate, partial_result: AgentToolResult) -> None:
    """A sync tool's `on_update`, called from its worker thread: handed to the event loop."""
    import anyio.from_thread

    anyio.from_thread.run_sync(on_update, partial_result)


def _resolved_hints(func: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(func)
    except Exception as exc:
        raise TypeError(f"@tool could not resolve the type hints of {func.__name__!r}: {exc}") from None


def _as_result(value: Any) -> AgentToolResult:
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult(content=(TextContent(value),))
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"a @tool function must return str, AgentToolResult or a JSON value, got {type(value).__name__}"
        ) from exc
    return AgentToolResult(content=(TextContent(text),), details=value)


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
