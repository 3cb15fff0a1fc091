"""The run lock of the SQL checkpoint store: a lease in a table, not a database session.

A row per key names its holder and when its lease ends, by the database's clock. A run takes
it when the row is absent or its lease ended (or its holder is a process of this host that
is gone), renews it from a thread while it runs, and releases it at the end. Each step is one
short transaction, so the lease holds behind a transaction pooler (PgBouncer), across a
server that ends sessions (``idle_session_timeout``, a failover, ``pg_terminate_backend``)
and on SQLite alike, where a session-scoped lock would be freed or shared.

A run that stops renewing (a paused VM, a stuck call) loses the lease once it ends, to the
next run that asks; :meth:`SqlLease.verify`, called before each commit phase, then raises
:class:`CheckpointLockLostError`, and the run commits nothing more.
"""
from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import uuid
from typing import Any, ContextManager, Protocol

from sqlalchemy import Column, Float, String, Table, and_, delete, insert, literal_column, select, update
from sqlalchemy import exc as sa_exc

from .errors import CheckpointLockedError, CheckpointLockLostError, CheckpointStoreError
from .store import RunLock



class LeaseDatabase(Protocol):
    """What a lease needs of its store (:class:`.sql_store.SqlCheckpointStore`)."""

    dialect: str
    leases: Table

    def _transaction(self, action: str) -> ContextManager[Any]: ...

    def _describe_db(self) -> str: ...

#: the lease a run holds, in seconds; renewed every third of it
DEFAULT_LEASE_SECONDS = 120.0

#: the database's clock, in seconds since the epoch
_NOW = {"postgresql": "EXTRACT(EPOCH FROM clock_timestamp())",
        "sqlite": "((julianday('now') - 2440587.5) * 86400.0)"}


def lease_table(metadata: Any, prefix: str, key_length: int) -> Table:
    return Table(f"{prefix}binlog_run_leases", metadata,
                 Column("key", String(key_length), primary_key=True),
                 Column("holder", String(300), nullable=False),
                 Column("expires_at", Float, nullable=False),
                 Column("acquired_at", String(64), nullable=False))


class SqlLease(RunLock):
    """The lease of ``key`` in ``store``'s lease table, taken by :meth:`acquire`."""

    def __init__(self, store: LeaseDatabase, key: str, seconds: float) -> None:
        super().__init__(key)
        self.store, self.seconds = store, float(seconds)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self._now = literal_column(_NOW[store.dialect], type_=Float())
        self._lost = False
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def _table(self) -> Table:
        return self.store.leases

    def acquire(self) -> "SqlLease":
        leases = self._table.c
        values = {"holder": self.holder, "acquired_at": dt.datetime.now(dt.timezone.utc).isoformat()}
        with self.store._transaction("take the run lock") as conn:
            expiry = self._now + self.seconds
            took = conn.execute(update(self._table).values(**values, expires_at=expiry).where(
                and_(leases.key == self.key, leases.expires_at < self._now))).rowcount
            if not took:
                row = conn.execute(select(leases.holder, leases.expires_at - self._now)
                                   .where(leases.key == self.key)).first()
                if row is not None and _holder_is_gone(row[0]):
                    took = conn.execute(update(self._table).values(**values, expires_at=expiry).where(
                        and_(leases.key == self.key, leases.holder == row[0]))).rowcount
                elif row is None:
                    try:
                        with conn.begin_nested():
                            conn.execute(insert(self._table).values(key=self.key, expires_at=expiry, **values))
                        took = 1
                    except sa_exc.IntegrityError:  # taken meanwhile
                        row = conn.execute(select(leases.holder, leases.expires_at - self._now)
                                           .where(leases.key == self.key)).first()
        if not took:
            holder, left = (row[0], max(0.0, float(row[1]))) if row is not None else ("unknown", 0.0)
            raise CheckpointLockedError(
                f"another run of {self.key!r} is in progress (holder {holder} in {self.store._describe_db()}, "
                f"its lease renewed while it runs, ending in {left:.0f} s otherwise); two runs of the same load "
                f"must not overlap: let it finish, or wait for it to fail")
        self._thread = threading.Thread(target=self._renew_while_held, name=f"lease {self.key}", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> bool:
        """Extend the lease while this run still holds it; False when another run took it."""
        leases = self._table.c
        with self.store._transaction("renew the run lock") as conn:
            return bool(conn.execute(update(self._table).values(expires_at=self._now + self.seconds).where(
                and_(leases.key == self.key, leases.holder == self.holder))).rowcount)

    def _renew_while_held(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            if self._paused.is_set():
                continue
            try:
                if not self._renew():
                    self._lost = True
                    return
            except CheckpointStoreError:
                continue  # the database away for a moment: verify() tells whether the lease held

    def verify(self) -> None:
        if not self._lost:
            try:
                self._lost = not self._renew()
            except CheckpointStoreError as exc:
                raise CheckpointLockLostError(f"cannot verify the run lock of {self.key!r}: {exc}; "
                                              f"nothing more is committed by this run") from None
        if self._lost:
            raise CheckpointLockLostError(
                f"the run lock of {self.key!r} was taken by another run after this run's lease ended "
                f"(the process did not renew it within {self.seconds:.0f} s); nothing more is committed "
                f"by this run, and the other run goes on from what is committed")

    def pause_renewal(self) -> None:
        self._paused.set()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        leases = self._table.c
        try:
            with self.store._transaction("release the run lock") as conn:
                conn.execute(delete(self._table).where(and_(leases.key == self.key, leases.holder == self.holder)))
        except CheckpointStoreError:
            pass  # the lease ends by itself


def _holder_is_gone(holder: str) -> bool:
    """A lease's holder is a process of this host that no longer runs."""
    host, _, rest = holder.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
