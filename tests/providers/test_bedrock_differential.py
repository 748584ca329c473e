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

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx

from agentloop import AbortSignal, Context, Model, StreamOptions, UserMessage, to_json
from agentloop.providers import HTTPOptions, stream_bedrock

from .test_differential import final as _final
from .test_differential import replay_server, sequence


def pi_ai_folder() -> str:
    """The pi-ai package folder (under the node_modules) whose provider is compared with."""
    from . import conftest

    return str(getattr(conftest, "PI_AI", "@earendil-works/pi-ai"))


HERE = Path(__file__).parent / "bedrock_wire"
RECORDINGS = HERE / "recordings"
REPLAY = HERE / "pi_replay.mjs"
EVENT_STREAM = "application/vnd.amazon.eventstream"
HTTP = HTTPOptions(max_retries=0)

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
    bodies = {case_id: path.read_bytes() for case_id, path in recordings}
    async with replay_server(bodies, EVENT_STREAM.encode()) as url:
        request = [{"id": case_id, "baseUrl": f"{url}/{case_id}"} for case_id, _ in recordings]
        done = await anyio.run_process(
            ["node", str(REPLAY)],
            input=json.dumps(request).encode(),
            env={**os.environ, "PI_AI": pi_ai_folder(), "NODE_PATH": str(node_modules)},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    return {line["id"]: line["events"] for line in lines}


async def our_events(body: bytes) -> list[dict[str, Any]]:
    """What agentloop's Bedrock provider emits for a recording, as JSON without partials."""
    model = Model(
        id="replay",
        name="replay",
        api="bedrock-converse-stream",
        provider="replay",
        base_url="http://replay",
        reasoning=True,
        max_tokens=1000,
    )
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": EVENT_STREAM}, content=body)
    )
    context = Context(system_prompt="You are terse.", messages=[UserMessage(content="hello", timestamp=0)])
    out = []
    async with httpx.AsyncClient(transport=transport) as client:
        options = StreamOptions(signal=AbortSignal(), api_key="sk-replay")
        async with stream_bedrock(model, context, options, http=HTTP, client=client) as events:
            async for event in events:
                data = to_json(event)
                partial = data.pop("partial", None)
                if data["type"] == "toolcall_delta":
                    data["partialArguments"] = partial["content"][data["contentIndex"]]["arguments"]
                out.append(data)
    return out


async def compare(node_modules: Path) -> list[tuple[str, bool, bool, Any, Any]]:
    """(id, finals equal, sequences equal, theirs, ours) for every recording."""
    recordings = cases()
    theirs = await reference_events(recordings, node_modules)
    out = []
    for case_id, path in recordings:
        ours = await our_events(path.read_bytes())
        reference = theirs[case_id]
        out.append((case_id, final(reference) == final(ours), sequence(reference) == sequence(ours), reference, ours))
    return out


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
        from tests.providers.conftest import PI_CACHE

        modules = Path(os.environ.get("PI_NODE_MODULES", PI_CACHE / "node_modules"))
        results = await compare(modules)
        finals = sum(r[1] for r in results)
        sequences = sum(r[2] for r in results)
        print(f"{len(results)} recordings: final messages agree on {finals}, event sequences on {sequences}")
        for case_id, same_final, same_events, theirs, ours in results:
            if same_final and same_events:
                continue
            print(f"\n== {case_id} (final {'=' if same_final else '!='}, events {'=' if same_events else '!='})")
            if not same_final:
                print("  pi-ai:", json.dumps(final(theirs))[:700])
                print("  ours: ", json.dumps(final(ours))[:700])
            if not same_events:
                a, b = sequence(theirs), sequence(ours)
                for i in range(max(len(a), len(b))):
                    x = a[i] if i < len(a) else None
                    y = b[i] if i < len(b) else None
                    if x != y:
                        print(f"  first difference at event {i}:")
                        print(f"    pi-ai: {json.dumps(x)[:300]}\n    ours:  {json.dumps(y)[:300]}")
                        print(f"  pi-ai types: {[e['type'] for e in a]}\n  our types:   {[e['type'] for e in b]}")
                        break

    sys.path.insert(0, str(Path(__file__).parents[2]))
    anyio.run(main)
