"""Record raw provider response bodies from aimock and llama.cpp for the differential test.

    python tests/providers/servers.py start            # aimock and llama.cpp (see servers.py)
    set -a; . .ci-cache/providers/servers.env; set +a
    python tests/providers/pi_wire/record_streams.py   # writes pi_wire/recordings/*.sse
    python tests/providers/pi_wire/record_streams.py mistral-conversations   # only these APIs

Each request is made by agentloop's own provider (so the requests are realistic); a transport
keeps the response bytes exactly as the server sent them, a connection dropped mid-body
included. Only 200 event-stream answers are kept. The file name says the API:
`<source>-<case>.<completions|responses|messages|azure|mistral>.sse`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

from agentloop import AbortSignal, Context, Model, StreamOptions, UserMessage
from agentloop.providers import AssistantMessageEventStream, HTTPOptions, stream_simple

sys.path.insert(0, str(Path(__file__).parents[3]))  # the repository, when run as a script
from tests.providers.helpers import Weather as Weather  # the tool of aimock's fixtures

OUT = Path(__file__).with_name("recordings")
APIS = {
    "openai-completions": "completions",
    "openai-responses": "responses",
    "anthropic-messages": "messages",
    "azure-openai-responses": "azure",
    "mistral-conversations": "mistral",
}
HTTP = HTTPOptions(max_retries=0, idle_timeout=60)


class Recorder(httpx.AsyncBaseTransport):
    """Sends with a real transport and keeps the whole body (up to a disconnect) of the answer."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.bodies: list[tuple[int, str, bytes]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        chunks: list[bytes] = []
        try:
            async for chunk in response.stream:  # type: ignore[union-attr]
                chunks.append(chunk)
        except httpx.HTTPError:
            pass  # the server dropped the connection: keep what came
        finally:
            await response.aclose()
        body = b"".join(chunks)
        self.bodies.append((response.status_code, response.headers.get("content-type", ""), body))
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def recorded(
    stream_fn: Callable[..., AssistantMessageEventStream],
    model: Model,
    context: Context,
    options: StreamOptions,
    content_type: str = "text/event-stream",
) -> list[bytes]:
    """Make one request with `stream_fn` (a provider's stream) through a `Recorder`, reading the
    stream to its end; the bodies of the answers with status 200 and `content_type`."""
    recorder = Recorder()
    async with (
        httpx.AsyncClient(transport=recorder) as client,
        stream_fn(model, context, options, http=HTTP, client=client) as events,
    ):
        async for _ in events:
            pass
    return [body for status, kind, body in recorder.bodies if status == 200 and content_type in kind]


async def record(name: str, model: Model, text: str, **options: Any) -> None:
    tools = options.pop("tools", [])
    context = Context(system_prompt="You are terse.", messages=[UserMessage(content=text)], tools=tools)
    stream_options = StreamOptions(signal=AbortSignal(), api_key="sk-local", **options)
    for body in await recorded(stream_simple, model, context, stream_options):
        path = OUT / f"{name}.{APIS[model.api]}.sse"
        path.write_bytes(body)
        print(f"{path.name}: {len(body)} bytes")


def server_model(url: str, api: str, model_id: str, provider: str) -> Model:
    # aimock serves Azure's v1 API at /openai/v1 (llama.cpp at /v1); Mistral's base is the root
    base = url if api in ("anthropic-messages", "mistral-conversations") else url + "/v1"
    if api == "azure-openai-responses" and provider == "aimock":
        base = url + "/openai/v1"
    return Model(id=model_id, api=api, provider=provider, base_url=base, reasoning=True, max_tokens=64)


async def main() -> None:
    OUT.mkdir(exist_ok=True)
    aimock = os.environ.get("AGENTLOOP_AIMOCK_URL")
    llama = os.environ.get("AGENTLOOP_LLAMA_URL")
    if not aimock or not llama:
        sys.exit("set AGENTLOOP_AIMOCK_URL and AGENTLOOP_LLAMA_URL (python tests/providers/servers.py start)")
    for api in sys.argv[1:] or APIS:
        m = server_model(aimock, api, "test-model", "aimock")
        await record("aimock-hello", m, "hello")
        await record("aimock-tools", m, "What is the weather in Paris?", tools=[Weather()])
        await record("aimock-truncated", m, "truncate-me")
        await record("aimock-dropped", m, "drop-me")
        await record("aimock-story", m, "slow-story")
        m = server_model(llama, api, "smollm2", "llama.cpp")
        for i, prompt in enumerate(
            [
                "Say hello.",
                "Count from one to ten.",
                "What is the capital of France?",
                "Write a haiku about the sea.",
                "Explain what a tool call is, in one sentence.",
            ]
        ):
            await record(f"llama-text{i}", m, prompt, max_tokens=24 + 8 * i)
        await record("llama-think", m, "Think, then answer: what is 2 + 2?", reasoning="low", max_tokens=48)
        await record("llama-think-long", m, "Why is the sky blue?", reasoning="high", max_tokens=64)
        await record("llama-length", m, "Tell me a long story about a dragon.", max_tokens=8)
        await record("llama-tools", m, "What is the weather in Paris?", tools=[Weather()], max_tokens=48)
        await record("llama-unicode", m, "Write the word café and an emoji.", max_tokens=24)


if __name__ == "__main__":
    anyio.run(main)
