"""Vertex AI (`api="google-vertex"`): the Gemini wire of `_google_shared` on Vertex AI's URLs.

Who the request is sent as, in this order:

1. `token=`: an OAuth access token, or a function that returns one, sent as
   `Authorization: Bearer` (called for each request: it may cache and refresh as it likes; an
   async function is awaited, a plain one runs in a worker thread, as it may block);
2. an API key (`options.api_key`, else `$GOOGLE_CLOUD_API_KEY`): Vertex AI express mode, the key
   in `x-goog-api-key`, no project or location;
3. application default credentials from Google's own `google-auth` library (the `vertex` extra):
   `$GOOGLE_APPLICATION_CREDENTIALS`, `gcloud auth application-default login`, or the metadata
   server of Google Cloud; refreshed in a worker thread when they expire.

Project and location come from the arguments, else `$GOOGLE_CLOUD_PROJECT` (or
`$GCLOUD_PROJECT`, or the credentials' own project) and `$GOOGLE_CLOUD_LOCATION`. The URL is
`https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google/models/{id}:streamGenerateContent?alt=sse`
(`global`: `aiplatform.googleapis.com`; `us`, `eu`: `aiplatform.{location}.rep.googleapis.com`).
A model whose `base_url` has no `{location}` (a proxy, a mock) is sent to
`{base_url}/publishers/google/models/{id}:streamGenerateContent?alt=sse`, with `/v1` added when
the base URL names no API version.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._types._messages import Context, Model
from .._types._stream_fn import StreamOptions
from ._auth import fetch_token
from ._errors import ProviderError
from ._google_shared import GoogleParser, build_body, model_path
from ._http import AsyncClient, HTTPOptions, run_stream
from ._request import Request, request_headers
from ._stream import AssistantMessageEventStream, check_arguments

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "VERTEX_BASE_URL",
    "TokenSource",
    "VertexParser",
    "build_vertex_request",
    "stream_google_vertex",
    "vertex_url",
)

VERTEX_BASE_URL = "https://{location}-aiplatform.googleapis.com"
"""The registry's base URL of Vertex AI models: the regional endpoint of the location."""
_API_VERSION = "v1"
_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_NO_KEY = "gcp-vertex-credentials"
_VERSION_SEGMENT = re.compile(r"^v\d+(?:beta\d*)?$")
_LOCATION = re.compile(r"^[a-z0-9-]+$")

TokenSource: TypeAlias = str | Callable[[], str | Awaitable[str]]
"""An OAuth access token, or a function that returns one (called for each request)."""


class VertexParser(GoogleParser):
    label = "Google Vertex"


@dataclass(frozen=True, slots=True)
class _Auth:
    """Who a request is sent as: a bearer token, or an express-mode API key."""

    token: str | None = None
    key: str | None = None
    project: str | None = None
    location: str | None = None

    def __repr__(self) -> str:
        return f"_Auth(project={self.project!r}, location={self.location!r})"


