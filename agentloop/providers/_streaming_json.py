"""Incremental, tolerant parsing of JSON text that arrives in pieces (streamed tool-call arguments).

`StreamingJson.append` reads each piece once, so a stream costs time linear in its length, and
`snapshot` returns the value of the text read so far. A snapshot is never changed once returned:
the containers still open (the "open path") are copied into every new snapshot, and completed
containers and strings are shared. The rules for incomplete text are pi-ai's (its
`StreamingJsonParser`):

- An unterminated string shows the characters read so far; an unterminated escape (`\\`, `\\u00`)
  is held back until it is complete.
- An unterminated container shows the members and elements read so far; a member whose key or
  value has not started is left out.
- An unterminated literal shows its value once it is a prefix of `true`, `false` or `null`; an
  unterminated number shows its value when its digits form a number (an exponent without digits
  shows the mantissa).

Malformed text is read leniently, as `repair_json` reads it: raw control characters in strings
are kept, an invalid escape such as `\\d` stays literal text, missing commas and colons are
tolerated, values in invalid positions and unknown words (`NaN` too) are dropped, and text after
the root value is ignored. It never raises.

Cost: each `append` earns copy credit (256, plus 8 per character); `snapshot` spends what a fresh
copy of the open path costs (its member and element count, plus one per 32 characters of the
string being streamed) and returns the previous snapshot while the credit does not cover it. So a
document that keeps a very large container or string open shows a preview that lags a few pieces
behind the text, and no input makes the total work grow faster than the text.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ("NOTHING", "StreamingJson")

NOTHING: Any = type("Nothing", (), {"__repr__": lambda self: "NOTHING", "__slots__": ()})()
"""What `StreamingJson.snapshot` returns before a value starts."""

_CREDIT_PER_APPEND = 256
_CREDIT_PER_CHARACTER = 8
_CHARACTERS_PER_CREDIT = 32
"""A snapshot copies the string being streamed: one unit of credit per this many characters."""
_MAX_PENDING_SCALAR = 64
"""An unterminated number or literal longer than this is not shown until it ends."""

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
_MANTISSA_ONLY = re.compile(r"(-?(?:0|[1-9]\d*)(?:\.\d+)?)[eE][+-]?\Z")
_LITERALS = (("true", True), ("false", False), ("null", None))
_STRING_STOP = re.compile(r'["\\]')
_DELIMITER = re.compile(r'[ \t\n\r,:{}\[\]"]')
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

_ROOT = ("root", None)
_Slot = tuple[str, Any]
"""Where a value goes: `("root", None)`, `("element", index)` or `("member", key)`; None for a
position that takes no value."""


class _Frame:
    """An open container and where the parser stands in it."""

    __slots__ = ("container", "key", "phase", "size", "slot")

    def __init__(self, container: dict[str, Any] | list[Any], slot: _Slot | None) -> None:
        self.container = container
        self.slot = slot
        self.size = 0
        self.key: str | None = None
        self.phase = "value" if isinstance(container, list) else "key"
        """`key`, `colon`, `value` or `comma`: what the container expects next."""


class _String:
    """The string being read: a member's key, or a value at `slot`."""

    __slots__ = ("escape", "is_key", "parts", "size", "slot")

    def __init__(self, is_key: bool, slot: _Slot | None) -> None:
        self.is_key = is_key
        self.slot = slot
        self.parts: list[str] = []
        self.size = 0
        self.escape = ""

    def add(self, text: str) -> None:
        if self.parts and "\udc00" <= text[0] <= "\udfff" and "\ud800" <= self.parts[-1][-1] <= "\udbff":
            # The two halves of an escaped surrogate pair (`\ud83d\ude00`) are one character.
            high = self.parts.pop()
            pair = (high[-1] + text[0]).encode("utf-16", "surrogatepass").decode("utf-16")
            text = high[:-1] + pair + text[1:]
            self.size -= len(high)
        self.parts.append(text)
        self.size += len(text)

    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


