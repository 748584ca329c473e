"""Write the Gemini recordings of `pi_wire/recordings` (`*.gemini.sse` and `*.vertex.sse`).

    python tests/providers/servers.py start            # aimock (see servers.py)
    set -a; . .ci-cache/providers/servers.env; set +a
    python -m tests.providers.google_wire.record       # aimock's answers, and the synthetic ones

`aimock-*`: aimock's answers to requests made by agentloop's own providers, on the Gemini API's
URL and on Vertex AI's (the bytes kept as the server sent them, a dropped connection included).
`synthetic-*`: streams written from the wire's documentation (`GenerateContentResponse` chunks,
`\\r\\n\\r\\n` between events as Google sends them) for what aimock does not send: thought
signatures, parallel calls with ids, cached and thought tokens, safety stops, a blocked prompt,
an error chunk, a stream without a finish reason.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from agentloop import (
    AbortSignal,
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentloop.providers import stream_simple

from ..pi_wire.record_streams import Weather, recorded

OUT = Path(__file__).parents[1] / "pi_wire" / "recordings"
SUFFIX = {"google-generative-ai": "gemini", "google-vertex": "vertex"}


def aimock_model(url: str, api: str) -> Model:
    base = url + ("/v1beta" if api == "google-generative-ai" else "/v1/projects/demo/locations/us-central1")
    return Model(id="gemini-2.5-flash", api=api, provider="aimock", base_url=base, reasoning=True, max_tokens=64)


async def record(name: str, model: Model, context: Context, **options: Any) -> None:
    stream_options = StreamOptions(signal=AbortSignal(), api_key="k-local", **options)
    for body in await recorded(stream_simple, model, context, stream_options):
        path = OUT / f"{name}.{SUFFIX[model.api]}.sse"
        path.write_bytes(body)
        print(f"{path.name}: {len(body)} bytes")


def ask(text: str, **extra: Any) -> Context:
    return Context(system_prompt="You are terse.", messages=[UserMessage(content=text)], **extra)


async def record_aimock(url: str) -> None:
    for api in SUFFIX:
        m = aimock_model(url, api)
        await record("aimock-hello", m, ask("hello"), reasoning="low")
        await record("aimock-tools", m, ask("What is the weather in Paris?", tools=[Weather()]), reasoning="low")
        call = ToolCall("c1", "get_weather", {"location": "Paris"})
        called = AssistantMessage(content=(call,), api=api, provider="aimock", model=m.id, stop_reason="toolUse")
        answered = Context(
            system_prompt="You are terse.",
            messages=[
                UserMessage(content="What is the weather in Paris?"),
                called,
                ToolResultMessage(tool_call_id="c1", tool_name="get_weather", content=(TextContent("sunny"),)),
            ],
            tools=[Weather()],
        )
        await record("aimock-tool-result", m, answered)
        await record("aimock-truncated", m, ask("truncate-me"))
        await record("aimock-dropped", m, ask("drop-me"))
        await record("aimock-story", m, ask("slow-story"))


# --- the synthetic streams ------------------------------------------------------------------

SIGNATURE = "CiQBjz1rX2h5dGhvdWdodC1zaWduYXR1cmUtZXhhbXBsZS0wMDE="
SIGNATURE_2 = "CiQBjz1rX3NlY29uZC1zaWduYXR1cmUtZXhhbXBsZS0wMDI="


def sse(chunks: list[Any], end: bytes = b"\r\n\r\n") -> bytes:
    return b"\r\n\r\n".join(b"data: " + json.dumps(c, ensure_ascii=False).encode() for c in chunks) + end


def chunk(parts: list[Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-3-flash-preview", "responseId": "resp-syn-1", **extra}


def usage(prompt: int, candidates: int, thoughts: int = 0, cached: int = 0) -> dict[str, Any]:
    out = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    if cached:
        out["cachedContentTokenCount"] = cached
    out["totalTokenCount"] = prompt + candidates + thoughts
    return {"usageMetadata": out}


def weather(location: str, call_id: str | None = None, signature: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": "get_weather", "args": {"location": location, "unit": "celsius"}}
    if call_id:
        call["id"] = call_id
    part: dict[str, Any] = {"functionCall": call}
    if signature:
        part["thoughtSignature"] = signature
    return part


SYNTHETIC: dict[str, bytes] = {
    # Gemini 3: thoughts, then parallel calls with ids; the first call carries the signature.
    "synthetic-parallel-calls.gemini": sse(
        [
            chunk([{"text": "**Planning**\nTwo cities: ", "thought": True}]),
            chunk([{"text": "call the tool twice.", "thought": True}]),
            chunk([weather("Paris", "fc-1", SIGNATURE), weather("Paris, Texas", "fc-2")]),
            chunk([], "STOP", **usage(120, 40, thoughts=75, cached=64)),
        ]
    ),
    # Gemini 2.5: calls without ids, one chunk each, finish in the last; no candidates content at end.
    "synthetic-calls-without-ids.gemini": sse(
        [
            chunk([{"text": "Checking both."}]),
            chunk([weather("Paris", signature=SIGNATURE)]),
            chunk([weather("Rome")], "STOP", **usage(50, 30)),
        ]
    ),
    # The same id twice: the second call gets an id of its own.
    "synthetic-duplicate-ids.gemini": sse(
        [chunk([weather("Paris", "same"), weather("Rome", "same")], "STOP", **usage(10, 10))]
    ),
    # A signature on a text part, and the last part empty with the signature (no function call).
    "synthetic-text-signature.gemini": sse(
        [
            chunk([{"text": "Let me think.", "thought": True, "thoughtSignature": SIGNATURE}]),
            chunk([{"text": "The answer "}]),
            chunk([{"text": "is 4."}]),
            chunk([{"text": "", "thoughtSignature": SIGNATURE_2}], "STOP", **usage(8, 5, thoughts=12)),
        ]
    ),
    # Thinking, text, thinking again: three blocks.
    "synthetic-interleaved.gemini": sse(
        [
            chunk([{"text": "First thought.", "thought": True}, {"text": "Part one. "}]),
            chunk([{"text": "Second thought.", "thought": True}]),
            chunk([{"text": "Part two."}], "STOP", **usage(9, 6, thoughts=4)),
        ]
    ),
    "synthetic-max-tokens.gemini": sse(
        [chunk([{"text": "This answer is cut"}]), chunk([{"text": " off"}], "MAX_TOKENS", **usage(7, 64))]
    ),
    "synthetic-safety.gemini": sse(
        [
            chunk([{"text": "Here is how to "}]),
            chunk(
                [],
                "SAFETY",
                **usage(11, 4),
            )
            | {
                "candidates": [
                    {
                        "index": 0,
                        "finishReason": "SAFETY",
                        "safetyRatings": [
                            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
                        ],
                    }
                ]
            },
        ]
    ),
    "synthetic-malformed-call.gemini": sse(
        [
            {
                "candidates": [
                    {"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "Malformed function call: x("}
                ],
                **usage(20, 0),
            }
        ]
    ),
    "synthetic-prompt-blocked.gemini": sse(
        [
            {
                "promptFeedback": {
                    "blockReason": "PROHIBITED_CONTENT",
                    "blockReasonMessage": "The prompt was blocked.",
                    "safetyRatings": [
                        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "MEDIUM"},
                        {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
                    ],
                },
                **usage(15, 0),
            }
        ]
    ),
    "synthetic-no-finish.gemini": sse([chunk([{"text": "Half an "}]), chunk([{"text": "answer"}])]),
    "synthetic-error-chunk.gemini": sse(
        [
            chunk([{"text": "Partial"}]),
            {
                "error": {
                    "code": 503,
                    "message": "The model is overloaded. Please try again later.",
                    "status": "UNAVAILABLE",
                }
            },
        ]
    ),
    # A reason this version does not know: agentloop ends the turn (pi-ai reports an error).
    "synthetic-unknown-finish.gemini": sse([chunk([{"text": "Done."}], "SOME_NEW_REASON", **usage(3, 2))]),
    # Vertex AI: the usage in a chunk of its own after the finish; no responseId.
    "synthetic-usage-after-finish.vertex": sse(
        [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}]},
            {"candidates": [{"content": {"role": "model", "parts": [{"text": " there."}]}, "finishReason": "STOP"}]},
            {"usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 3, "totalTokenCount": 7}},
        ]
    ),
    "synthetic-parallel-calls.vertex": sse(
        [
            chunk([{"text": "Two calls.", "thought": True}]),
            chunk([weather("Paris", "v-1", SIGNATURE), weather("Berlin", "v-2")], "STOP", **usage(30, 20, thoughts=9)),
        ]
    ),
    # The last event without its blank line: agentloop reads it (pi-ai's SDK rejects the body).
    "synthetic-no-blank-line.gemini": sse([chunk([{"text": "Complete."}], "STOP", **usage(2, 1))], end=b""),
}


def write_synthetic() -> None:
    for name, body in SYNTHETIC.items():
        path = OUT / f"{name}.sse"
        path.write_bytes(body)
        print(f"{path.name}: {len(body)} bytes")


async def main() -> None:
    write_synthetic()
    url = os.environ.get("AGENTLOOP_AIMOCK_URL")
    if not url:
        sys.exit("set AGENTLOOP_AIMOCK_URL (python tests/providers/servers.py start) to record aimock's answers")
    await record_aimock(url)


if __name__ == "__main__":
    anyio.run(main)
