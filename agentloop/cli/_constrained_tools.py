"""Tool calling for a small local model, by constrained output instead of a chat template.

The command line's embedded model (SmolLM2-135M) never emits a tool call through a template, but
it fills in a JSON object well when llama.cpp constrains every token to a schema. So each response
is one of two steps, both greedy (temperature 0: the same prompt gets the same answer):

* After a user message, the *choice*: the output is constrained to
  `{"tool": <a tool's name or "answer">, "input": <a string>}`. A tool becomes a tool call (the
  input fills the tool's string parameter); "answer", or output that does not parse, streams a
  plain answer instead.
* After tool results, the *answer*, streamed, with the results written plainly into the user's
  message ("The calculator tool says: 17 * 23 = 391. Answer with this result.") under a short
  system prompt of its own: the model's template has no tool role, so it would not see them
  otherwise, and measured on arithmetic prompts, the long system prompt with the tools listed
  made it misread the result it had just been given.

One tool call per prompt: after its result the model answers. A real model needs none of this.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .._types._messages import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._types._stream_fn import StreamOptions
from .._wire._json_text import decode_json

__all__ = (
    "ANSWER",
    "ANSWER_SYSTEM_PROMPT",
    "MAX_INPUT_CHARS",
    "choice_schema",
    "constrained_tool_stream",
)

ANSWER = "answer"
"""The choice that calls no tool."""
MAX_INPUT_CHARS = 120
"""The longest tool input the model may write (a runaway string would only waste the turn)."""


def choice_schema(tools: Sequence[Any]) -> dict[str, Any]:
    """The JSON schema of the choice: a tool's name (or "answer") and one string input."""
    return {
        "type": "object",
        "properties": {
            "tool": {"enum": [*(t.name for t in tools), ANSWER]},
            "input": {"type": "string", "maxLength": MAX_INPUT_CHARS},
        },
        "required": ["tool", "input"],
        "additionalProperties": False,
    }


