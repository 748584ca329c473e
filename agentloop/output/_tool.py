"""`OutputTool`: an output type as a final tool, with bounded retries and partial objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from .._tools._tool import AgentTool, OnUpdate
from .._types._abort import AbortSignal
from .._types._errors import AgentLoopError
from .._types._events import AgentEvent, MessageUpdate, ToolCallDeltaEvent, ToolCallStartEvent
from .._types._messages import AgentToolResult, TextContent, ToolCall

__all__ = ("MISSING", "OutputError", "OutputTool", "PartialObjects", "error_lines", "output_adapter")

T = TypeVar("T")

MISSING: Any = object()
"""No value yet (a result or a partial object not made)."""


class OutputError(AgentLoopError):
    """The run ended without a valid typed result (after the retries, or without a final call).

    `errors` holds the validation errors the model was sent, one per failed attempt.
    """

    def __init__(self, message: str, errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class OutputTool(AgentTool, Generic[T]):
    """The final tool of a run: the model calls it with the result, which must validate as `output_type`.

    Example:
        ```python
        final = OutputTool(Sum)
        context = AgentContext(tools=[add, final])
        async for event in agent_loop([prompt], context, config, stream_fn=stream):
            if (partial := final.partial(event)) is not None:
                print(partial)
        total = final.result()  # a Sum, or OutputError
        ```

    A call whose arguments validate is answered "Result accepted" with `terminate=True`: the run
    ends after that batch (when the batch's other calls agree, as `terminate` always works). A
    call that does not validate is answered with the validation errors, as any tool's error, and
    the model tries again; the call after `max_retries` failures also ends the run, and `result()`
    raises `OutputError`. One `OutputTool` serves one run: it keeps the run's attempts.

    Args:
        output_type: A pydantic model, a dataclass or a TypedDict (from `typing_extensions` before
            Python 3.12): anything pydantic validates whose JSON schema is an object.
        name: The tool's name, for the model.
        description: What the model is told; the default asks for the final result.
        max_retries: Failed attempts sent back to the model before the run is ended.
    """

    def __init__(
        self,
        output_type: type[T],
        *,
        name: str = "final_result",
        description: str | None = None,
        max_retries: int = 2,
    ) -> None:
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        adapter, schema = output_adapter(output_type)
        title = getattr(output_type, "__name__", "result")
        super().__init__(
            name=name,
            description=description or f"Call this with the final result ({title}) when you have it. It ends the run.",
            parameters=schema,
            execution_mode="sequential",
        )
        self.output_type = output_type
        self.max_retries = max_retries
        self.errors: list[str] = []
        self._adapter = adapter
        self._value: T = MISSING
        self._call_index: int | None = None
        self._partials = PartialObjects(self._adapter)

    def validate(self, arguments: Mapping[str, Any]) -> Any:
        """The raw arguments: `execute` validates them, to count the attempts."""
        return arguments

    async def execute(
        self, tool_call_id: str, params: Any, signal: AbortSignal, on_update: OnUpdate
    ) -> AgentToolResult | str:
        if self._value is not MISSING:
            return AgentToolResult(content=(TextContent("Result already accepted."),), terminate=True)
        try:
            self._value = self._adapter.validate_python(params)
        except ValidationError as exc:
            self.errors.append(_error_text(self.name, exc))
            last = len(self.errors) > self.max_retries
            text = self.errors[-1] + ("" if last else "\n\nFix the arguments and call the tool again.")
            return AgentToolResult(content=(TextContent(text),), is_error=True, terminate=last or None)
        return AgentToolResult(content=(TextContent("Result accepted."),), terminate=True)

    def result(self) -> T:
        """The validated result, or `OutputError` saying why there is none."""
        if self._value is not MISSING:
            return self._value
        if self.errors:
            raise OutputError(
                f"the model's result for {self.name} did not validate after {len(self.errors)} attempts; "
                f"the last error:\n{self.errors[-1]}",
                tuple(self.errors),
            )
        raise OutputError(f"the run ended without a call to {self.name}")

    def partial(self, event: AgentEvent) -> T | None:
        """The partial result this event makes, if it makes a new one; else None.

        Feed it every event of the run, in order. While the model streams a call to this tool,
        each new argument fragment is validated as far as it goes (pydantic's partial JSON
        validation): an object appears once every required field has started (fields with
        defaults, or a TypedDict with `total=False`, may come later); the last string may be
        cut short. Each partial object
        returned differs from the one before.
        """
        if not isinstance(event, MessageUpdate):
            return None
        update = event.assistant_message_event
        if isinstance(update, ToolCallStartEvent):
            block = update.partial.content[update.content_index]
            if isinstance(block, ToolCall) and block.name == self.name:
                self._call_index = update.content_index
                self._partials.restart()
            else:
                self._call_index = None
            return None
        if not isinstance(update, ToolCallDeltaEvent) or update.content_index != self._call_index:
            return None
        return self._partials.add(update.delta)


_VALIDATE_EVERY_FRAGMENT_BELOW = 4096
"""Characters: a text shorter than this is validated again at every fragment."""
_GROWTH = 8
"""A longer text is validated again once it has grown by an eighth (1/_GROWTH) of its length."""


class PartialObjects(Generic[T]):
    """The objects a streamed JSON text makes as it grows: after each fragment, the text so far
    validated as far as it goes (pydantic's partial JSON validation), when it makes a new one.

    Each validation reads the whole text, and the model chooses how long its answer is: a long
    text is validated again only once it has grown by an eighth, so the work of a whole answer
    stays linear in its length (about nine readings of it) and the last partial object of a long
    answer can lag behind its text by up to an eighth of it. The final answer is validated whole,
    once, elsewhere.
    """

    def __init__(self, adapter: TypeAdapter[T]) -> None:
        self._adapter = adapter
        self.restart()

    def restart(self) -> None:
        """A new text begins."""
        self._pieces: list[str] = []
        self._length = 0
        self._validated_length = 0
        self._last: Any = MISSING

    def add(self, fragment: str) -> T | None:
        """The object the text makes with `fragment`, if it makes one that differs from the last."""
        self._pieces.append(fragment)
        self._length += len(fragment)
        grown = self._length - self._validated_length
        if self._length >= _VALIDATE_EVERY_FRAGMENT_BELOW and grown * _GROWTH < self._length:
            return None
        text = "".join(self._pieces)
        self._pieces = [text]
        self._validated_length = self._length
        try:
            value = self._adapter.validate_json(text, experimental_allow_partial="trailing-strings")
        except ValueError:
            return None
        if self._last is not MISSING and value == self._last:
            return None
        self._last = value
        return value


def output_adapter(output_type: type[T]) -> tuple[TypeAdapter[T], dict[str, Any]]:
    """The validator of an output type and its JSON schema; TypeError unless it is a JSON object."""
    try:
        adapter: TypeAdapter[T] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:
        raise TypeError(f"output_type must be a type pydantic can validate, got {output_type!r}: {exc}") from None
    if schema.get("type") != "object":
        raise TypeError(
            f"output_type must be a pydantic model, a dataclass or a TypedDict (a JSON object), got {output_type!r}"
        )
    return adapter, schema


def error_lines(exc: ValidationError) -> list[str]:
    """One line per validation error: where, and what is wrong."""
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "root"
        lines.append(f"  - {where}: {error['msg']}")
    return lines


def _error_text(name: str, exc: ValidationError) -> str:
    return f'Validation failed for tool "{name}":\n' + "\n".join(error_lines(exc))
