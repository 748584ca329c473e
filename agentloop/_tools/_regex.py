"""Regular expressions from JSON schemas, matched in time linear in the text.

Tool schemas may come from third parties (MCP servers, user configs) and their strings from the
model. Python's `re` backtracks: `^(a+)+$` against 30 characters takes seconds, and the event
loop stalls while it runs. `compile_bounded` turns a pattern into a Thompson automaton that
`search` runs over the text once, tracking every state at the same time: time proportional to
the text's length times the pattern's size, whatever both are.

It reads patterns with Python's own parser and matches what `re.search` matches, for the part of
the syntax JSON-schema patterns use: literals, classes (`[a-z]`, `\\d`, `\\w`, `\\s` and
negations), `.`, alternation, groups, every quantifier (greedy or lazy), `^`, `$`, `\\A`, `\\Z`,
`\\b`, `\\B`. Backreferences, lookarounds, atomic groups, possessive quantifiers and inline flags
cannot be matched this way: `compile_bounded` raises `ValueError` saying so.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import Any

if sys.version_info >= (3, 11):
    from re import _constants as _c
    from re import _parser as _sre_parse
else:  # pragma: no cover
    import sre_constants as _c
    import sre_parse as _sre_parse

__all__ = ("MAX_STATES", "BoundedPattern", "compile_bounded")

MAX_STATES = 20_000
"""The largest automaton a pattern may make (`x{1,100000}` makes one state per repetition)."""

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)
_ALLOWED_FLAGS = re.UNICODE | re.VERBOSE
_AT_CODES = frozenset(
    {_c.AT_BEGINNING, _c.AT_BEGINNING_STRING, _c.AT_END, _c.AT_END_STRING, _c.AT_BOUNDARY, _c.AT_NON_BOUNDARY}
)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


_CATEGORY_CODES = {
    _c.CATEGORY_DIGIT: "\\d",
    _c.CATEGORY_NOT_DIGIT: "\\D",
    _c.CATEGORY_SPACE: "\\s",
    _c.CATEGORY_NOT_SPACE: "\\S",
    _c.CATEGORY_WORD: "\\w",
    _c.CATEGORY_NOT_WORD: "\\W",
}
_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    _c.CATEGORY_DIGIT: str.isdecimal,
    _c.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdecimal(),
    _c.CATEGORY_SPACE: str.isspace,
    _c.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
    _c.CATEGORY_WORD: _is_word,
    _c.CATEGORY_NOT_WORD: lambda ch: not _is_word(ch),
}


_MAX_STEPS_CACHED = 50_000
"""How many (state set, character, context) steps a pattern remembers (a lazily built DFA)."""


class BoundedPattern:
    """A compiled pattern: `search(text)` says whether it matches anywhere in `text`.

    The automaton's steps are remembered as they are first taken (a DFA built lazily, up to
    `_MAX_STEPS_CACHED` steps; past that it starts afresh, still in bounded time). While no match
    is under way, the search jumps to the next character that can start one (found by `re` with a
    one-character pattern, which cannot backtrack), and an anchored pattern stops there.
    """

    __slots__ = (
        "_accepting",
        "_anchored",
        "_arg",
        "_asserts",
        "_idle",
        "_ids",
        "_kind",
        "_out1",
        "_out2",
        "_sets",
        "_skip",
        "_start",
        "_steps",
        "pattern",
    )

    def __init__(
        self,
        pattern: str,
        kind: list[int],
        arg: list[Any],
        out1: list[int],
        out2: list[int],
        start: int,
        fragments: list[str | None],
    ) -> None:
        self.pattern = pattern
        self._kind = kind
        self._arg = arg
        self._out1 = out1
        self._out2 = out2
        self._start = start
        self._asserts = _ASSERT in kind
        self._anchored = self._only_at_start()
        self._ids: dict[tuple[int, ...], int] = {}
        self._sets: list[tuple[int, ...]] = []
        self._accepting: list[bool] = []
        self._steps: dict[tuple[int, str, Any], int] = {}
        self._skip: re.Pattern[str] | None = None
        self._idle: tuple[int, ...] = ()
        if not self._asserts:
            # Without assertions the states of "no match under way" are the same everywhere:
            # they keep id 0, and a character that none of them accepts can be skipped.
            self._idle = tuple(self._close([start], 0, ""))
            self._intern(list(self._idle))
            firsts = [fragments[state] for state in self._idle if kind[state] == _CHAR]
            if firsts and all(f is not None for f in firsts) and _MATCH not in (kind[s] for s in self._idle):
                self._skip = re.compile("|".join(f for f in firsts if f is not None))

    def __repr__(self) -> str:
        return f"compile_bounded({self.pattern!r})"

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in `text` (as `re.search(pattern, text)` would)."""
        n = len(text)
        steps, accepting, asserts, skip = self._steps, self._accepting, self._asserts, self._skip
        current = self._intern(self._close([self._start], 0, text))
        sets, anchored = self._sets, self._anchored
        i = 0
        while i < n:
            if accepting[current]:
                return True
            if anchored and i and not sets[current]:
                return False  # no match under way, and none can start after the text's start
            if skip is not None and current == 0:
                found = skip.search(text, i)
                if found is None:
                    return False  # no character left that can start a match
                i = found.start()
            ch = text[i]
            # What the assertions at position i + 1 can see besides the character before it.
            context = (
                (i + 1 == n, i + 2 == n and text[i + 1] == "\n", i + 1 < n and _is_word(text[i + 1]))
                if asserts
                else None
            )
            key = (current, ch, context)
            following = steps.get(key)
            if following is None:
                kind, arg, out1 = self._kind, self._arg, self._out1
                targets = [out1[state] for state in sets[current] if kind[state] == _CHAR and arg[state](ch)]
                targets.append(self._start)  # a match may also start at the next position
                before = len(sets)
                following = self._intern(self._close(targets, i + 1, text))
                if len(sets) >= before and len(steps) < _MAX_STEPS_CACHED:  # ids still the same
                    steps[key] = following
            current = following
            i += 1
        return accepting[current]

    def _only_at_start(self) -> bool:
        """Whether every match must start at the text's start (`^...`, `\\A...`): then a search
        with no match under way can stop (as `re` does)."""
        kind, arg, out1, out2 = self._kind, self._arg, self._out1, self._out2
        seen: set[int] = set()
        stack = [self._start]
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            k = kind[state]
            if k == _SPLIT:
                stack += (out1[state], out2[state])
            elif k == _ASSERT:
                if arg[state] is not _c.AT_BEGINNING and arg[state] is not _c.AT_BEGINNING_STRING:
                    stack.append(out1[state])
            else:
                return False  # a character or the match can be reached away from the start
        return True

    def _intern(self, states: list[int]) -> int:
        key = tuple(states)
        found = self._ids.get(key)
        if found is None:
            if len(self._sets) >= _MAX_STEPS_CACHED:  # too many distinct sets: start afresh
                self._ids.clear()
                self._sets.clear()
                self._accepting.clear()
                self._steps.clear()
                if self._idle:  # id 0 stays the idle states'
                    self._ids[self._idle] = 0
                    self._sets.append(self._idle)
                    self._accepting.append(False)
                found = self._ids.get(key)
                if found is not None:
                    return found
            found = self._ids[key] = len(self._sets)
            self._sets.append(key)
            self._accepting.append(any(self._kind[state] == _MATCH for state in key))
        return found

    def _close(self, states: list[int], i: int, text: str) -> list[int]:
        """The character and match states reachable from `states` at position `i`, in order."""
        kind, arg, out1, out2 = self._kind, self._arg, self._out1, self._out2
        seen: set[int] = set()
        out: list[int] = []
        stack = list(reversed(states))
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            k = kind[state]
            if k == _SPLIT:
                stack.append(out2[state])
                stack.append(out1[state])
            elif k == _ASSERT:
                if _holds(arg[state], text, i):
                    stack.append(out1[state])
            else:
                out.append(state)
        return out


