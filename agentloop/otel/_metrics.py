"""The GenAI client metrics of model calls: `gen_ai.client.token.usage` and
`gen_ai.client.operation.duration`, histograms with the conventions' attributes and buckets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider

from .._types._messages import AssistantMessage
from ._content import counted, input_tokens

__all__ = ("ChatMetrics", "response_model")

_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_KEYS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "server.address", "server.port")
"""The chat span's attributes that metrics carry too (never content: metrics are aggregated)."""


class ChatMetrics:
    """The two histograms, recorded once per model call when it ends."""

    def __init__(self, meter_provider: MeterProvider, scope: str) -> None:
        meter = metrics.get_meter(scope, meter_provider=meter_provider)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    def record(
        self,
        on_span: Mapping[str, Any],
        seconds: float,
        message: AssistantMessage | None,
        error_type: str | None,
    ) -> None:
        """A call that ended after `seconds`: with its final message, or without one. Tokens are
        recorded only when the message counts them (see `counted`)."""
        attributes = {key: on_span[key] for key in _KEYS if key in on_span}
        if message is not None:
            attributes["gen_ai.response.model"] = response_model(message)
        if message is not None and counted(message.usage):
            self.tokens.record(input_tokens(message.usage), {**attributes, "gen_ai.token.type": "input"})
            self.tokens.record(message.usage.output, {**attributes, "gen_ai.token.type": "output"})
        if error_type is not None:
            attributes["error.type"] = error_type
        self.duration.record(seconds, attributes)


def response_model(message: AssistantMessage) -> str:
    """The model that answered: the provider's name for it when the message carries one (pi's
    `responseModel`, a dated version of the requested model), else the requested one."""
    answered = (message.extra or {}).get("responseModel")
    return answered if isinstance(answered, str) and answered else message.model
