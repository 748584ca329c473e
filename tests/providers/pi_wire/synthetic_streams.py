"""Write the hand-made `synthetic-*` recordings (edge cases the servers do not produce).

python tests/providers/pi_wire/synthetic_streams.py
"""

import json
from pathlib import Path

Event = dict[str, object]
"""One JSON object of a stream."""
Item = Event | str
"""One `data:` line: a JSON object, or a literal such as `[DONE]`."""

OUT = Path(__file__).with_name("recordings")


def sse(items: list[Item], events: bool = False, end: bytes = b"\n\n") -> bytes:
    parts: list[str] = []
    for it in items:
        if isinstance(it, str):
            parts.append(f"data: {it}")
        elif events:
            parts.append(f"event: {it['type']}\ndata: {json.dumps(it)}")
        else:
            parts.append(f"data: {json.dumps(it)}")
    return ("\n\n".join(parts)).encode() + end


def chunk(delta: Event | None = None, finish: str | None = None, **extra: object) -> Event:
    choice: Event = {"index": 0, "delta": delta or {}}
    if finish:
        choice["finish_reason"] = finish
    return {
        "id": "chatcmpl-syn",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [choice],
        **extra,
    }


def tc(i: int, id: str | None = None, name: str | None = None, args: str | None = None) -> Event:
    call: Event = {"index": i}
    if id:
        call["id"] = id
        call["type"] = "function"
    fn: Event = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    call["function"] = fn
    return {"tool_calls": [call]}


