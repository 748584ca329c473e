"""Context accounting: the last usage plus an estimate of what came after it."""

from __future__ import annotations

import pytest

import agentloop as al
from agentloop.context import IMAGE_TOKENS, ContextUsage, estimate_context, estimate_tokens, usage_tokens


def reply(text: str, tokens: int = 0, stop: al.StopReason = "stop") -> al.AssistantMessage:
    return al.AssistantMessage(content=(al.TextContent(text),), usage=al.Usage(total_tokens=tokens), stop_reason=stop)


def test_a_message_is_estimated_at_one_token_per_four_characters_rounded_up() -> None:
    assert estimate_tokens(al.UserMessage(content="x" * 9)) == 3
    assert estimate_tokens(al.UserMessage(content=(al.TextContent("x" * 8),))) == 2
    call = al.ToolCall("c1", "read", {"path": "a.py"})  # "read" + '{"path": "a.py"}': 20 characters
    assert estimate_tokens(al.AssistantMessage(content=(al.ThinkingContent("t" * 4), call))) == 1 + 5
    assert estimate_tokens(al.CustomMessage(role="note", data={"k": "v" * 10})) == 5  # '{"k": "vvvvvvvvvv"}'


def test_an_image_counts_as_1200_tokens_in_user_messages_and_tool_results() -> None:
    image = al.ImageContent(data="AAAA" * 10_000, mime_type="image/png")
    assert estimate_tokens(al.UserMessage(content=(al.TextContent("look"), image))) == 1 + IMAGE_TOKENS
    result = al.ToolResultMessage(tool_call_id="c1", tool_name="shot", content=(image, image))
    assert estimate_tokens(result) == 2 * IMAGE_TOKENS


def test_usage_tokens_is_the_total_or_the_sum_of_its_parts() -> None:
    assert usage_tokens(al.Usage(input=10, output=5, total_tokens=20)) == 20
    assert usage_tokens(al.Usage(input=10, output=5, cache_read=3, cache_write=2)) == 20
    with pytest.raises(TypeError, match=r"usage must be an agentloop\.Usage"):
        usage_tokens(5)  # type: ignore[arg-type]


def test_the_context_is_the_last_usage_plus_an_estimate_of_what_came_after_it() -> None:
    messages: list[al.AgentMessage] = [
        al.UserMessage(content="x" * 400),
        reply("first", tokens=500),
        al.UserMessage(content="y" * 40),
        reply("second", tokens=900),
        al.UserMessage(content="z" * 80),
    ]
    assert estimate_context(messages) == ContextUsage(900 + 20, 900, 20, 3)
    # a usage report before `usage_from` is not used; the overhead counts only without one
    assert estimate_context(messages, usage_from=4, overhead=7).tokens == 7 + 100 + 2 + 10 + 2 + 20
    assert estimate_context(messages[:1], overhead=7) == ContextUsage(107, 0, 107, None)


def test_failed_aborted_and_empty_usage_reports_are_skipped() -> None:
    messages: list[al.AgentMessage] = [
        reply("ok", tokens=300),
        reply("x" * 8, tokens=999, stop="error"),
        reply("y" * 8, stop="aborted"),
    ]
    messages.append(reply("z" * 4))  # no usage reported (0)
    assert estimate_context(messages) == ContextUsage(300 + 2 + 2 + 1, 300, 5, 0)


def test_fits_leaves_the_reserve_free_and_an_unknown_window_always_fits() -> None:
    usage = ContextUsage(6000, 6000, 0, 0)
    assert usage.fits(8192, 2048) and usage.fits(8192, 2192)
    assert not usage.fits(8192, 2193)
    assert usage.fits(0, 10**6)
