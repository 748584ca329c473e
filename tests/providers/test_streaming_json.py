"""Streamed tool-call arguments read incrementally: the previews of pi-ai 1.6.1's
`ToolCallArgumentsStream` (checked against it, fragment by fragment), at a cost linear in the text."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop.providers._json_stream import ToolArguments
from agentloop.providers._streaming_json import NOTHING, StreamingJson

from .conftest import PI_AI

ORACLE = Path(__file__).parent / "pi_wire" / "pi_arguments.mjs"


def previews(pieces: list[str]) -> list[Any]:
    args = ToolArguments()
    return [args.append(piece) for piece in pieces]


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        # An escape cut by a fragment is held back until it is complete.
        (['{"p": "ab\\', '"cd"}'], [{"p": "ab"}, {"p": 'ab"cd'}]),
        (['{"p": "x\\u00', 'e9"}'], [{"p": "x"}, {"p": "x\u00e9"}]),
        (['{"p": "x\\u0', "0e9", '!"}'], [{"p": "x"}, {"p": "x\u00e9"}, {"p": "x\u00e9!"}]),
        (['{"p": "\\ud83d', '\\ude00"}'], [{"p": "\ud83d"}, {"p": "\U0001f600"}]),
        # Malformed text read as repair_json reads it.
        (['{"p": "a\\d', '"}'], [{"p": "a\\d"}, {"p": "a\\d"}]),
        (['{"p": "\\u12"', "}"], [{"p": "\\u12"}, {"p": "\\u12"}]),
        (['{"t": "line\n', 'two"}'], [{"t": "line\n"}, {"t": "line\ntwo"}]),
        (['{"n": NaN, "m": 1', "}"], [{"m": 1}, {"m": 1}]),
        (['{"a": 1 "b": 2', "}"], [{"a": 1, "b": 2}, {"a": 1, "b": 2}]),
        (['{"a" 1, "b": [1 2', "]}"], [{"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}]),
        # Unfinished literals and numbers.
        (['{"a": tr', 'ue, "b": 1.5e', "3}"], [{"a": True}, {"a": True, "b": 1.5}, {"a": True, "b": 1500.0}]),
        (['{"p": "a b  ', '"}'], [{"p": "a b  "}, {"p": "a b  "}]),
        # Text after the root value is ignored; a root that is not an object shows as no arguments.
        (['{"a": 1}', ' more {"b": 2}'], [{"a": 1}, {"a": 1}]),
        (["[1, 2", "]"], [{}, {}]),
        ([""], [{}]),
    ],
)
def test_previews_at_each_fragment(pieces: list[str], expected: list[Any]) -> None:
    assert previews(pieces) == expected


def test_a_snapshot_never_changes_once_returned() -> None:
    parser = StreamingJson()
    assert parser.snapshot() is NOTHING
    parser.append('{"a": [1, {"b": "x')
    first = parser.snapshot()
    parser.append('y"}, 2], "c": "z')
    second = parser.snapshot()
    assert first == {"a": [1, {"b": "x"}]}
    assert second == {"a": [1, {"b": "xy"}, 2], "c": "z"}
    assert parser.snapshot() is second  # nothing new read: the same object


def test_a_five_kilobyte_argument_is_fresh_at_every_fragment() -> None:
    content = "".join(random.Random(1).choice("abcdefgh ") for _ in range(5900))
    text = json.dumps({"path": "notes.md", "content": content})
    args = ToolArguments()
    for end in range(7, len(text) + 7, 7):
        preview = args.append(text[end - 7 : end])
        shown = preview.get("content", "")
        streamed = text[: min(end, len(text))].partition('"content": "')[2]
        assert shown == streamed.removesuffix('"}').removesuffix('"')


def test_a_long_open_string_costs_linear_work() -> None:
    """Each fragment pays for a bounded share of the copies: 256 + 8 per character units, one unit per
    32 characters of the open string. A preview at every 100-character delta of a 200 KB string
    would copy 2,000 x 100 KB; the credit bounds it to 32 x (256 + 800) x 2,000 characters."""
    text = json.dumps({"content": "x" * 200_000})
    args = ToolArguments()
    copied = 0
    last: Any = None
    appends = 0
    for start in range(0, len(text), 100):
        preview = args.append(text[start : start + 100])
        appends += 1
        if preview is not last:
            copied += len(preview.get("content", ""))
            last = preview
    assert last == {"content": "x" * 200_000}  # the closed string is shown at once, made once
    copied -= 200_000
    assert copied <= 32 * (256 + 8 * 100) * appends < appends * 100_000
    assert args.final() == ({"content": "x" * 200_000}, None)


def _random_document(rnd: random.Random) -> str:
    atoms = ["a", " ", '\\"', "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\d", "\t", "\\u12", "\u00e9", "/"]

    def string() -> str:
        return '"' + "".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 8))) + '"'

    def value(depth: int) -> str:
        roll = rnd.random()
        if depth > 3 or roll < 0.4:
            scalars = [str(rnd.randint(-99, 99)), "1.5e3", "-0.25", "true", "false", "null", "1e", "NaN"]
            return rnd.choice([string(), *scalars])
        if roll < 0.7:
            return "{" + ",".join(f"{string()}:{value(depth + 1)}" for _ in range(rnd.randint(0, 4))) + "}"
        return "[" + ",".join(value(depth + 1) for _ in range(rnd.randint(0, 4))) + "]"

    document = "{" + ",".join(f"{string()}: {value(0)}" for _ in range(rnd.randint(0, 5))) + "}"
    if rnd.random() < 0.2:
        document = document[: rnd.randint(0, len(document))]
    if rnd.random() < 0.1:
        document = document.replace(",", " ", 1)
    return document


def _split(rnd: random.Random, text: str, most: int) -> list[str]:
    pieces = []
    start = 0
    while start < len(text):
        size = rnd.randint(1, most)
        pieces.append(text[start : start + size])
        start += size
    return pieces


async def test_previews_agree_with_pi_ai_fragment_by_fragment(anyio_backend: object, pi_node_modules: Path) -> None:
    rnd = random.Random(37)
    cases = [_split(rnd, _random_document(rnd), 6) for _ in range(200)]
    big = json.dumps({"xs": list(range(800)), "m": {f"k{i}": i for i in range(400)}, "s": "y" * 3000})
    cases.append(_split(rnd, big, 8))
    with anyio.fail_after(120):
        done = await anyio.run_process(
            ["node", str(ORACLE)],
            input=json.dumps(cases).encode(),
            env={**os.environ, "NODE_PATH": str(pi_node_modules), "PI_AI": PI_AI},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    theirs = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert len(theirs) == len(cases)
    compared = 0
    for pieces, reference in zip(cases, theirs, strict=True):
        ours = json.loads(json.dumps(previews(pieces)))  # JSON, as pi-ai's are (1e999 and the like as null)
        assert ours == reference, "".join(pieces)
        compared += len(pieces)
    assert compared > 10_000
