"""A model with a small context window for the tests: it counts a request's tokens its own way
(3.5 characters a token, so more than the 4 of the estimate), refuses a request over its window
with llama.cpp's error text, reports usage, and answers summary requests with numbered summaries."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import agentloop as al
from agentloop.context import SUMMARIZATION_SYSTEM_PROMPT

Answer = Callable[[al.Context], al.AssistantMessage]


def request_tokens(context: al.Context) -> int:
    """The model's own count of a request's tokens."""
    chars = len(context.system_prompt)
    for tool in context.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    for message in context.messages:
        if isinstance(message, al.AssistantMessage):
            for block in message.content:
                if isinstance(block, al.TextContent):
                    chars += len(block.text)
                elif isinstance(block, al.ToolCall):
                    chars += len(block.name) + len(json.dumps(block.arguments))
        elif isinstance(message.content, str):
            chars += len(message.content)
        else:
            chars += sum(len(b.text) if isinstance(b, al.TextContent) else 4800 for b in message.content)
    return math.ceil(chars / 3.5)


@dataclass
class WindowedModel:
    """A stream function: `answer(context)` makes each response of the agent's calls."""

    answer: Answer
    window: int = 8192
    requests: list[al.Context] = field(default_factory=list)
    """The agent's requests the model accepted."""
    summaries: list[al.Context] = field(default_factory=list)
    """The summary requests."""
    refused: int = 0
    largest: int = 0

    @property
    def model(self) -> al.Model:
        return al.Model(id="windowed", api="test", provider="test", context_window=self.window)

    def __call__(
        self, model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        return self._play(model, context)

    async def _play(self, model: al.Model, context: al.Context) -> AsyncIterator[al.AssistantMessageEvent]:
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        tokens = request_tokens(context)
        if tokens > self.window:
            self.refused += 1
            yield builder.error(
                "error", f"request ({tokens} tokens) exceeds the available context size ({self.window} tokens)"
            )
            return
        self.largest = max(self.largest, tokens)
        if context.system_prompt == SUMMARIZATION_SYSTEM_PROMPT:
            self.summaries.append(context)
            reply = al.AssistantMessage(content=(al.TextContent(f"## Goal\nsummary #{len(self.summaries)}"),))
        else:
            self.requests.append(context)
            reply = self.answer(context)
        yield builder.start()
        output = math.ceil(
            sum(
                len(json.dumps(b.arguments)) if isinstance(b, al.ToolCall) else len(getattr(b, "text", ""))
                for b in reply.content
            )
            / 3.5
        )
        builder.usage = al.Usage(input=tokens, output=output, total_tokens=tokens + output)
        builder.set_content(reply.content)
        yield builder.done("toolUse" if reply.tool_calls else "stop")


def text_of(message: al.Message) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(b.text for b in message.content if isinstance(b, al.TextContent))


def check_pairs(context: al.Context) -> None:
    """Every tool result of a request follows the assistant message that made its call, and every
    call of an assistant message that is not the last has its result."""
    messages = list(context.messages)
    for i, message in enumerate(messages):
        if isinstance(message, al.ToolResultMessage):
            j = i - 1
            while j >= 0 and isinstance(messages[j], al.ToolResultMessage):
                j -= 1
            assert j >= 0 and isinstance(messages[j], al.AssistantMessage), f"result {i} has no call before it"
            owner = messages[j]
            assert isinstance(owner, al.AssistantMessage)
            assert message.tool_call_id in {c.id for c in owner.tool_calls}, f"result {i} is cut from its call"
        elif isinstance(message, al.AssistantMessage) and message.tool_calls:
            answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, al.ToolResultMessage)}
            assert {c.id for c in message.tool_calls} <= answered, f"call {i} has lost its result"


@al.tool
async def read(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line of code\n" * 250  # 3,250 characters: about 930 of the model's tokens


def reads_then_answers(turns: int, window: int = 8192) -> WindowedModel:
    """A model answering its n-th request with a call of `read` (n < turns), then "done"."""

    def answer(context: al.Context) -> al.AssistantMessage:
        n = len(model.requests) - 1
        if n < turns:
            call = al.ToolCall(f"c{n}", "read", {"path": f"src/file{n}.py"})
            return al.AssistantMessage(content=(al.TextContent(f"Reading file {n}."), call))
        return al.AssistantMessage(content=(al.TextContent("done"),))

    model = WindowedModel(answer, window=window)
    return model
