"""The compact wire form: linear bytes, and partials rebuilt exactly (in Python and in the
JavaScript of the SSE example page)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop import (
    AgentEvent,
    AssistantMessageBuilder,
    Cost,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolCall,
    Usage,
)
from agentloop._types._events import captured
from agentloop._wire._json_text import encode_json
from agentloop.wire import CompactDecoder, CompactEncoder, dumps, to_json

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "examples" / "sse_chat.html"

texts = st.text(min_size=0, max_size=6)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.lists(texts, max_size=5), st.one_of(st.none(), st.text(max_size=3))),
        st.tuples(st.just("thinking"), st.lists(texts, max_size=5), st.booleans()),
        st.tuples(st.just("tool"), st.lists(st.sampled_from(['{"a"', ": 1", ', "b": [', "2]", "}"]), max_size=5)),
        st.tuples(st.just("usage"), st.integers(0, 50)),
        st.tuples(st.just("response_id"), st.one_of(st.none(), st.text(min_size=1, max_size=4))),
    ),
    max_size=6,
)


def stream(steps: list[Any], end: str) -> list[AgentEvent]:
    """The agent events of one streamed answer made by a builder, as the loop makes them."""
    b = AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=7)
    start = b.start()
    events: list[AgentEvent] = [MessageStart(start.partial)]
    calls = 0
    updates: list[Any]
    for step in steps:
        kind = step[0]
        if kind == "text":
            updates = [b.text_start(), *(b.text_delta(d) for d in step[1]), b.text_end(signature=step[2])]
        elif kind == "thinking":
            updates = [b.thinking_start(), *(b.thinking_delta(d) for d in step[1]), b.thinking_end(redacted=step[2])]
        elif kind == "tool":
            calls += 1
            updates = [b.tool_call_start(f"c{calls}", "f")]
            text = ""
            for chunk in step[1]:
                text += chunk
                updates.append(b.tool_call_delta(chunk, {"so_far": text}))
            updates.append(b.tool_call_end(ToolCall(f"c{calls}", "f", {"done": text})))
        elif kind == "usage":
            b.usage = Usage(input=step[1], output=1, total_tokens=step[1] + 1, cost=Cost(total=step[1] / 10))
            updates = [b.text_start()] if step[1] % 2 else []
        else:
            b.response_id = step[1]
            updates = []
        events.extend(MessageUpdate(None, update) for update in updates)
    final = b.done() if end == "done" else b.error("error", "boom")
    events.append(MessageEnd(final.message if end == "done" else final.error))  # type: ignore[union-attr]
    return events


def built(event: AgentEvent) -> AgentEvent:
    """The same event with its partial already built (the encoder's general path)."""
    if isinstance(event, MessageUpdate):
        inner: Any = event.assistant_message_event
        _ = inner.partial
    return event


def plain(event: AgentEvent) -> AgentEvent:
    """The same event with a plain message as partial (a stream function without a builder)."""
    if isinstance(event, MessageUpdate):
        inner: Any = event.assistant_message_event
        return MessageUpdate(None, replace(inner, _partial=inner.partial))
    return event


def over_the_wire(events: list[AgentEvent]) -> list[Any]:
    encoder = CompactEncoder()
    return [json.loads(encode_json(encoder.to_json(event))) for event in events]


@settings(max_examples=150, deadline=None)
@given(ops, st.sampled_from(["done", "error"]), st.sampled_from(["lazy", "built", "plain"]))
def test_rebuilt_events_equal_the_in_process_ones_field_for_field(steps: list[Any], end: str, how: str) -> None:
    events = stream(steps, end)
    if how != "lazy":
        events = [(built if how == "built" else plain)(e) for e in events]
    expanding, decoding = CompactDecoder(), CompactDecoder()
    for event, data in zip(events, over_the_wire(events), strict=True):
        assert expanding.expand(data) == json.loads(encode_json(to_json(event)))
        assert decoding.from_json(data) == event


def test_text_deltas_cost_their_own_bytes_only() -> None:
    events = stream([("text", ["abc "] * 500, None)], "done")
    wire = over_the_wire(events)
    updates = [d for d in wire if d["type"] == "message_update"]
    assert updates[1] == {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "abc "},
    }
    compact = sum(len(encode_json(d)) for d in wire)
    full = sum(len(dumps(e)) for e in events)
    assert compact < 500 * 120 and full > 1_000_000  # linear against quadratic


def test_usage_and_blocks_changed_outside_a_delta_travel_with_the_update() -> None:
    b = AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=1)
    start, opened = b.start(), b.text_start()
    b.usage = Usage(input=3)
    b.response_id = "r1"
    delta = b.text_delta("x")
    wire = over_the_wire([MessageStart(start.partial), MessageUpdate(None, opened), MessageUpdate(None, delta)])
    assert wire[1]["blocks"] == {"0": {"type": "text", "text": ""}}
    assert wire[2]["fields"]["usage"]["input"] == 3 and wire[2]["fields"]["responseId"] == "r1"
    assert "blocks" not in wire[2]  # the delta itself says what changed in the block


def test_the_full_form_is_unchanged() -> None:
    events = stream([("text", ["Hel", "lo"], None)], "done")
    data = to_json(events[2])
    assert set(data) == {"type", "message", "assistantMessageEvent"}
    assert data["assistantMessageEvent"]["partial"]["content"] == [{"type": "text", "text": "Hel"}]
    assert json.loads(dumps(events[2])) == data


def test_an_update_the_encoder_cannot_shorten_is_sent_whole() -> None:
    b = AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=1)
    b.start()
    update = MessageUpdate(None, b.text_start())  # no message_start before it
    wire = CompactEncoder().to_json(update)
    assert wire == to_json(update)
    assert CompactDecoder().from_json(wire) == update


