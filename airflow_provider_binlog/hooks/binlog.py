"""Airflow hook for a MySQL/MariaDB server read like a replica.

The connection (type ``mysql_binlog``) holds host, port, login and password; its extras:

``server_id``
    Required. The replica server id this load registers with: distinct from the server's
    own id and from every other replica of the server.
``ssl``, ``ssl_ca``, ``ssl_cert``, ``ssl_key``, ``ssl_verify``
    TLS: on when ``ssl`` is true or any of the files is given. ``ssl_verify`` (default true)
    checks the server's certificate and host name (against ``ssl_ca``, else the system's CAs).
``flavor``
    ``auto`` (default), ``mysql`` or ``mariadb``.
``checkpoint_store_uri``
    Where loads keep their checkpoint: a directory path or ``file:///path``, or a SQLAlchemy
    URL of a database (``postgresql://...``, ``sqlite:///...``; see docs/checkpoint-stores.md);
    the hook's ``checkpoint_store_uri`` argument overrides it.
``heartbeat_seconds``
    Heartbeat period the server uses on an idle replication stream (default 30).
``connect_timeout``
    Seconds to wait for the TCP connection (default 10).
"""
from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Union

import pymysql
from airflow.sdk import BaseHook

from ..checkpoints import Checkpoint, CheckpointStore, open_checkpoint_store
from ..codec.gtid import Flavor
from ..capture.options import DumpOptions, SnapshotOptions
from ..errors import ProviderError
from ..replica.position import PositionCheck, check_position
from ..replica import ReplicaConnection
from ..replica.preflight import PreflightReport, preflight
from ..utils.settings import dump_workers
from ..common.tables import TableFilter
from ..staging.masking import Masking
from ..staging.ref import StagingRef
from .masking import load_masking
from .staging_storage import staging_storage_options

DEFAULT_PORT = 3306
FLAVORS = ("auto", Flavor.MYSQL.value, Flavor.MARIADB.value)
_TRUE = ("1", "true", "yes", "on", "y", "t")
_FALSE = ("0", "false", "no", "off", "n", "f", "")

CheckpointLike = Union[Checkpoint, Mapping[str, Any], str]


#: Why a position check is ready: the thresholds are met, or new data waited long enough.
REASON_THRESHOLDS = "thresholds met"
REASON_WAITED = "max_threshold_wait elapsed"


class BinlogConnectionError(ProviderError, ValueError):
    """The Airflow connection is incomplete or has an invalid extra."""


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BinlogConnectionError(f"connection extra {name!r} must be true or false")


def _number(name: str, value: Any, kind=float, minimum: float = 0):
    try:
        number = kind(value)
        if isinstance(value, bool) or number < minimum:
            raise ValueError
    except (TypeError, ValueError):
        raise BinlogConnectionError(
            f"connection extra {name!r} must be {'an integer' if kind is int else 'a number'} "
            f">= {minimum}") from None
    return number


def _given(extra: Mapping[str, Any], name: str, default: Any) -> Any:
    """An extra's value; ``default`` when absent or left empty in the connection form."""
    value = extra.get(name)
    return default if value is None or value == "" else value


def as_checkpoint(value: CheckpointLike, what: str = "checkpoint") -> Checkpoint:
    """A checkpoint from a :class:`Checkpoint`, its JSON dict, a sensor's XCom value (its
    ``target``), or text: the forms of :meth:`Checkpoint.parse`, or a dict rendered by a
    template (JSON or Python literal)."""
    if isinstance(value, Checkpoint):
        return value
    if isinstance(value, Mapping):
        if "target" in value and isinstance(value["target"], Mapping):
            value = value["target"]  # a sensor's XCom value
        return Checkpoint.from_json(dict(value))
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except ValueError:
                try:
                    data = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    data = None
            if isinstance(data, Mapping):
                return as_checkpoint(data, what)
        return Checkpoint.parse(text)
    raise TypeError(f"{what} must be a Checkpoint, a dict or a string, not {type(value).__name__}")


