"""`NativeOutput`: an output type as the provider's schema-constrained answer, parsed from the text."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from .._core._loop import resolve_stream_fn
from .._types._events import AgentEvent, MessageUpdate, TextDeltaEvent, TextStartEvent
from .._types._messages import AssistantMessage, Context, Model
from .._types._stream_fn import OutputSchema, StreamFn, StreamOptions
from ._tool import MISSING, OutputError, PartialObjects, error_lines, output_adapter

__all__ = ("NativeOutput", "strict_schema")

T = TypeVar("T")

_NAME = re.compile(r"[^a-zA-Z0-9_-]")


class NativeOutput(Generic[T]):
    """The final answer as the provider's schema-constrained output: the model answers in text
    that is JSON following the output type's schema, and that text is validated as the type.

    Example:
        ```python
        final = NativeOutput(Sum)
        stream = final.stream_fn(stream_simple)  # every call asks for the schema
        ...
        error = final.check(message)  # None once the answer validates
        total = final.result()  # a Sum, or OutputError
        ```

    `stream_fn(inner)` wraps a stream function so that each call carries the schema in
    `StreamOptions.output_schema`: OpenAI Chat Completions and Responses, Azure OpenAI, Mistral,
    Gemini and Vertex AI constrain their answer to it; the other providers end the call with an
    error saying so. `check(message)` validates an answer: None when it holds, else the text to
    send back to the model (counted: after `max_retries` failures `result()` raises
    `OutputError`). `partial(event)` gives partial objects while the text streams. One
    `NativeOutput` serves one run.

    Args:
        output_type: A pydantic model, a dataclass or a TypedDict (a JSON object).
        name: The schema's name, for the provider.
        max_retries: Failed answers sent back to the model before the run is given up.
    """

    def __init__(self, output_type: type[T], *, name: str | None = None, max_retries: int = 2) -> None:
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        adapter, schema = output_adapter(output_type)
        if name is None:
            name = _NAME.sub("_", getattr(output_type, "__name__", "result"))[:64] or "result"
        elif not isinstance(name, str) or not name or _NAME.search(name):
            raise ValueError(f"name must be letters, digits, '_' and '-', got {name!r}")
        self.output_type = output_type
        self.name = name
        self.max_retries = max_retries
        self.output_schema = OutputSchema(name=name, schema=schema, strict=strict_schema(schema))
        self.errors: list[str] = []
        self._adapter = adapter
        self._value: T = MISSING
        self._text_index: int | None = None
        self._partials = PartialObjects(self._adapter)

    def stream_fn(self, inner: StreamFn | None = None) -> StreamFn:
        """`inner` (default: the provider of `model.api`) asking for this schema on every call."""
        resolved = resolve_stream_fn(inner)
        schema = self.output_schema

        def stream(model: Model, context: Context, options: StreamOptions) -> Any:
            return resolved(model, context, dataclasses.replace(options, output_schema=schema))

        return stream

    def check(self, message: AssistantMessage) -> str | None:
        """Validate the answer's text: None when it is a valid result (kept for `result()`),
        else what to tell the model (the validation errors)."""
        if self._value is not MISSING:
            return None
        try:
            self._value = self._adapter.validate_json(message.text or "")
        except ValidationError as exc:
            self.errors.append("The answer does not follow the schema:\n" + "\n".join(error_lines(exc)))
            return self.errors[-1] + "\n\nAnswer again with JSON that follows the schema."
        return None

    @property
    def retries_left(self) -> bool:
        """Whether a failed answer may still be sent back to the model."""
        return len(self.errors) <= self.max_retries

    def result(self) -> T:
        """The validated result, or `OutputError` saying why there is none."""
        if self._value is not MISSING:
            return self._value
        if self.errors:
            raise OutputError(
                f"the model's answer did not follow the schema {self.name} after {len(self.errors)} attempts; "
                f"the last error:\n{self.errors[-1]}",
                tuple(self.errors),
            )
        raise OutputError(f"the run ended without an answer following the schema {self.name}")

    def partial(self, event: AgentEvent) -> T | None:
        """The partial result this event makes, if it makes a new one; else None (as
        `OutputTool.partial`, on the answer's text)."""
        if not isinstance(event, MessageUpdate):
            return None
        update = event.assistant_message_event
        if isinstance(update, TextStartEvent):
            self._text_index = update.content_index
            self._partials.restart()
            return None
        if not isinstance(update, TextDeltaEvent) or update.content_index != self._text_index:
            return None
        return self._partials.add(update.delta)


def strict_schema(schema: Mapping[str, Any]) -> bool:
    """Whether OpenAI's strict mode takes `schema` as it is: every object lists all its
    properties as required and forbids others, at any depth."""

    def strict(node: Any) -> bool:
        if isinstance(node, list):
            return all(strict(item) for item in node)
        if not isinstance(node, Mapping):
            return True
        properties = node.get("properties")
        if node.get("type") == "object" or isinstance(properties, Mapping):
            names = set(properties or {})
            if node.get("additionalProperties") is not False or set(node.get("required") or ()) != names:
                return False
        return all(strict(value) for key, value in node.items() if key not in ("required", "enum", "const"))

    return strict(schema)
