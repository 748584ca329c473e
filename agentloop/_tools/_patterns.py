"""Regular expressions from JSON schemas, matched by pydantic-core's linear-time engine.

Tool schemas may come from third parties (MCP servers, user configs) and their strings from the
model. Python's `re` backtracks: `^(a+)+$` against 30 characters takes seconds, and the event
loop stalls while it runs. pydantic-core (a dependency already) matches `pattern`s with Rust's
`regex` crate, whose time is linear in the text's length: `pattern_search` asks it. As JSON
Schema asks, the search is unanchored (`"b"` matches `"abc"`) and `$` matches at the very end
only (not before a final newline, unlike `re`).

JSON Schema patterns are ECMA-262 regular expressions, whose classes are ASCII: `\\d` is
`[0-9]`, `\\w` is `[0-9A-Za-z_]`, `\\b` is a boundary between those and the rest, `\\s` is
ECMA-262's list of spaces and line ends, and `.` is anything but a line end. Rust's classes are
Unicode (`\\d` matches Arabic-Indic digits, `\\w` Cyrillic), so `engine_pattern` rewrites them
into the ECMA-262 sets before the engine sees the pattern. The rewrite also keeps the memory of
compiled patterns small: a Unicode class repeated (`\\w{200}`) compiles to megabytes.

What a compiled pattern costs is estimated from its shape (`engine_pattern`'s second answer);
a pattern estimated over `MAX_PATTERN_BYTES` is refused, and the cache of compiled patterns
keeps at most `CACHED_PATTERN_BYTES` of them (and `CACHED_PATTERNS` entries), the least
recently used going first.

The engine refuses what it cannot match in linear time: backreferences, lookarounds, atomic
groups, `\\Z`. `pattern_search` raises `ValueError` with the engine's reason (or the size
estimate), which the validation reports to the model. Each search counts one step of the
validation's budget (`_budget`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from pydantic_core import SchemaError, SchemaValidator, core_schema

from . import _budget

__all__ = (
    "CACHED_PATTERNS",
    "CACHED_PATTERN_BYTES",
    "MAX_PATTERN_BYTES",
    "engine_pattern",
    "pattern_search",
)

CACHED_PATTERNS = 1024
"""How many compiled patterns are kept at most (the least recently used go first)."""

CACHED_PATTERN_BYTES = 32 << 20
"""How much memory (as estimated by `engine_pattern`) the compiled patterns kept may take."""

MAX_PATTERN_BYTES = 4 << 20
"""The largest estimated size of one compiled pattern; a larger pattern is refused, as the
engine refuses one over its own limit (10 MiB)."""

# What the engine sees for ECMA-262's classes: outside a class, and inside one (where a negated
# set is a nested class, which Rust's syntax allows).
_DIGITS = "0-9"
_WORD = "0-9A-Za-z_"
_SPACE = r"\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}"
_LINE_ENDS = r"\n\r\x{2028}\x{2029}"
_SETS = {"d": _DIGITS, "w": _WORD, "s": _SPACE}

# Estimated bytes of one copy of an atom once compiled (measured: each is about twice the most
# seen for its kind), and of a pattern besides its atoms.
_BASE_COST = 4096
_LITERAL_COST = 256  # an ASCII character
_WIDE_LITERAL_COST = 1024  # a non-ASCII character, or a letter when case is ignored
_CLASS_COST = 1024  # a set of ASCII characters
_WIDE_CLASS_COST = 8192  # a negated set, a set with non-ASCII characters, `.`, `\s`
_PROPERTY_COST = 65536  # a set with a Unicode property (`\p{L}`): thousands of ranges

_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_HEX = re.compile(r"[0-9A-Fa-f]+")
_FLAGS = re.compile(r"\(\?([a-zA-Z-]*)([:)])")


class _Frame:
    """A group being read: the cost of its alternatives so far, of the current one, of its last atom."""

    __slots__ = ("alternatives", "ignore_case", "last", "sequence")

    def __init__(self, ignore_case: bool) -> None:
        self.alternatives = 0
        self.sequence = 0
        self.last = 0
        self.ignore_case = ignore_case

    def atom(self, cost: int) -> None:
        self.sequence += cost
        self.last = cost

    def repeat(self, times: int) -> None:
        self.sequence += self.last * (times - 1)
        self.last *= times

    def total(self) -> int:
        return self.alternatives + self.sequence


def _escape_end(pattern: str, i: int) -> int:
    """Where the escape starting at `pattern[i] == "\\\\"` ends (the index after it)."""
    if i + 1 >= len(pattern):
        return i + 1
    c = pattern[i + 1]
    rest = i + 2
    if c in "pPxu" and rest < len(pattern) and pattern[rest] == "{":
        close = pattern.find("}", rest)
        return len(pattern) if close < 0 else close + 1
    if c == "u" and _HEX.fullmatch(pattern[rest : rest + 4] or "-"):
        return rest + 4
    if c == "x" and _HEX.fullmatch(pattern[rest : rest + 2] or "-"):
        return rest + 2
    if c in "pP" and rest < len(pattern):
        return rest + 1  # \pL
    if c == "c" and rest < len(pattern) and pattern[rest].isascii() and pattern[rest].isalpha():
        return rest + 1
    return rest


def _escape(text: str, in_class: bool) -> tuple[str, int]:
    """One escape (`text` starts with a backslash) for the engine, and what a copy of it costs."""
    c = text[1:2]
    if c.lower() in _SETS:
        members = _SETS[c.lower()]
        wide = c.lower() == "s" or c.isupper()
        cost = _WIDE_CLASS_COST if wide else _CLASS_COST
        if c.isupper():
            return f"[^{members}]", cost
        return (members if in_class else f"[{members}]"), cost
    if c in "bB":
        return (r"\x{8}" if in_class and c == "b" else f"(?-u:\\{c})"), 0
    if c == "c" and len(text) == 3:
        return f"\\x{{{ord(text[2]) % 32:X}}}", _LITERAL_COST
    if c == "0" and len(text) == 2:
        return r"\x{0}", _LITERAL_COST
    if c in "pP":
        return text, _PROPERTY_COST
    if c in "xu":
        return text, _WIDE_LITERAL_COST
    return text, _LITERAL_COST


def _class(pattern: str, i: int) -> tuple[str, int, int]:
    """The class starting at `pattern[i] == "["`: its text for the engine, its cost, where it ends."""
    j = i + 1
    negated = pattern.startswith("^", j)
    if negated:
        j += 1
    if pattern.startswith("]", j):  # ECMA-262: `[]` matches nothing, `[^]` anything
        return (r"[\x{0}-\x{10FFFF}]" if negated else r"[^\x{0}-\x{10FFFF}]"), _WIDE_CLASS_COST, j + 1
    out = ["[^" if negated else "["]
    cost = _WIDE_CLASS_COST if negated else _CLASS_COST
    previous = ""
    while j < len(pattern) and pattern[j] != "]":
        c = pattern[j]
        if c == "\\":
            end = _escape_end(pattern, j)
            text, atom_cost = _escape(pattern[j:end], in_class=True)
            out.append(text)
            cost = max(cost, atom_cost)
            j = end
            previous = ""
            continue
        if c in "[&~" or (c == "-" and previous == "-"):
            out.append("\\" + c)  # literal in ECMA-262; set operations in Rust's syntax
        else:
            out.append(c)
        if not c.isascii():
            cost = max(cost, _WIDE_CLASS_COST)
        previous = c
        j += 1
    if j >= len(pattern):  # unclosed: the engine says so
        return "".join(out), cost, j
    out.append("]")
    return "".join(out), cost, j + 1


def engine_pattern(pattern: str) -> tuple[str, int]:
    """The ECMA-262 `pattern` in the engine's syntax, and an estimate of its compiled size in bytes.

    Outside the classes rewritten (see the module docstring) the pattern is passed on as it is;
    a `{` that does not start a quantifier is a literal, as ECMA-262 reads it. The estimate adds
    up its atoms, each repetition counted as the copies the engine compiles (`x{3,5}`: five).

    For instance `\\d+` becomes `[0-9]+`; `[\\w-]` becomes `[0-9A-Za-z_-]`; `[^\\S\\n]` becomes
    `[^[^...spaces...]\\n]`; `a{,3}` becomes `a\\{,3\\}`; `\\bx` becomes `(?-u:\\b)x`; `.`
    becomes `[^\\n\\r\\x{2028}\\x{2029}]`; `\\p{L}` stays as it is.
    """
    out: list[str] = []
    stack = [_Frame(ignore_case=False)]
    i = 0
    n = len(pattern)
    while i < n:
        frame = stack[-1]
        c = pattern[i]
        if c == "\\":
            end = _escape_end(pattern, i)
            text, cost = _escape(pattern[i:end], in_class=False)
            if cost == _LITERAL_COST and frame.ignore_case:
                cost = _WIDE_LITERAL_COST
            out.append(text)
            frame.atom(cost)
            i = end
        elif c == "[":
            text, cost, i = _class(pattern, i)
            out.append(text)
            frame.atom(max(cost, _WIDE_LITERAL_COST) if frame.ignore_case else cost)
        elif c == "(":
            flags = _FLAGS.match(pattern, i)
            if flags and flags.group(2) == ")":  # `(?i)`: for the rest of this group
                frame.ignore_case = _ignores_case(flags.group(1), frame.ignore_case)
                out.append(flags.group(0))
                i = flags.end()
                continue
            ignore_case = _ignores_case(flags.group(1), frame.ignore_case) if flags else frame.ignore_case
            stack.append(_Frame(ignore_case))
            out.append(c)
            i += 1
        elif c == ")":
            if len(stack) > 1:
                stack.pop()
                stack[-1].atom(frame.total())
            out.append(c)
            i += 1
        elif c == "|":
            frame.alternatives += frame.sequence
            frame.sequence = frame.last = 0
            out.append(c)
            i += 1
        elif c in "*?":
            out.append(c)
            i += 1
        elif c == "+":
            frame.repeat(2)  # `x+` is `xx*`
            out.append(c)
            i += 1
        elif c == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            if quantifier is None:
                out.append("\\{")
                frame.atom(_LITERAL_COST)
                i += 1
                continue
            low = int(quantifier.group(1))
            high = quantifier.group(3)
            frame.repeat(low + 1 if quantifier.group(2) and not high else max(low, int(high or low)))
            out.append(quantifier.group(0))
            i = quantifier.end()
        elif c == "}":
            out.append("\\}")
            frame.atom(_LITERAL_COST)
            i += 1
        elif c == ".":
            out.append(f"[^{_LINE_ENDS}]")
            frame.atom(_WIDE_CLASS_COST)
            i += 1
        elif c in "^$":
            out.append(c)
            frame.atom(0)
            i += 1
        else:
            out.append(c)
            frame.atom(_LITERAL_COST if c.isascii() and not (frame.ignore_case and c.isalpha()) else _WIDE_LITERAL_COST)
            i += 1
    while len(stack) > 1:  # unclosed groups: the engine says so
        frame = stack.pop()
        stack[-1].atom(frame.total())
    return "".join(out), _BASE_COST + stack[0].total()


def _ignores_case(flags: str, before: bool) -> bool:
    on, _, off = flags.partition("-")
    if "i" in off:
        return False
    return before or "i" in on


class _Cache:
    """Compiled patterns (or why each was refused), bounded by entries and by estimated bytes."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[SchemaValidator | str, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # validations run in worker threads

    def get(self, pattern: str) -> SchemaValidator | str:
        with self._lock:
            found = self._entries.get(pattern)
            if found is not None:
                self._entries.move_to_end(pattern)
                return found[0]
        compiled, size = _compile(pattern)
        with self._lock:
            if pattern not in self._entries:
                self._entries[pattern] = (compiled, size)
                self._bytes += size
            while self._entries and (len(self._entries) > CACHED_PATTERNS or self._bytes > CACHED_PATTERN_BYTES):
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
        return compiled

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def size(self) -> tuple[int, int]:
        """How many patterns are kept, and their estimated bytes."""
        with self._lock:
            return len(self._entries), self._bytes


