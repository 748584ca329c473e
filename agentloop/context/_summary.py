"""The summary of a compaction: pi's prompts, the conversation as text, the files touched, and
the model call that writes it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from .._types._abort import AbortSignal
from .._types._messages import (
    AgentMessage,
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._types._stream_fn import StreamFn, StreamOptions, opened_stream

__all__ = (
    "SUMMARIZATION_PROMPT",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "TOOL_RESULT_MAX_CHARS",
    "UPDATE_SUMMARIZATION_PROMPT",
    "CompactionError",
    "FileOperations",
    "serialize_conversation",
    "summary_model_call",
    "summary_request",
)

SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
SUMMARY_SUFFIX = "\n</summary>"

SUMMARIZATION_SYSTEM_PROMPT = (
    "You are a context summarization assistant. Your task is to read a conversation between a user and an "
    "AI assistant, then produce a structured summary following the exact format specified.\n\n"
    "Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the "
    "structured summary."
)

_FORMAT = """## Goal
[{goal}]

## Constraints & Preferences
- [{constraints}]

## Progress
### Done
- [x] [{done}]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]{decisions}

## Next Steps
1. [{next}]

## Critical Context
- [{critical}]

Keep each section concise. Preserve exact file paths, function names, and error messages."""

SUMMARIZATION_PROMPT = (
    "The messages above are a conversation to summarize. Create a structured context checkpoint summary "
    "that another LLM will use to continue the work.\n\nUse this EXACT format:\n\n"
    + _FORMAT.format(
        goal="What is the user trying to accomplish? Can be multiple items if the session covers different tasks.",
        constraints='Any constraints, preferences, or requirements mentioned by user, or "(none)"',
        done="Completed tasks/changes",
        decisions="",
        next="Ordered list of what should happen next",
        critical='Any data, examples, or references needed to continue, or "(none)"',
    )
)
"""pi's prompt for a first summary."""

UPDATE_SUMMARIZATION_PROMPT = (
    "The messages above are NEW conversation messages to incorporate into the existing summary provided "
    "in <previous-summary> tags.\n\nUpdate the existing structured summary with new information. RULES:\n"
    "- PRESERVE all existing information from the previous summary\n"
    "- ADD new progress, decisions, and context from the new messages\n"
    '- UPDATE the Progress section: move items from "In Progress" to "Done" when completed\n'
    '- UPDATE "Next Steps" based on what was accomplished\n'
    "- PRESERVE exact file paths, function names, and error messages\n"
    "- If something is no longer relevant, you may remove it\n\nUse this EXACT format:\n\n"
    + _FORMAT.format(
        goal="Preserve existing goals, add new ones if the task expanded",
        constraints="Preserve existing, add new ones discovered",
        done="Include previously done items AND newly completed items",
        decisions=" (preserve all previous, add new)",
        next="Update based on current state",
        critical="Preserve important context, add new if needed",
    )
)
"""pi's prompt for updating the previous summary with the messages compacted since."""

TOOL_RESULT_MAX_CHARS = 2000
"""A tool result is cut to this many characters in the text the summarizer reads."""


class CompactionError(Exception):
    """A compaction failed: the summary model answered with an error (its text is the message)."""


class FileOperations:
    """The files the compacted tool calls read, wrote and edited (calls named `read`, `write` and
    `edit` with a `path` argument, as pi's tools are), carried from one compaction to the next."""

    __slots__ = ("modified", "read")

    def __init__(self, read: Iterable[str] = (), modified: Iterable[str] = ()) -> None:
        self.read = set(read)
        self.modified = set(modified)

    def add(self, messages: Sequence[AgentMessage]) -> None:
        for message in messages:
            if not isinstance(message, AssistantMessage):
                continue
            for call in message.tool_calls:
                path = call.arguments.get("path")
                if not isinstance(path, str):
                    continue
                if call.name == "read":
                    self.read.add(path)
                elif call.name in ("write", "edit"):
                    self.modified.add(path)

    def lists(self) -> tuple[list[str], list[str]]:
        """(files only read, files modified), sorted."""
        return sorted(self.read - self.modified), sorted(self.modified)

    def tags(self) -> str:
        read, modified = self.lists()
        sections = []
        if read:
            sections.append("<read-files>\n" + "\n".join(read) + "\n</read-files>")
        if modified:
            sections.append("<modified-files>\n" + "\n".join(modified) + "\n</modified-files>")
        return "\n\n" + "\n\n".join(sections) if sections else ""


def _texts(content: str | Sequence[object]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def serialize_conversation(messages: Sequence[AgentMessage]) -> str:
    """The messages as labelled text (`[User]: ...`, `[Assistant tool calls]: ...`), so that the
    summarizer reads a conversation instead of continuing it; tool results cut to
    `TOOL_RESULT_MAX_CHARS`. Custom messages are left out."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = _texts(message.content)
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
            calls = [
                f"{b.name}({', '.join(f'{k}={json.dumps(v, default=str)}' for k, v in b.arguments.items())})"
                for b in message.content
                if isinstance(b, ToolCall)
            ]
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif isinstance(message, ToolResultMessage):
            text = _texts(message.content)
            if len(text) > TOOL_RESULT_MAX_CHARS:
                cut = len(text) - TOOL_RESULT_MAX_CHARS
                text = f"{text[:TOOL_RESULT_MAX_CHARS]}\n\n[... {cut} more characters truncated]"
            if text:
                parts.append(f"[Tool result]: {text}")
    return "\n\n".join(parts)


def summary_request(messages: Sequence[AgentMessage], previous: str | None, instructions: str | None) -> Context:
    """The summarizer's context: the conversation in tags, the previous summary, pi's prompt."""
    prompt = UPDATE_SUMMARIZATION_PROMPT if previous is not None else SUMMARIZATION_PROMPT
    if instructions:
        prompt = f"{prompt}\n\nAdditional focus: {instructions}"
    text = f"<conversation>\n{serialize_conversation(messages)}\n</conversation>\n\n"
    if previous is not None:
        text += f"<previous-summary>\n{previous}\n</previous-summary>\n\n"
    return Context(system_prompt=SUMMARIZATION_SYSTEM_PROMPT, messages=(UserMessage(content=text + prompt),), tools=())


async def summary_model_call(
    stream_fn: StreamFn, model: Model, context: Context, *, max_tokens: int, api_key: str | None, signal: AbortSignal
) -> str:
    """One call of the summary model; its text, or `CompactionError` with its error."""
    final: AssistantMessage | None = None
    options = StreamOptions(signal=signal, api_key=api_key, max_tokens=max_tokens)
    async with opened_stream(stream_fn(model, context, options)) as events:
        async for event in events:
            if event.type == "done":
                final = event.message
                break
            if event.type == "error":
                raise CompactionError(f"Summarization failed: {event.error.error_message or 'unknown error'}")
    if final is None:
        raise CompactionError("Summarization failed: the model stream ended without a response")
    return "\n".join(b.text for b in final.content if isinstance(b, TextContent))
