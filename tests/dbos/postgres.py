"""A PostgreSQL cluster of its own, in a temporary directory, on a free loopback port.

For the DBOS tests and `benchmarks/dbos.py`. It uses the machine's `initdb` and `pg_ctl` (on the
PATH, or Debian's `/usr/lib/postgresql/*/bin`); PostgreSQL refuses to run as root, so as root
its commands run as the `postgres` user (Debian's package makes it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator


class PostgresMissing(RuntimeError):
    """initdb or pg_ctl is not installed."""


def postgres_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[-1:]), None)
    if found is None:
        raise PostgresMissing(
            f"PostgreSQL's {name} is not installed: the DBOS tests need a PostgreSQL server "
            "(Debian: apt-get install postgresql; .ci/run installs it)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@contextlib.contextmanager
def postgres_cluster(fsync: bool = False) -> Iterator[str]:
    """Start a cluster; yield the URL of a database on it (DBOS creates it); stop and remove it.

    Without `fsync` the cluster runs with `fsync=off` (commits do not wait for the disk: faster,
    and safe for a throwaway cluster, not for data that must survive a machine's crash)."""
    initdb, pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
    root = tempfile.mkdtemp(prefix="agentloop-pg-")
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        data = os.path.join(root, "data")
        port = free_port()
        initdb_command = [initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]
        subprocess.run(_as_server_user(initdb_command), check=True, capture_output=True)
        durability = "" if fsync else " -F -c fsync=off"
        options = f"-h 127.0.0.1 -p {port} -k {root}{durability} -c max_connections=300"
        start = [pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-o", options, "-w", "start"]
        subprocess.run(_as_server_user(start), check=True, capture_output=True)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/agentloop_dbos"
        finally:
            stop = [pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"]
            subprocess.run(_as_server_user(stop), capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
