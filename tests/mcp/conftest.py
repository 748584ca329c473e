"""Servers for the MCP tests: the reference server-everything (from npm, installed on first use
into a cache directory outside the repository) and a small server made with the `mcp` SDK."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from ..support import free_port, stop

EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
CACHE = Path(os.environ.get("AGENTLOOP_MCP_CACHE", Path.home() / ".cache" / "agentloop" / "mcp-npm"))
SMALL_SERVER = Path(__file__).with_name("small_server.py")

SDK_READERS_LEFT_OPEN = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <async_generator object "
    r"(Response\.aiter_text|Response\.aiter_bytes|PoolByteStream\.__aiter__|EventSource\.__aiter__) "
    r":pytest.PytestUnraisableExceptionWarning"
)
"""The SDK's streamable HTTP client (mcp 2.3.0, on httpx2) leaves its SSE readers' async generators
unclosed when a response stream is cut; trio reports them at garbage collection. Those four
generators are the SDK's own, not agentloop's: only they are let through."""


@pytest.fixture(scope="session")
def everything_js() -> str:
    """The path of server-everything's entry point (npm installs it the first time)."""
    entry = CACHE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if not entry.exists():
        npm = shutil.which("npm")
        assert npm is not None, "the MCP tests need Node 20+ and npm on PATH"
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", "--silent", EVERYTHING],
            check=True,
            timeout=300,
        )
    assert entry.exists(), f"npm did not install {EVERYTHING} into {CACHE}"
    return str(entry)


@pytest.fixture(scope="session")
def devnull() -> Iterator[TextIO]:
    """Where the servers' stderr logs go."""
    with open(os.devnull, "w") as sink:
        yield sink


def _serve(command: list[str], port: int, env: dict[str, str], log: TextIO) -> Iterator[str]:
    process = subprocess.Popen(command, env={**os.environ, **env}, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"{command} exited with {process.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"{command} did not listen on port {port} in 30 s"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


@pytest.fixture(scope="session")
def everything_url(everything_js: str, devnull: TextIO) -> Iterator[str]:
    """server-everything over streamable HTTP on a free loopback port."""
    port = free_port()
    yield from _serve(["node", everything_js, "streamableHttp"], port, {"PORT": str(port)}, devnull)


@pytest.fixture(scope="session")
def small_url(devnull: TextIO) -> Iterator[str]:
    """The small SDK server over streamable HTTP on a free loopback port."""
    port = free_port()
    yield from _serve([sys.executable, str(SMALL_SERVER), "http", str(port)], port, {}, devnull)
