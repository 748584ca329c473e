"""The model registry and `stream_simple`, the stream function that dispatches on `model.api`.

A built-in catalogue (current OpenAI and Anthropic models, and the Gemini, Azure OpenAI, Mistral
and Amazon Bedrock models pi-ai 1.6.1 lists; prices in dollars per million tokens) plus the models
users register, for example a local server:

    register_model(Model(id="smollm2", api="openai-completions", provider="llama.cpp",
                         base_url="http://127.0.0.1:8080/v1", context_window=8192, max_tokens=2048))
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent
from .._types._messages import Context, Model, ModelCost
from .._types._stream_fn import StreamOptions
from ._anthropic import ANTHROPIC_BASE_URL, stream_anthropic
from ._azure import stream_azure_openai_responses
from ._azure_models import AZURE_MODELS
from ._bedrock import stream_bedrock
from ._bedrock_models import BEDROCK_MODELS
from ._google import stream_google
from ._google_models import GOOGLE_MODELS
from ._google_vertex import stream_google_vertex
from ._http import AsyncClient, HTTPOptions
from ._mistral import stream_mistral
from ._mistral_models import MISTRAL_MODELS
from ._openai_completions import OPENAI_BASE_URL, stream_openai_completions
from ._openai_responses import stream_openai_responses
from ._stream import AssistantMessageEventStream, check_arguments

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "API_STREAMS",
    "ProviderStreamFn",
    "get_model",
    "get_models",
    "get_providers",
    "local_model",
    "openai_compatible_model",
    "register_model",
    "stream_simple",
)

ProviderStreamFn: TypeAlias = Callable[..., AssistantMessageEventStream]

API_STREAMS: dict[str, ProviderStreamFn] = {
    "openai-completions": stream_openai_completions,
    "openai-responses": stream_openai_responses,
    "anthropic-messages": stream_anthropic,
    "bedrock-converse-stream": stream_bedrock,
    "google-generative-ai": stream_google,
    "google-vertex": stream_google_vertex,
    "azure-openai-responses": stream_azure_openai_responses,
    "mistral-conversations": stream_mistral,
}
"""The built-in wire APIs and their stream functions."""


def stream_simple(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
) -> AssistantMessageEventStream:
    """Stream a response with the built-in stream function of `model.api`.

    An API without a built-in stream function ends the stream with one `error` event.
    """
    check_arguments(model, context, options)
    stream = API_STREAMS.get(model.api)
    if stream is None:
        return AssistantMessageEventStream(_unknown_api(model))
    return stream(model, context, options, http=http, client=client)


async def _unknown_api(model: Model) -> AsyncGenerator[AssistantMessageEvent, None]:
    builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
    known = ", ".join(sorted(API_STREAMS))
    yield builder.error("error", f"No API provider registered for api: {model.api} (built in: {known})")


def _openai(
    model_id: str,
    name: str,
    cost: tuple[float, float, float],
    context_window: int,
    max_tokens: int,
    *,
    reasoning: bool,
    images: bool = True,
) -> Model:
    return Model(
        id=model_id,
        name=name,
        api="openai-responses",
        provider="openai",
        base_url=OPENAI_BASE_URL,
        reasoning=reasoning,
        input=("text", "image") if images else ("text",),
        cost=ModelCost(input=cost[0], output=cost[1], cache_read=cost[2]),
        context_window=context_window,
        max_tokens=max_tokens,
    )


def _anthropic(
    model_id: str,
    name: str,
    cost: tuple[float, float, float, float],
    max_tokens: int,
    *,
    context_window: int = 200_000,
    compat: Mapping[str, Any] | None = None,
) -> Model:
    return Model(
        id=model_id,
        name=name,
        api="anthropic-messages",
        provider="anthropic",
        base_url=ANTHROPIC_BASE_URL,
        reasoning=True,
        input=("text", "image"),
        cost=ModelCost(input=cost[0], output=cost[1], cache_read=cost[2], cache_write=cost[3]),
        context_window=context_window,
        max_tokens=max_tokens,
        compat=compat,
    )


_ADAPTIVE_1M: dict[str, Any] = {"context_window": 1_000_000, "compat": {"adaptive_thinking": True}}
"""Claude 4.6: a 1M-token window, and adaptive thinking only."""

_BUILTIN: tuple[Model, ...] = (
    # Ids, names, windows and prices as pi-ai 1.6.1 lists them.
    _openai("gpt-5.1", "GPT-5.1", (1.25, 10.0, 0.125), 400_000, 128_000, reasoning=True),
    _openai("gpt-5", "GPT-5", (1.25, 10.0, 0.125), 400_000, 128_000, reasoning=True),
    _openai("gpt-5-mini", "GPT-5 Mini", (0.25, 2.0, 0.025), 400_000, 128_000, reasoning=True),
    _openai("gpt-5-nano", "GPT-5 Nano", (0.05, 0.4, 0.005), 400_000, 128_000, reasoning=True),
    _openai("gpt-4.1", "GPT-4.1", (2.0, 8.0, 0.5), 1_047_576, 32_768, reasoning=False),
    _openai("gpt-4.1-mini", "GPT-4.1 mini", (0.4, 1.6, 0.1), 1_047_576, 32_768, reasoning=False),
    _openai("gpt-4o", "GPT-4o", (2.5, 10.0, 1.25), 128_000, 16_384, reasoning=False),
    _openai("gpt-4o-mini", "GPT-4o mini", (0.15, 0.6, 0.075), 128_000, 16_384, reasoning=False),
    _anthropic("claude-opus-4-6", "Claude Opus 4.6", (5.0, 25.0, 0.5, 6.25), 128_000, **_ADAPTIVE_1M),
    _anthropic("claude-sonnet-4-6", "Claude Sonnet 4.6", (3.0, 15.0, 0.3, 3.75), 128_000, **_ADAPTIVE_1M),
    _anthropic("claude-opus-4-5", "Claude Opus 4.5 (latest)", (5.0, 25.0, 0.5, 6.25), 64_000),
    _anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5 (latest)", (3.0, 15.0, 0.3, 3.75), 64_000),
    _anthropic("claude-haiku-4-5", "Claude Haiku 4.5 (latest)", (1.0, 5.0, 0.1, 1.25), 64_000),
    *BEDROCK_MODELS,
    *GOOGLE_MODELS,
    *AZURE_MODELS,
    *MISTRAL_MODELS,
)

_MODELS: dict[tuple[str, str], Model] = {(m.provider, m.id): m for m in _BUILTIN}


def openai_compatible_model(
    model_id: str,
    base_url: str,
    *,
    name: str = "",
    provider: str = "openai-compatible",
    reasoning: bool = False,
    images: bool = False,
    context_window: int = 0,
    max_tokens: int = 0,
    compat: Mapping[str, Any] | None = None,
) -> Model:
    """A model of an OpenAI-compatible server (llama.cpp, Ollama, vLLM, LM Studio...).

    `base_url` is the API root that `/chat/completions` is appended to, usually ending in `/v1`
    (`http://127.0.0.1:11434/v1` for Ollama). The provider name has no key in the environment,
    so no key is sent unless one is given; the cost is zero.
    """
    if not isinstance(model_id, str):
        raise TypeError(f"model_id must be a str, got {type(model_id).__name__}")
    if not isinstance(base_url, str):
        raise TypeError(f"base_url must be a str (the API root, usually ending in /v1), got {type(base_url).__name__}")
    return Model(
        id=model_id,
        name=name or model_id,
        api="openai-completions",
        provider=provider,
        base_url=base_url.rstrip("/"),
        reasoning=reasoning,
        input=("text", "image") if images else ("text",),
        context_window=context_window,
        max_tokens=max_tokens,
        compat=compat,
    )


def local_model(url: str, model_id: str = "smollm2-135m") -> Model:
    """SmolLM2-135M-Instruct served by llama.cpp at `url` (the server root, no `/v1`).

    Thinking follows the thinking level through llama.cpp's `chat_template_kwargs` and
    `thinking_budget_tokens` (the server's template must support it).
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str (the llama.cpp server root), got {type(url).__name__}")
    if not url:
        raise ValueError("local_model: url must be the server's base URL, got ''")
    return openai_compatible_model(
        model_id,
        url.rstrip("/") + "/v1",
        name="SmolLM2-135M-Instruct (llama.cpp)",
        provider="local",
        reasoning=True,
        context_window=8192,
        max_tokens=2048,
        compat={"thinking_format": "llama.cpp"},
    )


def get_model(provider: str, model_id: str) -> Model:
    """The registered model `model_id` of `provider`.

    Raises:
        LookupError: No such model; the message lists the provider's models.
    """
    model = _MODELS.get((provider, model_id))
    if model is None:
        known = sorted(m.id for (p, _), m in _MODELS.items() if p == provider)
        if not known:
            raise LookupError(
                f"unknown provider {provider!r}; known providers: {', '.join(get_providers())} "
                "(register a model with register_model)"
            )
        raise LookupError(f"unknown model {model_id!r} for provider {provider!r}; known: {', '.join(known)}")
    return model


def get_models(provider: str | None = None) -> list[Model]:
    """The registered models (of one provider, if given), in registration order."""
    return [m for (p, _), m in _MODELS.items() if provider is None or p == provider]


def get_providers() -> list[str]:
    """The providers that have registered models."""
    return sorted({p for p, _ in _MODELS})


def register_model(model: Model) -> Callable[[], None]:
    """Add `model` to the registry (replacing one with the same provider and id).

    Returns a function that removes it again (restoring a built-in model it replaced).
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be an agentloop.Model, got {type(model).__name__}")
    if not model.id or not model.provider:
        raise ValueError(
            f"a registered model needs an id and a provider, got id={model.id!r}, provider={model.provider!r}"
        )
    key = (model.provider, model.id)
    previous = _MODELS.get(key)
    _MODELS[key] = model

    def remove() -> None:
        if _MODELS.get(key) is model:
            if previous is not None:
                _MODELS[key] = previous
            else:
                del _MODELS[key]

    return remove
