"""Regular expressions from JSON schemas, matched by pydantic-core's linear-time engine.

Tool schemas may come from third parties (MCP servers, user configs) and their strings from the
model. Python's `re` backtracks: `^(a+)+$` against 30 characters takes seconds, and the event
loop stalls while it runs. pydantic-core (a dependency already) matches `pattern`s with Rust's
`regex` crate, whose time is linear in the text's length and whose compiled size is bounded
(10 MiB): `pattern_search` asks it. As JSON Schema asks, the search is unanchored (`"b"` matches
`"abc"`) and `$` matches at the very end only (not before a final newline, unlike `re`).

The engine refuses what it cannot match in linear time: backreferences, lookarounds, atomic
groups, `\\Z`, and patterns too large once compiled. `pattern_search` raises `ValueError` with the
engine's reason, which the validation reports to the model.
"""

from __future__ import annotations

import functools

from pydantic_core import SchemaError, SchemaValidator, core_schema

__all__ = ("CACHED_PATTERNS", "pattern_search")

CACHED_PATTERNS = 128
"""How many compiled patterns are kept (the least recently used go first)."""


@functools.lru_cache(maxsize=CACHED_PATTERNS)
def _compiled(pattern: str) -> SchemaValidator | str:
    """The validator of strings that match `pattern`, or why the engine refuses it."""
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError as exc:
        return _reason(str(exc))


def _reason(message: str) -> str:
    """The engine's own words from a `SchemaError` (its last line that says `error:`, or the last line)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line[len("error:") :].strip()
    last = lines[-1] if lines else "unknown error"
    return last.removeprefix("SchemaError:").strip()


def pattern_search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text`; `ValueError` when the pattern cannot be matched."""
    if not isinstance(pattern, str):
        raise ValueError(f"a pattern must be a string, got {type(pattern).__name__}")
    validator = _compiled(pattern)
    if isinstance(validator, str):
        raise ValueError(f"{pattern!r} is not a pattern the linear-time engine accepts: {validator}")
    return validator.isinstance_python(text)