class StreamingJson:
    """Incremental, tolerant JSON parser; see the module docstring for its rules and costs."""

    __slots__ = (
        "_credit",
        "_dirty",
        "_done",
        "_path_cost",
        "_root",
        "_scalar",
        "_scalar_slot",
        "_snapshot",
        "_stack",
        "_string",
    )

    def __init__(self) -> None:
        self._root: Any = NOTHING
        self._done = False
        self._stack: list[_Frame] = []
        self._string: _String | None = None
        self._scalar = ""
        self._scalar_slot: _Slot | None = None
        self._path_cost = 0
        """The sum of `size + 1` over the open containers: what a fresh snapshot copies."""
        self._credit = 0
        self._dirty = False
        self._snapshot: Any = NOTHING

    def append(self, text: str) -> None:
        """Read the next piece of text (time linear in its length)."""
        self._credit += _CREDIT_PER_APPEND + _CREDIT_PER_CHARACTER * len(text)
        index = 0
        end = len(text)
        while index < end and not self._done:
            if self._string is not None:
                index = self._read_string(self._string, text, index)
            elif self._scalar:
                index = self._read_scalar(text, index)
            else:
                self._structural(text[index])
                index += 1

    def snapshot(self) -> Any:
        """The value of the text read so far (`NOTHING` before a value starts), a plain JSON value
        never changed afterwards. The previous snapshot while nothing changed, or while a fresh
        copy of the open path is not yet paid for."""
        if not self._dirty:
            return self._snapshot
        open_string = self._string
        string_cost = 0
        if open_string is not None and not open_string.is_key and open_string.slot is not None:
            string_cost = 1 + open_string.size // _CHARACTERS_PER_CREDIT
        else:
            open_string = None
        pending = self._pending_scalar()
        cost = self._path_cost + string_cost + (0 if pending is None else 1)
        if cost > self._credit:
            return self._snapshot
        self._credit -= cost
        self._dirty = False
        if open_string is not None:
            assert open_string.slot is not None
            pending = (open_string.slot, open_string.text())
        self._snapshot = self._copy_open_path(pending)
        return self._snapshot

    # --- reading ------------------------------------------------------------------------------

    def _read_string(self, open_string: _String, text: str, start: int) -> int:
        """Read string characters from `start` until the string or the text ends; the next index."""
        run = start
        index = start
        end = len(text)
        while index < end:
            if open_string.escape:
                if self._continue_escape(open_string, text[index]):
                    index += 1
                    run = index
                    continue
                run = index  # not part of the escape: read it as a normal character
            stop = _STRING_STOP.search(text, index)
            if stop is None:
                break
            index = stop.start()
            if index > run:
                self._add(open_string, text[run:index])
            if text[index] == '"':
                self._end_string(open_string)
                return index + 1
            open_string.escape = "\\"
            index += 1
            run = index
        if end > run:
            self._add(open_string, text[run:])
        return end

    def _continue_escape(self, open_string: _String, char: str) -> bool:
        """Continue an escape with `char`; False when `char` is not part of it (then read as usual)."""
        if open_string.escape == "\\":
            decoded = _SIMPLE_ESCAPES.get(char)
            if decoded is not None:
                open_string.escape = ""
                self._add(open_string, decoded)
                return True
            if char == "u":
                open_string.escape = "\\u"
                return True
            open_string.escape = ""  # an invalid escape: the backslash stays, as repair_json keeps it
            self._add(open_string, "\\")
            return False
        if char in _HEX:
            open_string.escape += char
            if len(open_string.escape) < 6:
                return True
            decoded = chr(int(open_string.escape[2:], 16))
            open_string.escape = ""
            self._add(open_string, decoded)
            return True
        literal = open_string.escape  # `\u` without four hex digits: kept as text
        open_string.escape = ""
        self._add(open_string, literal)
        return False

    def _add(self, open_string: _String, text: str) -> None:
        open_string.add(text)
        if not open_string.is_key and open_string.slot is not None:
            self._dirty = True

    def _read_scalar(self, text: str, start: int) -> int:
        """Read number or literal characters up to the next delimiter; the delimiter's index."""
        delimiter = _DELIMITER.search(text, start)
        end = len(text) if delimiter is None else delimiter.start()
        if end > start:
            self._scalar += text[start:end]
            if self._scalar_slot is not None:
                self._dirty = True
        if end < len(text):
            self._end_scalar()
        return end

    def _structural(self, char: str) -> None:
        """One character outside strings."""
        if char in " \t\n\r":
            return
        if char == '"':
            self._start_string()
        elif char == "{" or char == "[":
            self._open_container({} if char == "{" else [])
        elif char == "}" or char == "]":
            self._close_container()
        elif char == ":":
            frame = self._stack[-1] if self._stack else None
            if frame is not None and isinstance(frame.container, dict) and frame.phase == "colon":
                frame.phase = "value"
        elif char == ",":
            if self._stack:
                frame = self._stack[-1]
                frame.phase = "value" if isinstance(frame.container, list) else "key"
        else:
            self._scalar = char
            self._scalar_slot = self._value_slot()
            if self._scalar_slot is not None:
                self._dirty = True

    def _value_slot(self) -> _Slot | None:
        """Where a value starting now goes; None where this position takes no value."""
        if not self._stack:
            return _ROOT if self._root is NOTHING else None
        frame = self._stack[-1]
        if isinstance(frame.container, list):
            return ("element", len(frame.container))
        # A missing colon is tolerated: `{"a" 1}` reads as `{"a": 1}`.
        if frame.phase in ("value", "colon") and frame.key is not None:
            return ("member", frame.key)
        return None

    def _start_string(self) -> None:
        frame = self._stack[-1] if self._stack else None
        # A missing comma is tolerated: `{"a": 1 "b": 2}` reads the second member.
        if frame is not None and isinstance(frame.container, dict) and frame.phase in ("key", "comma"):
            self._string = _String(True, None)
            return
        slot = self._value_slot()
        self._string = _String(False, slot)
        self._place(slot, "")

    def _end_string(self, open_string: _String) -> None:
        self._string = None
        frame = self._stack[-1] if self._stack else None
        if open_string.is_key:
            if frame is not None:
                frame.key = open_string.text()
                frame.phase = "colon"
            return
        self._place(open_string.slot, open_string.text())
        self._value_ended(frame)

    def _end_scalar(self) -> None:
        token, slot = self._scalar, self._scalar_slot
        self._scalar, self._scalar_slot = "", None
        value = _scalar_value(token)
        if value is not NOTHING:
            self._place(slot, value)
        self._value_ended(self._stack[-1] if self._stack else None)

    def _pending_scalar(self) -> tuple[_Slot, Any] | None:
        """The value of the unterminated scalar at the end of the text, if it shows."""
        slot, token = self._scalar_slot, self._scalar
        if slot is None or not token or len(token) > _MAX_PENDING_SCALAR:
            return None
        value = _pending_scalar_value(token)
        return None if value is NOTHING else (slot, value)

    def _open_container(self, container: dict[str, Any] | list[Any]) -> None:
        slot = self._value_slot()
        self._place(slot, container)
        self._stack.append(_Frame(container, slot))
        self._path_cost += 1
        self._dirty = True

    def _close_container(self) -> None:
        if not self._stack:
            return  # a stray closer outside any container is ignored
        frame = self._stack.pop()
        self._path_cost -= frame.size + 1
        self._dirty = True
        self._value_ended(self._stack[-1] if self._stack else None)

    def _value_ended(self, frame: _Frame | None) -> None:
        """A value in `frame` (the root value when None) has ended."""
        if frame is None:
            if self._root is not NOTHING:
                self._done = True  # text after the root value is ignored
            return
        frame.phase = "comma"

    def _place(self, slot: _Slot | None, value: Any) -> None:
        """Set the value at `slot` in the open path; nothing for a value in an invalid position."""
        if slot is None:
            return
        self._dirty = True
        kind, key = slot
        if kind == "root":
            self._root = value
            return
        frame = self._stack[-1]
        container = frame.container
        if kind == "element":
            assert isinstance(container, list)
            if key == len(container):
                frame.size += 1
                self._path_cost += 1
                container.append(value)
            else:
                container[key] = value
            return
        assert isinstance(container, dict)
        if key not in container:
            frame.size += 1
            self._path_cost += 1
        container[key] = value

    def _copy_open_path(self, pending: tuple[_Slot, Any] | None) -> Any:
        """A fresh snapshot: copies of the open containers, innermost first, each holding the
        copy of its open child."""
        if not self._stack:
            return pending[1] if pending is not None and pending[0] == _ROOT else self._root
        child: Any = NOTHING
        child_slot: _Slot | None = None
        top = len(self._stack) - 1
        for depth in range(top, -1, -1):
            frame = self._stack[depth]
            copy: Any = list(frame.container) if isinstance(frame.container, list) else dict(frame.container)
            if depth == top and pending is not None:
                _set_slot(copy, pending[0], pending[1])
            if child is not NOTHING and child_slot is not None:
                _set_slot(copy, child_slot, child)
            child, child_slot = copy, frame.slot
        # The outermost open container is the root unless it sits in an invalid position.
        return child if child_slot == _ROOT else self._root


def _set_slot(container: Any, slot: _Slot, value: Any) -> None:
    kind, key = slot
    if kind == "element":
        if key == len(container):
            container.append(value)
        else:
            container[key] = value
    elif kind == "member":
        container[key] = value


def _number(token: str) -> Any:
    if not any(c in token for c in ".eE"):
        return int(token)
    value = float(token)
    return value if math.isfinite(value) else None  # as JSON shows a number too large for a double


def _scalar_value(token: str) -> Any:
    """The value of a complete number or literal; `NOTHING` for anything else (dropped)."""
    for literal, value in _LITERALS:
        if token == literal:
            return value
    return _number(token) if _NUMBER.match(token) else NOTHING


def _pending_scalar_value(token: str) -> Any:
    """The value an unterminated number or literal shows."""
    for literal, value in _LITERALS:
        if literal.startswith(token):
            return value
    if _NUMBER.match(token):
        return _number(token)
    mantissa = _MANTISSA_ONLY.match(token)
    return NOTHING if mantissa is None else _number(mantissa.group(1))
