"""OpenTelemetry traces of agent runs, following the GenAI semantic conventions.

Extra `[otel]` (`opentelemetry-api`); `import agentloop` never imports this module. Tracing is
built on the loop's extension points and nothing else:

- `observe(event)` opens and closes the run's `invoke_agent` span and one `turn` span per turn;
- the wrapped stream function opens a `chat {model}` span when it is called and ends it at the
  stream's terminal event (`done` or `error`), or when the stream is cut;
- `wrap_tool_call` opens an `execute_tool {tool}` span and makes it current around the tool, so a
  tool's own spans (an HTTP client's, a nested agent's) nest under it, in a sequential batch and
  in the tasks of a parallel one, on asyncio and trio.

`instrument(config, stream_fn)` applies all three to a config; `Tracing.instrument_agent(agent)`
to an `Agent` (every prompt is a run).

The tree of one run::

    invoke_agent [agent name]          INTERNAL
      turn                             INTERNAL (agentloop.turn.index = 1, 2, ...)
        chat {model}                   CLIENT
        execute_tool {tool}            INTERNAL (one per call; parallel calls are siblings)
          ...the tool's own spans

No span is made current across a `yield` of the run (a bare `async for` runs the loop in the
consumer's task): parents are passed explicitly, and only `execute_tool` is current, inside the
tool call. Spans find their run through a context variable set at `agent_start` in the loop's
task, so concurrent runs sharing one instrumented config do not mix.

Content (messages, system prompt, tool arguments and results) is recorded only with
`record_content=True`; API keys are never read into spans, and the key a model call used is
masked out of any error text or content that is recorded.

A run sampled out (its `invoke_agent` span not recording) records nothing below it: its model
calls are not wrapped, and its tools run with the run's span context current, so their own spans
follow the same decision.

A run that ends without `agent_end` is ended by whatever sees it end: a model or tool call that is
cancelled or raises ends the turn and run spans with it. A run left between steps (a bare
generator closed at `turn_end`, say) is seen by no call: its spans are ended as `cancelled`, at
its last activity, when the next run starts in the same task.

`error.type` values: `model_error` (the model stream ended with stop reason `error`), `aborted`
(the run's signal aborted the call), `timeout` (a tool ran past its `timeout`), `tool_error` (a
tool returned an error result), `cancelled` (the run was cancelled, or torn down by an error
raised outside the call, while the call was open), or the class name of an exception a tool or
stream function raised.

Runs are told apart by context: two bare runs iterated in turn by one task share it, and their
spans may mix (give each its own task).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import anyio

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("agentloop.otel needs the OpenTelemetry API: pip install 'anyio-agentloop[otel]'") from exc

from ._core._agent import Agent
from ._core._config import AgentLoopConfig, ToolInvocation, call
from ._core._loop import resolve_stream_fn
from ._types._errors import ToolTimeoutError
from ._types._events import AgentEvent, AssistantMessageEvent
from ._types._messages import AgentToolResult, AssistantMessage, Context, Model, Usage
from ._types._stream_fn import MaybeAwaitable, StreamFn, StreamOptions, opened_stream

__all__ = ("Tracing", "instrument")

_SCOPE = "agentloop"
_FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error", "aborted": "aborted"}
_ERROR_TYPES = {"error": "model_error", "aborted": "aborted"}
_TERMINAL = ("done", "error")
_RUN_ATTRIBUTES = ("gen_ai.provider.name", "gen_ai.request.model", "gen_ai.conversation.id")


class _RunSpans:
    """The spans of one run in progress, found through `_CURRENT` by the model and tool wrappers."""

    __slots__ = (
        "api_key",
        "context",
        "described",
        "done",
        "input_tokens",
        "last",
        "output_tokens",
        "previous",
        "recording",
        "span",
        "tools_running",
        "turn",
        "turns",
    )

    def __init__(self, span: Span, previous: _RunSpans | None) -> None:
        self.span = span
        self.recording = span.is_recording()
        self.context = trace.set_span_in_context(span)
        self.previous = previous
        self.turn: tuple[Span, otel_context.Context] | None = None
        self.turns = 0
        self.described = False
        self.input_tokens = 0
        self.output_tokens = 0
        self.api_key: str | None = None  # the key the last model call got: masked out of recorded text
        self.done = False
        self.tools_running = 0
        self.last = time.time_ns()  # the last sign of life: where a run found dead ends

    def parent(self) -> otel_context.Context:
        """Where a model or tool call of this run hangs: the current turn, else the run."""
        return self.turn[1] if self.turn is not None else self.context

    def end_turn(self, error_type: str | None, description: str | None = None, end_time: int | None = None) -> None:
        if self.turn is not None:
            span = self.turn[0]
            self.turn = None
            _end(span, error_type, description, end_time)

    def fail(self, error_type: str, description: str | None, end_time: int | None = None) -> None:
        """End the turn and the run: the run is ending without its `agent_end` (cancelled, or an exception)."""
        if self.done:
            return
        self.end_turn(error_type, description, end_time)
        self.done = True
        _end(self.span, error_type, description, end_time)


_CURRENT: ContextVar[_RunSpans | None] = ContextVar("agentloop_otel_run", default=None)


class Tracing:
    """Traces runs as OpenTelemetry spans; `instrument` applies it to a config and a stream function.

    Args:
        tracer_provider: Where spans go (default: the global provider, `trace.get_tracer_provider()`).
        record_content: Record messages, the system prompt, tool arguments and tool results
            (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`,
            `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). Off by default: they may hold
            personal data.
        agent_name: `gen_ai.agent.name` of the run spans (the span is named `invoke_agent {name}`).
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        record_content: bool = False,
        agent_name: str | None = None,
    ) -> None:
        if type(record_content) is not bool:
            raise TypeError(f"record_content must be a bool, got {type(record_content).__name__}")
        if agent_name is not None and not isinstance(agent_name, str):
            raise TypeError(f"agent_name must be a str or None, got {type(agent_name).__name__}")
        if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
            raise TypeError(f"tracer_provider must be an OpenTelemetry TracerProvider or None, got {tracer_provider!r}")
        self.tracer: Tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        self.record_content = record_content
        self.agent_name = agent_name
        handlers: dict[str, Callable[[Any], None]] = {
            "agent_start": self._agent_start,
            "turn_start": self._turn_start,
            "message_end": self._message_end,
            "turn_end": self._turn_end,
            "agent_end": self._agent_end,
        }
        handler_of = handlers.get

        def observe(event: AgentEvent) -> None:
            handler = handler_of(event.type)  # called for every event: one lookup for the others
            if handler is not None:
                handler(event)

        self.observe = observe
        """Open and close the run and turn spans; pass as `AgentLoopConfig(observe=...)`."""

    # --- applying it ----------------------------------------------------------------------

    def instrument(
        self, config: AgentLoopConfig, stream_fn: StreamFn | None = None
    ) -> tuple[AgentLoopConfig, StreamFn]:
        """A copy of `config` that traces its runs, and the stream function to run it with.

        `stream_fn` None means the default one (dispatch on `model.api`). An `observe` or
        `wrap_tool_call` the config already has keeps working: it is called from the tracing one
        (inside the tool's span, so its own spans nest there too).
        """
        if not isinstance(config, AgentLoopConfig):
            raise TypeError(f"config must be an agentloop.AgentLoopConfig, got {type(config).__name__}")
        traced_stream_fn = self.wrap_stream_fn(stream_fn)
        observe, wrap_tool_call = self._hooks(config.observe, config.wrap_tool_call, config.propagate)
        return replace(config, observe=observe, wrap_tool_call=wrap_tool_call), traced_stream_fn

    def instrument_agent(self, agent: Agent) -> Agent:
        """Trace every run of `agent` from now on (its `observe`, `wrap_tool_call` and stream
        function are wrapped in place, its own ones kept); returns the agent.

        Instrument an agent once: a second call would trace each run twice.
        """
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        traced_stream_fn = self.wrap_stream_fn(agent.stream_fn)
        agent.observe, agent.wrap_tool_call = self._hooks(agent.observe, agent.wrap_tool_call, agent.propagate)
        agent.stream_fn = traced_stream_fn
        return agent

    def _hooks(
        self,
        user_observe: Callable[[AgentEvent], None] | None,
        user_wrap: Callable[[ToolInvocation, Callable[[], Awaitable[object]]], MaybeAwaitable[object]] | None,
        propagate: tuple[type[BaseException], ...],
    ) -> tuple[
        Callable[[AgentEvent], None], Callable[[ToolInvocation, Callable[[], Awaitable[object]]], Awaitable[object]]
    ]:
        """`observe` and `wrap_tool_call` that trace, calling the user's own ones (theirs inside the tool span)."""
        observe = self.observe if user_observe is None else _chain_observe(self.observe, user_observe)

        async def wrap_tool_call(invocation: ToolInvocation, proceed: Callable[[], Awaitable[object]]) -> object:
            if user_wrap is None:
                return await self._tool_call(invocation, proceed, propagate)
            return await self._tool_call(invocation, lambda: call(user_wrap, invocation, proceed), propagate)

        return observe, wrap_tool_call

    # --- runs and turns (observe) -------------------------------------------------------

    def _agent_start(self, event: Any) -> None:
        previous = _CURRENT.get()
        if previous is not None and not previous.done and previous.tools_running == 0:
            # Not a run this one nests in (that one would be in a tool call): a run left between
            # steps in this task (a bare generator closed at turn_end), which no call saw end.
            previous.fail("cancelled", "the run ended without agent_end", end_time=previous.last)
        while previous is not None and previous.done:
            previous = previous.previous
        # The model, provider and conversation id are set by the run's first model call.
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        span = self.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
        _CURRENT.set(_RunSpans(span, previous))

    def _turn_start(self, event: Any) -> None:
        run = _CURRENT.get()
        if run is None or run.done or not run.recording:
            return
        run.end_turn(None)
        run.turns += 1
        span = self.tracer.start_span(
            "turn", context=run.context, kind=SpanKind.INTERNAL, attributes={"agentloop.turn.index": run.turns}
        )
        run.turn = (span, trace.set_span_in_context(span, run.context))

    def _message_end(self, event: Any) -> None:
        message = event.message
        if message.role != "assistant":
            return
        run = _CURRENT.get()
        if run is not None and not run.done:
            run.last = time.time_ns()
            usage: Usage = message.usage
            run.input_tokens += _input_tokens(usage)
            run.output_tokens += usage.output

    def _turn_end(self, event: Any) -> None:
        run = _CURRENT.get()
        if run is None or run.done:
            return
        run.last = time.time_ns()
        message: AssistantMessage = event.message
        error_type = _ERROR_TYPES.get(message.stop_reason)
        run.end_turn(error_type, _mask(message.error_message, run.api_key) if error_type else None)

    def _agent_end(self, event: Any) -> None:
        run = _CURRENT.get()
        if run is None:
            return
        _CURRENT.set(run.previous)
        if run.done:
            return  # already ended by the exception or cancellation that ends the run
        run.end_turn(None)
        run.done = True
        span = run.span
        if span.is_recording():
            span.set_attribute("gen_ai.usage.input_tokens", run.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", run.output_tokens)
        last = next((m for m in reversed(event.messages) if m.role == "assistant"), None)
        error_type = None if last is None else _ERROR_TYPES.get(last.stop_reason)
        _end(span, error_type, _mask(last.error_message, run.api_key) if error_type and last else None)

    # --- model calls (the stream function) -----------------------------------------------

    def wrap_stream_fn(self, stream_fn: StreamFn | None = None) -> StreamFn:
        """`stream_fn` (None: the default one) with a `chat {model}` span around each call."""
        stream_fn = resolve_stream_fn(stream_fn)

        def traced(model: Model, context: Context, options: StreamOptions) -> Any:
            run = _CURRENT.get()
            if run is not None:
                if not run.recording:
                    return stream_fn(model, context, options)  # a run sampled out records nothing
                if run.done:
                    run = None
            attributes = self._chat_attributes(model, context, options)
            if run is not None:
                run.api_key = options.api_key
                if not run.described:  # the run's first model call describes the run
                    run.described = True
                    if run.span.is_recording():
                        run.span.set_attributes({k: attributes[k] for k in _RUN_ATTRIBUTES if k in attributes})
            span = self.tracer.start_span(
                f"chat {model.id}",
                context=run.parent() if run is not None else None,
                kind=SpanKind.CLIENT,
                attributes=attributes,
            )
            try:
                source = stream_fn(model, context, options)
            except BaseException as exc:
                _fail(span, run, exc, options.signal.aborted, options.api_key)
                raise
            if not span.is_recording():
                return source  # sampled out: nothing to record, no cost per event
            return self._chat_events(span, run, source, options)

        return traced

    def _chat_attributes(self, model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": model.provider or model.api,
            "gen_ai.request.model": model.id,
        }
        if options.temperature is not None:
            attributes["gen_ai.request.temperature"] = float(options.temperature)
        if options.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = options.max_tokens
        if options.session_id:
            attributes["gen_ai.conversation.id"] = options.session_id
        if model.base_url:
            try:
                url = urlsplit(model.base_url)
                host, port = url.hostname, url.port
            except ValueError:  # not a URL: no server attributes
                host, port = None, None
            if host:
                attributes["server.address"] = host
            if port is not None:
                attributes["server.port"] = port
        if self.record_content:
            key = options.api_key
            if context.system_prompt:
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": context.system_prompt}], key
                )
            attributes["gen_ai.input.messages"] = _json([_message_parts(m) for m in context.messages], key)
        return attributes

    async def _chat_events(
        self, span: Span, run: _RunSpans | None, source: Any, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        """The model's events, unchanged, up to the terminal one, where the span ends (or where
        the stream is cut). Nothing after it is read: the loop reads no further either, and a
        stream that waits for more after its terminal event would never end."""
        ended = False
        try:
            async with opened_stream(source) as events:
                read = events.__anext__
                while True:
                    try:
                        event = await read()
                    except StopAsyncIteration:
                        break
                    if getattr(event, "type", None) in _TERMINAL:
                        ended = True
                        self._chat_end(span, event, options.api_key)
                        yield event
                        return
                    yield event
        except BaseException as exc:
            if not ended:
                ended = True
                _fail(span, run, exc, options.signal.aborted, options.api_key)
            raise
        finally:
            if not ended:  # the stream ended without a terminal event
                _end(span, "aborted" if options.signal.aborted else "model_error", "no terminal event")

    def _chat_end(self, span: Span, event: Any, api_key: str | None) -> None:
        message: AssistantMessage = event.message if event.type == "done" else event.error
        usage = message.usage
        finish_reason = _FINISH_REASONS.get(message.stop_reason, "error")
        attributes: dict[str, Any] = {
            "gen_ai.response.model": message.model,
            "gen_ai.response.finish_reasons": (finish_reason,),
            "gen_ai.usage.input_tokens": _input_tokens(usage),
            "gen_ai.usage.output_tokens": usage.output,
        }
        if message.response_id:
            attributes["gen_ai.response.id"] = message.response_id
        if usage.cache_read:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read
        if usage.cache_write:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write
        if self.record_content:
            output = _message_parts(message)
            output["finish_reason"] = finish_reason
            attributes["gen_ai.output.messages"] = _json([output], api_key)
        span.set_attributes(attributes)
        error_type = _ERROR_TYPES.get(message.stop_reason)
        _end(span, error_type, _mask(message.error_message, api_key) if error_type else None)

    # --- tool calls (wrap_tool_call) -----------------------------------------------------

    async def wrap_tool_call(self, invocation: ToolInvocation, proceed: Callable[[], Awaitable[object]]) -> object:
        """Run a tool call in an `execute_tool {tool}` span, current while the tool runs.

        Pass as `AgentLoopConfig(wrap_tool_call=...)` (`instrument` does this, chaining yours, and
        knows the config's `propagate` exceptions, which end the run and its spans).
        """
        return await self._tool_call(invocation, proceed, ())

    async def _tool_call(
        self,
        invocation: ToolInvocation,
        proceed: Callable[[], Awaitable[object]],
        propagate: tuple[type[BaseException], ...],
    ) -> object:
        run = _CURRENT.get()
        if run is not None:
            if not run.recording:  # sampled out: the tool's own spans see the run's decision
                return await _current_in(run.context, proceed, run)
            if run.done:
                run = None
        tool = invocation.tool
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": invocation.tool_call.id,
            "gen_ai.tool.type": "function",
        }
        if tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        key = run.api_key if run is not None else None
        if self.record_content:
            attributes["gen_ai.tool.call.arguments"] = _json(_plain(invocation.args), key)
        parent = run.parent() if run is not None else otel_context.get_current()
        span = self.tracer.start_span(
            f"execute_tool {tool.name}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )
        try:
            result = await _current_in(trace.set_span_in_context(span, parent), proceed, run)
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                if invocation.signal.aborted:
                    _end(span, "aborted", "aborted")
                else:
                    _end(span, "cancelled", "cancelled")
                    if run is not None:
                        run.fail("cancelled", "cancelled")
            elif isinstance(exc, ToolTimeoutError):
                _end(span, "timeout", f"timed out after {tool.timeout:g} s")
            else:
                error_type = type(exc).__qualname__
                _end(span, error_type, _mask(str(exc), key))
                if run is not None and (not isinstance(exc, Exception) or isinstance(exc, propagate)):
                    run.fail(error_type, _mask(str(exc), key))
            raise
        if isinstance(result, AgentToolResult):
            if self.record_content:
                span.set_attribute("gen_ai.tool.call.result", _json(_content_text(result.content), key))
            if result.is_error:
                _end(span, "tool_error", _mask(_content_text(result.content), key))
                return result
        elif self.record_content and isinstance(result, str):
            span.set_attribute("gen_ai.tool.call.result", _json(result, key))
        _end(span, None)
        return result


def instrument(
    config: AgentLoopConfig,
    stream_fn: StreamFn | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
    record_content: bool = False,
    agent_name: str | None = None,
) -> tuple[AgentLoopConfig, StreamFn]:
    """Trace the runs of `config`: returns the config and the stream function to run with.

    ```python
    config, stream_fn = agentloop.otel.instrument(config, stream_fn)
    async with agent_loop(prompts, context, config, stream_fn=stream_fn) as events: ...
    ```

    See `Tracing` for the arguments.
    """
    tracing = Tracing(tracer_provider=tracer_provider, record_content=record_content, agent_name=agent_name)
    return tracing.instrument(config, stream_fn)


# --- helpers ---------------------------------------------------------------------------------


def _chain_observe(
    first: Callable[[AgentEvent], None], second: Callable[[AgentEvent], None]
) -> Callable[[AgentEvent], None]:
    def observe(event: AgentEvent) -> None:
        first(event)
        second(event)

    return observe


async def _current_in(
    context: otel_context.Context, proceed: Callable[[], Awaitable[object]], run: _RunSpans | None
) -> object:
    """Await a tool call with `context` current (its own spans nest there), in this task only."""
    token = otel_context.attach(context)
    if run is not None:
        run.tools_running += 1  # a run started meanwhile in this task nests in this one
    try:
        return await proceed()
    finally:
        otel_context.detach(token)
        if run is not None:
            run.tools_running -= 1
            run.last = time.time_ns()


def _end(span: Span, error_type: str | None, description: str | None = None, end_time: int | None = None) -> None:
    if error_type is not None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, description or error_type))
    span.end(end_time)


