"""Recorded provider streams through pi-ai 1.6.1's own providers and through ours, event by event.

The recordings: `pi_wire/recordings/*.sse` (`<source>-<case>.<api>.sse`: aimock and llama.cpp
answers made by `record_streams.py`, and `synthetic-*` streams written by hand for the edge
cases: block order, empty deltas, refusals, partial literals, a last event without its blank
line, no [DONE], no output_index, ...) and, when the shared research folder is there, the OpenAI
captures in `../shared/research/recordings/openai-live`. Each body is served on loopback to pi-ai's
providers (Node, npm 1.6.0 in the test cache) and fed to ours through `httpx.MockTransport`. Both
final messages and both event sequences (type, index, delta, content, tool call, and a tool
call's partial arguments at each delta) must agree, except where agentloop keeps its own
behaviour on purpose (`KEPT`, each with its reason).

`python -m tests.providers.test_differential` prints the counts and every difference.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio

from agentloop.providers import stream_simple
from agentloop.wire import from_json, to_json

from .conftest import PI_AI, PI_CACHE, Result, agreement, our_events, pi_events, print_differences, replay_model

HERE = Path(__file__).parent
RECORDINGS = HERE / "pi_wire" / "recordings"
SHARED = Path(os.environ.get("AGENTLOOP_SHARED_RECORDINGS", HERE.parents[2] / "shared" / "research" / "recordings"))
REPLAY = HERE / "pi_wire" / "pi_replay.mjs"
APIS = {
    "completions": "openai-completions",
    "responses": "openai-responses",
    "messages": "anthropic-messages",
    "gemini": "google-generative-ai",
    "vertex": "google-vertex",
    "azure": "azure-openai-responses",
    "mistral": "mistral-conversations",
}
ROOT_BASE_URL = {"anthropic-messages", "mistral-conversations"}
"""The APIs whose base URL is the server's root (the others' ends in /v1)."""

_WORDING = "a stream cut before its end: the same events and content, the error text is agentloop's own"
_SUMMARY = (
    "reasoning summary parts: pi-ai sends a '\\n\\n' delta after every part and drops the last from "
    "the final text; agentloop sends it between parts, so the deltas add up to the final text"
)
_FUNCTION_CALL = (
    "aimock ends Gemini tool calls with finishReason FUNCTION_CALL, which Gemini does not send: pi-ai throws "
    "'Unhandled stop reason' (an error); agentloop reads an unknown reason as stop, so toolUse"
)
KEPT: dict[str, str] = {
    "openai-live-a491adda": "n=3 choices: pi-ai merges the three answers into one text; agentloop keeps choice 0",
    "openai-live-173417d5": "a refusal: pi-ai drops `delta.refusal` (an empty message); agentloop shows it as text",
    "openai-live-569c877e": "a refusal: pi-ai drops `delta.refusal` (an empty message); agentloop shows it as text",
    "aimock-dropped-completions": _WORDING,
    "aimock-dropped-messages": _WORDING,
    "aimock-dropped-responses": _WORDING,
    "aimock-hello-responses": _SUMMARY,
    "aimock-tools-responses": _SUMMARY,
    "aimock-dropped-azure": _WORDING,
    "aimock-hello-azure": _SUMMARY,
    "aimock-tools-azure": _SUMMARY,
    "synthetic-reasoning-calls-azure": _SUMMARY,
    "synthetic-no-output-index-responses": (
        "items without output_index (llama.cpp) interleaved: pi-ai files them all in one slot and loses the "
        "reasoning block's end and signature; agentloop routes them by item_id"
    ),
    "synthetic-redacted-thinking-messages": (
        "redacted thinking: pi-ai puts '[Reasoning redacted]' in the block without a delta; agentloop sends "
        "it as a thinking_delta, so the deltas add up to the final text"
    ),
    "synthetic-error-chunk-gemini": (
        "an error chunk mid-stream: the same events and content; pi-ai's text is its SDK's ('got status: "
        "UNAVAILABLE. {...}'), agentloop's the error's message and status"
    ),
    "aimock-tools-gemini": _FUNCTION_CALL,
    "aimock-tools-vertex": _FUNCTION_CALL,
    "synthetic-unknown-finish-gemini": (
        "a finishReason this version does not know: pi-ai throws 'Unhandled stop reason' (an error); agentloop "
        "ends the turn as stop (toolUse with calls), so a reason Google adds later does not fail every answer"
    ),
    "synthetic-no-blank-line-gemini": (
        "the last event without its blank line: pi-ai's SDK rejects the body ('Incomplete JSON segment at the "
        "end'); agentloop reads the event, as it does for every API"
    ),
}
"""Recordings where agentloop differs from pi-ai on purpose (pi-ai is wrong there), and why."""

BEFORE_1_6_1: dict[str, str] = {
    "synthetic-no-finish-gemini": "pi-ai 1.6.0's text lacks the chunk count 1.6.1 (and agentloop) give",
    "synthetic-prompt-blocked-gemini": "pi-ai 1.6.0 does not report a blocked prompt (1.6.1 and agentloop do)",
}
"""Gemini recordings that differ from pi-ai 1.6.0 only, where agentloop follows 1.6.1."""


def pi_ai_version(node_modules: Path) -> str:
    """The version of the pi-ai whose providers the recordings are compared with."""
    return str(json.loads((node_modules / PI_AI / "package.json").read_text())["version"])


def cases() -> list[tuple[str, str, Path]]:
    """(id, api, path) of every recording."""
    found = [
        (p.name.split(".")[0] + "-" + p.name.split(".")[1], APIS[p.name.split(".")[1]], p)
        for p in RECORDINGS.glob("*.sse")
    ]
    live = SHARED / "openai-live"
    if live.is_dir():
        found += [(f"openai-live-{p.stem[:8]}", "openai-completions", p) for p in live.glob("*.bin")]
    return sorted(found)


async def reference_events(
    recordings: list[tuple[str, str, Path]], node_modules: Path
) -> dict[str, list[dict[str, Any]]]:
    """What pi-ai 1.6.1's providers emit for each recording."""

    def requests(url: str) -> list[dict[str, Any]]:
        return [
            {"id": case_id, "api": api, "baseUrl": f"{url}/{case_id}" + ("" if api in ROOT_BASE_URL else "/v1")}
            for case_id, api, _ in recordings
        ]

    bodies = {case_id: path.read_bytes() for case_id, _, path in recordings}
    return await pi_events(REPLAY, bodies, requests, node_modules)


