"""DBOS for the tests: in this process on SQLite, and PostgreSQL clusters on loopback.

DBOS runs async workflows on asyncio only, so these tests run on asyncio only (the trio param
is replaced); `test_on_trio_every_function_fails_at_once` checks what trio users get. The
in-process DBOS is launched once for the session (DBOS is a process-wide singleton) with the
agents of `tests.dbos.agents`; worker processes of the kill-and-resume tests launch their own.
PostgreSQL comes from the machine (`initdb`, `pg_ctl`; `.ci/run` installs Debian's package): a
cluster of its own in a temporary directory, on a free loopback port, stopped at the end.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("dbos") is None:  # without the [dbos] extra: nothing to test here
    collect_ignore_glob = ["*.py"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dbos_config(url: str) -> dict[str, object]:
    """The DBOS config of the tests' processes: quiet, and quick to notice new stream values."""
    return {
        "name": "agentloop-tests",
        "system_database_url": url,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }


@pytest.fixture
def anyio_backend() -> object:
    """DBOS runs async workflows on asyncio: these tests run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def launched_dbos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """DBOS launched in this process, on a SQLite file, with the test agents defined."""
    from dbos import DBOS

    from tests.dbos import agents  # noqa: F401  (the agents' workflows are registered before the launch)

    directory = tmp_path_factory.mktemp("dbos")
    DBOS(config=dbos_config(f"sqlite:///{directory}/dbos.sqlite"))  # type: ignore[arg-type]
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy()


def postgres_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[-1:]), None)
    if found is None:
        pytest.fail(
            f"PostgreSQL's {name} is not installed: the DBOS tests need a PostgreSQL server "
            "(Debian: apt-get install postgresql; .ci/run installs it)"
        )
    return found


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its commands as the `postgres` user."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster of its own on loopback, for the session; its URL (DBOS creates the database)."""
    initdb, pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
    root = tempfile.mkdtemp(prefix="agentloop-pg-")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = os.path.join(root, "data")
    port = free_port()
    subprocess.run(
        _as_server_user([initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]),
        check=True,
        capture_output=True,
    )
    options = f"-h 127.0.0.1 -p {port} -k {root} -F -c fsync=off"
    subprocess.run(
        _as_server_user([pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-o", options, "-w", "start"]),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/agentloop_dbos"
    finally:
        subprocess.run(_as_server_user([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
