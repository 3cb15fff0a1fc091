"""A private, throw-away MariaDB server: the embedded default source of the quickstart and the tests.

:class:`MariaDBServer` initialises a fresh data directory in a temporary
directory and starts its own ``mariadbd`` on a free TCP port on 127.0.0.1,
with binary logging in ROW format.  It never reads the system configuration
(``--no-defaults``) and never touches the system server, its port or
``/var/lib/mysql``.

Example::

    with MariaDBServer({"binlog_checksum": "NONE"}) as srv:
        srv.execute("CREATE TABLE test.t (id INT PRIMARY KEY)")
        print(srv.master_status(), srv.binlog_path(srv.binlog_files()[-1]))

Server options are given as a dict; ``{"binlog_row_image": "MINIMAL"}``
becomes ``--binlog-row-image=MINIMAL``.  ``True``/``False`` become ``ON``/
``OFF`` and ``None`` gives a bare flag (``{"skip_slave_start": None}``).
They are applied after :data:`.mariadb_command.BASE_OPTIONS` (small memory
settings for a fast start) and override them.

The root user has an empty password over TCP.  A user ``repl`` (password
``replpass``) can read the binlog over the replication protocol and SELECT
everything, and a database ``test`` exists.  This setup is done with
``sql_log_bin=0``, so the binlog holds only what the tests themselves do.

A watchdog process per server (:mod:`airflow_provider_binlog.local.watchdog`)
stops ``mariadbd`` and removes its temporary directory if the Python process
that started it dies without calling :meth:`MariaDBServer.stop` (even after
SIGKILL).  The first server a process starts registers :func:`stop_all` with
:mod:`atexit`, which stops the servers still running at a normal interpreter
exit; importing this module registers nothing.

:meth:`MariaDBServer.halt` stops ``mariadbd`` but keeps its data directory,
port and binlogs (a clean shutdown, or a crash with ``crash=True``);
:meth:`MariaDBServer.start` then starts it again on them.

Binaries are looked up on ``PATH`` and in ``/usr/sbin`` and ``/usr/bin``;
the environment variables ``MARIADBD`` and ``MARIADB_INSTALL_DB`` override
them (:mod:`.mariadb_command`).
"""

from __future__ import annotations

import atexit
import itertools
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Mapping, Sequence

import pymysql

from ..errors import ProviderError
from .mariadb_command import BASE_OPTIONS, mariadb_binaries, normalize_options, option_args

__all__ = [
    "MariaDBServer",
    "MariaDBServerError",
    "stop_all",
]

REPL_USER = "repl"
REPL_PASSWORD = "replpass"

_server_ids = itertools.count(101)
_live: set["MariaDBServer"] = set()
_live_lock = threading.Lock()
_atexit_registered = False


