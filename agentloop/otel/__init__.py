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

Content (messages, system prompt, tool definitions, tool arguments and results) is recorded
only with `record_content=True`; API keys are never read into spans, and the key a model call
used is masked out of any error text or content that is recorded.

`gen_ai.response.model` is the model that answered when it is not the one asked for (a dated
version, a fallback: the providers keep it as pi-ai does, in the message's
`extra["responseModel"]`), else the requested one.

Metrics: with a `meter_provider`, each model call records the GenAI client histograms
`gen_ai.client.token.usage` and `gen_ai.client.operation.duration` (see `Tracing`).

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

try:
    import opentelemetry.trace as _trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    from ..cli._install import install_command

    hint = install_command("otel")
    raise ImportError(f"agentloop.otel needs the OpenTelemetry API, the 'otel' extra: {hint}") from exc

from ._tracing import Tracing, instrument

__all__ = ("Tracing", "instrument")