async def ours(api: str, body: bytes) -> list[dict[str, Any]]:
    """What agentloop's provider emits for a recording, as JSON without partials."""
    return await our_events(stream_simple, replay_model(api), body)


_GENERATED_ID = re.compile(r"_\d{10,}_\d+$")


def stable_ids(data: Any) -> Any:
    """`data` with the tool-call ids Gemini streams make up (`{name}_{clock}_{n}`, as pi-ai) made
    comparable: the clock and the counter differ from run to run."""
    if isinstance(data, dict):
        return {
            k: _GENERATED_ID.sub("_<generated>", v) if k == "id" and isinstance(v, str) else stable_ids(v)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [stable_ids(v) for v in data]
    return data


_NOT_COMPARED = {"timestamp", "api", "provider", "model"}
# What pi-ai 1.x sets and agentloop's providers do not make (the codec keeps it, in `extra`).
_ONLY_PI_AI_1X = {"durationMs", "rawStopReason", "cacheWrite1h", "reasoning", "totalFromProvider"}


def _modelled(data: Any) -> Any:
    """`data` without the keys only pi-ai 1.x sets, at any depth."""
    if isinstance(data, dict):
        return {k: _modelled(v) for k, v in data.items() if k not in _ONLY_PI_AI_1X}
    if isinstance(data, list):
        return [_modelled(v) for v in data]
    return data


def final(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The final message as the codec reads it (1.x-only fields left out), without its clock."""
    last = events[-1]
    message = last.get("message") or last.get("error")
    data = _modelled(to_json(from_json(message)))
    return {k: v for k, v in data.items() if k not in _NOT_COMPARED}


def sequence(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without the final message (compared apart), tool calls as the codec reads them."""
    out = []
    for event in events:
        item = {k: v for k, v in event.items() if k not in ("message", "error")}
        if "toolCall" in item:
            item["toolCall"] = _modelled(to_json(from_json(item["toolCall"])))
        out.append(item)
    return out


async def compare(node_modules: Path) -> list[Result]:
    """How every recording compares (see `agreement`)."""
    recordings = cases()
    theirs = await reference_events(recordings, node_modules)
    return [
        agreement(case_id, stable_ids(theirs[case_id]), stable_ids(await ours(api, path.read_bytes())), final, sequence)
        for case_id, api, path in recordings
    ]


async def test_recorded_streams_agree_with_pi_ai_except_where_kept(
    anyio_backend: object, pi_node_modules: Path
) -> None:
    live = sorted((SHARED / "openai-live").glob("*.bin"))
    assert live, f"no shared OpenAI recordings in {SHARED / 'openai-live'} (set AGENTLOOP_SHARED_RECORDINGS)"
    with anyio.fail_after(120):
        results = await compare(pi_node_modules)
    assert len(results) == len(list(RECORDINGS.glob("*.sse"))) + len(live) >= 84
    differing = {case_id for case_id, same_final, same_events, _, _ in results if not (same_final and same_events)}
    kept = set(KEPT) | (set(BEFORE_1_6_1) if pi_ai_version(pi_node_modules) == "1.6.0" else set())
    assert differing == kept & {r[0] for r in results}, [
        (r[0], final(r[3]), final(r[4])) for r in results if r[0] in differing - set(KEPT)
    ]


if __name__ == "__main__":  # the measurement: counts and every difference

    async def main() -> None:
        print_differences(await compare(PI_CACHE / "node_modules"), final, sequence)

    sys.path.insert(0, str(HERE.parents[1]))
    anyio.run(main)