@dataclass(frozen=True)
class CheckpointRef:
    """Where a load keeps its checkpoint: the store's URI (``None``: no store) and the key,
    resolved once (:meth:`BinlogHook.checkpoint_ref`) and handed to every step of a task."""

    store_uri: Optional[str]
    key: str

    def open(self) -> CheckpointStore:
        """The store; a :class:`BinlogConnectionError` saying how to name one when there is none."""
        if not self.store_uri:
            raise BinlogConnectionError(
                f"no checkpoint store for {self.key!r}: the connection has no extra 'checkpoint_store_uri' "
                "(a directory path or file:///path where loads keep their checkpoints) and none was "
                "passed (checkpoint_store_uri=)")
        return open_checkpoint_store(self.store_uri)


def _options_of(kind: Any, method: str, options: Any, masking: Any, given: Mapping[str, Any]) -> tuple[Any, Any]:
    """The options of :meth:`BinlogHook.dump` or ``snapshot`` (``kind``): ``options`` as given,
    else made from the keyword arguments that are set (both is a ``TypeError``); and the
    ``masking`` when it is a :class:`Masking` with its key, used as it is."""
    values = {k: v for k, v in given.items() if v is not None}
    keyed = masking if isinstance(masking, Masking) else None
    if masking is not None and keyed is None:
        values["masking"] = masking
    if options is None:
        return kind(**values), keyed
    if values:
        raise TypeError(f"{method}() takes options= or the options as keyword arguments, not both: "
                        f"{', '.join(sorted(values))}")
    return options, keyed


