"""Tool calling for a small local model, by constrained output instead of a chat template.

The command line's embedded model (SmolLM2-135M) never emits a tool call through a template, but
it fills in a JSON object well when llama.cpp constrains every token to a schema. So each response
is one of two steps, both greedy (temperature 0: the same prompt gets the same answer):

* After a user message, the *choice*: the output is constrained to
  `{"tool": <a tool's name or "answer">, "input": <a string>}`. A tool becomes a tool call (the
  input fills the tool's string parameter); "answer", or output that does not parse, streams a
  plain answer instead.
* After tool results, the *answer*, streamed, with the results written into the system prompt
  (the model's template has no tool role, so it would not see them otherwise).

One tool call per prompt: after its result the model answers. A real model needs none of this.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .._types._messages import AssistantMessage, Context, Model, ToolCall, ToolResultMessage, Usage, UserMessage
from .._types._stream_fn import StreamOptions
from .._wire._codec import decode_json

__all__ = (
    "ANSWER",
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
    async with stream_openai_completions(model, _answer_context(context), options) as events:
        async for event in events:
            if isinstance(event, DoneEvent):
                yield DoneEvent(event.reason, _with_usage(event.message, spent))
            elif isinstance(event, ErrorEvent):
                yield ErrorEvent(event.reason, _with_usage(event.error, spent))
            else:
                yield event


def _with_usage(message: AssistantMessage, spent: Usage) -> AssistantMessage:
    usage = message.usage
    total = Usage(
        input=usage.input + spent.input,
        output=usage.output + spent.output,
        total_tokens=usage.total_tokens + spent.total_tokens,
    )
    return replace(message, usage=total)


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


def _answer_context(context: Context) -> Context:
    """The transcript as the template can show it: tool results since the last prompt go into
    the system prompt, tool calls and results leave the messages."""
    results: list[str] = []
    for message in reversed(context.messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, ToolResultMessage):
            text = " ".join(getattr(block, "text", "") for block in message.content).strip()
            results.insert(0, f"- {message.tool_name}: {text}")
    system = context.system_prompt
    if results:
        system = f"{system}\n\nTool results:\n" + "\n".join(results)
    messages = [
        m
        for m in context.messages
        if isinstance(m, UserMessage) or (isinstance(m, AssistantMessage) and not m.tool_calls and m.text)
    ]
    return Context(system_prompt=system, messages=tuple(messages), tools=())


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
