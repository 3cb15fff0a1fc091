"""A checkpoint store in a SQL database: PostgreSQL (any number of hosts) or SQLite (one host).

The checkpoints then need no filesystem shared between the parties that advance them (the
scheduler's workers, the merge job): each connects to the database.  Same semantics as
:class:`~airflow_provider_binlog.checkpoints.file_store.FileCheckpointStore`: one current checkpoint per
key, saved with compare-and-set together with the schema history valid at it, and a bounded
history of saves.

Two tables, created when missing (``<prefix>`` is ``table_prefix``, empty by default, in
``schema`` if given)::

    <prefix>binlog_checkpoints         key (primary key), checkpoint, schema_history, saved_at
    <prefix>binlog_checkpoint_history  id, key, checkpoint, saved_at

``checkpoint`` holds the checkpoint's JSON with sorted keys, so that compare-and-set is one
conditional ``UPDATE ... WHERE key = :key AND checkpoint = :expected``.  A third table,
``<prefix>binlog_run_leases``, holds the run locks of :meth:`exclusive`.

The URL's password never appears in a message of this module: errors name the database by
its URL with the password masked.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from typing import Any, Callable, Iterator

from sqlalchemy import (
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine, create_engine, make_url

from .checkpoint import Checkpoint
from .errors import ABSENT, CheckpointConflictError, CheckpointStoreError
from .file_store import key_to_file_stem
from .sql_lease import DEFAULT_LEASE_SECONDS, SqlLease, lease_table
from .store import CheckpointStore, RunLock, SavedCheckpoint

#: URL schemes (SQLAlchemy dialects, with or without ``+driver``) this store accepts.
SQL_STORE_DIALECTS = ("postgresql", "sqlite")

_KEY_LENGTH = 512


def mask_url(text: str) -> str:
    """``text`` with the password of its ``user:password@`` part replaced by ``***``."""
    head, sep, rest = text.partition("://")
    if not sep:
        return text
    authority, slash, tail = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not at or ":" not in userinfo:
        return text
    user = userinfo.split(":", 1)[0]
    return f"{head}://{user}:***@{host}{slash}{tail}"


class SqlCheckpointStore(CheckpointStore):
    """Checkpoints in the tables of a SQL database given by a SQLAlchemy URL.

    ``postgresql://user:password@host:5432/db`` (the driver is psycopg 3, the ``sql`` extra;
    ``postgresql+psycopg://`` names it explicitly) or ``sqlite:////absolute/path.db``.  The URL's
    query parameters ``checkpoint_schema`` and ``checkpoint_table_prefix`` set ``schema`` and
    ``table_prefix`` (for a location given as one string); the others go to the driver.

    Compare-and-set is one conditional ``UPDATE`` (``expected`` a checkpoint) or one
    ``INSERT`` (``expected=ABSENT``; a duplicate key is a conflict); the current row, its
    schema history and the history row are written in one transaction.  On SQLite every
    transaction starts with ``BEGIN IMMEDIATE``, so writers queue (``timeout`` seconds)
    instead of failing.

    ``exclusive(key)``: a lease in a table, by the database's clock, renewed from a thread
    while the block runs and verified before each commit phase (:mod:`.sql_lease`); it holds
    behind a transaction pooler such as PgBouncer and when the server ends a session. A run
    killed before it releases the lease leaves it to the next run once it ends
    (``lease_seconds``, default 120, or the URL's ``checkpoint_lease_seconds``), or at once
    on the same host when that process is gone. psycopg's server-side prepared statements
    are off (``prepare_threshold=None``), which a transaction pooler cannot keep.

    Each process opens its own connections: a store used after ``fork`` starts a new pool.
    """

    def __init__(self, url: str | URL, *, history_limit: int = 100, schema: str | None = None,
                 table_prefix: str = "", timeout: float = 30.0,
                 clock: Callable[[], dt.datetime] | None = None,
                 engine_options: dict[str, Any] | None = None,
                 lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        try:
            parsed = make_url(url)
        except (sa_exc.ArgumentError, ValueError):
            raise ValueError(f"invalid checkpoint store URL {mask_url(str(url))!r}") from None
        backend = parsed.get_backend_name()
        if backend not in SQL_STORE_DIALECTS:
            raise ValueError(f"unsupported SQL checkpoint store {backend!r}; supported: "
                             f"{', '.join(d + '://' for d in SQL_STORE_DIALECTS)}")
        if backend == "postgresql" and parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        # the URL may carry the options (a connection's extra holds one string): not the driver's
        query = dict(parsed.query)
        schema = _single(query.pop("checkpoint_schema", None)) or schema
        table_prefix = _single(query.pop("checkpoint_table_prefix", None)) or table_prefix
        lease_text = _single(query.pop("checkpoint_lease_seconds", None))
        lease_seconds = float(lease_text) if lease_text else lease_seconds
        if lease_seconds <= 0:
            raise ValueError("the run lock's lease_seconds must be positive")
        parsed = parsed.set(query=query)
        self.url = parsed
        self.dialect = backend
        self.history_limit = history_limit
        self.lease_seconds = lease_seconds
        self.timeout = timeout
        self._clock = clock or (lambda: dt.datetime.now(dt.timezone.utc))
        self._engine_options = dict(engine_options or {})
        self._engine: Engine | None = None
        self._engine_pid = 0
        self._tables_ready = False
        md = MetaData(schema=schema)
        self.checkpoints = Table(
            f"{table_prefix}binlog_checkpoints", md,
            Column("key", String(_KEY_LENGTH), primary_key=True),
            Column("checkpoint", Text, nullable=False),
            Column("schema_history", Text, nullable=True),
            Column("saved_at", String(64), nullable=False),
        )
        self.history_table = Table(
            f"{table_prefix}binlog_checkpoint_history", md,
            Column("id", Integer, primary_key=True, autoincrement=True),
            Column("key", String(_KEY_LENGTH), nullable=False),
            Column("checkpoint", Text, nullable=False),
            Column("saved_at", String(64), nullable=False),
            Index(f"{table_prefix}binlog_checkpoint_history_key", "key", "id"),
        )
        self.leases = lease_table(md, table_prefix, _KEY_LENGTH)
        self.metadata = md

    def __repr__(self) -> str:
        return f"SqlCheckpointStore({self.url.render_as_string(hide_password=True)!r})"

    # -- connections -------------------------------------------------------

    def _describe_db(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def _error(self, action: str, exc: BaseException) -> CheckpointStoreError:
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        message = detail[0] if detail else type(exc).__name__
        password = self.url.password
        if password:
            message = message.replace(str(password), "***")
        return CheckpointStoreError(f"checkpoint store {self._describe_db()}: cannot {action}: {message}")

    def _get_engine(self) -> Engine:
        if self._engine is not None and self._engine_pid != os.getpid():
            self._engine.dispose(close=False)  # the parent's connections stay the parent's
            self._engine = None
        if self._engine is None:
            options = dict(self._engine_options)
            if self.dialect == "sqlite":
                options.setdefault("connect_args", {}).setdefault("timeout", self.timeout)
            else:
                args = options.setdefault("connect_args", {})
                args.setdefault("connect_timeout", max(1, int(self.timeout)))
                args.setdefault("prepare_threshold", None)  # no prepared statements: a transaction pooler keeps none
                options.setdefault("pool_pre_ping", True)  # a session the server ended is not handed out
            engine = create_engine(self.url, **options)
            if self.dialect == "sqlite":
                _begin_immediate(engine)
            self._engine, self._engine_pid = engine, os.getpid()
        return self._engine

    @contextlib.contextmanager
    def _transaction(self, action: str) -> Iterator[Connection]:
        self._ensure_tables()
        try:
            with self._get_engine().begin() as conn:
                yield conn
        except CheckpointStoreError:
            raise
        except sa_exc.SQLAlchemyError as exc:
            raise self._error(action, exc) from None

    def _ensure_tables(self) -> None:
        if self._tables_ready:
            return
        last: Exception | None = None
        for _ in range(3):  # two processes creating the tables at once: one of them fails, then sees them
            try:
                with self._get_engine().begin() as conn:
                    self.metadata.create_all(conn, checkfirst=True)
                self._tables_ready = True
                return
            except sa_exc.SQLAlchemyError as exc:
                last = exc
        raise self._error("create the checkpoint tables", last)

    def dispose(self) -> None:
        """Close the pooled connections."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- reading -----------------------------------------------------------

    def _row(self, conn: Connection, key: str) -> Any:
        c = self.checkpoints.c
        return conn.execute(select(c.checkpoint, c.schema_history)
                            .where(c.key == key)).first()

    def _decode(self, key: str, text_value: str | None) -> Checkpoint | None:
        if text_value is None:
            return None
        try:
            return Checkpoint.from_json(text_value)
        except ValueError as exc:
            raise CheckpointStoreError(f"checkpoint store {self._describe_db()} holds an invalid "
                                       f"checkpoint for key {key!r}: {exc}") from None

    def load(self, key: str) -> Checkpoint | None:
        _check_key(key)
        with self._transaction("read a checkpoint") as conn:
            row = self._row(conn, key)
        return None if row is None else self._decode(key, row.checkpoint)

    def load_schema_history(self, key: str) -> tuple[Checkpoint, dict] | None:
        _check_key(key)
        with self._transaction("read a checkpoint") as conn:
            row = self._row(conn, key)
        if row is None or row.schema_history is None:
            return None
        try:
            history = json.loads(row.schema_history)
        except ValueError as exc:
            raise CheckpointStoreError(f"checkpoint store {self._describe_db()} holds an invalid "
                                       f"schema history for key {key!r}: {exc}") from None
        if not isinstance(history, dict):
            return None
        return self._decode(key, row.checkpoint), history

    def history(self, key: str, limit: int | None = None) -> list[SavedCheckpoint]:
        _check_key(key)
        h = self.history_table.c
        query = select(h.checkpoint, h.saved_at).where(h.key == key).order_by(h.id.desc())
        if limit is not None:
            query = query.limit(max(limit, 0))
        with self._transaction("read the checkpoint history") as conn:
            rows = conn.execute(query).all()
        try:
            return [SavedCheckpoint(Checkpoint.from_json(r.checkpoint), dt.datetime.fromisoformat(r.saved_at))
                    for r in rows]
        except (TypeError, ValueError) as exc:
            raise CheckpointStoreError(f"checkpoint store {self._describe_db()} has a bad history "
                                       f"entry for key {key!r}: {exc}") from None

    # -- writing -----------------------------------------------------------

    def save(self, key: str, checkpoint: Checkpoint, *, expected: Checkpoint | None = None,
             schema_history: dict | None = None) -> None:
        _check_key(key)
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"expected a Checkpoint, got {type(checkpoint).__name__}")
        if expected is not None and expected is not ABSENT and not isinstance(expected, Checkpoint):
            raise TypeError(f"expected must be a Checkpoint or ABSENT, got {type(expected).__name__}")
        saved_at = self._clock().isoformat()
        values = {
            "checkpoint": _encode(checkpoint),
            "schema_history": None if schema_history is None else json.dumps(schema_history, sort_keys=True),
            "saved_at": saved_at,
        }
        c = self.checkpoints.c
        conflict: tuple[bool, Checkpoint | None] | None = None
        with self._transaction("save a checkpoint") as conn:
            if expected is ABSENT:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(self.checkpoints).values(key=key, **values))
                except sa_exc.IntegrityError:
                    conflict = (True, None)
            elif expected is not None:
                done = conn.execute(update(self.checkpoints).values(**values)
                                    .where(and_(c.key == key, c.checkpoint == _encode(expected)))).rowcount
                if done != 1:
                    row = self._row(conn, key)
                    actual = None if row is None else self._decode(key, row.checkpoint)
                    if actual is not None and actual == expected:
                        # the same checkpoint in another spelling (older JSON text): set it by that text
                        done = conn.execute(update(self.checkpoints).values(**values).where(
                            and_(c.key == key, c.checkpoint == row.checkpoint))).rowcount
                    if done != 1:
                        conflict = (False, actual)
            else:
                done = conn.execute(update(self.checkpoints).values(**values).where(c.key == key)).rowcount
                if done != 1:
                    try:
                        with conn.begin_nested():
                            conn.execute(insert(self.checkpoints).values(key=key, **values))
                    except sa_exc.IntegrityError:  # inserted meanwhile by another save
                        conn.execute(update(self.checkpoints).values(**values).where(c.key == key))
            if conflict is None:
                self._append_history(conn, key, values)
        if conflict is not None:
            absent, actual = conflict
            if absent:  # the row that made the INSERT fail, read after that transaction
                actual = self.load(key)
            raise CheckpointConflictError(key, ABSENT if absent else expected, actual)

    def _append_history(self, conn: Connection, key: str, values: dict[str, Any]) -> None:
        h = self.history_table.c
        conn.execute(insert(self.history_table).values(key=key, checkpoint=values["checkpoint"],
                                                       saved_at=values["saved_at"]))
        keep = select(h.id).where(h.key == key).order_by(h.id.desc()).limit(self.history_limit)
        conn.execute(delete(self.history_table).where(and_(h.key == key, h.id.not_in(keep.scalar_subquery()))))

    # -- run lock ----------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, key: str) -> Iterator[RunLock]:
        """A lease in the table ``<prefix>binlog_run_leases``, renewed while the block runs
        (:mod:`.sql_lease`); the block gets it, to verify before each commit phase."""
        _check_key(key)
        self._ensure_tables()
        lease = SqlLease(self, key, self.lease_seconds).acquire()
        try:
            yield lease
        finally:
            lease.release()


def _begin_immediate(engine: Engine) -> None:
    """SQLite: the driver's own transaction handling off, every transaction ``BEGIN
    IMMEDIATE`` (the write lock taken at once, so a compare-and-set never upgrades a read
    lock and no writer fails with "database is locked" before the busy timeout)."""

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _single(value: str | tuple[str, ...] | None) -> str | None:
    return value[-1] if isinstance(value, tuple) else value


def _encode(checkpoint: Checkpoint) -> str:
    return json.dumps(checkpoint.to_json(), sort_keys=True, separators=(",", ":"))


def _check_key(key: str) -> None:
    key_to_file_stem(key)  # a non-empty string
    if len(key) > _KEY_LENGTH:
        raise ValueError(f"checkpoint key longer than {_KEY_LENGTH} characters")
