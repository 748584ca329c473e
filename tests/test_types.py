"""Immutable values, their checks and copies, and AssistantMessageBuilder snapshots."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import agentloop as al
from agentloop._types._snapshot import PartialSnapshot


@pytest.mark.parametrize(
    ("value", "attr"),
    [
        (al.TextContent("a"), "text"),
        (al.TextContent("a"), "text_signature"),
        (al.ThinkingContent("a"), "redacted"),
        (al.ImageContent("d", "image/png"), "data"),
        (al.ToolCall("i", "n"), "arguments"),
        (al.Usage(), "input"),
        (al.Cost(), "total"),
        (al.UserMessage(content="x"), "content"),
        (al.AssistantMessage(), "stop_reason"),
        (al.ToolResultMessage(tool_call_id="i", tool_name="n"), "is_error"),
        (al.CustomMessage(role="memo"), "role"),
        (al.AgentToolResult(), "details"),
    ],
)
def test_values_are_immutable(value: Any, attr: str) -> None:
    before = getattr(value, attr)
    with pytest.raises(AttributeError):
        setattr(value, attr, before)
    # A new attribute: frozen+slots dataclasses raise TypeError on CPython 3.11 (a CPython bug).
    with pytest.raises((AttributeError, TypeError)):
        value.brand_new = 1
    assert not hasattr(value, "brand_new")
    with pytest.raises(AttributeError):
        delattr(value, attr)
    assert getattr(value, attr) == before


def test_text_blocks_require_str() -> None:
    with pytest.raises(TypeError, match="TextContent text must be a str"):
        al.TextContent(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ThinkingContent text must be a str"):
        al.ThinkingContent(None)  # type: ignore[arg-type]


def test_text_equality_and_repr() -> None:
    text: object = al.TextContent("a")
    assert text != al.ThinkingContent("a")
    assert text != "a"
    assert al.ThinkingContent("a", redacted=True) != al.ThinkingContent("a")
    assert len({al.TextContent("a"), al.TextContent("a"), al.TextContent("b")}) == 2
    assert repr(al.ThinkingContent("t", thinking_signature="s", redacted=True)) == (
        "ThinkingContent(thinking='t', thinking_signature='s', redacted=True)"
    )
    assert repr(al.ThinkingContent("t")) == "ThinkingContent(thinking='t')"
    match al.TextContent("hi"):
        case al.TextContent(text):
            assert text == "hi"
    assert (
        al.TextContent.type,
        al.ThinkingContent.type,
        al.ToolCall("i", "n").type,
        al.ImageContent("d", "m").type,
    ) == (
        "text",
        "thinking",
        "toolCall",
        "image",
    )


def test_assistant_message_text_and_tool_calls() -> None:
    a, b = al.ToolCall("1", "f", {"x": 1}), al.ToolCall("2", "g")
    message = al.AssistantMessage(content=(al.ThinkingContent("no"), al.TextContent("Hel"), a, al.TextContent("lo"), b))
    assert message.text == "Hello"
    assert message.tool_calls == (a, b)
    assert al.AssistantMessage().text == "" and al.AssistantMessage().tool_calls == ()
    assert (message.role, message.stop_reason, message.usage) == ("assistant", "stop", al.Usage())


def test_user_and_tool_result_messages_read_their_text_blocks_and_leave_images_out() -> None:
    image = al.ImageContent("d", "image/png")
    blocks = (al.TextContent("Hel"), image, al.TextContent("lo"))
    result = al.ToolResultMessage(tool_call_id="i", tool_name="n", content=blocks, timestamp=7)
    assert result.text == "Hello"
    assert al.ToolResultMessage(tool_call_id="i", tool_name="n", content=(image,)).text == ""
    assert al.ToolResultMessage(tool_call_id="i", tool_name="n").text == ""
    assert al.UserMessage(content=blocks).text == "Hello"
    assert al.UserMessage(content="as typed").text == "as typed"
    assert al.UserMessage(content=(image,)).text == "" and al.UserMessage(content="").text == ""


def test_the_text_of_a_message_is_not_one_of_its_fields() -> None:
    from agentloop.wire import to_json

    result = al.ToolResultMessage(tool_call_id="i", tool_name="n", content=(al.TextContent("r"),), timestamp=7)
    user = al.UserMessage(content="x", timestamp=7)
    for message in (result, user):
        assert "text" not in {f.name for f in dataclasses.fields(message)} and "text" not in to_json(message)
    assert result == dataclasses.replace(result) and hash(result) == hash(dataclasses.replace(result))


def test_lists_become_tuples() -> None:
    blocks: list[al.TextContent | al.ImageContent] = [al.TextContent("a"), al.ImageContent("d", "image/png")]
    user = al.UserMessage(content=blocks)  # type: ignore[arg-type]
    result = al.ToolResultMessage(tool_call_id="i", tool_name="n", content=[al.TextContent("r")])  # type: ignore[arg-type]
    tool_result = al.AgentToolResult(content=[al.TextContent("r")])  # type: ignore[arg-type]
    assert user.content == tuple(blocks) and isinstance(user.content, tuple)
    assert isinstance(result.content, tuple) and isinstance(tool_result.content, tuple)
    blocks.append(al.TextContent("later"))
    assert len(user.content) == 2
    assert al.UserMessage(content="text").content == "text"
    with pytest.raises(TypeError, match="UserMessage content"):
        al.UserMessage(content=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AgentToolResult content"):
        al.AgentToolResult(content="text")  # type: ignore[arg-type]


FROM_TEXT = r"\(for plain text use AgentToolResult.from_text\(text\)\)"


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (
            lambda: al.UserMessage(content=[5]),  # type: ignore[arg-type]
            r"UserMessage content\[0\] must be a TextContent or ImageContent, got int",
        ),
        (lambda: al.UserMessage(content=[al.TextContent("a"), "b"]), r"UserMessage content\[1\] must be a TextContent"),  # type: ignore[arg-type]
        (lambda: al.UserMessage(content=[al.ThinkingContent("a")]), r"content\[0\] .* got ThinkingContent"),  # type: ignore[arg-type]
        (lambda: al.UserMessage(content={"a": 1}), "UserMessage content must be a str or a sequence"),  # type: ignore[arg-type]
        (lambda: al.UserMessage(content="x", timestamp="now"), "UserMessage timestamp must be an int .* got str"),  # type: ignore[arg-type]
        (lambda: al.UserMessage(content="x", timestamp=1.5), "UserMessage timestamp must be an int"),  # type: ignore[arg-type]
        (lambda: al.UserMessage(content="x", timestamp=True), "UserMessage timestamp must be an int"),
        (lambda: al.AgentToolResult(content=["plain text"]), r"AgentToolResult content\[0\] .* got str " + FROM_TEXT),  # type: ignore[arg-type]
        (
            lambda: al.AgentToolResult(content="plain text"),  # type: ignore[arg-type]
            "AgentToolResult content must be a list or tuple .*" + FROM_TEXT,
        ),
        (lambda: al.AgentToolResult(is_error="no"), "AgentToolResult is_error must be a bool or None, got str"),  # type: ignore[arg-type]
        (lambda: al.AgentToolResult(terminate=1), "AgentToolResult terminate must be a bool or None, got int"),  # type: ignore[arg-type]
        (
            lambda: al.ToolResultMessage(tool_call_id="i", tool_name="n", content=[None]),  # type: ignore[arg-type]
            r"ToolResultMessage content\[0\]",
        ),
        (lambda: al.ToolResultMessage(tool_call_id="i", tool_name="n", is_error=None), "is_error must be a bool"),  # type: ignore[arg-type]
        (lambda: al.ToolResultMessage(tool_call_id="i", tool_name="n", timestamp="x"), "ToolResultMessage timestamp"),  # type: ignore[arg-type]
        (lambda: al.CustomMessage(role="memo", timestamp=None), "CustomMessage timestamp must be an int"),  # type: ignore[arg-type]
        (lambda: al.CustomMessage(role="memo", data=5), "CustomMessage data must be a mapping, got int"),  # type: ignore[arg-type]
    ],
)
def test_bad_fields_are_named_at_construction(make: Any, pattern: str) -> None:
    with pytest.raises(TypeError, match=pattern):
        make()


def test_subclassed_blocks_and_int_subclass_timestamps_are_accepted() -> None:
    class Note(al.TextContent):
        __slots__ = ()

    class Stamp(int):
        pass

    message = al.UserMessage(content=[Note("a")], timestamp=Stamp(5))  # type: ignore[arg-type]  # a list is accepted at run time
    assert type(message.content[0]) is Note and message.timestamp == 5


@pytest.mark.parametrize("role", ["user", "assistant", "toolResult", "", None])
def test_custom_message_rejects_standard_and_empty_roles(role: Any) -> None:
    with pytest.raises(ValueError, match="CustomMessage role"):
        al.CustomMessage(role=role)


def test_custom_message_and_timestamps() -> None:
    memo = al.CustomMessage(role="memo", data={"text": "hi"}, timestamp=9)
    assert (memo.role, dict(memo.data), memo.timestamp) == ("memo", {"text": "hi"}, 9)
    assert isinstance(al.UserMessage(content="x").timestamp, int) and al.UserMessage(content="x").timestamp > 10**12


def test_agent_tool_result_text_helper() -> None:
    result = al.AgentToolResult.from_text("done", details={"n": 1})
    assert result == al.AgentToolResult(content=(al.TextContent("done"),), details={"n": 1})
    assert (result.is_error, result.terminate) == (None, None)
    assert al.AgentToolResult.from_text("x").details is None


# --- AssistantMessageBuilder ------------------------------------------------------------------


def test_builder_snapshots_are_stable() -> None:
    b = al.AssistantMessageBuilder(api="api", provider="prov", model="m", timestamp=42)
    start = b.start()
    b.thinking_start()
    think = b.thinking_delta("hmm")
    think_end = b.thinking_end(signature="sig", redacted=True)
    b.text_start()
    d1 = b.text_delta("Hel")
    d2 = b.text_delta("lo")
    end = b.text_end(signature="ts")
    b.tool_call_start("c1", "f")
    call_delta = b.tool_call_delta('{"a": ', {"a": None})
    b.tool_call_delta("1}")
    assert b.tool_call_text() == '{"a": 1}'
    final_call = al.ToolCall("c1", "f", {"a": 1})
    call_end = b.tool_call_end(final_call)
    b.usage = al.Usage(input=1, output=2, total_tokens=3)
    b.response_id = "resp"
    done = b.done("toolUse")

    assert start.partial == al.AssistantMessage(
        api="api", provider="prov", model="m", stop_reason="pending", timestamp=42
    )
    assert think.partial.content == (al.ThinkingContent("hmm"),)
    assert think_end.partial.content == (al.ThinkingContent("hmm", thinking_signature="sig", redacted=True),)
    assert (d1.content_index, d1.delta, d1.partial.text) == (1, "Hel", "Hel")
    assert d2.partial.text == "Hello" and d1.partial.text == "Hel"
    assert (end.content, end.partial.content[1]) == ("Hello", al.TextContent("Hello", text_signature="ts"))
    assert call_delta.partial.content[2] == al.ToolCall("c1", "f", {"a": None})
    assert (call_end.content_index, call_end.tool_call) == (2, final_call)
    assert done.reason == "toolUse"
    assert done.message == al.AssistantMessage(
        content=(think_end.partial.content[0], al.TextContent("Hello", text_signature="ts"), final_call),
        api="api",
        provider="prov",
        model="m",
        usage=al.Usage(input=1, output=2, total_tokens=3),
        stop_reason="toolUse",
        response_id="resp",
        timestamp=42,
    )
    assert start.partial.content == () and start.partial.usage == al.Usage() and start.partial.response_id is None
    assert b.content == done.message.content


def test_builder_error_keeps_partial_content() -> None:
    b = al.AssistantMessageBuilder(timestamp=1)
    b.text_start()
    b.text_delta("part")
    early = b.snapshot()
    b.text_delta("ial")
    error = b.error("aborted", "Request was aborted")
    assert error.reason == "aborted"
    final = error.error
    assert (final.stop_reason, final.error_message, final.text) == ("aborted", "Request was aborted", "partial")
    assert early.text == "part"


def test_builder_explicit_indexes_and_errors() -> None:
    b = al.AssistantMessageBuilder()
    with pytest.raises(IndexError, match="no content block -1"):
        b.text_delta("x")
    b.text_start()
    b.thinking_start()
    b.text_delta("to text", index=0)
    b.thinking_delta("to thinking")
    assert b.snapshot().content == (al.TextContent("to text"), al.ThinkingContent("to thinking"))
    for bad in (-1, 2, 99):
        with pytest.raises(IndexError):
            b.text_delta("x", index=bad)
    with pytest.raises(IndexError):
        b.tool_call_text(5)
    assert dataclasses.replace(b.snapshot(), stop_reason="stop").stop_reason == "stop"


def test_builder_tool_calls_by_position() -> None:
    b = al.AssistantMessageBuilder()
    with pytest.raises(IndexError, match="no content block -1"):
        b.tool_call_delta("{")
    first = b.tool_call_start("c1", "one")
    second = b.tool_call_start("c2", "two")
    b.tool_call_delta('{"a"', index=0)  # an earlier call, by index
    b.tool_call_delta(": 1}", {"a": 1}, index=0)
    b.tool_call_delta("{}", {})  # the last block by default
    assert (b.tool_call_text(0), b.tool_call_text()) == ('{"a": 1}', "{}")
    b.tool_call_end(al.ToolCall("c1", "one", {"a": 1}), index=0)
    b.text_start()
    b.text_delta("so far")
    earlier = b.tool_call_delta("", {"b": 1}, index=1)  # a text block is open after it
    assert earlier.partial.content[1:] == (al.ToolCall("c2", "two", {"b": 1}), al.TextContent("so far"))
    with pytest.raises(ValueError, match="content block 2 is a TextContent, not a ToolCall"):
        b.tool_call_delta("{}")
    with pytest.raises(ValueError, match="not a ToolCall"):
        b.tool_call_end(al.ToolCall("c2", "two", {}))
    b.tool_call_end(al.ToolCall("c2", "two", {"b": 2}), index=1)
    content = b.snapshot().content
    assert content[:2] == (al.ToolCall("c1", "one", {"a": 1}), al.ToolCall("c2", "two", {"b": 2}))
    assert content[2] == al.TextContent("so far")
    # Every event kept the message as it was, whatever changed after it (earlier blocks included).
    assert first.partial.content == (al.ToolCall("c1", "one", {}),)
    assert second.partial.content == (al.ToolCall("c1", "one", {}), al.ToolCall("c2", "two", {}))
    assert earlier.partial.content[0] == al.ToolCall("c1", "one", {"a": 1})


def test_builder_partial_arguments_of_the_last_tool_call() -> None:
    # The last call's partial arguments go into its ToolCall only when needed: every event, the
    # snapshot and the block after it still see the arguments of their moment.
    b = al.AssistantMessageBuilder(timestamp=1)
    b.tool_call_start("c1", "f")
    one = b.tool_call_delta('{"a": 1', {"a": 1})
    two = b.tool_call_delta(', "b": 2', {"a": 1, "b": 2})
    raw = b.tool_call_delta("}")  # a fragment without parsed arguments keeps the last ones
    assert b.snapshot().content == (al.ToolCall("c1", "f", {"a": 1, "b": 2}),)
    opened = b.text_start()  # the next block closes the call with its arguments so far
    done = b.done("toolUse")
    assert [e.partial.content[0].arguments for e in (one, two, raw)] == [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2}]  # type: ignore[union-attr]
    assert opened.partial.content == (al.ToolCall("c1", "f", {"a": 1, "b": 2}), al.TextContent(""))
    assert done.message.content[0] == al.ToolCall("c1", "f", {"a": 1, "b": 2})

    b = al.AssistantMessageBuilder(timestamp=1)
    b.tool_call_start("c1", "f")
    pending = b.tool_call_delta('{"a": 1}', {"a": 1})
    b.tool_call_end(al.ToolCall("c1", "f", {"a": 9}))  # the final block replaces the partial arguments
    assert b.done("toolUse").message.content == (al.ToolCall("c1", "f", {"a": 9}),)
    assert pending.partial.content == (al.ToolCall("c1", "f", {"a": 1}),)

    b = al.AssistantMessageBuilder(timestamp=1)
    b.tool_call_start("c1", "f")
    b.tool_call_delta('{"a": 1', {"a": 1})
    assert b.done("toolUse").message.content == (al.ToolCall("c1", "f", {"a": 1}),)  # never ended
    b = al.AssistantMessageBuilder(timestamp=1)
    b.tool_call_start("c1", "f")
    b.tool_call_delta('{"a": 1', {"a": 1})
    assert b.error("aborted", "stopped").error.content == (al.ToolCall("c1", "f", {"a": 1}),)
    with pytest.raises(ValueError, match="content block 0 is a ToolCall, not a TextContent"):
        b.text_delta("x")


def _every_value() -> list[Any]:
    import agentloop as al

    builder = al.AssistantMessageBuilder(api="a", provider="p", model="m", timestamp=1)
    stream: list[al.AssistantMessageEvent] = [
        builder.start(),
        builder.thinking_start(),
        builder.thinking_delta("hm"),
        builder.thinking_end(),
    ]
    stream += [builder.text_start(), builder.text_delta("Hel"), builder.text_delta("lo"), builder.text_end()]
    stream += [builder.tool_call_start("c1", "t"), builder.tool_call_delta("{}", {})]
    stream.append(builder.tool_call_end(al.ToolCall("c1", "t", {})))
    done = builder.done("toolUse")
    stream.append(done)
    message = done.message
    result = al.ToolResultMessage(tool_call_id="c1", tool_name="t", content=(al.TextContent("r"),), timestamp=1)
    tool_result = al.AgentToolResult.from_text("r", details={"k": [1]})
    return [
        *stream,
        builder.error("aborted", "stopped"),
        al.TextContent("x", text_signature="s"),
        al.ThinkingContent("t", thinking_signature="sig", redacted=True),
        al.ImageContent("aGk=", "image/png"),
        al.UserMessage(content="u", timestamp=1),
        message,
        result,
        al.CustomMessage(role="memo", data={"a": 1}, timestamp=1),
        tool_result,
        al.AgentStart(),
        al.TurnStart(),
        al.MessageStart(message),
        al.MessageUpdate(None, stream[6]),
        al.MessageEnd(result),
        al.ToolExecutionStart("c1", "t", {"a": 1}),
        al.ToolExecutionUpdate("c1", "t", {"a": 1}, tool_result),
        al.ToolExecutionEnd("c1", "t", tool_result, False),
        al.TurnEnd(message, [result]),
        al.AgentEnd([message, result]),
    ]


@pytest.mark.parametrize("value", _every_value(), ids=lambda v: type(v).__name__)
def test_every_value_survives_copy_deepcopy_and_pickle(value: Any) -> None:
    import copy
    import pickle

    for again in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert type(again) is type(value)
        assert again == value
        assert repr(again) == repr(value)


def test_records_are_plain_dataclasses_that_fill_defaults_and_replace() -> None:
    call = al.ToolCall("i", "n")
    assert call.arguments == {} and call.arguments is not al.ToolCall("i", "n").arguments  # a fresh dict each
    assert call.type == "toolCall" and dataclasses.replace(call, name="m") == al.ToolCall("i", "m")
    message = al.AssistantMessage(model="m")
    assert message.role == "assistant" and message.timestamp > 10**12
    assert dataclasses.replace(message, stop_reason="length").stop_reason == "length"
    result = al.ToolResultMessage(tool_call_id="i", tool_name="n", timestamp=7)
    assert (result.role, result.timestamp, result.is_error) == ("toolResult", 7, False)
    with pytest.raises(TypeError):
        al.AssistantMessage(())  # type: ignore[call-arg]  # keyword-only
    with pytest.raises(TypeError):
        al.ToolCall("i")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="UserMessage content"):
        dataclasses.replace(al.UserMessage(content="x"), content=5)  # type: ignore[arg-type]  # replace checks as the constructor does
    assert dataclasses.asdict(al.ToolCall("i", "n", {"a": 1})) == {
        "id": "i",
        "name": "n",
        "arguments": {"a": 1},
        "thought_signature": None,
        "arguments_error": None,
        "type": "toolCall",
        "extra": None,
    }


# --- extra: the JSON keys agentloop does not model ----------------------------------------------


def _with_extra(value: Any) -> Any:
    from agentloop.wire import from_json, to_json

    return from_json({**to_json(value), "x-app": {"k": [1]}})


@pytest.mark.parametrize(
    "value", [v for v in _every_value() if not isinstance(v, al.CustomMessage)], ids=lambda v: type(v).__name__
)
def test_extra_is_none_by_default_compared_kept_by_copies_and_left_out_of_hash_and_repr(value: Any) -> None:
    import copy
    import pickle

    assert value.extra is None
    carrying = _with_extra(value)
    assert carrying.extra == {"x-app": {"k": [1]}}
    assert carrying != value and value != carrying
    assert repr(carrying) == repr(value)
    try:
        expected = hash(value)
    except TypeError:  # not hashable: a streaming event, or a field holds a dict (arguments, details)
        pass
    else:
        assert hash(carrying) == expected
    for again in (copy.copy(carrying), copy.deepcopy(carrying), pickle.loads(pickle.dumps(carrying))):
        assert again == carrying
        assert again.extra == {"x-app": {"k": [1]}}


def test_extra_is_a_keyword_of_the_records_and_kept_by_replace() -> None:
    extra = {"durationMs": 3}
    values: list[Any] = [
        al.TextContent("a", extra=extra),
        al.ThinkingContent("t", extra=extra),
        al.ImageContent("aGk=", "image/png", extra=extra),
        al.ToolCall("c", "f", extra=extra),
        al.Cost(extra=extra),
        al.Usage(extra=extra),
        al.UserMessage(content="u", extra=extra),
        al.AssistantMessage(extra=extra),
        al.ToolResultMessage(tool_call_id="c", tool_name="f", extra=extra),
        al.AgentToolResult(extra=extra),
    ]
    for value in values:
        assert value.extra == extra, type(value).__name__
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            assert dataclasses.replace(value).extra == extra  # type: ignore[attr-defined]
    assert al.AssistantMessage(timestamp=1, extra={}) == al.AssistantMessage(timestamp=1)  # empty is None
    assert al.Usage(extra={}).extra is None and al.TextContent("a", extra={}).extra is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: al.TextContent("a", extra=[("k", 1)]),  # type: ignore[arg-type]
        lambda: al.ImageContent("a", "b", extra="k"),  # type: ignore[arg-type]
        lambda: al.Usage(extra=1),  # type: ignore[arg-type]
        lambda: al.AssistantMessage(extra=[1]),  # type: ignore[arg-type]
        lambda: al.AgentToolResult(extra="x"),  # type: ignore[arg-type]
    ],
)
def test_extra_that_is_not_a_mapping_is_a_clear_error(make: Any) -> None:
    with pytest.raises(TypeError, match=r"extra must be a mapping of JSON keys to values \(or None\), got"):
        make()


def test_other_missing_attributes_still_raise() -> None:
    with pytest.raises(AttributeError, match="'AssistantMessage' object has no attribute 'nope'"):
        al.AssistantMessage().nope  # type: ignore[attr-defined]  # noqa: B018


# --- the records of a streaming response -------------------------------------------------------


def test_deltas_of_one_block_share_one_snapshot_and_keep_their_own_text() -> None:
    from agentloop._types._events import appends_only, captured

    b = al.AssistantMessageBuilder(timestamp=1)
    b.text_start()
    one, two = b.text_delta("a"), b.text_delta("b")
    b.usage = al.Usage(output=1)  # a change: the next delta has a snapshot of its own
    three = b.text_delta("c")
    (first, first_chunks), (second, second_chunks) = captured(one), captured(two)  # type: ignore[misc]
    assert isinstance(first, PartialSnapshot) and first is second and (first_chunks, second_chunks) == (1, 2)
    assert captured(three)[0] is not second  # type: ignore[index]
    assert appends_only(two, captured(one))
    assert not appends_only(three, captured(two)) and not appends_only(one, captured(one))
    assert not appends_only(two, None) and not appends_only(b.text_end(), captured(three))
    assert [e.partial.text for e in (one, two, three)] == ["a", "ab", "abc"]
    assert (two.partial.usage, three.partial.usage) == (al.Usage(), al.Usage(output=1))
    assert captured(one) is one.partial  # built once, then kept


def test_stream_events_are_dataclasses_shown_and_compared_by_their_partial() -> None:
    import agentloop as al

    b = al.AssistantMessageBuilder(timestamp=1)
    b.text_start()
    delta = b.text_delta("Hi")
    built = al.AssistantMessage(content=(al.TextContent("Hi"),), stop_reason="pending", timestamp=1)
    assert delta == al.TextDeltaEvent(1 - 1, "Hi", built) and delta != al.TextDeltaEvent(0, "Hi", al.AssistantMessage())
    assert repr(delta) == f"TextDeltaEvent(content_index=0, delta='Hi', partial={built!r})"
    match delta:
        case al.TextDeltaEvent(index, text, partial):
            assert (index, text, partial) == (0, "Hi", built)
    again = dataclasses.replace(delta, delta="Ho", extra={"k": 1})
    assert (again.delta, again.partial, again.extra) == ("Ho", built, {"k": 1})
    assert [f.name for f in dataclasses.fields(al.TextDeltaEvent)] == ["content_index", "delta", "_partial", "extra"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.delta = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="unhashable"):
        hash(delta)
    update = al.MessageUpdate(None, delta)
    assert update.message is delta.partial and update == al.MessageUpdate(built, delta)
    assert repr(update) == f"MessageUpdate(message={built!r}, assistant_message_event={delta!r})"
    match update:
        case al.MessageUpdate(message, event):
            assert (message, event) == (built, delta)
    assert dataclasses.replace(al.ToolExecutionEnd("c", "t", al.AgentToolResult(), False, extra={"d": 1})).extra == {
        "d": 1
    }  # `extra` is a field: replace keeps it


def test_a_message_update_of_a_terminal_event_shows_its_final_message() -> None:
    import agentloop as al

    b = al.AssistantMessageBuilder(timestamp=1)
    done, error = b.done("stop"), al.AssistantMessageBuilder(timestamp=1).error("aborted", "stopped")
    assert al.MessageUpdate(None, done).message is done.message
    assert al.MessageUpdate(None, error).message is error.error