usage: Event = {
    "id": "chatcmpl-syn",
    "choices": [],
    "usage": {
        "prompt_tokens": 20,
        "completion_tokens": 9,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 5},
    },
}
ESCAPE_CUTS = [
    '{"path": "C:\\',
    "\\Users\\\\me\\",
    '"", "note": "caf\\u00',
    "e9 \\u0",
    "0e9 \\ud83d",
    "\\ude00 tab\\t",
    'x\\d", "n": [1, tr',
    "ue, nul",
    "l, 1.5e",
    "3]}",
]
"""Tool-call argument fragments cut inside escapes, literals and numbers."""
LONG_ARGUMENTS = json.dumps(
    {"path": "notes.md", "content": "".join("abcdefgh "[(i * 7 + i // 9) % 9] for i in range(5900))}
)
"""A 5.9 KB argument text, streamed in 7-character fragments."""
LONG_PIECES = [LONG_ARGUMENTS[i : i + 7] for i in range(0, len(LONG_ARGUMENTS), 7)]

C: dict[str, list[Item]] = {}
C["reasoning-text"] = [
    chunk({"role": "assistant", "content": None}),
    chunk({"reasoning_content": "think "}),
    chunk({"reasoning_content": "more"}),
    chunk({"content": "Hi"}),
    chunk({"content": " there"}),
    chunk(finish="stop"),
    usage,
    "[DONE]",
]
C["parallel-tools"] = [
    chunk(tc(0, "call_a", "get_weather", "")),
    chunk(tc(1, "call_b", "get_time", "")),
    chunk(tc(0, args='{"city": "Pa')),
    chunk(tc(1, args='{"tz": "UTC"}')),
    chunk(tc(0, args='ris"}')),
    chunk(finish="tool_calls"),
    usage,
    "[DONE]",
]
C["text-tool-text"] = [
    chunk({"content": "Checking."}),
    chunk(tc(0, "c1", "f", "{}")),
    chunk({"content": " Done."}),
    chunk(finish="tool_calls"),
    "[DONE]",
]
C["empty-tool-deltas"] = [
    chunk(tc(0, "c1", "lookup")),
    chunk(tc(0, args="")),
    chunk(tc(0, args='{"q":')),
    chunk(tc(0, args='"x"}')),
    chunk(finish="tool_calls"),
    "[DONE]",
]
C["partial-literals"] = [
    chunk(tc(0, "c1", "set", '{"deep":[tr')),
    chunk(tc(0, args='ue],"a":nul')),
    chunk(tc(0, args='l,"b":fals')),
    chunk(tc(0, args='e,"n":1.5e')),
    chunk(tc(0, args="3}")),
    chunk(finish="tool_calls"),
    "[DONE]",
]
C["escape-cuts"] = [
    chunk(tc(0, "c1", "write", "")),
    *(chunk(tc(0, args=piece)) for piece in ESCAPE_CUTS),
    chunk(finish="tool_calls"),
    "[DONE]",
]
C["long-arguments"] = [
    chunk(tc(0, "c1", "write", "")),
    *(chunk(tc(0, args=piece)) for piece in LONG_PIECES),
    chunk(finish="tool_calls"),
    "[DONE]",
]
C["no-done-marker"] = [chunk({"content": "Short"}), chunk(finish="length"), usage]
C["reasoning-tools"] = [
    chunk({"reasoning": "I will call it."}),
    chunk(tc(0, "c9", "get_weather", '{"city":"Oslo"}')),
    chunk(finish="tool_calls"),
    usage,
    "[DONE]",
]
C["unicode"] = [
    chunk({"content": "caf\u00e9 \U0001f600 "}),
    chunk({"content": "\u2028line"}),
    chunk(finish="stop"),
    "[DONE]",
]
synth = {f"synthetic-{k}.completions.sse": sse(v) for k, v in C.items()}
synth["synthetic-no-blank-line.completions.sse"] = sse(
    [chunk({"content": "Hello"}), chunk(finish="stop"), "[DONE]"], end=b"\n"
)


def a(type: str, **kw: object) -> Event:
    return {"type": type, **kw}


start = a(
    "message_start",
    message={
        "id": "msg_syn",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "m",
        "stop_reason": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 2,
        },
    },
)


def stop(reason: str, details: Event | None = None) -> list[Item]:
    d: Event = {"stop_reason": reason, "stop_sequence": None}
    if details:
        d["stop_details"] = details
    return [a("message_delta", delta=d, usage={"output_tokens": 7}), a("message_stop")]


M: dict[str, list[Item]] = {}
M["refusal-explanation"] = [
    start,
    a("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    a("content_block_delta", index=0, delta={"type": "text_delta", "text": "I can't"}),
    a("content_block_stop", index=0),
    *stop("refusal", {"type": "refusal", "explanation": "This request violates the usage policy."}),
]
M["refusal-plain"] = [start, *stop("refusal")]
M["empty-deltas"] = [
    start,
    a("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
    a("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": ""}),
    a("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Hmm."}),
    a("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig=="}),
    a("content_block_stop", index=0),
    a("content_block_start", index=1, content_block={"type": "text", "text": ""}),
    a("content_block_delta", index=1, delta={"type": "text_delta", "text": ""}),
    a("content_block_delta", index=1, delta={"type": "text_delta", "text": "Yes."}),
    a("content_block_stop", index=1),
    *stop("end_turn"),
]
M["tool-literals"] = [
    start,
    a("content_block_start", index=0, content_block={"type": "tool_use", "id": "toolu_1", "name": "set", "input": {}}),
    a("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": ""}),
    a("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": '{"on": tr'}),
    a("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": 'ue, "off": nu'}),
    a("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "ll}"}),
    a("content_block_stop", index=0),
    *stop("tool_use"),
]
M["escape-cuts"] = [
    start,
    a(
        "content_block_start",
        index=0,
        content_block={"type": "tool_use", "id": "toolu_e", "name": "write", "input": {}},
    ),
    *(
        a("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": piece})
        for piece in ESCAPE_CUTS
    ),
    a("content_block_stop", index=0),
    *stop("tool_use"),
]
M["sensitive"] = [
    start,
    a("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    a("content_block_delta", index=0, delta={"type": "text_delta", "text": "Well"}),
    a("content_block_stop", index=0),
    *stop("sensitive"),
]
M["redacted-thinking"] = [
    start,
    a("content_block_start", index=0, content_block={"type": "redacted_thinking", "data": "EmwKAhgB"}),
    a("content_block_stop", index=0),
    a("content_block_start", index=1, content_block={"type": "text", "text": ""}),
    a("content_block_delta", index=1, delta={"type": "text_delta", "text": "Done."}),
    a("content_block_stop", index=1),
    *stop("end_turn"),
]
for k, v in M.items():
    synth[f"synthetic-{k}.messages.sse"] = sse(v, events=True)
synth["synthetic-no-blank-line.messages.sse"] = sse(M["empty-deltas"], events=True, end=b"\n")


def r(type: str, **kw: object) -> Event:
    return {"type": type, **kw}


created = r("response.created", response={"id": "resp_syn", "status": "in_progress", "output": []})


def completed(status: str = "completed", **extra: object) -> Event:
    return r(
        f"response.{status}",
        response={
            "id": "resp_syn",
            "status": status,
            "usage": {
                "input_tokens": 12,
                "output_tokens": 6,
                "total_tokens": 18,
                "input_tokens_details": {"cached_tokens": 2},
            },
            **extra,
        },
    )


def msg(i: str, idx: int, text: str, phase: str | None = None) -> list[Item]:
    return [
        r(
            "response.output_item.added",
            output_index=idx,
            item={"type": "message", "id": i, "role": "assistant", "content": []},
        ),
        r(
            "response.content_part.added",
            item_id=i,
            output_index=idx,
            content_index=0,
            part={"type": "output_text", "text": ""},
        ),
        r("response.output_text.delta", item_id=i, output_index=idx, content_index=0, delta=text),
        r(
            "response.output_item.done",
            output_index=idx,
            item={
                "type": "message",
                "id": i,
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
                **({"phase": phase} if phase else {}),
            },
        ),
    ]


R: dict[str, list[Item]] = {}
R["function-calls"] = [
    created,
    r(
        "response.output_item.added",
        output_index=0,
        item={"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""},
    ),
    r("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"city":'),
    r("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='"Rome"}'),
    r("response.function_call_arguments.done", item_id="fc_1", output_index=0, arguments='{"city":"Rome"}'),
    r(
        "response.output_item.done",
        output_index=0,
        item={
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Rome"}',
        },
    ),
    completed(),
]
R["escape-cuts"] = [
    created,
    r(
        "response.output_item.added",
        output_index=0,
        item={"type": "function_call", "id": "fc_e", "call_id": "call_e", "name": "write", "arguments": ""},
    ),
    *(
        r("response.function_call_arguments.delta", item_id="fc_e", output_index=0, delta=piece)
        for piece in ESCAPE_CUTS
    ),
    r("response.function_call_arguments.done", item_id="fc_e", output_index=0, arguments="".join(ESCAPE_CUTS)),
    r(
        "response.output_item.done",
        output_index=0,
        item={
            "type": "function_call",
            "id": "fc_e",
            "call_id": "call_e",
            "name": "write",
            "arguments": "".join(ESCAPE_CUTS),
        },
    ),
    completed(),
]
R["phase-signature"] = [created, *msg("msg_p", 0, "Final answer.", "final_answer"), completed()]
R["content-filter"] = [
    created,
    *msg("msg_c", 0, "Partial"),
    completed("incomplete", incomplete_details={"reason": "content_filter"}),
]
R["max-output-tokens"] = [
    created,
    *msg("msg_m", 0, "Cut"),
    completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
]
R["refusal"] = [
    created,
    r(
        "response.output_item.added",
        output_index=0,
        item={"type": "message", "id": "msg_r", "role": "assistant", "content": []},
    ),
    r("response.refusal.delta", item_id="msg_r", output_index=0, content_index=0, delta="I can't help."),
    r(
        "response.output_item.done",
        output_index=0,
        item={
            "type": "message",
            "id": "msg_r",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "I can't help."}],
        },
    ),
    completed(),
]
for k, v in R.items():
    synth[f"synthetic-{k}.responses.sse"] = sse(v, events=True)
synth["synthetic-no-blank-line.responses.sse"] = sse(R["phase-signature"], events=True, end=b"")
for name, body in synth.items():
    (OUT / name).write_bytes(body)
print(len(synth))

items: list[Item] = [
    r("response.created", response={"id": "resp_x", "status": "in_progress"}),
    r(
        "response.output_item.added",
        item={"id": "rs_9", "summary": [], "type": "reasoning", "content": [], "encrypted_content": ""},
    ),
    r("response.reasoning_text.delta", delta="\nI", item_id="rs_9"),
    r("response.reasoning_text.delta", delta="'m", item_id="rs_9"),
    r("response.output_item.added", item={"content": [], "id": "msg_9", "role": "assistant", "type": "message"}),
    r("response.content_part.added", item_id="msg_9", part={"type": "output_text", "text": ""}),
    r("response.output_text.delta", item_id="msg_9", delta="A"),
    r("response.output_text.delta", item_id="msg_9", delta=" terse"),
    r(
        "response.output_item.done",
        item={
            "id": "rs_9",
            "summary": [],
            "type": "reasoning",
            "content": [{"text": "\nI'm", "type": "reasoning_text"}],
            "encrypted_content": "",
        },
    ),
    r(
        "response.output_item.done",
        item={
            "type": "message",
            "id": "msg_9",
            "content": [{"type": "output_text", "text": "A terse"}],
            "role": "assistant",
        },
    ),
    r(
        "response.completed",
        response={
            "id": "resp_x",
            "status": "completed",
            "usage": {"input_tokens": 24, "output_tokens": 12, "total_tokens": 36},
        },
    ),
]
(OUT / "synthetic-no-output-index.responses.sse").write_bytes(sse(items, events=True))
