"""`engine_pattern`: a JSON-schema pattern (ECMA-262) in the syntax of pydantic-core's engine
(Rust's `regex`), with ECMA-262's classes, and the estimate of its compiled size."""

from __future__ import annotations

import pytest

from agentloop._tools._patterns import MAX_PATTERN_BYTES, engine_pattern, pattern_search

SPACES = r"\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}"


@pytest.mark.parametrize(
    ("pattern", "engine"),
    [
        (r"^\d+$", "^[0-9]+$"),
        (r"\D", "[^0-9]"),
        (r"\w", "[0-9A-Za-z_]"),
        (r"\W", "[^0-9A-Za-z_]"),
        (r"\s", f"[{SPACES}]"),
        (r"\S", f"[^{SPACES}]"),
        (r"[\w-]", "[0-9A-Za-z_-]"),
        (r"[\d.]", "[0-9.]"),
        (r"[^\S\n]", rf"[^[^{SPACES}]\n]"),
        (r"\bx\B", r"(?-u:\b)x(?-u:\B)"),
        (r"[\b]", r"[\x{8}]"),
        (".", r"[^\n\r\x{2028}\x{2029}]"),
        ("[]", r"[^\x{0}-\x{10FFFF}]"),
        ("[^]", r"[\x{0}-\x{10FFFF}]"),
        ("a{,3}", r"a\{,3\}"),
        ("a{2,3}b{4}c{5,}", "a{2,3}b{4}c{5,}"),
        ("[a&&b]", r"[a\&\&b]"),
        ("[[]", r"[\[]"),
        ("[~~]", r"[\~\~]"),
        (r"\cJ", r"\x{A}"),
        (r"\0", r"\x{0}"),
        (r"\p{L}\u0041\x41\u{41}", r"\p{L}\u0041\x41\u{41}"),
        (r"(?i)ab|(?<name>c)\/", r"(?i)ab|(?<name>c)\/"),
        (r"(a)\1", r"(a)\1"),  # the engine refuses it, and says why
    ],
)
def test_a_pattern_is_rewritten_for_the_engine(pattern: str, engine: str) -> None:
    assert engine_pattern(pattern)[0] == engine


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"^\d$", "7", True),
        (r"^\d$", "\u0663", False),  # Arabic-Indic three
        (r"^\d$", "\uff17", False),  # fullwidth seven
        (r"^\w+$", "abc_XYZ_019", True),
        (r"^\w$", "\u0436", False),  # Cyrillic zhe
        (r"^\w$", "\u00e9", False),
        (r"^\W$", "\u00e9", True),
        (r"^\s$", "\u3000", True),  # ideographic space: an ECMA-262 space
        (r"^\s$", "\ufeff", True),
        (r"^\s$", "\x85", False),  # NEL: Python's and Rust's, not ECMA-262's
        (r"^\S$", "\x85", True),
        (r"\bab\b", "\u00e9ab\u00e9", True),  # `é` is not a word character
        (r"\Bab", "\u00e9ab", False),
        ("^a.b$", "a\rb", False),
        ("^a.b$", "a\u2028b", False),
        ("^a.b$", "a\u00e9b", True),
        ("[]", "anything", False),
        ("^[^]$", "\n", True),
        ("^a{,3}$", "a{,3}", True),
        ("^[a&&b]+$", "a&b", True),
        ("^[[]$", "[", True),
        (r"^\cJ$", "\n", True),
        (r"^[^\S\n]+$", " \t", True),
        (r"^[^\S\n]+$", " \n", False),
    ],
)
def test_classes_are_ecma_262s(pattern: str, text: str, expected: bool) -> None:
    assert pattern_search(pattern, text) is expected


def test_the_estimate_counts_the_copies_a_repetition_compiles() -> None:
    one = engine_pattern("[^a]")[1]
    assert engine_pattern("[^a]{100}")[1] > 50 * one
    assert engine_pattern("([^a]{10}){10}")[1] > 50 * one
    assert engine_pattern(r"\w{227}")[1] < MAX_PATTERN_BYTES  # ASCII classes compile small
    assert engine_pattern(r"\p{L}{227}")[1] > MAX_PATTERN_BYTES
    assert engine_pattern("x{1000000}")[1] > MAX_PATTERN_BYTES


@pytest.mark.parametrize("pattern", [r"\p{L}{227}", "[^a]{1000}", "(a{1,1000}){1,1000}"])
def test_a_pattern_too_large_once_compiled_is_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match=r"would take about \d+ MiB, over the size limit of 4 MiB"):
        pattern_search(pattern, "abc")
