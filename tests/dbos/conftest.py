"""DBOS for the tests: in this process on SQLite, and PostgreSQL clusters on loopback.

DBOS runs async workflows on asyncio only, so these tests run on asyncio only (the trio param
is replaced); `test_on_trio_every_function_fails_at_once` checks what trio users get. The
in-process DBOS is launched once for this package (DBOS is a process-wide singleton) with the
agents of `tests.dbos.agents`; worker processes of the kill-and-resume tests launch their own.
PostgreSQL comes from the machine (`initdb`, `pg_ctl`; `.ci/run` installs Debian's package): a
cluster of its own in a temporary directory, on a free loopback port, stopped at the end.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from tests.durable_checks import workers as workers  # the worker processes a test starts

if importlib.util.find_spec("dbos") is None:  # without the [dbos] extra: nothing to test here
    collect_ignore_glob = ["*.py"]


@pytest.fixture
def anyio_backend() -> object:
    """DBOS runs async workflows on asyncio: these tests run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="package")
def launched_dbos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """DBOS launched in this process, on a SQLite file, with the test agents defined.

    Destroyed once this package's tests have run: DBOS's background threads must not run
    during other tests (they use the `random` module, which Hypothesis watches).
    """
    from dbos import DBOS

    from tests.dbos.agents import dbos_config  # the agents' workflows are registered before the launch

    directory = tmp_path_factory.mktemp("dbos")
    DBOS(config=dbos_config(f"sqlite:///{directory}/dbos.sqlite"))
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster of its own on loopback, for the session; its URL (DBOS creates the database)."""
    from tests.dbos.postgres import PostgresMissing, postgres_bin, postgres_cluster

    try:
        postgres_bin("initdb"), postgres_bin("pg_ctl")
    except PostgresMissing as missing:
        pytest.fail(str(missing))  # not a skip: CI must run these tests
    with postgres_cluster() as url:
        yield url
