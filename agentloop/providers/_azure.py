"""Azure OpenAI Responses (`api="azure-openai-responses"`): the OpenAI Responses wire on an Azure
OpenAI (or Azure AI Foundry) resource, as pi-ai speaks it.

The request is OpenAI Responses' (the same input items, tools and reasoning; the stream is read by
the Responses parser), sent to `{base_url}/responses?api-version={version}` with the deployment
name as `model`, and authenticated by an `api-key` header or a Microsoft Entra ID bearer token.

Where each setting comes from, first found first:

* base URL: `model.base_url`, `$AZURE_OPENAI_BASE_URL`, or
  `https://{$AZURE_OPENAI_RESOURCE_NAME}.openai.azure.com/openai/v1`. On an Azure host
  (`*.openai.azure.com`, `*.cognitiveservices.azure.com`, `*.ai.azure.com`) a base URL whose path
  is empty, `/openai` or `/openai/v1/responses` becomes `.../openai/v1` (the v1 API); any other
  URL (a gateway in front of Azure) is used as given.
* deployment: the `azure_deployment_name` compat flag, the model's entry in
  `$AZURE_OPENAI_DEPLOYMENT_NAME_MAP` (`model-id=deployment,...`), else the model id.
* API version: the `azure_api_version` compat flag, `$AZURE_OPENAI_API_VERSION`, else `v1`.
* credentials: `azure_ad_token_provider=` (an Entra ID token per request, sent as
  `Authorization: Bearer`), else the key `options.api_key` or `$AZURE_OPENAI_API_KEY` (sent as
  `api-key`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from .._types._messages import Context, Model, ModelCost
from .._types._stream_fn import StreamOptions
from ._auth import fetch_token, resolve_api_key
from ._errors import ProviderError
from ._http import AsyncClient, HTTPOptions, run_stream
from ._openai_responses import ResponsesParser, convert_input
from ._request import Request, check_llm_messages, compat, native_output, request_headers, tool_specs
from ._stream import AssistantMessageEventStream
from ._thinking import model_thinking_level

__all__ = (
    "AZURE_API_VERSION",
    "AzureResponsesParser",
    "TokenProvider",
    "azure_base_url",
    "azure_deployment_name",
    "azure_openai_model",
    "build_azure_request",
    "stream_azure_openai_responses",
)

AZURE_API_VERSION = "v1"
"""The `api-version` sent when neither the model nor `$AZURE_OPENAI_API_VERSION` names one."""
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".ai.azure.com")
_V1_PATHS = frozenset({"", "/", "/openai", "/openai/v1/responses"})
_MIN_OUTPUT_TOKENS = 16  # the Responses API rejects less
_CACHE_KEY_LENGTH = 64

TokenProvider = Callable[[], "str | Awaitable[str]"]
"""A function returning a Microsoft Entra ID access token: an async function, or a plain one (run in
a worker thread, as it may block on the network), called once per request."""


def stream_azure_openai_responses(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
    azure_ad_token_provider: TokenProvider | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from an Azure OpenAI deployment over the Responses API.

    Arguments and result as `stream_openai_responses`, plus `azure_ad_token_provider`: a function
    giving a Microsoft Entra ID token for each request (for example azure-identity's
    `get_bearer_token_provider(credential, "https://cognitiveservices.azure.com/.default")`),
    sent as `Authorization: Bearer` instead of a key. A provider that fails or returns no token
    ends the stream with an `error` event naming the failure.
    """
    if azure_ad_token_provider is None:
        return run_stream(model, context, options, build_azure_request, AzureResponsesParser, http=http, client=client)
    if not callable(azure_ad_token_provider):
        kind = type(azure_ad_token_provider).__name__
        raise TypeError(f"azure_ad_token_provider must be a function returning a token, got {kind}")
    build = functools.partial(_build_with_token, provider=azure_ad_token_provider)
    return run_stream(model, context, options, build, AzureResponsesParser, http=http, client=client)


async def _build_with_token(
    model: Model, context: Context, options: StreamOptions, *, provider: TokenProvider
) -> Request:
    """The `Request` for one response, once the token provider has given a token for it."""
    token = await fetch_token(provider, "The Azure AD token provider")
    return build_azure_request(model, context, options, token=token)


# --- where the request goes -----------------------------------------------------------------


def azure_base_url(model: Model) -> str:
    """The base URL a request of `model` goes to (see the module docstring); ProviderError when
    none is configured or it is not a URL."""
    url = model.base_url.strip() or os.environ.get("AZURE_OPENAI_BASE_URL", "").strip()
    if not url:
        resource = os.environ.get("AZURE_OPENAI_RESOURCE_NAME", "").strip()
        if resource:
            url = f"https://{resource}.openai.azure.com/openai/v1"
    if not url:
        raise ProviderError(
            "Azure OpenAI base URL is required: set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, or give "
            "the model a base_url (azure_openai_model(..., base_url=... or resource_name=...))."
        )
    return _normalize(url)


def _normalize(url: str) -> str:
    try:
        parts = urlsplit(url.rstrip("/"))
        host = parts.hostname or ""
    except ValueError:
        parts, host = None, ""
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ProviderError(f"Invalid Azure OpenAI base URL: {url!r}")
    if host.endswith(_AZURE_HOSTS) and parts.path in _V1_PATHS:
        return urlunsplit((parts.scheme, parts.netloc, "/openai/v1", "", ""))
    return urlunsplit(parts)


def _deployment_map() -> dict[str, str]:
    mapping: dict[str, str] = {}
    for entry in os.environ.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "").split(","):
        model_id, _, deployment = entry.strip().partition("=")
        if model_id.strip() and deployment.strip():
            mapping[model_id.strip()] = deployment.strip()
    return mapping


