"""Tool calling for a small local model, by a few-shot choice under a grammar instead of a chat template.

The command line's embedded model (SmolLM2-135M) never emits a tool call through a template, and
asked to pick a tool as JSON under its chat template it picks nearly the same tool whatever the
message. What it does well is continue a plain list of examples, and copy a word it was given. So
each response is one of two steps, both greedy (temperature 0: the same prompt gets the same
answer):

* After a user message, the *choice*: a plain completion (llama.cpp's `/v1/completions`, no chat
  template) of examples such as

      Message: What is 6 * 7?
      Tool: math
      Input: 6 * 7

  ending with the user's message, under a grammar that allows only the tools' labels, each
  followed by an input of its kind: an arithmetic expression for the calculator, a word of the
  message (or `.`) for a path, nothing for the clock or a plain answer (`chat`), one line for any
  other tool (a tool the examples do not show is offered with its description as the example
  message). A tool becomes a tool call (the input fills the tool's string parameter); `chat`
  streams a plain answer instead.
* After tool results, the *answer*, streamed, with the results written plainly into the user's
  message ("The calculator tool says: 17 * 23 = 391. Answer with this result.") under a short
  system prompt of its own: the model's template has no tool role, so it would not see them
  otherwise, and measured on arithmetic prompts, the long system prompt with the tools listed
  made it misread the result it had just been given.

One tool call per prompt: after its result the model answers. A real model needs none of this.
The prompts that were measured are in `benchmarks/embedded_prompts.json`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

import anyio

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
from ._printer import one_line

__all__ = (
    "ANSWER",
    "ANSWER_SYSTEM_PROMPT",
    "CHOICE_TIMEOUT",
    "EXAMPLES",
    "MAX_INPUT_CHARS",
    "Choice",
    "choice_prompt",
    "constrained_tool_stream",
)

ANSWER = "chat"
"""The choice that calls no tool: a plain answer."""
MAX_INPUT_CHARS = 120
"""The longest tool input the model may write (a runaway string would only waste the turn)."""
CHOICE_TIMEOUT = 300.0
"""Seconds the choice's request may take (a loaded machine evaluates the examples slowly)."""

_LABELS = {"calculator": "math", "read_file": "read", "list_folder": "ls", "current_time": "clock"}
"""The built-in tools' labels in the choice: words the model picks well (it picks `list_folder`
for nearly everything, and `math` where `calculator` loses to it)."""
_INPUTS = {"calculator": "expression", "read_file": "path", "list_folder": "folder"}
"""The kind of input each built-in tool takes (the grammar's rule for it); others take a line."""
EXAMPLES: tuple[tuple[str, str, str | None], ...] = (
    ("What is 6 * 7?", "calculator", "6 * 7"),
    ("Hello!", ANSWER, None),
    ("What files are in the reports folder?", "list_folder", "reports"),
    ("Read plan.txt", "read_file", "plan.txt"),
    ("What is the capital of Spain?", ANSWER, None),
    ("What time is it?", "current_time", None),
    ("Add 5 and 9", "calculator", "5 + 9"),
    ("Show me budget.csv", "read_file", "budget.csv"),
    ("Thank you!", ANSWER, None),
    ("List the files here", "list_folder", "."),
    ("What is 250 / 5?", "calculator", "250 / 5"),
    ("What does notes.md say?", "read_file", "notes.md"),
    ("Who painted the Mona Lisa?", ANSWER, None),
    ("What is in the music folder?", "list_folder", "music"),
    ("What is 3 to the power of 5?", "calculator", "3 ^ 5"),
    ("Open report/q1.txt", "read_file", "report/q1.txt"),
    ("Good night!", ANSWER, None),
    ("What day is it today?", "current_time", None),
    ("How much is 12 divided by 3?", "calculator", "12 / 3"),
    ("Print the file setup.cfg", "read_file", "setup.cfg"),
)
"""The choice's examples: (message, tool or ANSWER, input). Those of tools not offered are left out."""

# fmt: off
_NOT_NAMES = frozenset((
    "a", "an", "the", "this", "that", "these", "those", "here", "there", "it", "its", "my", "your", "our",
    "of", "in", "on", "at", "to", "from", "with", "for", "and", "or", "what", "which", "where", "who", "is",
    "are", "was", "does", "do", "did", "say", "says", "show", "list", "read", "open", "print", "tell", "me",
    "please", "contents", "content", "folder", "folders", "directory", "directories", "dir", "file", "files",
))
# fmt: on
"""Words of a message that are not taken for a folder's name."""
_EXPRESSION = """\
expression ::= operand (" "? operator " "? operand){0,12}
operand ::= "-"? (number | constant | function "(" expression ")" | "(" expression ")")
number ::= [0-9]{1,12} ("." [0-9]{1,8})?
constant ::= "pi" | "e"
function ::= "sqrt" | "abs" | "round" | "log" | "sin" | "cos"
operator ::= "+" | "-" | "*" | "/" | "%" | "^"
"""
"""The calculator's input: what it evaluates, with `^` for a power (a `**` the model copies from
one example turns `17 * 23` into `17 ** 23`)."""
_WORD = re.compile(r"[\w./~-]+")


@dataclass(frozen=True, slots=True)
class Choice:
    """The choice's prompt and grammar, and the tool each label stands for (None: `ANSWER`)."""

    prompt: str
    grammar: str
    tools: Mapping[str, Any | None]