_CACHE = _Cache()


def _compile(pattern: str) -> tuple[SchemaValidator | str, int]:
    """The validator of strings that match `pattern` (or why the engine refuses it), and its weight."""
    translated, size = engine_pattern(pattern)
    if size > MAX_PATTERN_BYTES:
        mib = 1 << 20
        limit = MAX_PATTERN_BYTES // mib
        reason = f"compiled, it would take about {size / mib:.0f} MiB, over the size limit of {limit} MiB"
        return reason, len(pattern)
    try:
        return SchemaValidator(core_schema.str_schema(pattern=translated)), size
    except SchemaError as exc:
        return _reason(str(exc)), len(pattern)


def _reason(message: str) -> str:
    """The engine's own words from a `SchemaError` (its last line that says `error:`, or the last line)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line[len("error:") :].strip()
    last = lines[-1] if lines else "unknown error"
    return last.removeprefix("SchemaError:").strip()


def pattern_search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text`; `ValueError` when the pattern cannot be matched.

    Counts one step of the current validation's budget (`TooCostly` once it is used up).
    """
    if not isinstance(pattern, str):
        raise ValueError(f"a pattern must be a string, got {type(pattern).__name__}")
    _budget.spend()
    validator = _CACHE.get(pattern)
    if isinstance(validator, str):
        raise ValueError(f"{pattern!r} is not a pattern the linear-time engine accepts: {validator}")
    return validator.isinstance_python(text)