def check_thresholds(min_bytes: Optional[int], min_transactions: Optional[int]) -> None:
    """Refuse thresholds of new data that :meth:`BinlogHook.poll_position` cannot take (the
    sensor's and the event trigger's): each is none or a whole number, 0 or more."""
    for name, value in (("min_bytes", min_bytes), ("min_transactions", min_transactions)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, not {value!r}")


class BinlogHook(BaseHook):
    """Reads a MySQL/MariaDB server's binlog like a replica, through an Airflow connection.

    :param binlog_conn_id: the Airflow connection (type ``mysql_binlog``).
    :param connection: the connection object itself, instead of looking ``binlog_conn_id`` up
        (default: looked up on first use).
    :param checkpoint_store_uri: the checkpoint store (directory path or ``file:///path``);
        default: the connection's extra ``checkpoint_store_uri``.
    """

    conn_name_attr = "binlog_conn_id"
    default_conn_name = "mysql_binlog_default"
    conn_type = "mysql_binlog"
    hook_name = "MySQL/MariaDB binlog"

    def __init__(self, binlog_conn_id: str = default_conn_name, *, connection=None,
                 checkpoint_store_uri: Optional[str] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.binlog_conn_id = binlog_conn_id
        self._connection = connection
        self.checkpoint_store_uri = checkpoint_store_uri or None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.binlog_conn_id!r})"

    # ------------------------------------------------------------------ connection
    @property
    def connection(self):
        if self._connection is None:
            self._connection = self.get_connection(self.binlog_conn_id)
        return self._connection

    def _extras(self) -> dict:
        conn = self.connection
        extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else json.loads(conn.extra or "{}")
        if not isinstance(extra, dict):
            raise BinlogConnectionError(f"the extra of connection {self.binlog_conn_id!r} must be a JSON object")
        return extra

    def replica_kwargs(self) -> dict:
        """Keyword arguments for :class:`ReplicaConnection`, password included: never log them."""
        conn = self.connection
        extra = self._extras()
        cid = self.binlog_conn_id
        if not conn.host:
            raise BinlogConnectionError(f"connection {cid!r} has no host")
        if extra.get("server_id") in (None, ""):
            raise BinlogConnectionError(
                f"connection {cid!r} needs the extra 'server_id': a replica server id that neither the "
                "server nor any of its replicas uses")
        server_id = _number("server_id", extra["server_id"], int, 1)
        if server_id >= 1 << 32:
            raise BinlogConnectionError("connection extra 'server_id' must be below 2**32")
        flavor = str(extra.get("flavor") or "auto").strip().lower()
        if flavor not in FLAVORS:
            raise BinlogConnectionError(f"connection extra 'flavor' must be one of {', '.join(FLAVORS)}")
        kwargs: dict = {
            "host": conn.host,
            "port": int(conn.port) if conn.port else DEFAULT_PORT,
            "user": conn.login or "",
            "password": conn.password or "",
            "server_id": server_id,
            "flavor": flavor,
            "heartbeat_seconds": _number("heartbeat_seconds", _given(extra, "heartbeat_seconds", 30.0), float, 0),
        }
        if extra.get("connect_timeout") not in (None, ""):
            kwargs["connect_timeout"] = _number("connect_timeout", extra["connect_timeout"], int, 1)
        ssl = self._ssl(extra)
        if ssl is not None:
            kwargs["ssl"] = ssl
        return kwargs

    @staticmethod
    def _ssl(extra: Mapping[str, Any]) -> Optional[dict]:
        files = {key: extra.get(f"ssl_{key}") for key in ("ca", "cert", "key")}
        given = {k: v for k, v in files.items() if v not in (None, "")}
        if not given and not _bool("ssl", _given(extra, "ssl", False)):
            return None
        if "key" in given and "cert" not in given:
            raise BinlogConnectionError("connection extra 'ssl_key' needs 'ssl_cert'")
        verify = _bool("ssl_verify", _given(extra, "ssl_verify", True))
        ssl = dict(given)
        ssl["verify_mode"] = verify
        ssl["check_hostname"] = verify
        return ssl

    def get_replica(self) -> ReplicaConnection:
        """A (not yet connected) replica session for the connection."""
        return ReplicaConnection(**self.replica_kwargs())

    def get_conn(self) -> ReplicaConnection:
        return self.get_replica()

    def checkpoint_store_location(self) -> Optional[str]:
        """The checkpoint store's URI: the hook's ``checkpoint_store_uri``, else the
        connection's extra of that name (``None`` when neither is set)."""
        return self.checkpoint_store_uri or self._extras().get("checkpoint_store_uri") or None

    def checkpoint_ref(self, checkpoint_key: Optional[str] = None) -> CheckpointRef:
        """The store (the hook's ``checkpoint_store_uri``, else the connection's extra) and the
        key (``checkpoint_key``, else the connection id) of this load's checkpoint."""
        return CheckpointRef(self.checkpoint_store_location(), checkpoint_key or self.binlog_conn_id)

    def checkpoint_store(self) -> CheckpointStore:
        """The store named by the hook's ``checkpoint_store_uri``, else by the connection's
        extra ``checkpoint_store_uri``."""
        return self.checkpoint_ref().open()

    def stored_checkpoint(self, checkpoint_key: Optional[str] = None) -> Checkpoint:
        """The checkpoint stored under ``checkpoint_key`` (default: the connection id)."""
        ref = self.checkpoint_ref(checkpoint_key)
        key = ref.key
        checkpoint = ref.open().load(key)
        if checkpoint is None:
            raise BinlogConnectionError(
                f"the checkpoint store has no checkpoint for {key!r}: run an initial snapshot "
                "(backfill mode 'snapshot') or give a start position")
        return checkpoint

    # ------------------------------------------------------------------ server
    def current_position(self) -> Checkpoint:
        """The server's binlog position now (file, position, GTID state)."""
        with self.get_replica() as replica:
            file, pos, gtid = replica.master_status()
            info = replica.info
        return Checkpoint.from_json({"file": file, "pos": pos, "gtid": gtid or None, "flavor": info.flavor,
                                     "server_id": info.server_id, "server_uuid": info.server_uuid})

    def preflight(self) -> PreflightReport:
        """Check the server's binlog settings and the user's grants (see
        :func:`~airflow_provider_binlog.replica.preflight.preflight`); log the warnings."""
        with self.get_replica() as replica:
            report = preflight(replica)
        for warning in report.warnings:
            self.log.warning("%s", warning)
        return report

    def test_connection(self) -> tuple[bool, str]:
        """For the connection form's Test button."""
        try:
            with self.get_replica() as replica:
                report = preflight(replica)
                file, pos, _ = replica.master_status()
                info = replica.info
        except Exception as exc:  # the message never holds the password
            return False, str(exc)
        note = f"; warnings: {' '.join(report.warnings)}" if report.warnings else ""
        return True, f"{info.flavor} {info.version} at {file}:{pos}{note}"

    def check_position(self, *, start: Optional[CheckpointLike] = None, checkpoint_key: Optional[str] = None,
                       retention_margin_files: int = 1) -> PositionCheck:
        """Compare a checkpoint (``start``, else the stored one) with the server's position
        now; raises ``BinlogPurgedError`` when the binlogs it needs are gone."""
        begin = as_checkpoint(start, "start") if start is not None else self.stored_checkpoint(checkpoint_key)
        with self.get_replica() as replica:
            return check_position(replica, begin, retention_margin_files=retention_margin_files)

    def poll_position(self, *, start: Optional[CheckpointLike] = None, checkpoint_key: Optional[str] = None,
                      min_bytes: Optional[int] = None, min_transactions: Optional[int] = None,
                      thresholds_waived: bool = False, retention_margin_files: int = 1,
                      quiet: bool = False) -> dict:
        """One check of the sensor and the triggers (blocking): the position check as JSON, with
        ``ready`` (whether to stop waiting) and ``reason`` (:data:`REASON_THRESHOLDS`,
        :data:`REASON_WAITED` or None). The lag is sent as metrics under ``checkpoint_key`` (or
        the connection id). Raises ``BinlogPurgedError`` when the checkpoint's binlogs are gone.
        ``quiet`` logs the lag at DEBUG instead of INFO (a watcher checks every few seconds)."""
        check = self.check_position(start=start, checkpoint_key=checkpoint_key,
                                    retention_margin_files=retention_margin_files)
        for warning in check.warnings:
            self.log.warning("%s", warning)
        if check.has_new_data and (min_transactions or 0) > 0 and check.lag.get("transactions") is None:
            self.log.warning("the transactions behind [%s] cannot be counted (no GTIDs): "
                             "min_transactions is not applied", check.start)
        (self.log.debug if quiet else self.log.info)("%s", check.describe())
        try:  # a metric must not fail the check
            from ..utils.metrics import record_lag
            record_lag(self.checkpoint_ref(checkpoint_key).key, check.lag)
        except Exception:
            self.log.debug("the lag metrics could not be sent", exc_info=True)
        out = check.to_json()
        if check.meets(min_bytes, min_transactions):
            out.update(ready=True, reason=REASON_THRESHOLDS)
        elif check.has_new_data and thresholds_waived:
            out.update(ready=True, reason=REASON_WAITED)
        else:
            out.update(ready=False, reason=None)
        return out

    # ------------------------------------------------------------------ dump
    def dump(self, *, staging: Union[StagingRef, str, os.PathLike[str]], start: Optional[CheckpointLike] = None,
             stop: Union[str, CheckpointLike] = "current", options: Optional[DumpOptions] = None,
             tables: Optional[Iterable[str]] = None, exclude: Optional[Iterable[str]] = None,
             max_rows: Optional[int] = None, max_bytes: Optional[int] = None,
             max_seconds: Optional[float] = None, checkpoint_key: Optional[str] = None,
             masking: Optional[Any] = None, history: Optional[Any] = None, **more: Any) -> dict:
        """Dump the binlog from ``start`` to ``stop`` into ``staging``; return the result as
        JSON (manifest path, dump id, start and end checkpoints, row counts, transactions).

        ``start=None`` reads the checkpoint stored under ``checkpoint_key`` (default: the
        connection id). ``stop`` is ``"current"`` (the server's position when the dump starts),
        a checkpoint, or a sensor's XCom value. ``tables``/``exclude`` are ``schema.table``
        patterns. ``masking=`` (a :class:`~airflow_provider_binlog.staging.masking.Masking`)
        excludes and masks columns as rows are staged. ``staging`` is a location, or a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef` of a location on S3, GCS or Azure
        and the ``aws``, ``google_cloud_platform`` or ``wasb`` connection of its credentials
        (without one: the environment's credential chain).
        The dump never advances the stored checkpoint.

        ``options`` (a :class:`~airflow_provider_binlog.capture.options.DumpOptions`) gives all
        of these at once, checked when made; without it, they are made from the keyword
        arguments (and ``workers``, ``retries``, ``backoff_seconds``, ``progress_seconds``).
        ``masking`` may also be a :class:`~airflow_provider_binlog.staging.masking.Masking` with
        its key, used as it is.
        """
        options, keyed = _options_of(DumpOptions, "dump", options, masking, {
            "tables": tables, "exclude": exclude, "max_rows": max_rows, "max_bytes": max_bytes,
            "max_seconds": max_seconds, "checkpoint_key": checkpoint_key, **more})
        staged = StagingRef.of(staging)
        ref = self.checkpoint_ref(options.checkpoint_key)
        store = ref.open() if ref.store_uri else None
        if start is None and store is not None and history is None:
            # one read of the store: the checkpoint with the schema history kept beside it
            stored = store.load_schema_history(ref.key)
            if stored is not None:
                from ..schema_history import SchemaHistory
                start, history = stored[0], SchemaHistory.from_json(stored[1])
        begin = as_checkpoint(start, "start") if start is not None else \
            self.stored_checkpoint(options.checkpoint_key)
        end = stop if stop == "current" else as_checkpoint(stop, "stop")
        table_filter = TableFilter(options.tables, options.exclude)
        if keyed is None:
            keyed = load_masking(options.masking, options.masking_secret_conn_id)
        from ..capture.dump import run_dump  # the capture and staging stack: not at DAG parse time

        replica = self.get_replica()
        plain = self._plain_connect_kwargs()
        try:
            replica.connect()
            report = preflight(replica)
            for warning in report.warnings:
                self.log.warning("%s", warning)
            self.log.info("binlog dump of %s from [%s] to [%s], tables %s", self.binlog_conn_id, begin,
                          end, table_filter.to_json())
            workers = dump_workers() if options.workers is None else options.workers
            # the schema history is kept with the checkpoint; without one it is read now
            result = run_dump(replica, staging_dir=staged.location, start=begin, stop=end, tables=table_filter,
                              store=store, key=ref.key,
                              seed_connect=lambda: pymysql.connect(autocommit=True, charset="utf8mb4", **plain),
                              max_rows=options.max_rows, max_bytes=options.max_bytes,
                              max_seconds=options.max_seconds, history=history, workers=workers,
                              masking=keyed, retries=options.retries, backoff_seconds=options.backoff_seconds,
                              progress_seconds=options.progress_seconds,
                              storage_options=staging_storage_options(staged.conn_id))
        finally:
            replica.close()
        out = result.to_json()
        self.log.info("binlog dump %s: %d transactions, rows %s, ended at [%s]", out["dump_id"],
                      out["transactions"], out["rows"], result.end)
        return out

    # ------------------------------------------------------------------ snapshot
    def _plain_connect_kwargs(self) -> dict:
        """pymysql connection arguments (no replication settings), password included."""
        keep = ("host", "port", "user", "password", "connect_timeout", "ssl")
        return {k: v for k, v in self.replica_kwargs().items() if k in keep}

    def snapshot(self, staging: Union[StagingRef, str, os.PathLike[str]], tables: Optional[Iterable[str]] = None,
                 exclude: Optional[Iterable[str]] = None, *, options: Optional[SnapshotOptions] = None,
                 chunk_rows: Optional[int] = None,
                 progress: Optional[Callable[[str, int, int], None]] = None,
                 masking: Optional[Any] = None, method: Optional[str] = None,
                 resume_key: Optional[str] = None, reader: Optional[str] = None,
                 read_connections: Optional[int] = None,
                 estimates: Optional[Callable[[dict], None]] = None) -> dict:
        """Take an initial snapshot of the selected tables into ``staging`` (a location or a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef`, as for :meth:`dump`). Returns
        the result like :meth:`dump` (manifest path, dump id, start and end checkpoints, which
        are equal, and row counts) with ``"mode": "snapshot"``. The merge applies it as an overwrite of
        each table and sets the stored checkpoint to its end; it never moves it here.

        ``method="watermark"`` (the default) reads the tables by key chunks between binlog
        watermarks (:mod:`~airflow_provider_binlog.capture.watermark`): no lock, no
        transaction longer than one chunk; the batch runs from the first watermark to the last.
        A table without a usable key (no primary key, no unique key of NOT NULL columns) is read
        in one consistent transaction at a position inside the batch instead (on MySQL after a
        short ``FLUSH TABLES WITH READ LOCK``, which needs RELOAD).
        ``method="consistent"`` reads every table in one consistent transaction with the binlog
        coordinates of its start (:func:`~airflow_provider_binlog.capture.snapshot.take_snapshot`);
        the user needs RELOAD on MySQL, for the short ``FLUSH TABLES WITH READ LOCK`` that pins
        the position.
        With ``resume_key`` its work is sealed as it goes (after about a million rows or 30
        seconds), and a snapshot of the same key whose process died is continued there.
        ``reader`` and ``read_connections`` choose how its chunks are read (see
        :func:`~airflow_provider_binlog.capture.watermark.snapshot.take_watermark_snapshot`:
        straight into Arrow with connectorx where it can, over that many connections); a
        connection with TLS is read with pymysql.

        ``options`` (a :class:`~airflow_provider_binlog.capture.options.SnapshotOptions`) gives
        the tables, method, reader, chunk rows, connections and masking at once, checked when
        made; without it, they are made from the keyword arguments.
        ``masking`` may also be a :class:`~airflow_provider_binlog.staging.masking.Masking` with
        its key, used as it is."""
        from ..capture.arrow_reader import ArrowChunkReader
        from ..capture.snapshot import take_snapshot
        from ..capture.watermark.snapshot import take_watermark_snapshot

        options, keyed = _options_of(SnapshotOptions, "snapshot", options, masking, {
            "tables": tables, "exclude": exclude, "chunk_rows": chunk_rows, "method": method, "reader": reader,
            "read_connections": read_connections})
        staged = StagingRef.of(staging)
        if keyed is None:
            keyed = load_masking(options.masking, options.masking_secret_conn_id)
        method, chunk_rows = options.method, options.chunk_rows
        table_filter = TableFilter(options.tables, options.exclude)
        storage_options = staging_storage_options(staged.conn_id)
        with self.get_replica() as replica:
            report = preflight(replica)
            info = replica.info
        for warning in report.warnings:
            self.log.warning("%s", warning)
        kwargs = self.replica_kwargs()
        server = {"host": kwargs["host"], "port": kwargs["port"], "flavor": info.flavor,
                  "version": info.version, "server_id": info.server_id,
                  "server_uuid": info.server_uuid}
        plain = self._plain_connect_kwargs()
        self.log.info("snapshot of %s, tables %s", self.binlog_conn_id, table_filter.to_json())
        connect = lambda: pymysql.connect(autocommit=True, charset="utf8mb4", **plain)  # noqa: E731
        if method == "watermark":
            arrow_url = None if "ssl" in plain else ArrowChunkReader.url_for(
                plain["host"], plain["port"], plain["user"], plain.get("password"), "information_schema")
            manifest = take_watermark_snapshot(connect, self.get_replica, staging_dir=staged.location,
                                               tables=table_filter, flavor=info.flavor, server=server,
                                               chunk_rows=chunk_rows, progress=progress, masking=keyed,
                                               resume_key=resume_key, arrow_url=arrow_url, reader=options.reader,
                                               read_connections=options.read_connections, estimates=estimates,
                                               storage_options=storage_options)
        else:
            manifest = take_snapshot(connect, staging_dir=staged.location, tables=table_filter, flavor=info.flavor,
                                     server=server, chunk_rows=chunk_rows or 10_000, progress=progress,
                                     masking=keyed, estimates=estimates, storage_options=storage_options)
        rows = {f"{t['schema']}.{t['table']}": t["rows"] for t in manifest.tables}
        out = {"manifest": manifest.ref, "dump_id": manifest.dump_id, "start": manifest.start.to_json(),
               "end": manifest.end.to_json(), "rows": rows, "transactions": 0, "mode": "snapshot"}
        self.log.info("snapshot %s: %d tables, %d rows, at [%s]", out["dump_id"], len(rows),
                      sum(r.get("insert", 0) for r in rows.values()), manifest.end)
        return out


__all__ = ["BinlogConnectionError", "BinlogHook", "check_thresholds", "CheckpointRef", "as_checkpoint"]
