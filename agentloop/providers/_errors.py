"""The error a request builder or a parser raises for the stream to report."""

from __future__ import annotations

__all__ = ("MAX_ERROR_BODY", "ProviderError")

MAX_ERROR_BODY = 64 * 1024
"""The most bytes of an error response read (and shown, cut further) from a server."""


class ProviderError(Exception):
    """A failure inside a provider; the stream turns it into its terminal `error` event.

    `retryable` errors are retried while no content has streamed (rate limits, overload,
    server errors). Never raised out of a stream function.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