class MariaDBServerError(ProviderError, RuntimeError):
    """The server could not be initialised, started or stopped."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: pathlib.Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no error log)"
    return "\n".join(text.splitlines()[-lines:]) or "(error log is empty)"


class MariaDBServer:
    """A private ``mariadbd`` with its own datadir, port, socket and binlog.

    The server starts in the constructor (pass ``start=False`` to call
    :meth:`start` later) and runs until :meth:`stop`; :meth:`halt` and
    :meth:`start` take it down and up again on the same data and port
    (a server restart, or a crash and recovery).  Connections made by
    :meth:`execute` and :meth:`query` share one cached root connection and
    are not thread-safe; use :meth:`connect` for anything else.
    """

    host = "127.0.0.1"
    user = "root"
    password = ""
    repl_user = REPL_USER
    repl_password = REPL_PASSWORD

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        *,
        server_id: int | None = None,
        port: int | None = None,
        startup_timeout: float = 60.0,
        start: bool = True,
    ) -> None:
        opts = normalize_options(options)
        if "server_id" in opts:
            given = opts.pop("server_id")
            if server_id is None and given is not None:
                server_id = int(given)
        for reserved in ("datadir", "port", "socket", "pid_file", "log_bin", "log_error"):
            if reserved in opts:
                raise ValueError(f"option {reserved!r} is set by MariaDBServer itself")
        #: The options given by the caller, normalised (``binlog_checksum``).
        self.options: dict[str, str | None] = opts
        self.server_id: int = server_id if server_id is not None else next(_server_ids)
        self._requested_port = port
        self.port: int = 0
        self.startup_timeout = startup_timeout
        self.version: str = ""
        self.basedir: pathlib.Path | None = None
        self.datadir: pathlib.Path | None = None
        self.socket: pathlib.Path | None = None
        self.pid_file: pathlib.Path | None = None
        self.error_log: pathlib.Path | None = None
        self.startup_seconds: float = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._conn: pymysql.connections.Connection | None = None
        self._halted = False
        if start:
            self.start()

    # ------------------------------------------------------------------ life

    @property
    def pid(self) -> int | None:
        """The process id of ``mariadbd``; None when it is not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def halted(self) -> bool:
        """True after :meth:`halt`, until :meth:`start` or :meth:`stop`."""
        return self._halted

    def server_args(self) -> list[str]:
        """The full ``mariadbd`` command line (after :meth:`start`)."""
        mariadbd, _ = mariadb_binaries()
        assert self.datadir is not None and self.basedir is not None
        args = [
            mariadbd or "mariadbd",
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--tmpdir={self.basedir / 'tmp'}",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.error_log}",
            "--skip-networking=0",
            "--bind-address=127.0.0.1",
            f"--port={self.port}",
            f"--log-bin={self.datadir / 'mariadb-bin'}",
            "--binlog-format=ROW",
            f"--server-id={self.server_id}",
        ]
        if os.geteuid() == 0:
            args.insert(2, "--user=root")
        merged = {**BASE_OPTIONS, **self.options}
        return args + option_args(merged)

    def start(self) -> "MariaDBServer":
        """Start the server: in a new temporary directory, or after :meth:`halt` again on
        its data directory and port.  Does nothing when it is running."""
        if self.running:
            return self
        if self._halted:
            return self._resume()
        mariadbd, install_db = mariadb_binaries()
        if not mariadbd or not install_db:
            raise MariaDBServerError(
                "MariaDB server binaries not found (need mariadbd and "
                "mariadb-install-db; Debian package mariadb-server)"
            )
        t0 = time.monotonic()
        self._make_dirs()
        self._register()
        try:
            self._arm_watchdog()
            self._install_db(install_db)
            attempts = 1 if self._requested_port else 5
            for attempt in range(attempts):
                self.port = self._requested_port or _free_port()
                try:
                    self._launch()
                    break
                except _PortInUse:
                    if attempt == attempts - 1:
                        raise MariaDBServerError(
                            f"port {self.port} in use\n{_tail(self.error_log)}"
                        ) from None
            self._setup_accounts()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _resume(self) -> "MariaDBServer":
        t0 = time.monotonic()
        try:
            self._launch()
        except _PortInUse:
            self.halt()
            raise MariaDBServerError(
                f"port {self.port} is taken: cannot start the server again on it\n"
                f"{_tail(self.error_log)}"
            ) from None
        except BaseException:
            self.halt()
            raise
        self._halted = False
        self.startup_seconds = time.monotonic() - t0
        return self

    def _register(self) -> None:
        global _atexit_registered
        with _live_lock:
            _live.add(self)
            if not _atexit_registered:
                atexit.register(stop_all)
                _atexit_registered = True

    def _make_dirs(self) -> None:
        base = tempfile.mkdtemp(prefix="mariadb-test-")
        # unix socket paths are limited to 107 bytes
        if len(base) > 80:
            shutil.rmtree(base, ignore_errors=True)
            base = tempfile.mkdtemp(prefix="mariadb-test-", dir="/tmp")
        self.basedir = pathlib.Path(base)
        self.datadir = self.basedir / "data"
        (self.basedir / "tmp").mkdir()
        self.socket = self.basedir / "mariadbd.sock"
        self.pid_file = self.basedir / "mariadbd.pid"
        self.error_log = self.basedir / "error.log"

    def _install_db(self, install_db: str) -> None:
        assert self.datadir is not None and self.basedir is not None
        cmd = [
            install_db,
            "--no-defaults",
            f"--datadir={self.datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            # do not insist on resolvable host names (minimal containers)
            "--force",
        ]
        # bootstrap with the InnoDB sizes the server will run with
        merged = {**BASE_OPTIONS, **self.options}
        cmd += option_args(
            {k: merged[k] for k in ("innodb_buffer_pool_size", "innodb_log_file_size")}
        )
        if os.geteuid() == 0:
            cmd.append("--user=root")
        log = self.basedir / "install-db.log"
        # a private temp directory: concurrent suites must not share the installer's temp files
        tmp = self.basedir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            rc = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                timeout=120, env={**os.environ, "TMPDIR": str(tmp)},
            ).returncode
        if rc != 0:
            raise MariaDBServerError(
                f"mariadb-install-db failed with exit code {rc}:\n{_tail(log)}"
            )

    def _launch(self) -> None:
        assert self.error_log is not None and self.basedir is not None
        args = self.server_args()
        # own session: a Ctrl-C on the terminal reaches pytest, which stops us
        with open(self.basedir / "mariadbd.out", "ab") as out:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        last_error: Exception | None = None
        while True:
            rc = self._proc.poll()
            if rc is not None:
                log = _tail(self.error_log)
                self._proc = None
                if "Address already in use" in log or "Bind on TCP/IP port" in log:
                    raise _PortInUse()
                raise MariaDBServerError(
                    f"mariadbd exited with code {rc} during startup "
                    f"(port {self.port}, datadir {self.datadir}):\n{log}"
                )
            try:
                conn = pymysql.connect(
                    host=self.host, port=self.port, user=self.user,
                    password=self.password, connect_timeout=2,
                )
            except pymysql.err.OperationalError as exc:
                last_error = exc
            else:
                conn.close()
                return
            if time.monotonic() > deadline:
                raise MariaDBServerError(
                    f"mariadbd did not accept connections on 127.0.0.1:{self.port} "
                    f"within {self.startup_timeout:.0f}s (last error: {last_error}):\n"
                    f"{_tail(self.error_log)}"
                )
            time.sleep(0.05)

    def _arm_watchdog(self) -> None:
        """Start the watchdog of :attr:`basedir`; it lives until :meth:`stop`, halts and
        restarts included (it finds the server by its command line)."""
        assert self.basedir is not None
        env = dict(os.environ)
        # this very package, whatever the caller's sys.path and working directory
        root = str(pathlib.Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-m", "airflow_provider_binlog.local.watchdog", str(self.basedir)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=env,
        )

    def _disarm_watchdog(self) -> None:
        wd, self._watchdog = self._watchdog, None
        if wd is None:
            return
        try:
            assert wd.stdin is not None
            wd.stdin.write(b"disarm")
            wd.stdin.close()
        except OSError:
            pass
        try:
            wd.wait(timeout=5)
        except subprocess.TimeoutExpired:
            wd.kill()
            wd.wait()

    def _setup_accounts(self) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                cur.execute("SELECT VERSION()")
                self.version = cur.fetchone()[0]
                cur.execute("CREATE DATABASE IF NOT EXISTS test")
                cur.execute(
                    f"CREATE USER IF NOT EXISTS '{REPL_USER}'@'%' "
                    f"IDENTIFIED BY '{REPL_PASSWORD}'"
                )
                # REPLICATION CLIENT is BINLOG MONITOR in MariaDB >= 10.5
                cur.execute(
                    f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT "
                    f"ON *.* TO '{REPL_USER}'@'%'"
                )
        finally:
            conn.close()

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _end_process(self, timeout: float, crash: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        if crash:
            proc.kill()
            proc.wait()
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def halt(self, *, crash: bool = False, timeout: float = 60.0) -> None:
        """Stop ``mariadbd`` but keep its data directory, port and binlogs, unlike
        :meth:`stop`; :meth:`start` starts it again on them.  A clean shutdown (SIGKILL
        after ``timeout``), or with ``crash`` a SIGKILL right away: InnoDB recovers and
        the binlog is checked at the next start.  The watchdog stays, and :meth:`stop`
        (or :func:`stop_all`, or the watchdog) still removes the directory."""
        if self.datadir is None or not self.datadir.is_dir():
            raise MariaDBServerError("halt() needs a started server")
        self._close_connection()
        self._halted = True
        self._end_process(timeout, crash=crash)

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down cleanly (SIGKILL after ``timeout``) and
        remove its temporary directory.  Safe to call more than once."""
        self._close_connection()
        self._end_process(timeout)
        self._halted = False
        self._disarm_watchdog()
        with _live_lock:
            _live.discard(self)
        if self.basedir is not None:
            shutil.rmtree(self.basedir, ignore_errors=True)

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (
            f"<MariaDBServer {state} 127.0.0.1:{self.port} server_id={self.server_id} "
            f"options={self.options}>"
        )

    # --------------------------------------------------------------- queries

    def connect(
        self,
        database: str | None = None,
        user: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> pymysql.connections.Connection:
        """A new autocommit utf8mb4 connection (root unless ``user``)."""
        if user is None:
            user = self.user
            password = self.password if password is None else password
        elif password is None:
            password = self.repl_password if user == self.repl_user else ""
        params: dict[str, Any] = dict(
            host=self.host, port=self.port, user=user, password=password,
            database=database, autocommit=True, charset="utf8mb4",
        )
        params.update(kwargs)
        return pymysql.connect(**params)

    def _cursor_conn(self) -> pymysql.connections.Connection:
        if self._conn is not None:
            try:
                self._conn.ping(False)
            except pymysql.err.Error:
                try:
                    self._conn.close()
                except pymysql.err.Error:
                    pass
                self._conn = None
        if self._conn is None:
            self._conn = self.connect()
        return self._conn

    def execute(self, sql: str, args: Sequence[Any] | Mapping[str, Any] | None = None) -> int:
        """Run one statement as root; return the affected row count."""
        with self._cursor_conn().cursor() as cur:
            return cur.execute(sql, args)

    def query(self, sql: str, args: Sequence[Any] | Mapping[str, Any] | None = None) -> list[tuple]:
        """Run one statement as root; return all rows as tuples."""
        with self._cursor_conn().cursor() as cur:
            cur.execute(sql, args)
            return [tuple(row) for row in cur.fetchall()]

    def variable(self, name: str) -> str | None:
        """The value of a global variable (SHOW GLOBAL VARIABLES)."""
        rows = self.query("SHOW GLOBAL VARIABLES LIKE %s", (name,))
        return rows[0][1] if rows else None

    # ---------------------------------------------------------------- binlog

    def binlog_files(self) -> list[str]:
        """Names of the binlog files, oldest first (SHOW BINARY LOGS)."""
        return [row[0] for row in self.query("SHOW BINARY LOGS")]

    def binlog_path(self, name: str) -> pathlib.Path:
        """Path on disk of binlog file ``name`` (e.g. ``mariadb-bin.000001``)."""
        assert self.datadir is not None
        return self.datadir / pathlib.PurePath(name).name

    def master_status(self) -> tuple[str, int]:
        """``(current binlog file, position)`` from SHOW MASTER STATUS."""
        row = self.query("SHOW MASTER STATUS")[0]
        return row[0], int(row[1])

    def flush_binary_logs(self) -> str:
        """Rotate to a new binlog file; return its name."""
        self.execute("FLUSH BINARY LOGS")
        return self.master_status()[0]


class _PortInUse(Exception):
    pass


def stop_all(timeout: float = 10.0) -> None:
    """Stop every server this process started and has not stopped yet, halted ones
    included (:meth:`MariaDBServer.stop`, each with ``timeout``).  Registered with
    :mod:`atexit` when the first server starts."""
    with _live_lock:
        servers = list(_live)
    for srv in servers:
        try:
            srv.stop(timeout=timeout)
        except Exception:
            pass