def test_the_decoder_says_what_is_wrong() -> None:
    decoder = CompactDecoder()
    compact = {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"},
    }
    with pytest.raises(ValueError, match="needs the message_start of its message first"):
        decoder.expand(compact)
    with pytest.raises(ValueError, match="an event must be a JSON object, got list"):
        decoder.expand([])
    events = stream([], "done")
    decoder.expand(to_json(events[0]))
    with pytest.raises(ValueError, match="for content block 0, which has no text"):
        decoder.expand(compact)
    with pytest.raises(ValueError, match="bad block index '9'"):
        decoder.expand({**compact, "blocks": {"9": {"type": "text", "text": ""}}})
    with pytest.raises(ValueError, match="needs an 'assistantMessageEvent' object"):
        decoder.expand({"type": "message_update"})


# --- the JavaScript of the example page --------------------------------------------------------


def page_expander() -> str:
    match = re.search(r"// compact-wire:begin\n(.*?)// compact-wire:end", PAGE.read_text(), re.S)
    assert match, "examples/sse_chat.html lost its compact-wire block"
    return match.group(1)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_example_pages_javascript_rebuilds_the_same_partials() -> None:
    cases = [
        stream([("text", ["Hel", "lo", " wörld 😀"], "sig")], "done"),
        stream([("thinking", ["a", "b"], True), ("tool", ['{"a"', ": 1}"]), ("usage", 3)], "error"),
        [plain(e) for e in stream([("response_id", "r"), ("text", ["x", "y"], None), ("usage", 4)], "done")],
    ]
    script = page_expander() + (
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        "console.log(JSON.stringify(cases.map(c => { const expand = compactExpander();"
        " return c.map(e => expand(e)); })));\n"
    )
    wire = [over_the_wire(events) for events in cases]
    result = subprocess.run(["node", "-e", script], input=json.dumps(wire), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    expected = [[json.loads(encode_json(to_json(e))) for e in events] for events in cases]
    assert json.loads(result.stdout) == expected


def test_replace_keeps_messages_comparable() -> None:
    """(The encoder compares messages with their content dropped; that must not lose fields.)"""
    b = AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=1)
    b.start()
    message = b.snapshot()
    assert replace(message, content=()).response_id == message.response_id


def test_an_update_whose_message_is_not_its_partial_is_sent_whole() -> None:
    b = AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=1)
    start, opened = b.start(), b.text_start()
    odd = MessageUpdate(replace(opened.partial, response_id="elsewhere"), opened)
    same = MessageUpdate(replace(opened.partial), opened)  # equal, not identical: still compact
    wire = over_the_wire([MessageStart(start.partial), odd])
    assert wire[1] == json.loads(dumps(odd))
    assert "message" not in over_the_wire([MessageStart(start.partial), same])[1]
    decoder = CompactDecoder()
    assert [decoder.from_json(data) for data in wire] == [MessageStart(start.partial), odd]


def test_a_run_of_deltas_is_written_without_building_their_partials() -> None:
    """A delta that only appends to the open block is written from what it and the event before
    it captured, without building either partial. Built: each block's first delta (the first
    snapshot the block's deltas share: written by comparing built partials) and its last (compared
    with the block's end)."""
    events = stream([("text", ["abc "] * 50, None), ("thinking", ["x"] * 20, False)], "done")
    wire = over_the_wire(events)
    deltas: list[Any] = [
        e.assistant_message_event
        for e in events
        if isinstance(e, MessageUpdate) and e.assistant_message_event.type.endswith("_delta")
    ]
    assert len(deltas) == 70
    built = [i for i, delta in enumerate(deltas) if isinstance(captured(delta), al.AssistantMessage)]
    assert built == [0, 49, 50, 69]
    decoder = CompactDecoder()
    assert [decoder.from_json(data) for data in wire] == events


def test_the_decoder_refuses_json_that_is_not_an_agent_event() -> None:
    decoder = CompactDecoder()
    for value in (al.TextContent("x"), al.UserMessage(content="u", timestamp=1)):
        with pytest.raises(ValueError, match="not an agent event"):
            decoder.from_json(to_json(value))


def _started_decoder() -> CompactDecoder:
    decoder = CompactDecoder()
    decoder.expand(to_json(stream([("text", ["a"], None)], "done")[1]))  # the text block's update
    return decoder


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        (
            lambda d: d.expand({"type": "message_start", "message": {"role": "assistant", "content": 2}}),
            "'content' of an assistant message must be an array of objects",
        ),
        (
            lambda d: d.expand({"type": "message_start", "message": {"role": "assistant", "content": [2]}}),
            "'content' of an assistant message must be an array of objects",
        ),
        (
            lambda d: _started_decoder().expand(
                {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0}}
            ),
            "a compact text_delta needs a string 'delta', got NoneType",
        ),
        (
            lambda d: _started_decoder().expand(
                {
                    "type": "message_update",
                    "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": ["x"]},
                }
            ),
            "a compact text_delta needs a string 'delta', got list",
        ),
        (
            lambda d: _started_decoder().expand(
                {
                    "type": "message_update",
                    "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"},
                    "fields": {"content": 2},
                }
            ),
            "cannot set 'content'",
        ),
    ],
)
def test_malformed_compact_events_are_a_clear_value_error(feed: Any, message: str) -> None:
    """(issue 30: these let a TypeError or KeyError out of the decoder.)"""
    with pytest.raises(ValueError, match=re.escape(message)):
        feed(CompactDecoder())