def choice_prompt(message: str, tools: Sequence[Any]) -> Choice:
    """The examples, then `message`; the grammar of what may follow `Tool:` (see the module's docstring)."""
    names = {t.name for t in tools}
    labels = {t.name: _LABELS.get(t.name, t.name) for t in tools}
    if len({*labels.values(), ANSWER}) != len(labels) + 1:  # a tool named like a label: names throughout
        labels = {t.name: t.name for t in tools}
    answer = ANSWER if ANSWER not in names else "answer"
    shots = [(m, tool, given) for m, tool, given in EXAMPLES if tool == ANSWER or tool in names]
    shots += [(_first_line(t.description) or t.name, t.name, None) for t in tools if t.name not in _LABELS]
    lines = [_shot(m, answer if tool == ANSWER else labels[tool], given) for m, tool, given in shots]
    prompt = "".join(lines) + f"Message: {one_line(message)}\nTool:"
    words = _words(message)
    files = [word for word in words if "." in word.strip(".") or "/" in word]
    folders = [word for word in words if word.lower() not in _NOT_NAMES]
    rules = [_literal(f" {answer}\n")]
    end = _literal("\n")
    for tool in tools:
        label = labels[tool.name]
        kind = _INPUTS.get(tool.name) if tool.name in _LABELS else None
        if tool.name not in _LABELS and _string_parameter(tool.parameters):
            kind = "line"
        head = _literal(f" {label}\nInput: ")
        spans = {"path": files, "folder": [*folders, "."]}.get(kind or "", [])
        if kind is None:
            rules.append(_literal(f" {label}\n"))
        elif kind == "line" or (kind == "expression" and any(c.isdigit() for c in message)):
            rules.append(f"{head} {kind} {end}")
        elif spans:
            rules.append(f"{head} ({' | '.join(map(_literal, spans))}) {end}")
    grammar = f"root ::= {' | '.join(rules)}\n{_EXPRESSION}line ::= [^\\n]{{1,{MAX_INPUT_CHARS}}}\n"
    return Choice(prompt, grammar, {answer: None, **{labels[t.name]: t for t in tools}})


def _shot(message: str, label: str, given: str | None) -> str:
    return f"Message: {message}\nTool: {label}\n" + (f"Input: {given}\n" if given is not None else "") + "\n"


def _words(message: str) -> list[str]:
    """The words of `message` a path could be, in order, once each (trailing punctuation off)."""
    found: dict[str, None] = {}
    for word in _WORD.findall(message):
        word = word.rstrip(".")
        if word and any(c.isalnum() for c in word) and len(word) <= MAX_INPUT_CHARS:
            found[word] = None
    return list(found)[:64]


def _literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def constrained_tool_stream(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """A stream function (`agentloop.StreamFn`) for a llama.cpp server: the steps above."""
    return _respond(model, context, replace(options, temperature=0.0))


class _ChoiceFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def _respond(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
    from ..providers import stream_openai_completions

    last = context.messages[-1] if context.messages else None
    spent = Usage()  # the choice's tokens, counted in the answer that follows it
    if context.tools and isinstance(last, UserMessage):
        choice = choice_prompt(_text(last), context.tools)
        builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        try:
            completion, spent = await _complete(model, choice, options)
        except _ChoiceFailed as failed:
            yield builder.start()
            yield builder.error("aborted" if failed.reason == "aborted" else "error", str(failed))
            return
        call = _tool_call(completion, choice)
        if call is not None:
            builder.usage = spent
            yield builder.start()
            yield builder.tool_call_start(call.id, call.name)
            yield builder.tool_call_delta(json.dumps(call.arguments), call.arguments)
            yield builder.tool_call_end(call)
            yield builder.done("toolUse")
            return
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


async def _complete(model: Model, choice: Choice, options: StreamOptions) -> tuple[str, Usage]:
    """The choice's completion and its usage; `_ChoiceFailed` when the server fails or the run aborts."""
    import httpx

    body = {
        "model": model.id,
        "prompt": choice.prompt,
        "grammar": choice.grammar,
        "max_tokens": MAX_INPUT_CHARS // 2,
        "temperature": 0.0,
    }
    with anyio.CancelScope() as scope:
        remove = options.signal.on_abort(scope.cancel)
        try:
            async with httpx.AsyncClient(timeout=CHOICE_TIMEOUT) as client:
                response = await client.post(f"{model.base_url.rstrip('/')}/completions", json=body)
            data = response.json() if response.is_success else None
        except (httpx.HTTPError, ValueError) as exc:
            raise _ChoiceFailed("error", f"the local model failed: {exc.__class__.__name__}: {exc}") from None
        finally:
            remove()
    if scope.cancelled_caught:
        raise _ChoiceFailed("aborted", "Request was aborted")
    if not isinstance(data, dict) or not data.get("choices"):
        raise _ChoiceFailed("error", f"the local model failed: HTTP {response.status_code}: {response.text[:200]}")
    counts = data.get("usage") or {}
    cached = int((counts.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    prompt, output = int(counts.get("prompt_tokens") or 0), int(counts.get("completion_tokens") or 0)
    usage = Usage(input=max(0, prompt - cached), output=output, cache_read=cached, total_tokens=prompt + output)
    return str(data["choices"][0].get("text") or ""), usage


def _text(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return " ".join(block.text for block in message.content if isinstance(block, TextContent))


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


def _tool_call(text: str, choice: Choice) -> ToolCall | None:
    """The tool call the choice's completion names, or None for a plain answer (or text that
    does not parse: the grammar should make that impossible)."""
    label, _, rest = text.strip("\n").partition("\n")
    tool = choice.tools.get(label.strip())
    if tool is None:
        return None
    given = rest.removeprefix("Input:").strip()
    parameter = _string_parameter(tool.parameters)
    arguments = {parameter: given} if parameter and given else {}
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