def _holds(at: Any, text: str, i: int) -> bool:
    n = len(text)
    if at is _c.AT_BEGINNING or at is _c.AT_BEGINNING_STRING:
        return i == 0
    if at is _c.AT_END:
        return i == n or (i == n - 1 and text[i] == "\n")
    if at is _c.AT_END_STRING:
        return i == n
    if n == 0:  # re: neither \b nor \B matches in an empty string
        return False
    before = i > 0 and _is_word(text[i - 1])
    after = i < n and _is_word(text[i])
    return (before != after) if at is _c.AT_BOUNDARY else (before == after)


class _Builder:
    """Builds the automaton back to front: each item is compiled with its continuation known."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.kind: list[int] = []
        self.arg: list[Any] = []
        self.out1: list[int] = []
        self.out2: list[int] = []
        self.fragments: list[str | None] = []  # a character state's test as a one-character `re`

    def new(self, kind: int, arg: Any = None, out1: int = -1, out2: int = -1, fragment: str | None = None) -> int:
        if len(self.kind) >= MAX_STATES:
            raise ValueError(f"the pattern {self.pattern!r} is too large to match in bounded time")
        self.kind.append(kind)
        self.arg.append(arg)
        self.out1.append(out1)
        self.out2.append(out2)
        self.fragments.append(fragment)
        return len(self.kind) - 1

    def unsupported(self, what: str) -> ValueError:
        return ValueError(f"the pattern {self.pattern!r} uses {what}, which cannot be matched in bounded time")

    def sequence(self, items: Any, after: int) -> int:
        for op, av in reversed(list(items)):
            after = self.item(op, av, after)
        return after

    def item(self, op: Any, av: Any, after: int) -> int:
        if op is _c.LITERAL:
            return self.new(_CHAR, functools.partial(str.__eq__, chr(av)), after, fragment=re.escape(chr(av)))
        if op is _c.NOT_LITERAL:
            return self.new(_CHAR, functools.partial(str.__ne__, chr(av)), after, fragment=f"[^{re.escape(chr(av))}]")
        if op is _c.ANY:
            return self.new(_CHAR, functools.partial(str.__ne__, "\n"), after, fragment="[^\\n]")
        if op is _c.IN:
            test, fragment = self.char_class(av)
            return self.new(_CHAR, test, after, fragment=fragment)
        if op is _c.AT:
            if av not in _AT_CODES:
                raise self.unsupported(f"the anchor {av}")
            return self.new(_ASSERT, av, after)
        if op is _c.BRANCH:
            alternatives = [self.sequence(branch, after) for branch in av[1]]
            start = alternatives[-1]
            for alternative in reversed(alternatives[:-1]):
                start = self.new(_SPLIT, None, alternative, start)
            return start
        if op is _c.SUBPATTERN:
            _, add_flags, del_flags, items = av
            if (add_flags | del_flags) & ~_ALLOWED_FLAGS:
                raise self.unsupported("inline flags")
            return self.sequence(items, after)
        if op is _c.MAX_REPEAT or op is _c.MIN_REPEAT:
            low, high, items = av
            return self.repeat(low, high, items, after)
        names = {"GROUPREF": "a backreference", "GROUPREF_EXISTS": "a conditional group"}
        names |= {"ASSERT": "a lookaround", "ASSERT_NOT": "a lookaround", "ATOMIC_GROUP": "an atomic group"}
        raise self.unsupported(names.get(str(op), f"{str(op).lower().replace('_', ' ')}"))

    def repeat(self, low: int, high: Any, items: Any, after: int) -> int:
        if high is _c.MAXREPEAT:
            loop = self.new(_SPLIT, None, -1, after)
            self.out1[loop] = self.sequence(items, loop)
            start = loop
        else:
            start = after
            for _ in range(high - low):
                start = self.new(_SPLIT, None, self.sequence(items, start), after)
        for _ in range(low):
            start = self.sequence(items, start)
        return start

    def char_class(self, items: Any) -> tuple[Callable[[str], bool], str]:
        """The test of a `[...]` class, and the class as a one-character `re`."""
        negate = False
        chars: set[str] = set()
        ranges: list[tuple[int, int]] = []
        tests: list[Callable[[str], bool]] = []
        parts: list[str] = []
        for op, av in items:
            if op is _c.NEGATE:
                negate = True
            elif op is _c.LITERAL:
                chars.add(chr(av))
                parts.append(re.escape(chr(av)))
            elif op is _c.RANGE:
                ranges.append(av)
                parts.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
            elif op is _c.CATEGORY and av in _CATEGORIES:
                tests.append(_CATEGORIES[av])
                parts.append(_CATEGORY_CODES[av])
            else:
                raise self.unsupported(f"the class item {op}")
        frozen = frozenset(chars)

        def test(ch: str) -> bool:
            found = ch in frozen or any(lo <= ord(ch) <= hi for lo, hi in ranges) or any(t(ch) for t in tests)
            return found != negate

        return test, f"[{'^' if negate else ''}{''.join(parts)}]" if parts else ("[\\s\\S]" if negate else "(?!)")


@functools.lru_cache(maxsize=512)
def compile_bounded(pattern: str) -> BoundedPattern:
    """The automaton of `pattern`; ValueError when it is not a regular expression or uses syntax
    that cannot be matched in bounded time (the message says which)."""
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    try:
        parsed = _sre_parse.parse(pattern, 0)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
    except RecursionError:
        raise ValueError(f"the pattern {pattern!r} nests too deeply") from None
    builder = _Builder(pattern)
    if parsed.state.flags & ~_ALLOWED_FLAGS:
        raise builder.unsupported("inline flags")
    try:
        start = builder.sequence(parsed, builder.new(_MATCH))
    except RecursionError:
        raise ValueError(f"the pattern {pattern!r} nests too deeply") from None
    return BoundedPattern(pattern, builder.kind, builder.arg, builder.out1, builder.out2, start, builder.fragments)
