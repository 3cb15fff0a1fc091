"""A private PostgreSQL server for the tests: ``postgres_server``, one for the session.

``initdb`` into a temporary directory (trust authentication, user ``postgres``), then
``pg_ctl start`` on a free port of 127.0.0.1 with its socket in that directory; stopped and
removed at the end of the session.  As root the server runs as the ``postgres`` user
(``runuser``), the directory being that user's.  A system PostgreSQL (5432) is not touched.

Without the PostgreSQL server binaries (Debian package postgresql) the tests that use it are
skipped, except when CI is set to a true value: there they fail.

A test module uses it by importing it: ``from tests.postgres import postgres_server``.
"""
from __future__ import annotations

import glob
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


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def postgres_bindir() -> str | None:
    """The directory of ``initdb`` and ``pg_ctl``: on PATH, else Debian's newest
    /usr/lib/postgresql/N/bin."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl", path=os.path.dirname(os.path.realpath(initdb))):
        return os.path.dirname(os.path.realpath(initdb))
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    for path in reversed(found):
        if os.access(os.path.join(os.path.dirname(path), "pg_ctl"), os.X_OK):
            return os.path.dirname(path)
    return None


@dataclass
class PostgresServer:
    host: str
    port: int
    user: str
    basedir: str

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://{self.user}@{self.host}:{self.port}/{database}"

    def jdbc_url(self, database: str = "postgres") -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database ``name`` (dropped first if it exists); its name."""
        import psycopg

        with psycopg.connect(host=self.host, port=self.port, user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = postgres_bindir()
    if bindir is None:
        reason = "PostgreSQL server binaries not found: initdb, pg_ctl (Debian package postgresql)"
        if _in_ci():
            pytest.fail(f"{reason}; CI must install them (.ci/run does)", pytrace=False)
        pytest.skip(reason)
    as_root = os.geteuid() == 0
    run_as = ["runuser", "-u", "postgres", "--"] if as_root else []
    basedir = tempfile.mkdtemp(prefix="binlog-pg-")
    if as_root:
        pw = pwd.getpwnam("postgres")
        os.chown(basedir, pw.pw_uid, pw.pw_gid)
    datadir, log = os.path.join(basedir, "data"), os.path.join(basedir, "server.log")
    pg_ctl = os.path.join(bindir, "pg_ctl")
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    started = False
    try:
        subprocess.run([*run_as, os.path.join(bindir, "initdb"), "-D", datadir, "-A", "trust",
                        "-U", "postgres", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, env=env, cwd=basedir, timeout=120)
        for attempt in range(3):
            port = _free_port()
            opts = (f"-p {port} -k {basedir} -c listen_addresses=127.0.0.1 -c fsync=off "
                    f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=50")
            proc = subprocess.run([*run_as, pg_ctl, "start", "-w", "-t", "60", "-D", datadir, "-l", log,
                                   "-o", opts], capture_output=True, env=env, cwd=basedir, timeout=90)
            if proc.returncode == 0:
                started = True
                break
            time.sleep(0.5)
        if not started:
            tail = open(log, errors="replace").read()[-2000:] if os.path.exists(log) else ""
            raise RuntimeError(f"pg_ctl start failed: {proc.stderr.decode(errors='replace')}\n{tail}")
        yield PostgresServer("127.0.0.1", port, "postgres", basedir)
    finally:
        if started:
            subprocess.run([*run_as, pg_ctl, "stop", "-w", "-m", "fast", "-D", datadir],
                           capture_output=True, env=env, cwd=basedir, timeout=90)
        shutil.rmtree(basedir, ignore_errors=True)
