"""Hypothesis strategies for what a server may send: plausible protocol events with junk mixed in,
serialized as server-sent events with every framing the spec allows, then mutated at the byte level
and cut into random chunks.

Used by the fuzz tests of the provider parsers and the proxy wire decoder.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# --- values ----------------------------------------------------------------------------------

_ODD_CHARS = '\ud800\udfff\x00\n\r\t"\\{}[]:,\u2028\ufeff\U0001f600é'
text = st.text(alphabet=st.one_of(st.characters(), st.sampled_from(_ODD_CHARS)), max_size=12)
"""Short strings, lone surrogates and control characters included."""
prose = st.lists(
    st.sampled_from(
        ["word ", "é", "😀", "\n", "\r\n", "\t", '"', "\\", "\u2028", "\u2029", "\x85", "\x0b", "\ud800", "data: "]
    ),
    max_size=8,
).map("".join)
"""Model text: words and the characters that trip up line readers and JSON writers, often."""

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
junk: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
"""Any JSON value (NaN and the infinities too: Python's json writes and reads them)."""


def maybe(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the plausible value, sometimes junk of any type."""
    return st.one_of(plausible, plausible, plausible, junk)


small_int = st.integers(min_value=-1, max_value=4)
arguments = st.one_of(
    # A whole argument object (any values: lone surrogates, NaN, huge numbers)...
    st.dictionaries(st.text(max_size=5), junk, max_size=3).map(json.dumps),
    # ...a piece of one...
    st.builds(
        lambda value, start, size: json.dumps(value)[start : start + size],
        st.dictionaries(st.text(max_size=5), junk, max_size=3),
        st.integers(0, 30),
        st.integers(1, 30),
    ),
    # ...or anything at all.
    text,
    st.sampled_from(['{"', '"a"', ":", "[" * 3000, "{", "}", "]", ",", "1", "NaN", "\\u", '"\\ud800"', "1" * 5000]),
    # ...or one of the values that once poisoned a conversation (the next request could not be sent).
    st.sampled_from(['{"a": "\\ud800"}', '{"\\udfff": 1}', '{"n": 1e999}', '{"n": -1e999}', '{"n": NaN}']),
)
"""Tool-call argument text, whole or in fragments."""


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    out, last = [], 0
    for point in points:
        out.append(text[last:point])
        last = point
    out.append(text[last:])
    return [piece for piece in out if piece] or [""]


@st.composite
def _blocks(draw: st.DrawFn) -> list[tuple[str, str, list[str]]]:
    """A well-formed response: (kind, name, pieces) for text, thinking and tool-call blocks."""
    blocks = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "thinking", "tool"]))
        body = draw(arguments if kind == "tool" else st.one_of(prose, text))
        pieces = _pieces(body, draw(st.lists(st.integers(0, 40), max_size=3)))
        blocks.append((kind, draw(st.sampled_from(["echo", "add"])), pieces))
    return blocks


class Clean(list[tuple[str, Any]]):
    """A well-formed response that nothing damaged: sent as is, it must end with `done`."""


def _interleave(draw: st.DrawFn, good: list[tuple[str, Any]], bad: st.SearchStrategy[Any]) -> list[tuple[str, Any]]:
    """`good` with a few `bad` events inserted, some removed, or none changed (then `Clean`)."""
    changes = draw(st.sampled_from([0, 0, 0, 1, 2]))
    if not changes:
        return Clean(good)
    out = list(good)
    for _ in range(changes):
        if len(out) > 0 and draw(st.booleans()):
            del out[draw(st.integers(0, len(out) - 1))]
        else:
            out.insert(draw(st.integers(0, len(out))), draw(bad))
    return out


def _usage_fields(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={name: maybe(st.integers(min_value=0, max_value=10**6)) for name in names}
    )


_error = st.fixed_dictionaries(
    {},
    optional={
        "message": maybe(text),
        "type": maybe(st.sampled_from(["server_error", "overloaded_error", "rate_limit_error", "error", "x"])),
        "code": maybe(st.sampled_from([429, 500, 400, "server_error", "rate_limit_exceeded", "x"])),
        "detail": maybe(text),
        "metadata": maybe(st.fixed_dictionaries({"raw": maybe(text)})),
    },
)

# --- OpenAI Chat Completions -----------------------------------------------------------------


def _chat_tool_call() -> st.SearchStrategy[dict[str, Any]]:
    function = st.fixed_dictionaries(
        {}, optional={"name": maybe(st.sampled_from(["echo", "add", ""])), "arguments": maybe(arguments)}
    )
    return st.fixed_dictionaries(
        {"index": maybe(small_int)},
        optional={"id": maybe(st.sampled_from(["call_1", "call_2", ""])), "function": maybe(function), "type": junk},
    )


_chat_delta = st.fixed_dictionaries(
    {},
    optional={
        "content": maybe(text),
        "reasoning_content": maybe(text),
        "reasoning": maybe(text),
        "refusal": maybe(text),
        "role": junk,
        "tool_calls": maybe(st.lists(_chat_tool_call(), max_size=2)),
    },
)
_chat_choice = st.fixed_dictionaries(
    {"index": maybe(st.just(0)), "delta": maybe(_chat_delta)},
    optional={
        "finish_reason": maybe(st.sampled_from([None, "stop", "length", "tool_calls", "content_filter", "error"])),
        "usage": junk,
    },
)
_chat_chunk = st.fixed_dictionaries(
    {"choices": maybe(st.lists(_chat_choice, max_size=2))},
    optional={
        "id": maybe(st.just("chatcmpl-1")),
        "usage": maybe(
            _usage_fields(["prompt_tokens", "completion_tokens"]).map(
                lambda u: {**u, "prompt_tokens_details": {"cached_tokens": 1}}
            )
        ),
        "error": maybe(_error),
    },
)
_completions_junk = st.lists(
    st.one_of(
        _chat_chunk.map(lambda d: ("", d)),
        _chat_chunk.map(lambda d: ("", d)),
        st.just(("", "[DONE]")),
        junk.map(lambda d: ("", d)),
    ),
    max_size=12,
)


@st.composite
def _completions_good(draw: st.DrawFn) -> list[tuple[str, Any]]:
    def chunk(delta: dict[str, Any], finish: Any = None) -> tuple[str, Any]:
        return ("", {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = []
    tools = 0
    for kind, name, pieces in draw(_blocks()):
        if kind == "tool":
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": tools, "id": f"call_{tools}", "function": {"name": name, "arguments": pieces[0]}}
                        ]
                    }
                )
            )
            out += [chunk({"tool_calls": [{"index": tools, "function": {"arguments": piece}}]}) for piece in pieces[1:]]
            tools += 1
        else:
            field = "content" if kind == "text" else "reasoning_content"
            out += [chunk({field: piece}) for piece in pieces]
    out.append(chunk({}, draw(st.sampled_from(["stop", "tool_calls", "length"]))))
    out.append(("", {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}))
    out.append(("", "[DONE]"))
    return _interleave(draw, out, _chat_chunk.map(lambda d: ("", d)))


completions_events = st.one_of(_completions_good(), _completions_junk)
"""(event name, data) pairs: data is a JSON value, or a raw string sent as is."""


# --- OpenAI Responses ------------------------------------------------------------------------

_ITEM_IDS = st.sampled_from(["rs_1", "msg_1", "fc_1", "fc_2", "x"])
_item = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(["reasoning", "message", "function_call", "web_search_call"]))},
    optional={
        "id": maybe(_ITEM_IDS),
        "call_id": maybe(st.sampled_from(["call_1", "call_2"])),
        "name": maybe(st.sampled_from(["echo", ""])),
        "arguments": maybe(arguments),
        "summary": maybe(
            st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": maybe(text)}), max_size=2)
        ),
        "content": maybe(
            st.lists(st.fixed_dictionaries({"type": st.just("output_text"), "text": maybe(text)}), max_size=2)
        ),
        "encrypted_content": maybe(text),
        "phase": maybe(st.sampled_from(["commentary", "final_answer"])),
    },
)
_response = st.fixed_dictionaries(
    {},
    optional={
        "id": maybe(st.just("resp_1")),
        "status": maybe(st.sampled_from(["completed", "incomplete", "failed", "cancelled"])),
        "incomplete_details": maybe(
            st.fixed_dictionaries({"reason": st.sampled_from(["max_output_tokens", "content_filter"])})
        ),
        "usage": maybe(_usage_fields(["input_tokens", "output_tokens", "total_tokens"])),
        "service_tier": maybe(st.sampled_from(["flex", "priority", "default"])),
        "error": maybe(_error),
    },
)
_RESPONSES_TYPES = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "something.new",
]
_responses_event = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(_RESPONSES_TYPES))},
    optional={
        "item": maybe(_item),
        "item_id": maybe(_ITEM_IDS),
        "output_index": maybe(small_int),
        "delta": maybe(st.one_of(text, arguments)),
        "arguments": maybe(arguments),
        "response": maybe(_response),
        "error": junk,
    },
)
_responses_junk = st.lists(
    st.one_of(
        _responses_event.map(lambda d: (d["type"] if isinstance(d.get("type"), str) else "", d)),
        junk.map(lambda d: ("", d)),
    ),
    max_size=14,
)


@st.composite
def _responses_good(draw: st.DrawFn) -> list[tuple[str, Any]]:
    def event(kind: str, **fields: Any) -> tuple[str, Any]:
        return (kind, {"type": kind, **fields})

    out = [event("response.created", response={"id": "resp_1"})]
    for n, (kind, name, pieces) in enumerate(draw(_blocks())):
        item_id = f"{kind}_{n}"
        if kind == "tool":
            item: dict[str, object] = {
                "type": "function_call",
                "id": item_id,
                "call_id": f"call_{n}",
                "name": name,
                "arguments": "",
            }
            out.append(event("response.output_item.added", item=item, output_index=n))
            out += [event("response.function_call_arguments.delta", item_id=item_id, delta=piece) for piece in pieces]
            out.append(event("response.output_item.done", item={**item, "arguments": "".join(pieces)}, output_index=n))
        elif kind == "text":
            item = {"type": "message", "id": item_id}
            out.append(event("response.output_item.added", item=item, output_index=n))
            out += [event("response.output_text.delta", item_id=item_id, delta=piece) for piece in pieces]
            out.append(event("response.output_item.done", item=item, output_index=n))
        else:
            item = {"type": "reasoning", "id": item_id, "summary": []}
            out.append(event("response.output_item.added", item=item, output_index=n))
            out += [event("response.reasoning_summary_text.delta", item_id=item_id, delta=piece) for piece in pieces]
            done = {**item, "summary": [{"type": "summary_text", "text": "".join(pieces)}]}
            out.append(event("response.output_item.done", item=done, output_index=n))
    out.append(event("response.completed", response={"status": "completed", "usage": {"input_tokens": 2}}))
    return _interleave(draw, out, _responses_event.map(lambda d: ("", d)))


responses_events = st.one_of(_responses_good(), _responses_junk)


# --- Anthropic Messages ----------------------------------------------------------------------

_block = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use", "server_tool_use"]))},
    optional={
        "text": maybe(text),
        "thinking": maybe(text),
        "data": maybe(text),
        "id": maybe(st.sampled_from(["toolu_1", "toolu_2"])),
        "name": maybe(st.sampled_from(["echo", ""])),
        "input": maybe(st.dictionaries(st.text(max_size=4), junk, max_size=2)),
    },
)
_block_delta = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(["text_delta", "thinking_delta", "signature_delta", "input_json_delta"]))},
    optional={
        "text": maybe(text),
        "thinking": maybe(text),
        "signature": maybe(text),
        "partial_json": maybe(arguments),
    },
)
_ANTHROPIC_TYPES = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
]
_anthropic_event = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(_ANTHROPIC_TYPES))},
    optional={
        "index": maybe(small_int),
        "content_block": maybe(_block),
        "delta": maybe(
            st.one_of(
                _block_delta,
                st.fixed_dictionaries(
                    {"stop_reason": maybe(st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal"]))}
                ),
            )
        ),
        "message": maybe(
            st.fixed_dictionaries(
                {"id": maybe(st.just("msg_1")), "usage": maybe(_usage_fields(["input_tokens", "output_tokens"]))}
            )
        ),
        "usage": maybe(_usage_fields(["output_tokens", "cache_read_input_tokens"])),
        "error": maybe(_error),
    },
)
_anthropic_junk = st.lists(
    st.one_of(
        _anthropic_event.map(lambda d: (d["type"] if isinstance(d.get("type"), str) else "", d)),
        junk.map(lambda d: ("", d)),
    ),
    max_size=14,
)


@st.composite
def _anthropic_good(draw: st.DrawFn) -> list[tuple[str, Any]]:
    def event(kind: str, **fields: Any) -> tuple[str, Any]:
        return (kind, {"type": kind, **fields})

    out = [event("message_start", message={"id": "msg_1", "usage": {"input_tokens": 3}})]
    for n, (kind, name, pieces) in enumerate(draw(_blocks())):
        if kind == "tool":
            out.append(
                event(
                    "content_block_start",
                    index=n,
                    content_block={"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}},
                )
            )
            out += [
                event("content_block_delta", index=n, delta={"type": "input_json_delta", "partial_json": p})
                for p in pieces
            ]
        elif kind == "text":
            out.append(event("content_block_start", index=n, content_block={"type": "text", "text": ""}))
            out += [event("content_block_delta", index=n, delta={"type": "text_delta", "text": p}) for p in pieces]
        else:
            out.append(event("content_block_start", index=n, content_block={"type": "thinking", "thinking": ""}))
            out += [
                event("content_block_delta", index=n, delta={"type": "thinking_delta", "thinking": p}) for p in pieces
            ]
            out.append(event("content_block_delta", index=n, delta={"type": "signature_delta", "signature": "sig"}))
        out.append(event("content_block_stop", index=n))
    reason = draw(st.sampled_from(["end_turn", "tool_use", "max_tokens"]))
    out.append(event("message_delta", delta={"stop_reason": reason}, usage={"output_tokens": 5}))
    out.append(event("message_stop"))
    return _interleave(draw, out, _anthropic_event.map(lambda d: ("", d)))


anthropic_events = st.one_of(_anthropic_good(), _anthropic_junk)


# --- framing, mutation, chunking ---------------------------------------------------------------


@st.composite
def sse_body(draw: st.DrawFn, events: list[tuple[str, Any]], legal: bool = False) -> bytes:
    """The events as an SSE body, with random framing (only what the SSE spec allows when `legal`)."""
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    out: list[str] = []
    for name, data in events:
        if draw(st.integers(0, 9)) == 0:
            out.append(": comment" + newline)
        if draw(st.integers(0, 9)) == 0:  # a block with no data: not an event (the SSE spec)
            out.append(draw(st.sampled_from(["id: 3", "retry: 100", "event: ping"])) + newline + newline)
        if name and draw(st.booleans()):
            out.append(f"event: {name}{newline}")
        if draw(st.integers(0, 9)) == 0:
            extra = ["id: 7", "retry: 10", "retry: x", "unknown: 1"] + ([] if legal else ["data"])
            out.append(draw(st.sampled_from(extra)) + newline)
        payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=draw(st.booleans()))
        if "\n" in payload or "\r" in payload or draw(st.integers(0, 19)) == 0:
            lines = payload.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            out.extend(f"data: {line}{newline}" for line in lines)
        else:
            out.append(f"data: {payload}{newline}")
        if legal or draw(st.integers(0, 14)) != 0:  # sometimes the blank line is missing
            out.append(newline)
    return "".join(out).encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, body: bytes) -> bytes:
    """`body` with a few byte-level mutations (or none)."""
    data = bytearray(body)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "duplicate"]))
        at = draw(st.integers(0, len(data))) if data else 0
        if op == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "delete" and at < len(data):
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif op == "truncate":
            del data[at:]
        elif op == "duplicate" and at < len(data):
            data[at:at] = data[at : at + draw(st.integers(1, 40))]
    return bytes(data)


@st.composite
def chunked(draw: st.DrawFn, body: bytes) -> list[bytes]:
    """`body` cut at random points (one to eight pieces)."""
    cuts = sorted(set(draw(st.lists(st.integers(0, max(0, len(body))), max_size=7))))
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(body[last:cut])
        last = cut
    pieces.append(body[last:])
    return [p for p in pieces if p] or [b""]
