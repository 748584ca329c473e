"""A long conversation with `agentloop chat` on a terminal: long prompts until the context fills.

    python benchmarks/chat_long.py [--turns 60] [--words 230] [--log chat_long.log] [-- chat args...]

Runs `python -m agentloop chat` (the embedded model by default) on a pseudo-terminal, as a
person would: it types one prompt of about `--words` words, waits for the prompt marker, types
the next. It counts the turns that ended in an error, those that overflowed the model's context,
the compactions the chat reported, and the fullest context its status line showed. Without
compaction the embedded model's 4,096-token context overflows from about the 13th prompt on.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import random
import re
import select
import sys
import time

VOCABULARY = (
    "the garden river stone bridge lantern harvest winter market letter window mountain village "
    "train station library teacher student kitchen recipe bread apple orange blue green small "
    "large quiet busy morning evening yesterday tomorrow because although while during after "
    "before between under over carefully slowly quickly remember describe explain compare"
)
OVERFLOW = re.compile(r"exceeds the available context size|context window|too long", re.IGNORECASE)
GAUGE = re.compile(r"context (\d+(?:\.\d)?k?)/(\d+(?:\.\d)?k?) \((\d+)%\)")
MARKER = b"\n> "


def prompt(number: int, words: int) -> str:
    rng = random.Random(number)
    vocabulary = VOCABULARY.split()
    body = " ".join(rng.choice(vocabulary) for _ in range(words - 12))
    return f"Note {number}: please read this and reply with one short sentence about it. {body}."


def read_until(fd: int, end: bytes, timeout: float, sink: bytearray) -> bool:
    deadline = time.monotonic() + timeout
    start = len(sink)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return False
        if not chunk:
            return False
        sink += chunk
        if sink[start:].endswith(end):
            return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--words", type=int, default=230)
    parser.add_argument("--log", default="chat_long.log")
    parser.add_argument("--turn-timeout", type=float, default=900.0)
    parser.add_argument("chat_args", nargs="*")
    args = parser.parse_args()
    command = [sys.executable, "-m", "agentloop", "chat", *args.chat_args]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the chat on the terminal
        os.execv(sys.executable, command)
    out = bytearray()
    started = time.monotonic()
    turns: list[dict[str, object]] = []
    ok = read_until(fd, MARKER, 600, out)
    for number in range(1, args.turns + 1):
        if not ok:
            break
        begin = len(out)
        t0 = time.monotonic()
        os.write(fd, prompt(number, args.words).encode() + b"\n")
        ok = read_until(fd, MARKER, args.turn_timeout, out)
        text = out[begin:].decode("utf-8", "replace")
        errors = [line for line in text.splitlines() if "error:" in line]
        turns.append(
            {
                "turn": number,
                "seconds": round(time.monotonic() - t0, 1),
                "errors": errors,
                "overflow": any(OVERFLOW.search(e) for e in errors),
                "compacted": text.count("context compacted"),
                # the fullest the status line showed in this turn (the last one shown can be the
                # small tool-choice request's usage, not the context's)
                "fullest_percent": max((int(m.group(3)) for m in GAUGE.finditer(text)), default=None),
            }
        )
        print(json.dumps(turns[-1]), flush=True)
        with open(args.log, "wb") as f:  # kept as it grows: a run cut short keeps its log
            f.write(out)
    os.write(fd, b"\x04")
    read_until(fd, b"s", 60, out)  # the summary line ends in seconds
    _, status = os.waitpid(pid, 0)
    with open(args.log, "wb") as f:
        f.write(out)
    percents = [int(m.group(3)) for m in GAUGE.finditer(out.decode("utf-8", "replace"))]
    report = {
        "turns_answered": len(turns) if ok else len(turns) - 1,
        "turns_with_error": sum(1 for t in turns if t["errors"]),
        "overflow_errors": sum(1 for t in turns if t["overflow"]),
        "compactions": sum(int(str(t["compacted"])) for t in turns),
        "fullest_context_percent": max(percents, default=None),
        "seconds": round(time.monotonic() - started, 1),
        "exit_status": os.waitstatus_to_exitcode(status),
    }
    print(json.dumps(report), flush=True)
    return 0 if report["overflow_errors"] == 0 and report["turns_answered"] == args.turns else 1


if __name__ == "__main__":
    sys.exit(main())