def constrained_tool_stream(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """A stream function (`agentloop.StreamFn`) for a llama.cpp server: the steps above."""
    return _respond(model, context, replace(options, temperature=0.0))


async def _respond(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
    from ..providers import stream_openai_completions

    last = context.messages[-1] if context.messages else None
    spent = Usage()  # the choice's tokens, counted in the answer that follows it
    if context.tools and isinstance(last, UserMessage):
        choice = await stream_openai_completions(
            _choice_model(model, context), _choice_context(context), options
        ).result()
        if choice.stop_reason in ("error", "aborted"):
            builder = _builder(choice)
            yield builder.start()
            yield builder.error(choice.stop_reason, choice.error_message or choice.stop_reason)
            return
        call = _tool_call(choice.text, context.tools)
        if call is not None:
            builder = _builder(choice)
            yield builder.start()
            yield builder.tool_call_start(call.id, call.name)
            yield builder.tool_call_delta(json.dumps(call.arguments), call.arguments)
            yield builder.tool_call_end(call)
            yield builder.done("toolUse")
            return
        spent = choice.usage
    answer = _answer_context(context)
    reasoned: AssistantMessage | None = None
    async with stream_openai_completions(model, answer, options) as events:
        async for event in events:
            if isinstance(event, DoneEvent) and options.reasoning is not None and not event.message.text:
                reasoned = event.message  # reasoned, then stopped before any text: answered below
            elif isinstance(event, DoneEvent):
                yield DoneEvent(event.reason, _with_usage(event.message, spent))
            elif isinstance(event, ErrorEvent):
                yield ErrorEvent(event.reason, _with_usage(event.error, spent))
            else:
                yield event
    if reasoned is not None:
        text = _answer_as_text(model, answer, options, reasoned, _sum(spent, reasoned.usage))
        async with aclosing(text):
            async for event in text:
                yield event


async def _answer_as_text(
    model: Model, context: Context, options: StreamOptions, reasoned: AssistantMessage, spent: Usage
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """The answer as text after the model spent its whole response reasoning (the tiny model often
    closes its reasoning with the answer in it): a second request, reasoning off, whose text
    follows the reasoning in the same message."""
    from ..providers import stream_openai_completions

    builder = _builder(reasoned)
    builder.set_content(reasoned.content)
    async with stream_openai_completions(model, context, replace(options, reasoning=None)) as events:
        async for event in events:
            if event.type == "text_start":
                yield builder.text_start()
            elif event.type == "text_delta":
                yield builder.text_delta(event.delta)
            elif event.type == "text_end":
                yield builder.text_end()
            elif isinstance(event, DoneEvent):
                builder.usage = _sum(event.message.usage, spent)
                yield builder.done(event.reason)
            elif isinstance(event, ErrorEvent):
                builder.usage = _sum(event.error.usage, spent)
                yield builder.error(event.reason, event.error.error_message or event.reason)


def _with_usage(message: AssistantMessage, spent: Usage) -> AssistantMessage:
    """The answer with the usage of the requests before it added (see `_sum`)."""
    return replace(message, usage=_sum(message.usage, spent))


def _sum(usage: Usage, spent: Usage) -> Usage:
    """Two requests' usage as one: every count, cached prompt tokens and cost too."""
    cost = replace(
        usage.cost,
        input=usage.cost.input + spent.cost.input,
        output=usage.cost.output + spent.cost.output,
        cache_read=usage.cost.cache_read + spent.cost.cache_read,
        cache_write=usage.cost.cache_write + spent.cost.cache_write,
        total=usage.cost.total + spent.cost.total,
    )
    return replace(
        usage,
        input=usage.input + spent.input,
        output=usage.output + spent.output,
        cache_read=usage.cache_read + spent.cache_read,
        cache_write=usage.cache_write + spent.cache_write,
        total_tokens=usage.total_tokens + spent.total_tokens,
        cost=cost,
    )


def _choice_model(model: Model, context: Context) -> Model:
    """The model with llama.cpp's JSON-schema constraint (and no thinking) on the request."""
    extra = {
        "response_format": {"type": "json_schema", "json_schema": {"schema": choice_schema(context.tools)}},
        "chat_template_kwargs": {"enable_thinking": False},
    }
    return replace(model, compat={**(model.compat or {}), "extra_body": extra})


def _choice_context(context: Context) -> Context:
    """The system prompt with the tools listed, and the user's message."""
    listed = "\n".join(f"- {t.name}: {_first_line(t.description)}" for t in context.tools)
    system = (
        f"{context.system_prompt}\n\nTools:\n{listed}\n- {ANSWER}: reply in words, no tool.\n"
        "Reply with JSON: the tool to use and its input."
    ).lstrip()
    return Context(system_prompt=system, messages=(context.messages[-1],), tools=())


ANSWER_SYSTEM_PROMPT = "Answer briefly."
"""The answer step's system prompt once tools have answered (see the module's docstring)."""


def _answer_context(context: Context) -> Context:
    """The transcript as the template can show it: tool calls and results leave the messages, and
    the results since the last prompt are written into that prompt, under `ANSWER_SYSTEM_PROMPT`."""
    results: list[str] = []
    for message in reversed(context.messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, ToolResultMessage):
            text = " ".join(getattr(block, "text", "") for block in message.content).strip()
            results.insert(0, f"The {message.tool_name} tool says: {text}")
    messages = [
        m
        for m in context.messages
        if isinstance(m, UserMessage) or (isinstance(m, AssistantMessage) and not m.tool_calls and m.text)
    ]
    if not results:
        return Context(system_prompt=context.system_prompt, messages=tuple(messages), tools=())
    last = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    prompt = messages[last]
    assert isinstance(prompt, UserMessage)
    shown = "\n".join(results) + "\nAnswer with this result."
    content = (
        f"{prompt.content}\n\n{shown}" if isinstance(prompt.content, str) else (*prompt.content, TextContent(shown))
    )
    messages[last] = replace(prompt, content=content)
    return Context(system_prompt=ANSWER_SYSTEM_PROMPT, messages=tuple(messages), tools=())


def _tool_call(text: str, tools: Sequence[Any]) -> ToolCall | None:
    """The tool call the choice names, or None for "answer" or output that does not parse."""
    try:
        choice = decode_json(text, constants=True)
    except ValueError:
        return None
    if not isinstance(choice, dict) or not isinstance(choice.get("input"), str):
        return None
    tool = next((t for t in tools if t.name == choice.get("tool")), None)
    if tool is None:
        return None
    parameter = _string_parameter(tool.parameters)
    arguments = {parameter: choice["input"]} if parameter else {}
    return ToolCall(f"call_{uuid.uuid4().hex[:12]}", tool.name, arguments)


def _string_parameter(schema: Any) -> str | None:
    """The parameter the input fills: the first required string one, else the first string one."""
    properties = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    strings = [name for name, spec in properties.items() if isinstance(spec, Mapping) and spec.get("type") == "string"]
    required = [name for name in strings if name in schema.get("required", ())]
    names = required or strings
    return str(names[0]) if names else None


def _builder(message: AssistantMessage) -> AssistantMessageBuilder:
    builder = AssistantMessageBuilder(api=message.api, provider=message.provider, model=message.model)
    builder.usage = message.usage
    return builder


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]
