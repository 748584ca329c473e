"""What previewing streamed tool-call arguments costs, three ways.

    .venv/bin/python benchmarks/tool_arguments.py

A tool call's arguments arrive as JSON text in small fragments (7 characters here, about what
the OpenAI and Anthropic APIs send), and every fragment's event carries a preview of the
arguments so far. For each argument text the script streams the fragments through:

- `incremental`: `ToolArguments` (each fragment read once by `StreamingJson`; a fresh preview
  at every fragment while the copy credit covers it);
- `every fragment`: `parse_streaming_json` of the whole text so far at every fragment (the
  reading of pi-ai's `parseStreamingJson`, quadratic in the text);
- `geometric`: the whole text re-parsed at every fragment up to 2,048 characters, then only when
  it has grown by half (linear, but most previews of a long text are old).

It prints the CPU time per argument text, how many previews are fresh (equal to what the
streaming reading shows of the text so far with no cost bound: a `StreamingJson` whose credit
never runs out) and how many fragments a preview was behind the text at most. A run that would
take more than a minute is left out and says so.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentloop.providers import parse_streaming_json
from agentloop.providers._json_stream import ToolArguments
from agentloop.providers._streaming_json import StreamingJson

FRAGMENT = 7
_EVERY_DELTA_UNTIL = 2048


def texts() -> dict[str, str]:
    prose = "".join("abcdefgh \\n"[(i * 7 + i // 9) % 10] for i in range(1_000_000))
    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"], "ok": i % 2 == 0} for i in range(1_600)]
    return {
        "file, 6 KB": json.dumps({"path": "notes.md", "content": prose[:5_900]}),
        "file, 100 KB": json.dumps({"path": "notes.md", "content": prose[:100_000]}),
        "file, 1 MB": json.dumps({"path": "notes.md", "content": prose}),
        "rows, 100 KB": json.dumps({"rows": rows}),
    }


def incremental(pieces: list[str]) -> list[Any]:
    args = ToolArguments()
    return [args.append(piece) for piece in pieces]


def every_fragment(pieces: list[str]) -> list[Any]:
    text = ""
    out = []
    for piece in pieces:
        text += piece
        out.append(parse_streaming_json(text))
    return out


def geometric(pieces: list[str]) -> list[Any]:
    text = ""
    due = 0
    preview: Any = {}
    out = []
    for piece in pieces:
        text += piece
        if len(text) <= _EVERY_DELTA_UNTIL or len(text) >= due:
            due = len(text) * 3 // 2
            preview = parse_streaming_json(text)
        out.append(preview)
    return out


def unbounded(pieces: list[str]) -> list[Any]:
    """The previews with no cost bound: what each prefix says."""
    parser = StreamingJson()
    out = []
    for piece in pieces:
        parser.append(piece)
        parser._credit = 1 << 62  # the bound never bites
        value = parser.snapshot()
        out.append(value if isinstance(value, dict) else {})
    return out


def measure(name: str, text: str, way: Callable[[list[str]], list[Any]], truth: list[Any] | None) -> str:
    pieces = [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]
    start = time.process_time()
    previews = way(pieces)
    seconds = time.process_time() - start
    fresh = behind = ""
    if truth is not None:
        fresh = f"{sum(a == b for a, b in zip(previews, truth, strict=True)):,}"
        # How many fragments the preview was behind the text, at most (0: up to date at every fragment).
        lag = most = 0
        for preview, value in zip(previews, truth, strict=True):
            lag = 0 if preview == value else lag + 1
            most = max(most, lag)
        behind = f"{most:,}"
    return f"| {name:<13} | {way.__name__:<14} | {len(pieces):>9,} | {seconds:>8.3f} | {fresh:>7} | {behind:>6} |"


def main() -> None:
    print(f"fragments of {FRAGMENT} characters; CPU seconds per argument text; fresh: previews up to date;")
    print("behind: the most fragments a preview was late")
    print("| text          | way            | fragments | CPU s    | fresh   | behind |")
    print("|---------------|----------------|-----------|----------|---------|--------|")
    rate = 0.0  # characters re-parsed per CPU second by `every_fragment`, from the first text
    for name, text in texts().items():
        pieces = [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]
        truth = unbounded(pieces) if len(text) <= 200_000 else None
        for way in (incremental, geometric, every_fragment):
            parsed = len(pieces) * len(text) / 2
            if way is every_fragment and rate and parsed / rate > 60:
                estimate = f"not run: about {parsed / rate:,.0f} s"
                print(f"| {name:<13} | {way.__name__:<14} | {len(pieces):>9,} | {estimate} |")
                continue
            start = time.process_time()
            print(measure(name, text, way, truth))
            if way is every_fragment:
                rate = parsed / (time.process_time() - start)


if __name__ == "__main__":
    main()