def _fail(span: Span, run: _RunSpans | None, exc: BaseException, aborted: bool, key: str | None) -> None:
    """A model call cut by an exception: abort (the run goes on) or anything else (the run ends)."""
    description: str | None
    if isinstance(exc, (anyio.get_cancelled_exc_class(), GeneratorExit)):
        if aborted:
            _end(span, "aborted", "aborted")
            return
        error_type, description = "cancelled", "cancelled"
    else:
        error_type, description = type(exc).__qualname__, _mask(str(exc), key)
    _end(span, error_type, description)
    if run is not None:
        run.fail(error_type, description)


def _input_tokens(usage: Usage) -> int:
    """All input tokens, cached ones included (the conventions count them in the input)."""
    return usage.input + usage.cache_read + usage.cache_write


def _mask(text: str | None, key: str | None) -> str | None:
    if text is None or not key:
        return text
    return text.replace(key, "***")


def _json(value: Any, key: str | None) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _mask(text, key) or text


def _plain(value: Any) -> Any:
    """Tool arguments as JSON can hold them (a pydantic model as its dump)."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _content_text(content: Sequence[Any]) -> str:
    return "\n".join(block.text if block.type == "text" else f"[{block.type}]" for block in content)


def _message_parts(message: Any) -> dict[str, Any]:
    """A message in the conventions' shape: `{"role", "parts": [...]}`; images are named, not inlined."""
    role = message.role
    if role == "toolResult":
        return {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": message.tool_call_id, "response": _content_text(message.content)}
            ],
        }
    content = message.content
    if isinstance(content, str):
        return {"role": role, "parts": [{"type": "text", "content": content}]}
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.type
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.thinking})
        elif kind == "toolCall":
            parts.append({"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments})
        elif kind == "image":
            parts.append({"type": "blob", "modality": "image", "mime_type": block.mime_type})
    return {"role": "assistant" if role == "assistant" else role, "parts": parts}
