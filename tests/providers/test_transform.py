"""Cross-provider handoff (pi-ai's transformMessages) and the per-API tool-call id rules."""

from __future__ import annotations

from agentloop import (
    AssistantMessage,
    Message,
    Model,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentloop.providers import transform_messages
from agentloop.providers._transform import (
    NO_RESULT_TEXT,
    mistral_id,
    normalize_anthropic_id,
    normalize_completions_id,
    normalize_responses_id,
    short_hash,
)

TARGET = Model(id="claude-sonnet-4-5", api="anthropic-messages", provider="anthropic")
RESPONSES_ID = "call_abc|fc_" + "x" * 80


def _assistant(
    *content: TextContent | ThinkingContent | ToolCall,
    model: str = "gpt-5",
    api: str = "openai-responses",
    provider: str = "openai",
    stop: StopReason = "toolUse",
) -> AssistantMessage:
    return AssistantMessage(content=tuple(content), api=api, provider=provider, model=model, stop_reason=stop)


def test_same_model_messages_pass_through_unchanged() -> None:
    message = _assistant(
        ThinkingContent("hmm", thinking_signature="sig"),
        TextContent("hi", text_signature="s"),
        model="claude-sonnet-4-5",
        api="anthropic-messages",
        provider="anthropic",
        stop="stop",
    )
    user = UserMessage(content="q")
    result = transform_messages([user, message], TARGET, normalize_anthropic_id)
    assert result[0] is user and result[1] is message


def test_empty_unsigned_thinking_of_the_same_model_is_dropped_and_signed_thinking_kept() -> None:
    message = _assistant(
        ThinkingContent(" "),
        ThinkingContent("", thinking_signature="encrypted"),
        ThinkingContent("", redacted=True),
        TextContent("hi"),
        stop="stop",
    )
    result = transform_messages([message], Model(id="gpt-5", api="openai-responses", provider="openai"))
    converted = result[0]
    assert isinstance(converted, AssistantMessage)
    assert converted.content == message.content[1:]


def test_thinking_of_another_model_is_dropped_and_signatures_are_dropped() -> None:
    message = _assistant(
        ThinkingContent("step by step", thinking_signature='{"type":"reasoning"}'),
        ThinkingContent("  "),
        ThinkingContent("[Reasoning redacted]", thinking_signature="opaque", redacted=True),
        TextContent("answer", text_signature='{"v":1,"id":"msg_1"}'),
        ToolCall(RESPONSES_ID, "get_weather", {"city": "Paris"}, thought_signature="sig"),
    )
    result = transform_messages(
        [
            message,
            ToolResultMessage(tool_call_id=RESPONSES_ID, tool_name="get_weather", content=(TextContent("sunny"),)),
        ],
        TARGET,
        normalize_anthropic_id,
    )
    converted = result[0]
    assert isinstance(converted, AssistantMessage)
    assert converted.content[0] == TextContent("answer")  # pi-ai 1.6.1: no thinking crosses models
    call = converted.content[1]
    assert isinstance(call, ToolCall)
    assert call.thought_signature is None
    assert call.id == normalize_anthropic_id(RESPONSES_ID)
    assert len(call.id) == 64 and "|" not in call.id
    assert isinstance(result[1], ToolResultMessage) and result[1].tool_call_id == call.id


def test_error_and_aborted_assistant_messages_are_dropped() -> None:
    messages: list[Message] = [
        UserMessage(content="q"),
        _assistant(TextContent("partial"), stop="error"),
        _assistant(TextContent("cut"), stop="aborted"),
        UserMessage(content="again"),
    ]
    result = transform_messages(messages, TARGET)
    assert [m.role for m in result] == ["user", "user"]


def test_dangling_tool_calls_are_answered_before_the_next_message_and_at_the_end() -> None:
    first = _assistant(ToolCall("call_1", "a", {}), ToolCall("call_2", "b", {}))
    answer = ToolResultMessage(tool_call_id="call_1", tool_name="a", content=(TextContent("ok"),))
    second = _assistant(ToolCall("call_3", "c", {}))
    result = transform_messages([UserMessage(content="q"), first, answer, UserMessage(content="next"), second], TARGET)
    roles = [(m.role, getattr(m, "tool_call_id", None)) for m in result]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "call_1"),
        ("toolResult", "call_2"),
        ("user", None),
        ("assistant", None),
        ("toolResult", "call_3"),
    ]
    synthetic = result[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.is_error and synthetic.content == (TextContent(NO_RESULT_TEXT),) and synthetic.tool_name == "b"


def test_a_dropped_errored_message_does_not_leave_its_calls_pending() -> None:
    broken = _assistant(ToolCall("call_9", "x", {}), stop="error")
    result = transform_messages([UserMessage(content="q"), broken, UserMessage(content="retry")], TARGET)
    assert [m.role for m in result] == ["user", "user"]


def test_id_rules() -> None:
    assert normalize_anthropic_id("call.1/2") == "call_1_2"
    assert normalize_anthropic_id("") == "call"
    assert normalize_completions_id(RESPONSES_ID) == "call_abc"
    assert normalize_completions_id("toolu_" + "y" * 50) == ("toolu_" + "y" * 50)[:40]
    assert normalize_completions_id("call_short") == "call_short"
    assert mistral_id("call_ab12c") == "callab12c"  # 9 letters and digits without the punctuation
    assert short_hash("callab") == "10wfj9yi10hm2"  # pi-ai's shortHash of the same text
    assert short_hash("é😀") == "102l7zrk951la"  # UTF-16 code units, as JavaScript counts them
    assert mistral_id("call_ab") == "10wfj9yi1"
    assert mistral_id("call_ab12c", attempt=1) == short_hash("callab12c:1")[:9]
    assert normalize_responses_id("toolu_01.x") == "toolu_01_x"
    assert normalize_responses_id("call_1|rs_2") == "call_1|fc_rs_2"
    assert normalize_responses_id("call_1__|fc_" + "z" * 70 + "__") == "call_1|fc_" + "z" * 61
