"""Schema patterns run on pydantic-core's linear-time engine, and match what `re.search` matches.

`agentloop._tools._patterns.pattern_search` asks pydantic-core (Rust's `regex` crate). Random
patterns from the syntax JSON-schema patterns use, against random texts that are not empty
(where `re` alone finds no `\\B`) and hold no newline (where `$` means the same in both), give
the same answer as `re.search`; the classic catastrophic patterns finish at once on texts that
stall `re`; what the engine refuses is refused with its reason.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from agentloop._tools import _patterns
from agentloop._tools._patterns import pattern_search

from ._profile import examples

ALPHABET = "ab_ 1"
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
        return rng.choice(["^", "$", r"\b", r"\B", r"\A"])
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
        patterns += 1
        for _ in range(20):
            text = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 8)))
            assert pattern_search(pattern, text) == (expected.search(text) is not None), (pattern, text)
            texts += 1
    assert patterns > CASES // 2 and texts > 0


def test_a_pattern_searches_unanchored_and_dollar_is_the_very_end() -> None:
    assert pattern_search("b", "abc")
    assert pattern_search("^a", "abc") and not pattern_search("^b", "abc")
    assert not pattern_search("^a$", "a\n")  # JSON Schema's `$`, unlike `re`'s


@pytest.mark.parametrize(
    "pattern",
    [r"^(a+)+$", r"^(a|a)*$", r"^(a|aa)+$", r"^(\w+\s?)*$", r"^([a-z0-9]+)*@", r"^(.*a){12}$", r"\s*\s*\s*\s*x$"],
)
def test_catastrophic_patterns_finish_at_once(pattern: str) -> None:
    for text in ("a" * 29 + "!", "a" * 5000 + "!", " " * 3000):
        started = time.perf_counter()
        pattern_search(pattern, text)
        assert time.perf_counter() - started < 1.0, (pattern, len(text))


def test_a_long_pattern_against_a_long_text_finishes_at_once() -> None:
    """The example of the issue: the hand-written engine took 24.6 s on two such arguments."""
    started = time.perf_counter()
    assert not pattern_search("[ab]*a[ab]{4000}b$", "ab" * 4096 + "c")
    assert not pattern_search("^[a-z]*$", "a" * 4_000_000 + "!")
    assert time.perf_counter() - started < 2.0


def test_what_the_engine_refuses_is_refused_with_its_reason() -> None:
    for pattern, reason in [
        (r"(a)\1", "backreferences are not supported"),
        (r"a(?=b)", "look-around"),
        (r"(?<!a)b", "look-around"),
        (r"(?>a+)b", "unrecognized flag"),
        ("(", "unclosed group"),
        ("(a{1,1000}){1,1000}", "size limit"),
    ]:
        with pytest.raises(ValueError, match=re.escape(reason)):
            pattern_search(pattern, "aa")


def test_compiled_patterns_are_kept_in_a_bounded_cache() -> None:
    _patterns._CACHE.clear()
    for i in range(_patterns.CACHED_PATTERNS + 50):
        assert pattern_search(f"^x{i}$", f"x{i}")
    assert _patterns._CACHE.size()[0] == _patterns.CACHED_PATTERNS
