"""Fixtures of the provider tests: mocked HTTP (httpx.MockTransport) and the real servers.

Tests marked `servers` talk to aimock and llama.cpp started by `tests/providers/servers.py start`
(their URLs in AGENTLOOP_AIMOCK_URL and AGENTLOOP_LLAMA_URL). They are deselected unless the `-m`
expression names them (`pytest -m servers`); once selected, an unreachable server is a failure
that says how to start it, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

SERVERS_HELP = "start them with `python tests/providers/servers.py start` and source the env file it prints"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "servers: needs aimock and llama.cpp running (python tests/providers/servers.py start)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "servers" in (config.getoption("markexpr", "") or ""):
        return
    deselected = [item for item in items if item.get_closest_marker("servers") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.get_closest_marker("servers") is None]


def _env_file() -> dict[str, str]:
    cache = os.environ.get("AGENTLOOP_SERVERS_CACHE") or str(
        Path(__file__).resolve().parents[2] / ".ci-cache" / "providers"
    )
    try:
        lines = (Path(cache) / "servers.env").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _server_url(variable: str, health: str, name: str) -> str:
    url = os.environ.get(variable) or _env_file().get(variable)
    if not url:
        pytest.fail(f"{variable} is not set: the {name} tests need the server; {SERVERS_HELP}", pytrace=False)
    try:
        with urllib.request.urlopen(url.rstrip("/") + health, timeout=5) as response:
            response.read()
    except OSError as exc:
        pytest.fail(f"{name} is not reachable at {url} ({exc}); {SERVERS_HELP}", pytrace=False)
    return url.rstrip("/")


@pytest.fixture(scope="session")
def aimock_url() -> str:
    """The root URL of the aimock server (no /v1)."""
    return _server_url("AGENTLOOP_AIMOCK_URL", "/__aimock/health", "aimock")


@pytest.fixture(scope="session")
def llama_url() -> str:
    """The root URL of the llama.cpp server (no /v1)."""
    return _server_url("AGENTLOOP_LLAMA_URL", "/health", "llama.cpp")


PI_PACKAGES = (
    "@earendil-works/pi-agent-core@1.6.0",  # brings @earendil-works/pi-ai 1.6.0
    "pi-agent-core-0.73.1@npm:@mariozechner/pi-agent-core@0.73.1",
    "pi-ai-1.6.1@npm:@earendil-works/pi-ai@1.6.1",  # the providers the recorded streams are compared with
)
PI_AI = "pi-ai-1.6.1"
"""The folder (in the cache's node_modules) of the pi-ai whose providers the recordings are compared with."""
PI_CACHE = Path(os.environ.get("AGENTLOOP_PI_CACHE", Path.home() / ".cache" / "agentloop" / "pi-npm"))


@pytest.fixture(scope="session")
def pi_node_modules() -> Path:
    """The `node_modules` of the TypeScript reference (pi-agent-core 1.6.0 with pi-ai 1.6.0,
    pi-agent-core 0.73.1, and pi-ai 1.6.1 as `pi-ai-1.6.1`), installed by npm into a cache
    directory outside the repository the first time, as the MCP tests install server-everything."""
    modules = PI_CACHE / "node_modules"
    entries = [
        modules / "@earendil-works" / "pi-agent-core",
        modules / "@earendil-works" / "pi-ai",
        modules / "pi-agent-core-0.73.1",
        modules / PI_AI,
    ]
    if not all((entry / "dist" / "index.js").exists() for entry in entries):
        npm = shutil.which("npm")
        assert npm is not None, "the pi reference tests need Node 20+ and npm on PATH"
        PI_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(PI_CACHE), "--no-audit", "--no-fund", "--silent", *PI_PACKAGES],
            check=True,
            timeout=300,
        )
    assert all((entry / "dist" / "index.js").exists() for entry in entries), f"npm did not install into {PI_CACHE}"
    return modules
