"""Bounded binlog dump: from a checkpoint to a stop point, cut on transaction boundaries, into
Parquet staging files and a manifest.

The dump reads like a replica (:mod:`.replica`), decodes with the codec, stages rows with
:class:`~.staging.StagingWriter` and publishes atomically. It never advances the checkpoint
store: the merge job does that once the data is committed.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Optional, Union

from .checkpoint import Checkpoint, CheckpointStore, split_binlog_file_name
from .codec.events import (BinlogCheckpointEvent, FormatDescriptionEvent, GtidEvent,
                           IncidentEvent, MariadbGtidEvent, MariadbGtidListEvent,
                           PreviousGtidsEvent, QueryEvent, RotateEvent, RowsEvent, StopEvent,
                           TransactionPayloadEvent, XaPrepareEvent, XidEvent)
from .codec.gtid import MariadbGtidPosition, MysqlGtidSet
from .replica import ReplicaConnection, ReplicationConnectionLost
from .staging import Manifest, StagingWriter
from .tables import TableFilter

log = logging.getLogger(__name__)

_DDL_RE = re.compile(r"^\s*(?:/\*.*?\*/\s*)*(ALTER|CREATE|DROP|TRUNCATE|RENAME)\b", re.I | re.S)
_TABLE_REF_RE = re.compile(r"(?:`((?:[^`]|``)+)`|([A-Za-z0-9_$]+))(?:\s*\.\s*(?:`((?:[^`]|``)+)`|([A-Za-z0-9_$]+)))?")


class DumpError(Exception):
    """A dump that cannot run as asked; the message says what to change."""


@dataclass
class DumpResult:
    manifest: Manifest
    start: Checkpoint
    end: Checkpoint
    rows: dict = field(default_factory=dict)
    transactions: int = 0

    def to_json(self) -> dict:
        return {"manifest": str(self.manifest.path), "dump_id": self.manifest.dump_id,
                "start": self.start.to_json(), "end": self.end.to_json(), "rows": self.rows,
                "transactions": self.transactions}


def _pos_key(file: str, pos: int) -> tuple[int, int]:
    return split_binlog_file_name(file)[1], pos


def _ddl_tables(query: str, default_schema: str) -> list[tuple[str, str]]:
    """Best-effort ``(schema, table)`` names a DDL statement names (for the manifest)."""
    m = _DDL_RE.match(query)
    if not m:
        return []
    body = query[m.end():]
    body = re.sub(r"^\s*(TEMPORARY\s+)?(TABLE|TABLES)\s+(IF\s+(NOT\s+)?EXISTS\s+)?", "", body, flags=re.I)
    names = []
    for part in re.split(r",|\bTO\b", body, flags=re.I)[:8]:
        ref = _TABLE_REF_RE.search(part)
        if not ref:
            continue
        first = (ref.group(1) or ref.group(2) or "").replace("``", "`")
        second = (ref.group(3) or ref.group(4) or "").replace("``", "`")
        names.append((first, second) if second else (default_schema, first))
    return names


def default_workers() -> int:
    """Staging processes of a dump by default: 2 where there are two cores or more, else 0,
    which stages in the dump's own process (``BINLOG_DUMP_WORKERS`` overrides it). Each
    worker costs about 50 MB of memory of its own; two keep the dump within 300 MB."""
    configured = os.environ.get("BINLOG_DUMP_WORKERS")
    if configured:
        return int(configured)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 0 if cores < 2 else 2


class _Transaction:
    __slots__ = ("gtid", "start", "standalone", "begun")

    def __init__(self, gtid: Optional[str], start: tuple, standalone: bool) -> None:
        self.gtid = gtid
        self.start = start
        self.standalone = standalone
        self.begun = False


class BoundedDump:
    """One bounded dump run. Use :func:`run_dump`."""

    def __init__(self, replica: ReplicaConnection, *, start: Checkpoint, stop: Checkpoint,
                 staging_dir, table_filter: TableFilter, schemas=None,
                 max_rows: Optional[int] = None, max_bytes: Optional[int] = None,
                 max_seconds: Optional[float] = None, progress_seconds: float = 5.0,
                 retries: int = 3, backoff_seconds: float = 1.0,
                 workers: Optional[int] = None) -> None:
        self.replica = replica
        self.start = start
        self.stop = stop
        self.table_filter = table_filter
        self.schemas = schemas
        self.limits = (max_rows, max_bytes, max_seconds)
        self.progress_seconds = progress_seconds
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        if workers is None:
            workers = default_workers()
        if max_rows is not None:
            workers = 0  # the row limit is checked at every transaction boundary: rows counted here
        self.writer = StagingWriter(staging_dir, workers=workers)
        self.flavor = replica.info.flavor
        self.gtid_state = start.gtid if start.gtid is not None else (
            MariadbGtidPosition() if self.flavor == "mariadb" else MysqlGtidSet())
        self.boundary = start
        self.txn: Optional[_Transaction] = None
        self.transactions = 0
        self.bytes_read = 0
        self.started = time.monotonic()
        self._last_log = self.started
        self._resume_at: Optional[tuple] = None   # events before it were staged already
        self._processed: Optional[tuple] = None   # end of the last event handled

    # ---------------------------------------------------------------- stop rules
    def _reached_stop(self, file: str, pos: int) -> bool:
        if self.stop.has_coordinates:
            return _pos_key(file, pos) >= _pos_key(self.stop.file, self.stop.position)
        return False

    def _stop_by_gtid(self) -> bool:
        if self.stop.has_coordinates or self.stop.gtid is None:
            return False
        if isinstance(self.stop.gtid, MysqlGtidSet):
            return self.stop.gtid.issubset(self.gtid_state)
        return self.gtid_state.is_at_or_after(self.stop.gtid)

    def _limit_reached(self) -> Optional[str]:
        max_rows, max_bytes, max_seconds = self.limits
        if max_rows is not None and self.writer.rows_staged >= max_rows:
            return f"max_rows={max_rows}"
        if max_bytes is not None and self.bytes_read >= max_bytes:
            return f"max_bytes={max_bytes}"
        if max_seconds is not None and time.monotonic() - self.started >= max_seconds:
            return f"max_seconds={max_seconds}"
        return None

    # ---------------------------------------------------------------- event handling
    def _boundary(self, file: str, next_pos: int) -> None:
        if self.txn is not None and self.txn.gtid:
            if self.flavor == "mariadb":
                self.gtid_state = self.gtid_state.advance(self.txn.gtid)
            else:
                self.gtid_state = self.gtid_state.add(self.txn.gtid)
            self.transactions += 1
        elif self.txn is not None:
            self.transactions += 1
        self.txn = None
        self.boundary = Checkpoint(file=file, position=next_pos, gtid=self.gtid_state,
                                   flavor=self.flavor, server_id=self.replica.info.server_id,
                                   server_uuid=self.replica.info.server_uuid)

    def _txn_id(self, file: str, pos: int) -> str:
        if self.txn is not None and self.txn.gtid:
            return self.txn.gtid
        start = self.txn.start if self.txn is not None else (file, pos)
        return f"{start[0]}:{start[1]}"

    def _handle(self, file: str, event, next_pos: int, pos: int) -> None:
        """Apply one event; ``pos``/``next_pos`` are those of the outer event."""
        if isinstance(event, (GtidEvent, MariadbGtidEvent)):
            standalone = isinstance(event, MariadbGtidEvent) and event.standalone
            self.txn = _Transaction(event.gtid, (file, pos), standalone)
        elif isinstance(event, RowsEvent):
            if self.txn is None:
                self.txn = _Transaction(None, (file, pos), False)
            if event.skipped:
                return
            if self._resume_at is not None and _pos_key(file, pos) < self._resume_at:
                return  # staged before the connection was lost
            gtid = self.txn.gtid
            self.writer.add_rows(event, binlog_file=file, gtid=gtid, txn=self._txn_id(file, pos))
        elif isinstance(event, (XidEvent, XaPrepareEvent)):
            self._boundary(file, next_pos)
        elif isinstance(event, QueryEvent):
            query = event.query
            if query == "BEGIN" or query.startswith("XA START"):
                if self.txn is None:
                    self.txn = _Transaction(None, (file, pos), False)
                self.txn.begun = True
            elif event.is_commit:
                self._boundary(file, next_pos)
            else:
                self._record_ddl(file, pos, event)
                if self.txn is None or not self.txn.begun:
                    self._boundary(file, next_pos)  # DDL and other standalone statements
        elif isinstance(event, TransactionPayloadEvent):
            for inner in event.events:
                self._handle(file, inner, next_pos, pos)

    def _record_ddl(self, file: str, pos: int, event: QueryEvent) -> None:
        if not _DDL_RE.match(event.query):
            return
        tables = _ddl_tables(event.query, event.schema)
        captured = [t for t in tables if self.table_filter(*t)]
        if tables and not captured:
            return
        if not tables and not self.table_filter.schemas_possibly_included(event.schema or ""):
            return
        kind = _DDL_RE.match(event.query).group(1).lower()
        if self._resume_at is not None and _pos_key(file, pos) < self._resume_at:
            return
        self.writer.add_ddl({"file": file, "pos": pos, "gtid": self.txn.gtid if self.txn else None,
                             "schema": event.schema, "kind": kind,
                             # "schema.table" texts, and the names apart (either may hold dots)
                             "tables": [f"{s}.{t}" for s, t in captured or tables],
                             "table_names": [[s, t] for s, t in captured or tables],
                             "query": event.query,
                             "ts": dt.datetime.fromtimestamp(event.header.timestamp, dt.timezone.utc).isoformat()})

    def _progress(self, file: str, pos: int) -> None:
        now = time.monotonic()
        if now - self._last_log >= self.progress_seconds:
            rows = self.writer.rows_staged
            rate = rows / max(now - self.started, 1e-9)
            log.info("binlog dump at %s:%d, %d rows staged (%.0f rows/s)", file, pos, rows, rate)
            self._last_log = now

    # ---------------------------------------------------------------- main loop
    def _stream_from(self, checkpoint: Checkpoint):
        if checkpoint.has_coordinates:
            return self.replica.stream(checkpoint.file, checkpoint.position, non_block=True,
                                       table_filter=self.table_filter, schemas=self.schemas,
                                       defer_rows=True)
        return self.replica.stream(gtid=checkpoint.gtid, non_block=True,
                                   table_filter=self.table_filter, schemas=self.schemas,
                                   defer_rows=True)

    def run(self) -> Checkpoint:
        attempt = 0
        while True:
            try:
                before = self.boundary
                if self._run_once():
                    return self.boundary
                if self.boundary == before:
                    return self.boundary  # the server has nothing more
                # MariaDB ends a non-blocking dump at the end of each binlog file: go on
                # from the boundary reached, in the next file
                continue
            except ReplicationConnectionLost as exc:
                if self._processed is not None:
                    self._resume_at = max(self._resume_at or self._processed, self._processed)
                attempt += 1
                if attempt > self.retries:
                    raise
                delay = self.backoff_seconds * 2 ** (attempt - 1)
                log.warning("%s; reconnecting in %.1fs and resuming from %s", exc, delay, self.boundary)
                time.sleep(delay)
                # the next stream connects again; a server still down (restarting) is one
                # more failed attempt, not the end of the dump
                self.replica.close()

    def _run_once(self) -> bool:
        """Stream from the last boundary; True when a stop point or limit was reached."""
        self.txn = None
        for file, event in self._stream_from(self.boundary):
            if event.header.log_pos == 0 or isinstance(event, FormatDescriptionEvent):
                continue  # artificial ROTATE/FDE the server sends first, or a file's header
            pos = event.pos
            if self.txn is None and self._reached_stop(file, pos):
                return True
            next_pos = event.header.log_pos
            self.bytes_read += max(0, next_pos - pos)
            if isinstance(event, RotateEvent):
                # end of a file: the dump continues in the next one
                if self.txn is None:
                    self.boundary = Checkpoint(file=event.next_file, position=event.position,
                                               gtid=self.gtid_state, flavor=self.flavor,
                                               server_id=self.replica.info.server_id,
                                               server_uuid=self.replica.info.server_uuid)
                continue
            if isinstance(event, IncidentEvent):
                raise DumpError(f"the binlog has an incident event at {file}:{pos} ({event.message or event.incident}): "
                                "the server lost changes there; take a new snapshot (backfill mode 'snapshot')")
            self._handle(file, event, next_pos, pos)
            if self.txn is None and isinstance(event, (MariadbGtidListEvent, BinlogCheckpointEvent,
                                                       PreviousGtidsEvent, StopEvent)):
                self._boundary(file, next_pos)  # a file's header events: no transaction in between
            self._processed = _pos_key(file, next_pos)
            if self.txn is None:
                if self._stop_by_gtid():
                    return True
                limit = self._limit_reached()
                if limit:
                    log.info("binlog dump stops at %s: %s reached", self.boundary, limit)
                    return True
            self._progress(file, pos)
        if self.txn is not None:
            raise ReplicationConnectionLost("the server ended the stream inside a transaction",
                                            "resume from the last transaction boundary")
        return self._reached_stop(*self._boundary_key()) if self.boundary.has_coordinates else False

    def _boundary_key(self) -> tuple:
        return self.boundary.file, self.boundary.position


def run_dump(replica: ReplicaConnection, *, staging_dir, start: Optional[Checkpoint] = None,
             stop: Union[str, Checkpoint] = "current", store: Optional[CheckpointStore] = None,
             key: Optional[str] = None, tables: Optional[TableFilter] = None, schemas=None,
             max_rows: Optional[int] = None, max_bytes: Optional[int] = None,
             max_seconds: Optional[float] = None, **options) -> DumpResult:
    """Dump from ``start`` (default: the stored checkpoint ``key``) to ``stop``.

    ``stop="current"`` is the server's position when the dump starts. The result's ``end`` is
    the transaction boundary where the dump stopped; the published manifest records it.
    """
    started_at = dt.datetime.now(dt.timezone.utc)
    started = time.monotonic()
    if replica.info is None:
        replica.connect()
    info = replica.info
    if start is None:
        if store is None or key is None:
            raise DumpError("no start checkpoint: pass start=, or a checkpoint store and key")
        start = store.load(key)
        if start is None:
            raise DumpError(f"the checkpoint store has no checkpoint for {key!r}: run an initial "
                            "snapshot (backfill mode 'snapshot') or give a start position")
    if isinstance(stop, str):
        if stop != "current":
            stop = Checkpoint.parse(stop)
        else:
            file, pos, gtid_text = replica.master_status()
            gtid = None
            if gtid_text:
                gtid = (MariadbGtidPosition.parse(gtid_text) if info.flavor == "mariadb"
                        else MysqlGtidSet.parse(gtid_text))
            stop = Checkpoint(file=file, position=pos, gtid=gtid, flavor=info.flavor)
    if not start.has_coordinates and start.gtid is None:
        raise DumpError(f"start checkpoint {start} has neither coordinates nor GTIDs")
    dump = BoundedDump(replica, start=start, stop=stop, staging_dir=staging_dir,
                       table_filter=tables or TableFilter(), schemas=schemas, max_rows=max_rows,
                       max_bytes=max_bytes, max_seconds=max_seconds, **options)
    try:
        if start.has_coordinates and stop.has_coordinates and \
                _pos_key(start.file, start.position) >= _pos_key(stop.file, stop.position):
            end = start
        else:
            end = dump.run()
        server = {"host": replica.host, "port": replica.port, "flavor": info.flavor,
                  "version": info.version, "server_id": info.server_id,
                  "server_uuid": info.server_uuid}
        dump_id = f"{start.file or 'gtid'}.{start.position or 0}-{end.file}.{end.position}"
        manifest = dump.writer.publish(
            dump_id=dump_id, start=start.to_json(), end=end.to_json(), server=server,
            extra={"tables_filter": dump.table_filter.to_json(), "transactions": dump.transactions,
                   "binlog_bytes": dump.bytes_read, "started_at": started_at.isoformat(),
                   "duration_seconds": round(time.monotonic() - started, 3)})
    except BaseException:
        dump.writer.abort()
        raise
    rows = {f"{t['schema']}.{t['table']}": t["rows"] for t in manifest.tables}
    return DumpResult(manifest, start, end, rows, dump.transactions)


__all__ = ["BoundedDump", "DumpError", "DumpResult", "run_dump"]
