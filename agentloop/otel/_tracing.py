"""`Tracing`: the observe hook, the stream-function wrapper and the tool-call wrapper."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Tracer, TracerProvider

from .._core._agent import Agent
from .._core._config import AgentLoopConfig, ToolInvocation, call
from .._core._loop import resolve_stream_fn
from .._types._errors import ToolTimeoutError
from .._types._events import AgentEvent, AssistantMessageEvent
from .._types._messages import AgentToolResult, AssistantMessage, Context, Model, Usage
from .._types._stream_fn import MaybeAwaitable, StreamFn, StreamOptions, opened_stream
from ..context._compaction import Compactor
from ._compaction import compaction_listener
from ._content import content_text, counted, input_tokens, mask, message_parts, plain, to_json, tool_definitions
from ._metrics import ChatMetrics, response_model
from ._spans import CURRENT, ERROR_TYPES, RunSpans, chain_observe, current_in, end_span, fail_span

__all__ = ("Tracing", "instrument")

_SCOPE = "agentloop"
_FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error", "aborted": "aborted"}
_TERMINAL = ("done", "error")
_RUN_ATTRIBUTES = ("gen_ai.provider.name", "gen_ai.request.model", "gen_ai.conversation.id")


class Tracing:
    """Traces runs as OpenTelemetry spans; `instrument` applies it to a config and a stream function.

    Args:
        tracer_provider: Where spans go (default: the global provider, `trace.get_tracer_provider()`).
        record_content: Record messages, the system prompt, tool arguments and tool results
            (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`,
            `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) and the tools offered to the
            model (`gen_ai.tool.definitions`). Off by default: they may hold personal data.
        agent_name: `gen_ai.agent.name` of the run spans (the span is named `invoke_agent {name}`).
        meter_provider: Where the GenAI client metrics go: the histograms
            `gen_ai.client.token.usage` (`{token}`, one record per call and `gen_ai.token.type`)
            and `gen_ai.client.operation.duration` (`s`, with `error.type` when the call failed),
            with the conventions' bucket boundaries. None: no metrics. They are recorded for runs
            sampled out of tracing too.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        record_content: bool = False,
        agent_name: str | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        if type(record_content) is not bool:
            raise TypeError(f"record_content must be a bool, got {type(record_content).__name__}")
        if agent_name is not None and not isinstance(agent_name, str):
            raise TypeError(f"agent_name must be a str or None, got {type(agent_name).__name__}")
        if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
            raise TypeError(f"tracer_provider must be an OpenTelemetry TracerProvider or None, got {tracer_provider!r}")
        if meter_provider is not None and not hasattr(meter_provider, "get_meter"):
            raise TypeError(f"meter_provider must be an OpenTelemetry MeterProvider or None, got {meter_provider!r}")
        self.tracer: Tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        self.metrics = ChatMetrics(meter_provider, _SCOPE) if meter_provider is not None else None
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
        return config.replace(observe=observe, wrap_tool_call=wrap_tool_call), traced_stream_fn

    def instrument_agent(self, agent: Agent) -> Agent:
        """Trace every run of `agent` from its next one on (its options' `observe` and
        `wrap_tool_call` and its stream function are replaced by tracing ones that call its own);
        returns the agent.

        Instrument an agent once: a second call would trace each run twice.
        """
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        traced_stream_fn = self.wrap_stream_fn(agent.stream_fn)
        options = agent.options
        observe, wrap_tool_call = self._hooks(options.observe, options.wrap_tool_call, options.propagate)
        agent.options = options.replace(observe=observe, wrap_tool_call=wrap_tool_call)
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
        observe = self.observe if user_observe is None else chain_observe(self.observe, user_observe)

        async def wrap_tool_call(invocation: ToolInvocation, proceed: Callable[[], Awaitable[object]]) -> object:
            if user_wrap is None:
                return await self._tool_call(invocation, proceed, propagate)
            return await self._tool_call(invocation, lambda: call(user_wrap, invocation, proceed), propagate)

        return observe, wrap_tool_call

    def instrument_compactor(self, compactor: Compactor) -> Compactor:
        """Trace every compaction of `compactor` (`Compaction(...).attach(agent)`) as a
        `compaction` span; returns the compactor.

        In a run, the span hangs under the turn whose model call it came before, and the
        summary's model call (through an instrumented stream function) nests in it. Attributes:
        `agentloop.compaction.reason` (`threshold`, `overflow` or `manual`),
        `agentloop.compaction.tokens_before`, `agentloop.compaction.tokens_after`,
        `agentloop.compaction.compacted_messages`, `agentloop.compaction.first_kept_index`,
        `agentloop.compaction.updated`, and with `record_content` the summary
        (`agentloop.compaction.summary`). A summary that failed ends the span with
        `error.type` `compaction_error`.
        """
        if not isinstance(compactor, Compactor):
            raise TypeError(f"compactor must be an agentloop.context.Compactor, got {type(compactor).__name__}")
        compactor.subscribe(compaction_listener(self.tracer, self.record_content))
        return compactor

    # --- runs and turns (observe) -------------------------------------------------------

    def _agent_start(self, event: Any) -> None:
        previous = CURRENT.get()
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
        CURRENT.set(RunSpans(span, previous))

    def _turn_start(self, event: Any) -> None:
        run = CURRENT.get()
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
        run = CURRENT.get()
        if run is not None and not run.done:
            run.last = time.time_ns()
            usage: Usage = message.usage
            if counted(usage):
                run.input_tokens = (run.input_tokens or 0) + input_tokens(usage)
                run.output_tokens = (run.output_tokens or 0) + usage.output

    def _turn_end(self, event: Any) -> None:
        run = CURRENT.get()
        if run is None or run.done:
            return
        run.last = time.time_ns()
        message: AssistantMessage = event.message
        error_type = ERROR_TYPES.get(message.stop_reason)
        run.end_turn(error_type, mask(message.error_message, run.api_key) if error_type else None)

    def _agent_end(self, event: Any) -> None:
        run = CURRENT.get()
        if run is None:
            return
        CURRENT.set(run.previous)
        if run.done:
            return  # already ended by the exception or cancellation that ends the run
        run.end_turn(None)
        run.done = True
        span = run.span
        if span.is_recording() and run.input_tokens is not None and run.output_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", run.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", run.output_tokens)
        last = next((m for m in reversed(event.messages) if m.role == "assistant"), None)
        error_type = None if last is None else ERROR_TYPES.get(last.stop_reason)
        end_span(span, error_type, mask(last.error_message, run.api_key) if error_type and last else None)

    # --- model calls (the stream function) -----------------------------------------------

    def wrap_stream_fn(self, stream_fn: StreamFn | None = None) -> StreamFn:
        """`stream_fn` (None: the default one) with a `chat {model}` span around each call."""
        stream_fn = resolve_stream_fn(stream_fn)

        def traced(model: Model, context: Context, options: StreamOptions) -> Any:
            started = time.perf_counter()
            run = CURRENT.get()
            if run is not None:
                if not run.recording:  # a run sampled out records no span (metrics still count)
                    if self.metrics is None:
                        return stream_fn(model, context, options)
                    return self._chat_call(stream_fn, trace.INVALID_SPAN, None, model, context, options, {}, started)
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
            if not span.is_recording() and self.metrics is None:
                return stream_fn(model, context, options)  # sampled out: nothing to record
            return self._chat_call(stream_fn, span, run, model, context, options, attributes, started)

        return traced

    def _chat_call(
        self,
        stream_fn: StreamFn,
        span: Span,
        run: RunSpans | None,
        model: Model,
        context: Context,
        options: StreamOptions,
        attributes: dict[str, Any],
        started: float,
    ) -> Any:
        if not attributes:  # not made for a span: the metrics' own attributes
            attributes = self._chat_attributes(model, context, options, content=False)
        try:
            source = stream_fn(model, context, options)
        except BaseException as exc:
            error_type = fail_span(span, run, exc, options.signal.aborted, options.api_key)
            self._measure(attributes, started, None, error_type)
            raise
        return self._chat_events(span, run, source, options, attributes, started)

    def _measure(
        self, attributes: dict[str, Any], started: float, message: AssistantMessage | None, error_type: str | None
    ) -> None:
        if self.metrics is not None:
            self.metrics.record(attributes, time.perf_counter() - started, message, error_type)

    def _chat_attributes(
        self, model: Model, context: Context, options: StreamOptions, content: bool = True
    ) -> dict[str, Any]:
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
        if self.record_content and content:
            key = options.api_key
            if context.tools:
                attributes["gen_ai.tool.definitions"] = tool_definitions(context.tools, key)
            if context.system_prompt:
                attributes["gen_ai.system_instructions"] = to_json(
                    [{"type": "text", "content": context.system_prompt}], key
                )
            attributes["gen_ai.input.messages"] = to_json([message_parts(m) for m in context.messages], key)
        return attributes

    async def _chat_events(
        self,
        span: Span,
        run: RunSpans | None,
        source: Any,
        options: StreamOptions,
        attributes: dict[str, Any],
        started: float,
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
                        message = self._chat_end(span, event, options.api_key)
                        self._measure(attributes, started, message, ERROR_TYPES.get(message.stop_reason))
                        yield event
                        return
                    yield event
        except BaseException as exc:
            if not ended:
                ended = True
                error_type = fail_span(span, run, exc, options.signal.aborted, options.api_key)
                self._measure(attributes, started, None, error_type)
            raise
        finally:
            if not ended:  # the stream ended without a terminal event
                error_type = "aborted" if options.signal.aborted else "model_error"
                end_span(span, error_type, "no terminal event")
                self._measure(attributes, started, None, error_type)

    def _chat_end(self, span: Span, event: Any, api_key: str | None) -> AssistantMessage:
        message: AssistantMessage = event.message if event.type == "done" else event.error
        usage = message.usage
        finish_reason = _FINISH_REASONS.get(message.stop_reason, "error")
        attributes: dict[str, Any] = {
            "gen_ai.response.model": response_model(message),
            "gen_ai.response.finish_reasons": (finish_reason,),
        }
        if counted(usage):
            attributes["gen_ai.usage.input_tokens"] = input_tokens(usage)
            attributes["gen_ai.usage.output_tokens"] = usage.output
        if message.response_id:
            attributes["gen_ai.response.id"] = message.response_id
        if usage.cache_read:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read
        if usage.cache_write:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write
        if self.record_content:
            output = message_parts(message)
            output["finish_reason"] = finish_reason
            attributes["gen_ai.output.messages"] = to_json([output], api_key)
        span.set_attributes(attributes)
        error_type = ERROR_TYPES.get(message.stop_reason)
        end_span(span, error_type, mask(message.error_message, api_key) if error_type else None)
        return message

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
        run = CURRENT.get()
        if run is not None:
            if not run.recording:  # sampled out: the tool's own spans see the run's decision
                return await current_in(run.context, proceed, run)
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
            attributes["gen_ai.tool.call.arguments"] = to_json(plain(invocation.args), key)
        parent = run.parent() if run is not None else otel_context.get_current()
        span = self.tracer.start_span(
            f"execute_tool {tool.name}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )
        try:
            result = await current_in(trace.set_span_in_context(span, parent), proceed, run)
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                if invocation.signal.aborted:
                    end_span(span, "aborted", "aborted")
                else:
                    end_span(span, "cancelled", "cancelled")
                    if run is not None:
                        run.fail("cancelled", "cancelled")
            elif isinstance(exc, ToolTimeoutError):
                end_span(span, "timeout", f"timed out after {tool.timeout:g} s")
            else:
                error_type = type(exc).__qualname__
                end_span(span, error_type, mask(str(exc), key))
                if run is not None and (not isinstance(exc, Exception) or isinstance(exc, propagate)):
                    run.fail(error_type, mask(str(exc), key))
            raise
        if isinstance(result, AgentToolResult):
            if self.record_content:
                span.set_attribute("gen_ai.tool.call.result", to_json(content_text(result.content), key))
            if result.is_error:
                end_span(span, "tool_error", mask(content_text(result.content), key))
                return result
        elif self.record_content and isinstance(result, str):
            span.set_attribute("gen_ai.tool.call.result", to_json(result, key))
        end_span(span, None)
        return result


def instrument(
    config: AgentLoopConfig,
    stream_fn: StreamFn | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
    record_content: bool = False,
    agent_name: str | None = None,
    meter_provider: MeterProvider | None = None,
) -> tuple[AgentLoopConfig, StreamFn]:
    """Trace the runs of `config`: returns the config and the stream function to run with.

    ```python
    config, stream_fn = agentloop.otel.instrument(config, stream_fn)
    async with agent_loop(prompts, context, config, stream_fn=stream_fn) as events: ...
    ```

    See `Tracing` for the arguments.
    """
    tracing = Tracing(
        tracer_provider=tracer_provider,
        record_content=record_content,
        agent_name=agent_name,
        meter_provider=meter_provider,
    )
    return tracing.instrument(config, stream_fn)
