"""Tool-call arguments that arrive as JSON fragments: a best-effort preview, then a final parse.

A model streams the arguments of a tool call as raw JSON text, a few characters at a time. While
it streams, `ToolArguments.append` gives the value so far, read incrementally by `StreamingJson`
(pi-ai's streaming parser: each fragment read once, a fresh preview at every delta within a
linear cost bound). At the end, `ToolArguments.final` gives the arguments and, when the text is
not a JSON object, an error text for `ToolCall.arguments_error` (the loop then reports it to the
model instead of running the tool with made-up arguments).

`parse_streaming_json` parses a whole possibly incomplete text at once (pi-ai's
`parseStreamingJson`: strict parse, else repair then parse, else partial parse, else `{}`; an
unfinished `true`/`false`/`null` at the end shows as that literal).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_core import from_json

from .._wire._json_text import decode_json
from ._streaming_json import NOTHING, StreamingJson

__all__ = ("ToolArguments", "parse_final_arguments", "parse_streaming_json", "repair_json")

_NEEDS_REPAIR = re.compile(r"[\\\x00-\x1f]")
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_COLUMN = re.compile(r"column (\d+)")
_PENDING_SCALAR = re.compile(r'[^ \t\n\r,:{}\[\]"]+\Z')
_EXPONENT_WITHOUT_DIGITS = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?([eE][+-]?)\Z")
_COMPLETE_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_LITERALS = ("true", "false", "null")
_SCALAR_ENDINGS = frozenset("truefalsneE+-")
_MAX_PENDING_SCALAR = 64


def repair_json(text: str) -> str:
    """Escape raw control characters inside strings and double invalid backslash escapes."""
    if not _NEEDS_REPAIR.search(text):
        return text
    out: list[str] = []
    in_string = False
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if not in_string:
            out.append(char)
            in_string = char == '"'
        elif char == '"':
            out.append(char)
            in_string = False
        elif char == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt == "u" and _HEX4.fullmatch(text, i + 2, i + 6):
                out.append(text[i : i + 6])
                i += 5
            elif nxt and nxt in _SIMPLE_ESCAPES:
                out.append("\\" + nxt)
                i += 1
            elif nxt:
                out.append("\\\\")
            else:
                out.append("\\\\")
        elif char < " ":
            out.append(json.dumps(char)[1:-1])
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_PARTIAL_ERRORS = (ValueError, TypeError, RecursionError)
"""What pydantic's partial parser may raise: TypeError for a text with lone surrogates."""


def _partial(text: str) -> dict[str, Any]:
    try:
        return _as_object(from_json(text, allow_partial="trailing-strings", allow_inf_nan=False))
    except _PARTIAL_ERRORS as exc:
        # Keep the parseable prefix (pi-ai's partial parser does): cut at the reported column.
        match = _COLUMN.search(str(exc))
        if match is None:
            return {}
        cut = int(match.group(1)) - 1
        if cut <= 0 or cut >= len(text):
            return {}
        try:
            return _as_object(from_json(text[:cut], allow_partial="trailing-strings", allow_inf_nan=False))
        except _PARTIAL_ERRORS:
            return {}


def _complete_pending_scalar(text: str) -> str:
    """`text` with an unfinished literal or number at its end completed as pi-ai's streaming parser
    shows it: a prefix of `true`, `false` or `null` is that literal (`[tr` -> `[true`), and a number
    whose exponent has no digits yet shows its mantissa (`1.5e` -> `1.5`)."""
    if not text or text[-1] not in _SCALAR_ENDINGS:
        return text
    tail = text[-_MAX_PENDING_SCALAR:]  # longer tokens are neither (and the search stays O(1))
    match = _PENDING_SCALAR.search(tail)
    if match is None or match.start() == 0:
        return text
    token = match.group()
    start = len(text) - len(token)
    literal = next((word for word in _LITERALS if word.startswith(token)), None)
    exponent = None if literal is not None else _EXPONENT_WITHOUT_DIGITS.match(token)
    if literal is None and exponent is None:
        return text
    if '"' in _COMPLETE_STRING.sub("", text[:start]):
        return text  # the text ends inside a string: those are characters, not a value
    if literal is not None:
        return text + literal[len(token) :]
    assert exponent is not None
    return text[: len(text) - len(exponent.group(1))]


def parse_streaming_json(text: str) -> dict[str, Any]:
    """The best-effort object that a possibly incomplete JSON text stands for (`{}` if none)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (JSON text, possibly incomplete), got {type(text).__name__}")
    if not text or text.isspace():
        return {}
    try:
        return _as_object(decode_json(text))
    except ValueError:
        pass
    repaired = repair_json(text)
    if repaired is not text:
        try:
            return _as_object(decode_json(repaired))
        except ValueError:
            pass
    return _partial(_complete_pending_scalar(repaired))


def parse_final_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """The arguments of a complete tool call, and an error text when they are not a JSON object.

    An empty text is `{}` (tools without parameters). Raw control characters and invalid
    escapes inside strings are repaired. Anything else that is not a JSON object gives `{}` and
    a sentence saying what was received.
    """
    if not text or text.isspace():
        return {}, None
    try:
        value = decode_json(text)
    except ValueError as exc:
        repaired = repair_json(text)
        try:
            value = decode_json(repaired)
        except ValueError:
            return {}, f"the arguments are not valid JSON ({exc}): {_excerpt(text)}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}: {_excerpt(text)}"
    return value, None


def _excerpt(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


class ToolArguments:
    """The argument text of one streaming tool call, and its preview (pi-ai's
    `ToolCallArgumentsStream`): the text is kept for the one full parse at the end, and a
    `StreamingJson` reads each fragment once for the previews in between."""

    __slots__ = ("_arguments", "_parser", "_parts", "_snapshot")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._parser = StreamingJson()
        self._snapshot: Any = NOTHING
        self._arguments: dict[str, Any] = {}

    @property
    def text(self) -> str:
        """The argument text received so far."""
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def append(self, delta: str) -> dict[str, Any]:
        """Add a fragment; return the preview (the same object as before when it did not change)."""
        if delta:
            self._parts.append(delta)
        self._parser.append(delta)
        snapshot = self._parser.snapshot()
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            # Tool arguments are an object: any other partial value shows as no arguments yet.
            self._arguments = snapshot if isinstance(snapshot, dict) else {}
        return self._arguments

    def replace(self, text: str) -> dict[str, Any]:
        """Take the provider's complete text: the rest when it continues the text so far,
        otherwise a new start with `text`. Returns the preview."""
        known = self.text
        if text.startswith(known):
            return self.append(text[len(known) :]) if len(text) > len(known) else self._arguments
        self._parts = []
        self._parser = StreamingJson()
        self._snapshot = NOTHING
        return self.append(text)

    def final(self) -> tuple[dict[str, Any], str | None]:
        """The final arguments and the error text (see `parse_final_arguments`)."""
        return parse_final_arguments(self.text)
