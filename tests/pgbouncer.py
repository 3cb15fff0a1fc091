"""A private PgBouncer in transaction pooling in front of the private PostgreSQL
(``pgbouncer_server``, one for the session): Debian's ``pgbouncer`` on a free port of
127.0.0.1 with its files in a temporary directory; stopped and removed at the end.

Transaction pooling hands each transaction to any server connection of the pool, as a
pooler in front of a managed PostgreSQL (or on Kubernetes) commonly does: session state
such as an advisory lock does not belong to the client that took it. Without the binary the
tests that use it are skipped, except with CI set, where they fail.

A test module uses it by importing it: ``from tests.pgbouncer import pgbouncer_server``.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator

import pytest

from tests.postgres import PostgresServer, _free_port, _in_ci, postgres_server  # noqa: F401  (a fixture)

PGBOUNCER = "/usr/sbin/pgbouncer"


@dataclass
class PgBouncer:
    host: str
    port: int
    server: PostgresServer

    def url(self, database: str = "postgres") -> str:
        """A URL through the pooler; psycopg's server-side prepared statements off, which a
        transaction pooler cannot keep."""
        return f"postgresql+psycopg://{self.server.user}@{self.host}:{self.port}/{database}"


@pytest.fixture(scope="session")
def pgbouncer_server(postgres_server: PostgresServer) -> Iterator[PgBouncer]:  # noqa: F811
    binary = PGBOUNCER if os.path.exists(PGBOUNCER) else shutil.which("pgbouncer")
    if binary is None:
        reason = "pgbouncer not found (Debian package pgbouncer)"
        if _in_ci():
            pytest.fail(f"{reason}; CI must install it (.ci/run does)", pytrace=False)
        pytest.skip(reason)
    as_root = os.geteuid() == 0
    run_as = ["runuser", "-u", "postgres", "--"] if as_root else []
    basedir = tempfile.mkdtemp(prefix="binlog-pgbouncer-")
    if as_root:
        pw = pwd.getpwnam("postgres")
        os.chown(basedir, pw.pw_uid, pw.pw_gid)
    port = _free_port()
    ini = os.path.join(basedir, "pgbouncer.ini")
    users = os.path.join(basedir, "users.txt")
    with open(users, "w") as f:
        f.write(f'"{postgres_server.user}" ""\n')
    with open(ini, "w") as f:
        f.write(f"""[databases]
* = host={postgres_server.host} port={postgres_server.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = transaction
default_pool_size = 1
max_client_conn = 200
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {os.path.join(basedir, "pgbouncer.log")}
pidfile = {os.path.join(basedir, "pgbouncer.pid")}
""")
    if as_root:
        for path in (ini, users):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    proc = subprocess.Popen([*run_as, binary, ini], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = os.path.join(basedir, "pgbouncer.log")
                tail = open(log, errors="replace").read()[-2000:] if os.path.exists(log) else ""
                raise RuntimeError(f"pgbouncer did not start: {proc.stderr.read().decode(errors='replace')}\n{tail}")
            time.sleep(0.1)
        yield PgBouncer("127.0.0.1", port, postgres_server)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(basedir, ignore_errors=True)
