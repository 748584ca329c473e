"""The `@tool` decorator: an `AgentTool` from a typed async function and its docstring."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from .._types._abort import AbortSignal
from .._types._messages import AgentToolResult, TextContent
from ._tool import AgentTool, ExecutionMode, OnUpdate

__all__ = ("tool",)

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