def azure_deployment_name(model: Model) -> str:
    """The deployment a request of `model` names (see the module docstring)."""
    name = compat(model, "azure_deployment_name", None)
    if isinstance(name, str) and name:
        return name
    return _deployment_map().get(model.id) or model.id


def _api_version(model: Model) -> str:
    version = compat(model, "azure_api_version", None)
    if isinstance(version, str) and version:
        return version
    return os.environ.get("AZURE_OPENAI_API_VERSION") or AZURE_API_VERSION


# --- the request ----------------------------------------------------------------------------


def build_azure_request(model: Model, context: Context, options: StreamOptions, *, token: str | None = None) -> Request:
    """The `Request` for one response: with `token` (Entra ID) as a bearer token, else with the
    API key."""
    check_llm_messages(context)
    if token is None:
        key = resolve_api_key(model, options)
        if not key:
            raise ProviderError(
                f"No API key for provider {model.provider!r}: set AZURE_OPENAI_API_KEY, pass api_key, or give "
                "stream_azure_openai_responses an azure_ad_token_provider."
            )
        auth, secret = {"api-key": key}, key
    else:
        auth, secret = {"authorization": f"Bearer {token}"}, token
    url = f"{azure_base_url(model)}/responses?api-version={quote(_api_version(model), safe='')}"
    body: dict[str, Any] = {"model": azure_deployment_name(model), "input": convert_input(model, context)}
    body["stream"] = True
    if options.session_id:
        body["prompt_cache_key"] = options.session_id[:_CACHE_KEY_LENGTH]
    body["store"] = False
    if options.max_tokens:
        body["max_output_tokens"] = max(options.max_tokens, _MIN_OUTPUT_TOKENS)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = [
            {"type": "function", "name": name, "description": description, "parameters": parameters, "strict": False}
            for name, description, parameters in tool_specs(context.tools)
        ]
    if model.reasoning:
        _add_reasoning(body, model, options)
    text_format = native_output(model, options, "responses")
    if text_format is not None:
        body["text"] = {"format": text_format}
    return Request(url, request_headers(auth, model, options), body, secret)


def _add_reasoning(body: dict[str, Any], model: Model, options: StreamOptions) -> None:
    level = model_thinking_level(model, options)
    efforts: Mapping[str, Any] = compat(model, "thinking_level_map", None) or {}
    if level is not None:
        body["reasoning"] = {"effort": efforts.get(level) or level, "summary": "auto"}
        body["include"] = ["reasoning.encrypted_content"]
    elif "off" not in efforts or efforts["off"] is not None:  # a model that cannot turn it off: not asked to
        body["reasoning"] = {"effort": efforts.get("off") or "none"}


class AzureResponsesParser(ResponsesParser):
    """The Responses parser, with the cost at the model's prices whatever `service_tier` the
    response names (Azure's deployments carry their own pricing)."""

    def _usage(self, response: dict[str, Any]) -> None:
        super()._usage({**response, "service_tier": None})


# --- models ---------------------------------------------------------------------------------


def azure_openai_model(
    model_id: str,
    *,
    base_url: str | None = None,
    resource_name: str | None = None,
    deployment: str | None = None,
    api_version: str | None = None,
) -> Model:
    """A model on Azure OpenAI: the registry's `azure` model `model_id` (its prices, window and
    thinking levels), or a plain reasoning-less one for an id the registry does not list, with
    where it is served.

    Args:
        model_id: The OpenAI model id (`gpt-5-mini`), or your deployment's name if it has no
            registry entry.
        base_url: The resource's endpoint (`https://my-resource.openai.azure.com/openai/v1`).
        resource_name: Instead of `base_url`: the resource's name (`my-resource`).
        deployment: The deployment's name when it is not `model_id`.
        api_version: The `api-version` (default `v1`).

    Without `base_url` or `resource_name` the model's requests go where `$AZURE_OPENAI_BASE_URL` or
    `$AZURE_OPENAI_RESOURCE_NAME` say.
    """
    from ._registry import get_models

    if not isinstance(model_id, str) or not model_id:
        raise TypeError(f"model_id must be a non-empty str, got {model_id!r}")
    if base_url is not None and resource_name is not None:
        raise ValueError("azure_openai_model: give base_url or resource_name, not both")
    for name, value in (("base_url", base_url), ("resource_name", resource_name)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"azure_openai_model: {name} must be a non-empty str, got {value!r}")
    known = next((m for m in get_models("azure") if m.id == model_id), None)
    flags: dict[str, Any] = dict(known.compat or {}) if known is not None else {}
    for name, value in (("azure_deployment_name", deployment), ("azure_api_version", api_version)):
        if value is not None:
            if not isinstance(value, str) or not value:
                raise ValueError(f"azure_openai_model: {name.removeprefix('azure_')} must be a non-empty str")
            flags[name] = value
    url = base_url if base_url is not None else ""
    if resource_name is not None:
        url = f"https://{resource_name.strip()}.openai.azure.com/openai/v1"
    if known is not None:
        return Model(
            id=known.id,
            name=known.name,
            api=known.api,
            provider=known.provider,
            base_url=url,
            reasoning=known.reasoning,
            input=known.input,
            cost=known.cost,
            context_window=known.context_window,
            max_tokens=known.max_tokens,
            headers=known.headers,
            compat=flags or None,
        )
    return Model(
        id=model_id,
        name=model_id,
        api="azure-openai-responses",
        provider="azure",
        base_url=url,
        input=("text", "image"),
        cost=ModelCost(),
        compat=flags or None,
    )
