"""Typed accessors for tests: what a run ended with, and the text of a content block."""

from __future__ import annotations

from collections.abc import Sequence

import agentloop as al


def agent_end(events: Sequence[al.AgentEvent]) -> al.AgentEnd:
    """The run's last event, which must be its `agent_end`."""
    end = events[-1]
    assert isinstance(end, al.AgentEnd), f"the run ended with {end.type}, not agent_end"
    return end


def last_assistant(events: Sequence[al.AgentEvent]) -> al.AssistantMessage:
    """The last message of the run, which must be an assistant message."""
    message = agent_end(events).messages[-1]
    assert isinstance(message, al.AssistantMessage), f"the run ended with a {message.role} message"
    return message


def tool_results(events: Sequence[al.AgentEvent]) -> list[al.ToolResultMessage]:
    """The tool-result messages the run added, in order."""
    return [m for m in agent_end(events).messages if isinstance(m, al.ToolResultMessage)]


def text(block: object) -> str:
    """The text of a content block, which must be a text block."""
    assert isinstance(block, al.TextContent), f"expected a text block, got {type(block).__name__}"
    return block.text
