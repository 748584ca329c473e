"""The Gemini API (`api="google-generative-ai"`): `POST {base_url}/models/{id}:streamGenerateContent?alt=sse`
with the key in `x-goog-api-key`.

The body and the stream are `_google_shared`'s (thought signatures, thinking levels and budgets);
compat flags: `thinking_level_map`, `extra_body`.
"""

from __future__ import annotations

from .._types._messages import Context, Model
from .._types._stream_fn import StreamOptions
from ._auth import resolve_api_key
from ._google_shared import GoogleParser, build_body, model_path
from ._http import AsyncClient, HTTPOptions, run_stream
from ._request import Request, request_headers
from ._stream import AssistantMessageEventStream

__all__ = ("GEMINI_BASE_URL", "build_google_request", "stream_google")

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


def stream_google(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from the Gemini API (`{base_url}/models/{id}:streamGenerateContent`).

    Args:
        model: The model; `base_url` defaults to `https://generativelanguage.googleapis.com/v1beta`
            (a base URL includes the API version).
        context: The system prompt, the messages (from any provider) and the tools.
        options: The key (else `$GEMINI_API_KEY`), the thinking level (a `thinkingLevel` or a
            `thinkingBudget`, as the model takes), the abort signal, `max_tokens` (else the
            model's), `temperature`, headers.
        http: An `HTTPOptions` (retries, timeouts).
        client: An `httpx.AsyncClient` to send with (not closed); by default one per response.

    Returns:
        The response's events (see `AssistantMessageEventStream`). Failures end it with one
            `error` event; it never raises once returned.
    """
    return run_stream(model, context, options, build_google_request, GoogleParser, http=http, client=client)


def build_google_request(model: Model, context: Context, options: StreamOptions) -> Request:
    """The `Request` for one response."""
    key = resolve_api_key(model, options)
    url = (model.base_url or GEMINI_BASE_URL).rstrip("/")
    body = build_body(model, context, options)
    own = {"x-goog-api-key": key} if key else {}
    headers = request_headers(own, model, options)
    return Request(f"{url}/{model_path(model, vertex=False)}:streamGenerateContent?alt=sse", headers, body, key)
