"""Record aimock's Bedrock Converse Stream answers for the differential and oracle tests.

    python tests/providers/servers.py start            # aimock (see servers.py)
    set -a; . .ci-cache/providers/servers.env; set +a
    python tests/providers/bedrock_wire/record_aimock.py   # writes recordings/aimock-*.eventstream

Each request is made by agentloop's own Bedrock provider (a bearer token, so no AWS account is
needed); the transport of `pi_wire/record_streams.py` keeps the answer's bytes exactly as aimock
sent them, a connection dropped mid-body included. Only 200 event-stream answers are kept.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio

from agentloop import AbortSignal, Context, Model, StreamOptions, UserMessage
from agentloop.providers import stream_bedrock

sys.path.insert(0, str(Path(__file__).parents[3]))  # the repository, when run as a script
from tests.providers.pi_wire.record_streams import Weather, recorded

OUT = Path(__file__).with_name("recordings")
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "hello": ("hello", {}),
    "tools": ("weather", {"tools": [Weather()]}),
    "truncated": ("truncate-me", {}),
    "dropped": ("drop-me", {}),
    "story": ("slow-story", {}),
}


async def record(url: str, name: str, text: str, tools: list[Any]) -> None:
    model = Model(
        id="anthropic.claude-sonnet-4-6",
        name="Claude Sonnet 4.6",
        api="bedrock-converse-stream",
        provider="amazon-bedrock",
        base_url=url,
        reasoning=True,
        max_tokens=1000,
    )
    context = Context(system_prompt="You are terse.", messages=[UserMessage(content=text)], tools=tools)
    options = StreamOptions(signal=AbortSignal(), api_key="bedrock-token")
    for body in await recorded(stream_bedrock, model, context, options, "application/vnd.amazon.eventstream"):
        (OUT / f"aimock-{name}.eventstream").write_bytes(body)
        print(f"aimock-{name}: {len(body)} bytes")


async def main() -> None:
    url = os.environ["AGENTLOOP_AIMOCK_URL"]
    for name, (text, options) in CASES.items():
        await record(url, name, text, options.get("tools", []))


if __name__ == "__main__":
    anyio.run(main)
