"""The JSON codec: exact round trips, the TypeScript camelCase keys, and clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import (
    AgentEnd,
    AgentStart,
    AgentToolResult,
    AssistantMessage,
    AssistantMessageBuilder,
    Cost,
    CustomMessage,
    ImageContent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
    dumps,
    from_json,
    loads,
    to_json,
)
from agentloop._codec import tool_result_from_json

USAGE = Usage(input=10, output=20, cache_read=3, cache_write=4, total_tokens=37, cost=Cost(0.1, 0.2, 0.03, 0.04, 0.37))
CALL = ToolCall("c1", "calc", {"n": [1, {"k": None}]}, thought_signature="ts", arguments_error="bad json")
USER = UserMessage(content=(TextContent("look", text_signature="sig"), ImageContent("aGk=", "image/png")), timestamp=1)
ASSISTANT = AssistantMessage(
    content=(ThinkingContent("hm", thinking_signature="s", redacted=True), TextContent("hi"), CALL),
    api="openai-responses",
    provider="openai",
    model="gpt",
    usage=USAGE,
    stop_reason="error",
    error_message="boom",
    response_id="r1",
    timestamp=2,
)
RESULT_MSG = ToolResultMessage(
    tool_call_id="c1", tool_name="calc", content=(TextContent("4"),), details={"v": 4}, is_error=True, timestamp=3
)
CUSTOM = CustomMessage(role="notification", data={"text": "hi", "level": [1, 2]}, timestamp=4)
PARTIAL_RESULT = AgentToolResult(content=(TextContent("50%"),), details={"p": 0.5}, is_error=False, terminate=True)
MESSAGES: list[Any] = [
    UserMessage(content="plain", timestamp=0),
    USER,
    ASSISTANT,
    AssistantMessage(timestamp=5),
    RESULT_MSG,
    ToolResultMessage(tool_call_id="c2", tool_name="t", timestamp=6),
    CUSTOM,
]


def stream_events() -> list[Any]:
    b = AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=7)
    events = [b.start(), b.thinking_start(), b.thinking_delta("hm"), b.thinking_end(signature="sig")]
    events += [b.text_start(), b.text_delta("Hel"), b.text_delta("lo"), b.text_end(signature="ts")]
    events += [b.tool_call_start("c1", "f"), b.tool_call_delta('{"a":', {"a": None}), b.tool_call_delta("1}")]
    events += [b.tool_call_end(ToolCall("c1", "f", {"a": 1}, thought_signature="g"))]
    b.usage = USAGE
    return [*events, b.done("toolUse"), b.error("aborted", "stopped")]


def agent_events() -> list[Any]:
    update = [MessageUpdate(e.partial, e) for e in stream_events()[:-2]]
    done, error = stream_events()[-2:]
    update += [MessageUpdate(done.message, done), MessageUpdate(error.error, error)]
    return [
        AgentStart(),
        AgentEnd(tuple(MESSAGES)),
        TurnStart(),
        TurnEnd(ASSISTANT, (RESULT_MSG,)),
        *(MessageStart(m) for m in MESSAGES),
        *update,
        MessageEnd(CUSTOM),
        ToolExecutionStart("c1", "calc", {"n": "5"}),
        ToolExecutionUpdate("c1", "calc", {"n": "5"}, PARTIAL_RESULT),
        ToolExecutionEnd("c1", "calc", AgentToolResult.from_text("4", details=[1]), False),
    ]


@pytest.mark.parametrize(
    "value",
    [*MESSAGES, *stream_events()[:-2], *agent_events(), CALL, ImageContent("eA==", "image/gif")],
    ids=lambda v: getattr(v, "type", None) or getattr(v, "role", type(v).__name__),
)
def test_round_trip(value: Any) -> None:
    assert from_json(to_json(value)) == value
    assert loads(dumps(value)) == value
    assert loads(dumps(value).encode()) == value
    assert to_json(loads(dumps(value))) == to_json(value)


def test_tool_result_round_trip() -> None:
    # from_json does not recognise a bare tool result (see the report); its own decoder does.
    assert tool_result_from_json(to_json(PARTIAL_RESULT)) == PARTIAL_RESULT
    assert tool_result_from_json({"content": []}) == AgentToolResult()


def test_every_event_type_is_covered() -> None:
    events = agent_events()
    inner = {e.assistant_message_event.type for e in events if e.type == "message_update"}
    assert len({e.type for e in events}) == 10 and len(inner) == 12


def test_message_keys_are_camel_case_and_none_omitted() -> None:
    assert to_json(ASSISTANT) == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "thinkingSignature": "s", "redacted": True},
            {"type": "text", "text": "hi"},
            {
                "type": "toolCall",
                "id": "c1",
                "name": "calc",
                "arguments": {"n": [1, {"k": None}]},
                "thoughtSignature": "ts",
                "argumentsError": "bad json",
            },
        ],
        "api": "openai-responses",
        "provider": "openai",
        "model": "gpt",
        "usage": {
            "input": 10,
            "output": 20,
            "cacheRead": 3,
            "cacheWrite": 4,
            "totalTokens": 37,
            "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.03, "cacheWrite": 0.04, "total": 0.37},
        },
        "stopReason": "error",
        "errorMessage": "boom",
        "responseId": "r1",
        "timestamp": 2,
    }
    assert set(to_json(AssistantMessage(timestamp=0))) == {
        "role",
        "content",
        "api",
        "provider",
        "model",
        "usage",
        "stopReason",
        "timestamp",
    }
    assert to_json(USER)["content"] == [
        {"type": "text", "text": "look", "textSignature": "sig"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    ]
    assert to_json(RESULT_MSG) == {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "calc",
        "content": [{"type": "text", "text": "4"}],
        "details": {"v": 4},
        "isError": True,
        "timestamp": 3,
    }
    assert "details" not in to_json(ToolResultMessage(tool_call_id="c", tool_name="t", timestamp=0))
    assert to_json(CUSTOM) == {"role": "notification", "text": "hi", "level": [1, 2], "timestamp": 4}
    assert to_json(ThinkingContent("x")) == {"type": "thinking", "thinking": "x"}
    assert to_json(ToolCall("i", "n")) == {"type": "toolCall", "id": "i", "name": "n", "arguments": {}}


def test_event_keys_are_camel_case() -> None:
    assert to_json(TurnEnd(ASSISTANT, (RESULT_MSG,)))["toolResults"] == [to_json(RESULT_MSG)]
    assert to_json(ToolExecutionUpdate("c1", "calc", {"n": 1}, PARTIAL_RESULT)) == {
        "type": "tool_execution_update",
        "toolCallId": "c1",
        "toolName": "calc",
        "args": {"n": 1},
        "partialResult": {
            "content": [{"type": "text", "text": "50%"}],
            "details": {"p": 0.5},
            "isError": False,
            "terminate": True,
        },
    }
    end = to_json(ToolExecutionEnd("c1", "calc", AgentToolResult.from_text("x"), True))
    assert end == {
        "type": "tool_execution_end",
        "toolCallId": "c1",
        "toolName": "calc",
        "result": {"content": [{"type": "text", "text": "x"}]},
        "isError": True,
    }
    delta = stream_events()[5]
    update = to_json(MessageUpdate(delta.partial, delta))
    assert set(update) == {"type", "message", "assistantMessageEvent"}
    assert update["assistantMessageEvent"] == {
        "type": "text_delta",
        "contentIndex": 1,
        "delta": "Hel",
        "partial": to_json(delta.partial),
    }
    assert update["message"]["content"][1] == {"type": "text", "text": "Hel"}
    assert update["message"]["stopReason"] == "pending"
    assert to_json(stream_events()[0]) == {"type": "start", "partial": to_json(stream_events()[0].partial)}
    tool_end = to_json(stream_events()[11])
    assert tool_end["contentIndex"] == 2
    assert tool_end["toolCall"] == {
        "type": "toolCall",
        "id": "c1",
        "name": "f",
        "arguments": {"a": 1},
        "thoughtSignature": "g",
    }
    # done/error only through message_update: to_json rejects them on their own (see the report).
    done, error = stream_events()[-2:]
    done_json = to_json(MessageUpdate(done.message, done))["assistantMessageEvent"]
    assert done_json == {"type": "done", "reason": "toolUse", "message": to_json(done.message)}
    err = to_json(MessageUpdate(error.error, error))["assistantMessageEvent"]
    assert set(err) == {"type", "reason", "error"}
    final = err["error"]
    assert (err["reason"], final["stopReason"], final["errorMessage"]) == ("aborted", "aborted", "stopped")


def test_dumps_is_one_compact_line_keeping_unicode() -> None:
    text = dumps(UserMessage(content="é\n☃", timestamp=1))
    assert text == '{"role":"user","content":"é\\n☃","timestamp":1}'


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([], "expects a JSON object"),
        ("text", "expects a JSON object"),
        ({"type": "bogus"}, "unknown event type 'bogus'"),
        ({"type": "text"}, "missing key 'text'"),
        ({"type": "image", "data": "x"}, "missing key 'mimeType'"),
        ({"type": "toolCall", "id": "1", "name": "n"}, "missing key 'arguments'"),
        ({"type": "text", "text": 5}, "wrong type"),
        ({}, "with a 'type'"),
        ({"role": ""}, "no valid role"),
        ({"role": "toolResult", "toolName": "x"}, "missing key 'toolCallId'"),
        ({"role": "user", "content": [5]}, "content block must be an object"),
        ({"role": "user", "content": [{"type": "video"}]}, "unknown content block type 'video'"),
        ({"type": "message_start"}, "cannot decode 'message_start': missing key 'message'"),
        ({"type": "turn_end", "message": {"role": "assistant"}}, "missing key 'toolResults'"),
        ({"type": "tool_execution_end", "toolCallId": "a", "toolName": "b"}, "missing key 'result'"),
        ({"type": "text_delta", "partial": {"role": "assistant"}}, "missing key 'contentIndex'"),
        ({"type": "text_delta", "contentIndex": 0, "partial": {"role": "assistant"}}, "missing key 'delta'"),
        ({"type": "text_start", "contentIndex": True, "partial": {"role": "assistant"}}, "wrong type"),
        ({"type": "start"}, "missing key 'partial'"),
        ({"type": "agent_end", "messages": [{"role": "user", "content": [{"type": None}]}]}, "unknown content block"),
    ],
)
def test_bad_input_raises_value_error(data: Any, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        from_json(data)


def test_to_json_rejects_other_values() -> None:
    with pytest.raises(TypeError, match="to_json expects"):
        to_json({"role": "user"})
    with pytest.raises(ValueError):
        loads("[1, 2]")


# --- property test ----------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(text, json_values, max_size=4)
opt_text = st.none() | text
stamps = st.integers(min_value=0, max_value=2**53)
counts = st.integers(min_value=0, max_value=10**9)
floats = st.floats(min_value=0, max_value=1e6, allow_nan=False)
text_blocks = st.builds(TextContent, text, text_signature=opt_text)
images = st.builds(ImageContent, text, text)
blocks = st.one_of(
    text_blocks,
    st.builds(ThinkingContent, text, thinking_signature=opt_text, redacted=st.booleans()),
    st.builds(ToolCall, text, text, json_objects, thought_signature=opt_text, arguments_error=opt_text),
)
usages = st.builds(
    Usage, counts, counts, counts, counts, counts, st.builds(Cost, floats, floats, floats, floats, floats)
)
messages = st.one_of(
    st.builds(UserMessage, content=text | st.lists(text_blocks | images, max_size=3).map(tuple), timestamp=stamps),
    st.builds(
        AssistantMessage,
        content=st.lists(blocks, max_size=4).map(tuple),
        api=text,
        provider=text,
        model=text,
        usage=usages,
        stop_reason=st.sampled_from(["stop", "length", "toolUse", "error", "aborted", "pending"]),
        error_message=opt_text,
        response_id=opt_text,
        timestamp=stamps,
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=text,
        tool_name=text,
        content=st.lists(text_blocks | images, max_size=3).map(tuple),
        details=json_values,
        is_error=st.booleans(),
        timestamp=stamps,
    ),
    st.builds(
        CustomMessage,
        role=text.filter(lambda r: r and r not in ("user", "assistant", "toolResult")),
        # "role", "timestamp" and "type" beside the message's own keys collide (see the report).
        data=st.dictionaries(text.filter(lambda k: k not in ("role", "timestamp", "type")), json_values, max_size=4),
        timestamp=stamps,
    ),
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(messages, max_size=4))
def test_random_messages_round_trip(batch: list[Any]) -> None:
    for message in batch:
        assert loads(dumps(message)) == message
    end = AgentEnd(tuple(batch))
    assert loads(dumps(end)) == end


def test_terminal_events_tool_results_and_custom_key_clashes() -> None:
    builder = AssistantMessageBuilder(api="a", provider="p", model="m")
    builder.text_start()
    builder.text_delta("hi")
    done = builder.done("stop")
    assert from_json(to_json(done)) == done
    assert to_json(done)["type"] == "done"
    aborted = AssistantMessageBuilder().error("aborted", "Request was aborted")
    assert from_json(to_json(aborted)) == aborted
    result = AgentToolResult.from_text("ok", details={"n": 1})
    assert from_json(to_json(result)) == result
    with pytest.raises(ValueError, match="cannot use the keys"):
        CustomMessage(role="note", data={"role": "user"})
    with pytest.raises(ValueError, match="cannot use the keys"):
        CustomMessage(role="note", data={"timestamp": 5})
    note = CustomMessage(role="note", data={"type": "reminder", "text": "x"})
    assert from_json(to_json(note)) == note  # a `type` key beside `role` stays a message


def test_deep_nesting_and_bad_custom_data_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="nests too deeply"):
        loads("[" * 100_000)
    with pytest.raises(TypeError, match="data must be a mapping"):
        CustomMessage(role="memo", data=5)  # type: ignore[arg-type]
