"""Schema patterns are matched in bounded time, and match what `re.search` matches.

`agentloop._tools._regex.compile_bounded` runs a pattern as an automaton over the text once. Random
patterns from the syntax JSON-schema patterns use, against random texts, give the same answer
as `re.search`; the classic catastrophic patterns finish at once on texts that stall `re`.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from agentloop._tools._regex import compile_bounded

from ._profile import examples

ALPHABET = "ab_ 1\n"
CASES = examples(2000, 50_000)


def random_pattern(rng: random.Random, depth: int = 0) -> str:
    choice = rng.randrange(12 if depth < 3 else 5)
    if choice == 0:
        return rng.choice(["a", "b", "1", " ", "_"])
    if choice == 1:
        return rng.choice([".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S"])
    if choice == 2:
        return rng.choice(["[ab]", "[^a]", "[a-c1]", r"[\d_]", r"[^\w]", "[ -_]"])
    if choice == 3:
        return rng.choice(["^", "$", r"\b", r"\B", r"\A", r"\Z"])
    if choice == 4:
        return ""
    if choice in (5, 6):
        return random_pattern(rng, depth + 1) + random_pattern(rng, depth + 1)
    if choice == 7:
        return "(" + random_pattern(rng, depth + 1) + "|" + random_pattern(rng, depth + 1) + ")"
    if choice == 8:
        return "(?:" + random_pattern(rng, depth + 1) + ")"
    atom = "(" + random_pattern(rng, depth + 1) + ")" if rng.random() < 0.5 else rng.choice(["a", "b", "[ab]", "."])
    quantifier = rng.choice(["*", "+", "?", "{2}", "{0,2}", "{1,}", "*?", "+?", "??", "{1,3}?"])
    return atom + quantifier


def test_random_patterns_match_as_re_does() -> None:
    rng = random.Random("bounded-regex")
    patterns = texts = 0
    for _ in range(CASES):
        pattern = random_pattern(rng)
        try:
            expected = re.compile(pattern)
        except re.error:
            continue
        bounded = compile_bounded(pattern)
        patterns += 1
        for _ in range(20):
            text = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(8)))
            assert bounded.search(text) == (expected.search(text) is not None), (pattern, text)
            texts += 1
    assert patterns > CASES // 2 and texts > 0


@pytest.mark.parametrize(
    "pattern",
    [r"^(a+)+$", r"^(a|a)*$", r"^(a|aa)+$", r"^(\w+\s?)*$", r"^([a-z0-9]+)*@", r"^(.*a){12}$", r"\s*\s*\s*\s*x$"],
)
def test_catastrophic_patterns_finish_at_once(pattern: str) -> None:
    bounded = compile_bounded(pattern)
    for text in ("a" * 29 + "!", "a" * 5000 + "!", " " * 3000):
        started = time.perf_counter()
        bounded.search(text)
        assert time.perf_counter() - started < 1.0, (pattern, len(text))


def test_what_cannot_be_bounded_is_refused_with_a_reason() -> None:
    for pattern, reason in [
        (r"(a)\1", "a backreference"),
        (r"a(?=b)", "a lookaround"),
        (r"(?<!a)b", "a lookaround"),
        (r"(?i)a", "inline flags"),
        (r"(?>a+)b", "an atomic group"),
        (r"a++", "possessive repeat"),
        (r"(a)?(?(1)b|c)", "a conditional group"),
    ]:
        with pytest.raises(ValueError, match=re.escape(reason)):
            compile_bounded(pattern)
    with pytest.raises(ValueError, match="is not a regular expression"):
        compile_bounded("(")
    with pytest.raises(ValueError, match="too large"):
        compile_bounded("(a{1,1000}){1,1000}")


def test_an_anchored_pattern_stops_where_re_stops() -> None:
    """`^x` against 10 MB that does not start with x: `re` stops at once, and so does the automaton."""
    text = "y" * 10_000_000
    for pattern in (r"^x", r"\Ax+", r"^(a|b)*c"):
        started = time.perf_counter()
        assert not compile_bounded(pattern).search(text)
        assert time.perf_counter() - started < 0.05, pattern
    assert compile_bounded(r"^y").search(text)


def test_a_search_jumps_to_where_a_match_can_start() -> None:
    """Unanchored, without assertions: the characters that cannot start a match are skipped."""
    text = "y" * 10_000_000
    for pattern in ("x", "[a-x]+z", r"\d{3}-\d{4}", "(a|b)*c", "[^y]"):
        started = time.perf_counter()
        assert not compile_bounded(pattern).search(text)
        assert time.perf_counter() - started < 0.5, pattern
    assert compile_bounded("(a|b)*c").search(text + "abc")
