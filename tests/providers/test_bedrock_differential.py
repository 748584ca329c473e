"""Recorded Bedrock Converse streams through pi-ai's own Bedrock provider and through ours, event by
event (as `test_differential.py` does for the other APIs).

The recordings: `bedrock_wire/recordings/*.eventstream`, aimock's answers (`record_aimock.py`) and
synthetic streams (`streams.json`, encoded by the AWS SDK's codec in `make_streams.mjs`). Each
body is served on loopback to pi-ai's provider (the AWS SDK's client, with a bearer token) and fed
to ours through `httpx.MockTransport`. Final messages and event sequences must agree, except where
agentloop keeps its own behaviour (`KEPT`, each with its reason).

`python -m tests.providers.test_bedrock_differential` prints the counts and every difference.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio

from agentloop.providers import stream_bedrock

from .conftest import PI_CACHE, Result, agreement, our_events, pi_events, print_differences, replay_model
from .test_differential import final as _final
from .test_differential import sequence

HERE = Path(__file__).parent / "bedrock_wire"
RECORDINGS = HERE / "recordings"
REPLAY = HERE.parent / "pi_wire" / "pi_replay.mjs"
EVENT_STREAM = "application/vnd.amazon.eventstream"

_INCOMPLETE = "a stream cut short: the same events and content, the error text is agentloop's own"
KEPT: dict[str, str] = {
    "aimock-dropped": _INCOMPLETE,
    "synthetic-no-message-stop": _INCOMPLETE,
    "synthetic-truncated-frame": _INCOMPLETE,
    "synthetic-truncated-metadata": _INCOMPLETE,
    "synthetic-user-role": (
        "a messageStart of the user role: pi-ai fails before its `start` event; agentloop sends `start` when "
        "the answer arrives, as for every API, then the same error"
    ),
}
"""Recordings where agentloop differs from pi-ai on purpose, and why."""


def final(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The final message as `test_differential.final` reads it, without pi-ai 1.x's `diagnostics`
    (request ids and error codes agentloop does not record)."""
    return {k: v for k, v in _final(events).items() if k != "diagnostics"}


def cases() -> list[tuple[str, Path]]:
    return sorted((path.stem, path) for path in RECORDINGS.glob("*.eventstream"))


async def reference_events(recordings: list[tuple[str, Path]], node_modules: Path) -> dict[str, list[dict[str, Any]]]:
    """What pi-ai's Bedrock provider emits for each recording."""

    def requests(url: str) -> list[dict[str, Any]]:
        api = "bedrock-converse-stream"
        return [{"id": case_id, "api": api, "baseUrl": f"{url}/{case_id}"} for case_id, _ in recordings]

    bodies = {case_id: path.read_bytes() for case_id, path in recordings}
    return await pi_events(REPLAY, bodies, requests, node_modules, EVENT_STREAM.encode())


MODEL = replay_model("bedrock-converse-stream", max_tokens=1000)


async def compare(node_modules: Path) -> list[Result]:
    """How every recording compares (see `agreement`)."""
    recordings = cases()
    theirs = await reference_events(recordings, node_modules)
    return [
        agreement(
            case_id,
            theirs[case_id],
            await our_events(stream_bedrock, MODEL, path.read_bytes(), EVENT_STREAM),
            final,
            sequence,
        )
        for case_id, path in recordings
    ]


async def test_recorded_bedrock_streams_agree_with_pi_ai_except_where_kept(
    anyio_backend: object, pi_node_modules: Path
) -> None:
    with anyio.fail_after(120):
        results = await compare(pi_node_modules)
    assert len(results) == len(cases()) >= 30
    differing = {case_id for case_id, same_final, same_events, _, _ in results if not (same_final and same_events)}
    assert differing == set(KEPT), [(r[0], final(r[3]), final(r[4])) for r in results if r[0] in differing - set(KEPT)]
    # what KEPT allows: the same content everywhere; the error text, and the terminal event's type
    for case_id, same_final, _, theirs, ours in results:
        if case_id in KEPT and not same_final:
            assert {**final(theirs), "errorMessage": ""} == {**final(ours), "errorMessage": ""}, case_id


if __name__ == "__main__":  # the measurement: counts and every difference

    async def main() -> None:
        modules = Path(os.environ.get("PI_NODE_MODULES", PI_CACHE / "node_modules"))
        print_differences(await compare(modules), final, sequence)

    sys.path.insert(0, str(Path(__file__).parents[2]))
    anyio.run(main)
