"""Write the hand-made `synthetic-*.mistral.sse` recordings: Mistral's own stream parts that
aimock (which answers in OpenAI's format) does not produce, written from Mistral's wire format as
the `mistralai` SDK models it (`CompletionChunk`, `DeltaMessage` with a string or a list of
`TextChunk`/`ThinkChunk`, whole `ToolCall`s whose arguments are a string or an object, `id`
"null" when absent, `UsageInfo`, finish reasons `stop`/`length`/`model_length`/`tool_calls`).

python tests/providers/pi_wire/synthetic_mistral.py
"""

import json
from pathlib import Path

Event = dict[str, object]

OUT = Path(__file__).with_name("recordings")


def sse(items: list[Event | str], end: bytes = b"\n\n", newline: str = "\n") -> bytes:
    parts = [f"data: {item if isinstance(item, str) else json.dumps(item)}" for item in items]
    return (newline * 2).join(parts).encode() + end.replace(b"\n", newline.encode())


def chunk(delta: Event, finish: str | None = None, usage: Event | None = None) -> Event:
    out: Event = {
        "id": "5f1a9b0c2d3e4f50",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "magistral-medium-2509",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        out["usage"] = usage
    return out


def thinking(text: str) -> Event:
    return {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]}


def text(value: str) -> Event:
    return {"content": [{"type": "text", "text": value}]}


def call(index: int, call_id: str, name: str, arguments: object) -> Event:
    return {"tool_calls": [{"id": call_id, "function": {"name": name, "arguments": arguments}, "index": index}]}


USAGE: Event = {
    "prompt_tokens": 20,
    "completion_tokens": 8,
    "total_tokens": 28,
    "prompt_tokens_details": {"cached_tokens": 5},
}
FIRST = chunk({"role": "assistant", "content": ""})

S: dict[str, list[Event | str]] = {}
S["think-text"] = [
    FIRST,
    chunk(thinking("The user")),
    chunk(thinking(" greets me.")),
    chunk(text("Hello")),
    chunk({"content": "! How can I help?"}),
    chunk({"content": ""}, "stop", USAGE),
    "[DONE]",
]
S["tools"] = [
    FIRST,
    chunk(call(0, "D681PevKs", "get_weather", '{"location": "Paris", "unit": "celsius"}')),
    chunk(call(1, "aB3dE5gH7", "get_weather", '{"location": "Lyon"}'), "tool_calls", USAGE),
    "[DONE]",
]
S["tool-object-arguments"] = [
    FIRST,
    chunk(text("Checking.")),
    chunk(call(0, "null", "get_weather", {"location": "Paris", "days": 2})),
    chunk({"content": ""}, "tool_calls", {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}),
    "[DONE]",
]
S["split-arguments"] = [
    FIRST,
    chunk(call(0, "kT9mQ2xZ1", "get_weather", '{"location": ')),
    chunk({"tool_calls": [{"function": {"name": "", "arguments": '"Paris"}'}, "index": 0}]}),
    chunk({"content": ""}, "tool_calls", USAGE),
    "[DONE]",
]
S["block-order"] = [
    FIRST,
    chunk(thinking("First, think.")),
    chunk({"content": "Let me check."}),
    chunk(thinking("Then think again.")),
    chunk(call(0, "Q1w2E3r4T", "get_weather", '{"location": "Rome"}')),
    chunk({"content": "While it runs: done."}),
    chunk({"content": ""}, "tool_calls", USAGE),
    "[DONE]",
]
S["empty-deltas"] = [
    FIRST,
    chunk(thinking("Plan")),
    chunk({"content": ""}),
    chunk(thinking(" more.")),
    chunk({"content": [{"type": "text", "text": ""}]}),
    chunk(text("Answer.")),
    chunk({"content": ""}, "stop", USAGE),
    "[DONE]",
]
S["model-length"] = [FIRST, chunk({"content": "This is cut"}), chunk({"content": ""}, "model_length", USAGE), "[DONE]"]
S["no-finish-reason"] = [FIRST, chunk({"content": "No end"}), "[DONE]"]
S["unicode"] = [
    FIRST,
    chunk({"content": "caf\u00e9 \U0001f600 "}),
    chunk(thinking("\u00e9t\u00e9")),
    chunk({"content": "\u4e2d\u6587"}, "stop", USAGE),
    "[DONE]",
]

synth = {f"synthetic-{name}.mistral.sse": sse(items) for name, items in S.items()}
synth["synthetic-no-done-marker.mistral.sse"] = sse(S["think-text"][:-1], end=b"")
synth["synthetic-crlf.mistral.sse"] = sse(S["tools"], newline="\r\n")
for name, body in synth.items():
    (OUT / name).write_bytes(body)
print(len(synth))
