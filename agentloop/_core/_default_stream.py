"""The stream function used when none is given.

It dispatches on `model.api`: first to stream functions registered with `register_api_provider`,
then to the built-in providers (`agentloop.providers.stream_simple`, imported on first use so that
`import agentloop` loads no HTTP stack), which end the response of an unknown API with one
`error` event (a stream function never raises), in the reference's words.
"""

from __future__ import annotations

from collections.abc import Callable

from .._types._messages import Context, Model
from .._types._stream_fn import StreamFn, StreamOptions, StreamSource

__all__ = ("default_stream_fn", "register_api_provider")

_PROVIDERS: dict[str, StreamFn] = {}


def register_api_provider(api: str, stream_fn: StreamFn) -> Callable[[], None]:
    """Make `stream_fn` the default stream function for models whose `api` is `api`.

    Returns a function that removes the registration.
    """
    if not isinstance(api, str) or not api:
        raise ValueError(f"api must be a non-empty str, got {api!r}")
    if not callable(stream_fn):
        raise TypeError(f"stream_fn must be callable, got {stream_fn!r}")
    _PROVIDERS[api] = stream_fn

    def remove() -> None:
        if _PROVIDERS.get(api) is stream_fn:
            del _PROVIDERS[api]

    return remove


def default_stream_fn(model: Model, context: Context, options: StreamOptions) -> StreamSource:
    """Stream with the provider registered for `model.api`, else with the built-in one for it."""
    provider = _PROVIDERS.get(model.api)
    if provider is not None:
        return provider(model, context, options)  # type: ignore[return-value]
    from ..providers import stream_simple

    return stream_simple(model, context, options)
