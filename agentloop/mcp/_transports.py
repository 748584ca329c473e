"""The two transports: a subprocess over stdio, and a URL over streamable HTTP."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx2
import mcp.types as mcp_types
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ._sampling import Sampling
from ._server import DEFAULT_INIT_TIMEOUT, DEFAULT_TIMEOUT, Elicitation, LogLevel, MCPServer, Roots, WrapCall
from ._stdio import stdio_transport

__all__ = ("DEFAULT_MAX_MESSAGE_BYTES", "MCPServerStdio", "MCPServerStreamableHTTP")

DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
"""The longest message (one line of JSON) a stdio server may send: 16 MiB."""

_TIMEOUTS = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults for its HTTP client: 30 s to connect, 300 s between reads of a stream."""


class MCPServerStdio(MCPServer):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    Args:
        command: The program (looked up on PATH).
        args: Its arguments.
        env: Extra environment variables, over the SDK's safe defaults (`HOME`, `PATH`,
            `USER`...), not the whole environment: a key in our environment reaches the server
            only when given here.
        cwd: Its working directory.
        errlog: Where its stderr goes (default: ours).
        max_message_bytes: The longest message the server may send (default 16 MiB). A longer
            one is dropped as it arrives, and the calls in flight end with an error saying so
            (one of them was waiting for it); the connection goes on.

    The other arguments are `MCPServer`'s.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: TextIO | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        tool_prefix: str = "",
        timeout: float | None = DEFAULT_TIMEOUT,
        init_timeout: float | None = DEFAULT_INIT_TIMEOUT,
        tool_filter: Callable[[mcp_types.Tool], bool] | None = None,
        wrap_call: WrapCall | None = None,
        sampling: Sampling | None = None,
        elicitation: Elicitation | None = None,
        roots: Roots | None = None,
        log_level: LogLevel | None = None,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ValueError(f"command must be a non-empty str, got {command!r}")
        if isinstance(args, str) or not all(isinstance(arg, str) for arg in args):
            raise TypeError(f"args must be a sequence of str, got {args!r}")
        if env is not None and (
            not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise TypeError(f"env must be a mapping of str to str or None, got {env!r}")
        if cwd is not None and not isinstance(cwd, (str, Path)):
            raise TypeError(f"cwd must be a str or a Path or None, got {cwd!r}")
        if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be a positive int, got {max_message_bytes!r}")
        super().__init__(
            tool_prefix=tool_prefix,
            timeout=timeout,
            init_timeout=init_timeout,
            tool_filter=tool_filter,
            wrap_call=wrap_call,
            sampling=sampling,
            elicitation=elicitation,
            roots=roots,
            log_level=log_level,
        )
        self.params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        self.errlog = errlog
        self.max_message_bytes = max_message_bytes

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        errlog = self.errlog if self.errlog is not None else sys.stderr
        return stdio_transport(self.params, errlog, self.max_message_bytes)

    def __repr__(self) -> str:
        return f"MCPServerStdio({self.params.command!r}, {self.params.args!r})"


class MCPServerStreamableHTTP(MCPServer):
    """An MCP server at a URL, over the streamable HTTP transport.

    Args:
        url: The server's MCP endpoint (for example `http://127.0.0.1:3001/mcp`).
        headers: Sent with every request.
        token: A bearer token (sent as `Authorization: Bearer ...`; never shown in a repr).
        auth: An `httpx2.Auth` for every request, for example the SDK's
            `mcp.client.auth.OAuthClientProvider` (OAuth 2.1 with PKCE, token refresh).
        http_client: An `httpx2.AsyncClient` of yours (the MCP SDK speaks HTTP through httpx2,
            not httpx), for TLS settings, proxies or pooling; its headers and auth are used as
            they are (do not also pass `headers`, `token` or `auth`), and you close it.

    The other arguments are `MCPServer`'s. Without `http_client` the SDK's default client is
    used: 30 s to connect, 300 s between two reads of a response stream. The SDK takes server-sent
    events of up to 1 MiB: a longer answer ends its call with an error.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        auth: httpx2.Auth | None = None,
        http_client: httpx2.AsyncClient | None = None,
        tool_prefix: str = "",
        timeout: float | None = DEFAULT_TIMEOUT,
        init_timeout: float | None = DEFAULT_INIT_TIMEOUT,
        tool_filter: Callable[[mcp_types.Tool], bool] | None = None,
        wrap_call: WrapCall | None = None,
        sampling: Sampling | None = None,
        elicitation: Elicitation | None = None,
        roots: Roots | None = None,
        log_level: LogLevel | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        if headers is not None and (
            not isinstance(headers, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise TypeError(f"headers must be a mapping of str to str or None, got {headers!r}")
        if token is not None and (not isinstance(token, str) or not token):
            raise TypeError("token must be a non-empty str or None")
        if auth is not None and not isinstance(auth, httpx2.Auth):
            raise TypeError(f"auth must be an httpx2.Auth (the MCP SDK's HTTP library) or None, got {auth!r}")
        if http_client is not None:
            if not isinstance(http_client, httpx2.AsyncClient):
                raise TypeError(
                    "http_client must be an httpx2.AsyncClient (the MCP SDK's HTTP library), "
                    f"got {type(http_client).__module__}.{type(http_client).__name__}"
                )
            if headers is not None or token is not None or auth is not None:
                raise ValueError("pass headers, token and auth in the http_client, not beside it")
        super().__init__(
            tool_prefix=tool_prefix,
            timeout=timeout,
            init_timeout=init_timeout,
            tool_filter=tool_filter,
            wrap_call=wrap_call,
            sampling=sampling,
            elicitation=elicitation,
            roots=roots,
            log_level=log_level,
        )
        self.url = url
        self.headers = dict(headers or {})
        self._token = token
        self.auth = auth
        self.http_client = http_client

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        if self.http_client is not None:
            async with streamable_http_client(self.url, http_client=self.http_client) as streams:
                yield streams
            return
        headers = dict(self.headers)
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        async with (
            httpx2.AsyncClient(headers=headers, auth=self.auth, timeout=_TIMEOUTS) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams

    def __repr__(self) -> str:
        return f"MCPServerStreamableHTTP({self.url!r})"