def stream_google_vertex(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
    project: str | None = None,
    location: str | None = None,
    token: TokenSource | None = None,
) -> AssistantMessageEventStream:
    """Stream a response from a Gemini model on Vertex AI.

    Args:
        model: The model; its `base_url` is Vertex AI's regional endpoint (`{location}` filled
            in) or a base URL of your own.
        context: The system prompt, the messages (from any provider) and the tools.
        options: The thinking level, the abort signal, `max_tokens` (else the model's),
            `temperature`, headers; `api_key` is an express-mode API key.
        http: An `HTTPOptions` (retries, timeouts).
        client: An `httpx.AsyncClient` to send with (not closed); by default one per response.
        project: The Google Cloud project (else `$GOOGLE_CLOUD_PROJECT`, `$GCLOUD_PROJECT`, or
            the application default credentials' project).
        location: The region, such as `us-central1` or `global` (else `$GOOGLE_CLOUD_LOCATION`).
        token: An access token or a function returning one; without it (and without an API
            key) the application default credentials are used (`pip install 'anyio-agentloop[vertex]'`).

    Returns:
        The response's events (see `AssistantMessageEventStream`). Failures (no credentials
            included) end it with one `error` event; it never raises once returned.

    Bind the arguments with `functools.partial` to use it as an agent's stream function.
    """
    check_arguments(model, context, options)
    for name, value in (("project", project), ("location", location)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if token is not None and not isinstance(token, str) and not callable(token):
        raise TypeError(f"token must be a str or a function returning one, got {type(token).__name__}")
    build = functools.partial(_build, project=project, location=location, token=token)
    return run_stream(model, context, options, build, VertexParser, http=http, client=client)


async def _build(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    project: str | None,
    location: str | None,
    token: TokenSource | None,
) -> Request:
    """The `Request` for one response, once its credentials are known (`run_stream` awaits this
    under the abort and the total timeout)."""
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT") or None
    location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or None
    if token is not None:
        auth = _Auth(token=await fetch_token(token, "The token function"), project=project, location=location)
    else:
        key = (options.api_key or os.environ.get("GOOGLE_CLOUD_API_KEY") or "").strip()
        if key and key != _NO_KEY and not (key.startswith("<") and key.endswith(">")):
            auth = _Auth(key=key)
        else:
            access, adc_project = await anyio.to_thread.run_sync(_adc_token, abandon_on_cancel=True)
            auth = _Auth(token=access, project=project or adc_project, location=location)
    return build_vertex_request(model, context, options, auth)


def build_vertex_request(model: Model, context: Context, options: StreamOptions, auth: _Auth) -> Request:
    """The `Request` for one response, sent as `auth`."""
    url = vertex_url(model, auth)
    body = build_body(model, context, options)
    own = {"authorization": f"Bearer {auth.token}"} if auth.token else {"x-goog-api-key": auth.key or ""}
    return Request(url, request_headers(own, model, options), body, auth.token or auth.key)


def vertex_url(model: Model, auth: _Auth) -> str:
    """Where a request of `model` goes (see the module docstring)."""
    path = model_path(model, vertex=True)
    method = f"{path}:streamGenerateContent?alt=sse"
    base = (model.base_url or "").strip().rstrip("/")
    if base and "{location}" not in base:
        if not any(_VERSION_SEGMENT.match(segment) for segment in base.split("/")):
            base = f"{base}/{_API_VERSION}"
        return f"{base}/{method}"
    if auth.key is not None:  # express mode
        return f"https://aiplatform.googleapis.com/{_API_VERSION}/{method}"
    if not auth.project:
        raise ProviderError(
            "Vertex AI requires a project ID: set GOOGLE_CLOUD_PROJECT (or GCLOUD_PROJECT), or pass project="
        )
    if not auth.location:
        raise ProviderError("Vertex AI requires a location: set GOOGLE_CLOUD_LOCATION, or pass location=")
    location = auth.location
    if not _LOCATION.match(location):
        raise ProviderError(f"Invalid Vertex AI location {location!r}")
    if location == "global":
        host = "https://aiplatform.googleapis.com"
    elif location in ("us", "eu"):
        host = f"https://aiplatform.{location}.rep.googleapis.com"
    else:
        host = f"https://{location}-aiplatform.googleapis.com"
    if path.startswith("projects/"):
        return f"{host}/{_API_VERSION}/{method}"
    return f"{host}/{_API_VERSION}/projects/{auth.project}/locations/{location}/{method}"


# --- application default credentials ---------------------------------------------------------

_adc_lock = threading.Lock()
_adc: list[Any] = []  # [credentials, project] once loaded


def _adc_token() -> tuple[str, str | None]:
    """A valid access token of the application default credentials, and their project (runs in a
    worker thread: loading and refreshing do blocking I/O)."""
    try:
        import google.auth as auth
        import google.auth.exceptions
        import google.auth.transport.requests as transport
    except ImportError:
        raise ProviderError(
            "Vertex AI needs credentials: pass token= or an API key, or install google-auth for the "
            "application default credentials (pip install 'anyio-agentloop[vertex]')"
        ) from None
    with _adc_lock:
        if not _adc:
            try:
                credentials, project = auth.default(scopes=[_SCOPE])
            except google.auth.exceptions.DefaultCredentialsError as exc:
                raise ProviderError(f"No Google Cloud credentials: {exc}") from None
            _adc[:] = [credentials, project]
        credentials, project = _adc
        if not credentials.valid:
            credentials.refresh(transport.Request())
        return str(credentials.token), project if isinstance(project, str) and project else None
