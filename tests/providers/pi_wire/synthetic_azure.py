"""Write the hand-made `synthetic-*.azure.sse` recordings: Responses streams as Azure OpenAI sends
them (every event with its `output_index` and `sequence_number`, as the `openai` SDK's types
describe them), for the cases aimock does not produce: reasoning with parallel function calls and
text, an answer cut by `max_output_tokens`, a content filter, a priority service tier.

python tests/providers/pi_wire/synthetic_azure.py
"""

import itertools
import json
from pathlib import Path

Event = dict[str, object]

OUT = Path(__file__).with_name("recordings")


def sse(events: list[Event]) -> bytes:
    numbers = itertools.count()
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': next(numbers)})}\n\n" for e in events
    ).encode()


def response(status: str, **extra: object) -> Event:
    return {
        "id": "resp_az1",
        "object": "response",
        "created_at": 1767225600,
        "model": "gpt-5-mini",
        "status": status,
        "output": [],
        **extra,
    }


USAGE: Event = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 64},
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 16},
    "total_tokens": 160,
}


def created() -> list[Event]:
    return [
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.in_progress", "response": response("in_progress")},
    ]


def message(index: int, item_id: str, text: str) -> list[Event]:
    done = {"type": "message", "id": item_id, "status": "completed", "role": "assistant"}
    part = {"type": "output_text", "text": text, "annotations": []}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**done, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": item_id,
            "output_index": index,
            "content_index": 0,
            "part": {**part, "text": ""},
        },
        *[
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "delta": text[i : i + 7],
            }
            for i in range(0, len(text), 7)
        ],
        {
            "type": "response.output_text.done",
            "item_id": item_id,
            "output_index": index,
            "content_index": 0,
            "text": text,
        },
        {
            "type": "response.content_part.done",
            "item_id": item_id,
            "output_index": index,
            "content_index": 0,
            "part": part,
        },
        {"type": "response.output_item.done", "output_index": index, "item": {**done, "content": [part]}},
    ]


def reasoning(index: int, item_id: str, summary: str) -> list[Event]:
    item = {"type": "reasoning", "id": item_id, "summary": [], "encrypted_content": "gAAAAB-opaque"}
    part = {"type": "summary_text", "text": summary}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": item_id,
            "output_index": index,
            "summary_index": 0,
            "part": {**part, "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": item_id,
            "output_index": index,
            "summary_index": 0,
            "delta": summary,
        },
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": item_id,
            "output_index": index,
            "summary_index": 0,
            "text": summary,
        },
        {
            "type": "response.reasoning_summary_part.done",
            "item_id": item_id,
            "output_index": index,
            "summary_index": 0,
            "part": part,
        },
        {"type": "response.output_item.done", "output_index": index, "item": {**item, "summary": [part]}},
    ]


def call(index: int, item_id: str, call_id: str, arguments: str) -> list[Event]:
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": "get_weather", "status": "in_progress"}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}},
        *[
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item_id,
                "output_index": index,
                "delta": arguments[i : i + 9],
            }
            for i in range(0, len(arguments), 9)
        ],
        {
            "type": "response.function_call_arguments.done",
            "item_id": item_id,
            "output_index": index,
            "arguments": arguments,
        },
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "status": "completed", "arguments": arguments},
        },
    ]


def finished(status: str, events: list[Event], **extra: object) -> Event:
    """The terminal event: its response repeats the finished items, as OpenAI's does."""
    output = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    kind = "response.completed" if status == "completed" else "response.incomplete"
    return {"type": kind, "response": response(status, output=output, usage=USAGE, **extra)}


def streamed(*parts: list[Event], status: str = "completed", **extra: object) -> list[Event]:
    events = [e for part in parts for e in part]
    return [*created(), *events, finished(status, events, **extra)]


S: dict[str, list[Event]] = {}
S["reasoning-calls"] = streamed(
    reasoning(0, "rs_az1", "Two cities: call the tool twice."),
    message(1, "msg_az1", "Checking both."),
    call(2, "fc_az1", "call_az1", '{"location": "Paris", "unit": "celsius"}'),
    call(3, "fc_az2", "call_az2", '{"location": "Lyon"}'),
)
S["max-output-tokens"] = streamed(
    message(0, "msg_az2", "This answer stops at the"),
    status="incomplete",
    incomplete_details={"reason": "max_output_tokens"},
)
S["content-filter"] = streamed(
    message(0, "msg_az3", "Partial"), status="incomplete", incomplete_details={"reason": "content_filter"}
)
S["service-tier"] = streamed(message(0, "msg_az4", "Fast answer."), service_tier="priority")

for name, events in S.items():
    (OUT / f"synthetic-{name}.azure.sse").write_bytes(sse(events))
print(len(S))
