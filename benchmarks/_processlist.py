"""The connections a user holds open on a MariaDB server, sampled from a thread
(``information_schema.PROCESSLIST``) while something runs: the peak, and the peak of each kind
(a replication stream, ``Binlog Dump``, against the other connections)."""
from __future__ import annotations

import threading
import time
from typing import Any, Optional


class ConnectionSampler:
    """``with ConnectionSampler(server, user) as s: ...``; then ``s.peak``, ``s.peak_streams``,
    ``s.peak_sessions`` (the connections other than replication streams), ``s.peak_rows`` (the
    user's rows of the process list when the peak was first seen) and ``s.samples``.
    The sampler's own connection is root's, so it is never counted for another user."""

    def __init__(self, server: Any, user: str, interval: float = 0.02) -> None:
        self.server = server
        self.user = user
        self.interval = interval
        self.peak = self.peak_streams = self.peak_sessions = self.samples = 0
        self.peak_rows: list[tuple] = []  # the process list's rows of the user at the peak
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    def _run(self) -> None:
        conn = self.server.connect()
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    cur.execute("SELECT ID, COMMAND, TIME_MS, STATE, LEFT(INFO, 60) "
                                "FROM information_schema.PROCESSLIST WHERE USER = %s ORDER BY ID", (self.user,))
                    rows = [tuple(row) for row in cur.fetchall()]
                    commands = [row[1] for row in rows]
                    streams = sum(1 for c in commands if c == "Binlog Dump")
                    if len(commands) > self.peak:
                        self.peak_rows = rows
                    self.peak = max(self.peak, len(commands))
                    self.peak_streams = max(self.peak_streams, streams)
                    self.peak_sessions = max(self.peak_sessions, len(commands) - streams)
                    self.samples += 1
                    self._stop.wait(self.interval)
        except BaseException as exc:  # noqa: BLE001 - said when the sampling ends
            self._error = exc
        finally:
            conn.close()

    def __enter__(self) -> "ConnectionSampler":
        self._thread = threading.Thread(target=self._run, name="processlist-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._error is not None and exc[0] is None:
            raise RuntimeError(f"sampling the process list failed: {self._error}")


def sample_now(server: Any, user: str) -> int:
    """The connections ``user`` holds right now."""
    return int(server.query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (user,))[0][0])


def wait_for_no_connections(server: Any, user: str, timeout: float = 30.0) -> int:
    """Wait until ``user`` holds no connection (those of an earlier task closing); what is left."""
    deadline = time.monotonic() + timeout
    left = sample_now(server, user)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = sample_now(server, user)
    return left


__all__ = ["ConnectionSampler", "sample_now", "wait_for_no_connections"]
