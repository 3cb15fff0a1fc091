"""The watchdog of a private MariaDB server: ``python -m airflow_provider_binlog.local.watchdog BASEDIR``.

:class:`~airflow_provider_binlog.local.mariadb.MariaDBServer` starts one per server, in a
session of its own, with a pipe on its standard input, and keeps the pipe's write end open
while the server exists.  The watchdog blocks reading that pipe:

* ``disarm`` and then end of file: the server was stopped by its owner; exit.
* end of file without ``disarm``: the owner died (even by SIGKILL, which closes the pipe);
  stop every process whose command line names ``BASEDIR`` (``mariadbd``, a
  ``mariadb-install-db`` still running) with SIGTERM, then SIGKILL after ``--timeout``
  seconds, and remove ``BASEDIR``.

The processes are found by their command line rather than by a process id, so a server that
was stopped and started again in the same directory is covered, and so is one that was being
started when the owner died.  SIGINT and SIGHUP are ignored: a Ctrl-C on the owner's terminal
must not take the watchdog down before the owner.

This module uses only the standard library and imports nothing of the package.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from typing import Optional

DISARM = b"disarm"


def wait_for_owner(fd: int = 0) -> bool:
    """Block until end of file on ``fd``; True if the owner disarmed the watchdog first."""
    data = b""
    try:
        while True:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return DISARM in data


def processes_under(basedir: str) -> list[int]:
    """Ids of the processes (other than this one) whose command line names ``basedir``."""
    needle = os.fsencode(basedir.rstrip("/") + "/")
    exact = os.fsencode(basedir.rstrip("/"))
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if any(needle in arg or arg.endswith(b"=" + exact) or arg == exact for arg in args):
            found.append(int(entry))
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def clean_up(basedir: str, timeout: float = 30.0) -> None:
    """Stop the processes of ``basedir`` (SIGTERM, SIGKILL after ``timeout``) and remove it."""
    pids = processes_under(basedir)
    if pids:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = processes_under(basedir)
        if pids:
            _signal_all(pids, signal.SIGKILL)
            time.sleep(0.2)
    shutil.rmtree(basedir, ignore_errors=True)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_binlog.local.watchdog",
        description="Stop a private MariaDB server and remove its directory when the process "
                    "holding this watchdog's standard input dies without disarming it.")
    parser.add_argument("basedir", help="the server's temporary directory")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds between SIGTERM and SIGKILL (default: 30)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if wait_for_owner():
        return 0
    clean_up(args.basedir, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
