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
import time
from dataclasses import dataclass, field
from typing import Optional, Union

from ..checkpoints import Checkpoint, CheckpointStore
from ..codec.errors import SchemaMismatchError
from ..codec.events import (
    BinlogCheckpointEvent,
    FormatDescriptionEvent,
    IncidentEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    StopEvent,
    TransactionPayloadEvent,
)
from ..codec.gtid import empty_gtid_state, parse_gtid_state
from ..codec.positions import position_key
from ..errors import ProviderError
from ..replica import ReplicaConnection, ReplicationConnectionLost
from ..replica.identity import require_not_behind, resume_point
from ..schema_history import (
    DdlSyntaxError,
    HistoryFollower,
    SchemaDivergenceError,
    SchemaHistory,
    SeedConflictError,
    check_table_map,
)
from ..schema_history.apply import statement_ops
from ..schema_history.ops import MoveOp, ops_to_json
from ..schema_history.ddl import named_tables, parse_ddl, statement_kind
from ..schema_history.ddl_tokens import tokenize
from ..staging import Manifest, StagingWriter
from ..staging.masking import Masking
from ..staging.storage import StorageOptions
from ..common.tables import TableFilter
from .transactions import Statement, Transaction, TransactionCommitted, TransactionTracker

log = logging.getLogger(__name__)

#: a binlog file's header events: a transaction boundary after them
_FILE_HEADERS = (MariadbGtidListEvent, BinlogCheckpointEvent, PreviousGtidsEvent, StopEvent)


class DumpError(ProviderError):
    """A dump that cannot run as asked; the message says what to change."""


@dataclass
class DumpResult:
    manifest: Manifest
    start: Checkpoint
    end: Checkpoint
    rows: dict = field(default_factory=dict)
    transactions: int = 0

    def to_json(self) -> dict:
        return {"manifest": self.manifest.ref, "dump_id": self.manifest.dump_id,
                "start": self.start.to_json(), "end": self.end.to_json(), "rows": self.rows,
                "transactions": self.transactions}


def default_workers() -> int:
    """Staging processes of a dump by default: 2 where there are two cores or more, else 0,
    which stages in the dump's own process (``AIRFLOW__BINLOG__DUMP_WORKERS``, the variable of
    Airflow's ``[binlog] dump_workers``, overrides it; the hook also reads that option from
    ``airflow.cfg``). Each
    worker costs about 50 MB of memory of its own; two keep the dump within 300 MB."""
    configured = os.environ.get("AIRFLOW__BINLOG__DUMP_WORKERS")
    if configured:
        return int(configured)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 0 if cores < 2 else 2


class BoundedDump:
    """One bounded dump run. Use :func:`run_dump`."""

    def __init__(self, replica: ReplicaConnection, *, start: Checkpoint, stop: Checkpoint,
                 staging_dir, table_filter: TableFilter, schemas=None,
                 max_rows: Optional[int] = None, max_bytes: Optional[int] = None,
                 max_seconds: Optional[float] = None, progress_seconds: float = 5.0,
                 retries: int = 3, backoff_seconds: float = 1.0,
                 workers: Optional[int] = None, history: Optional[SchemaHistory] = None,
                 masking: Optional[Masking] = None, storage_options: Optional[StorageOptions] = None) -> None:
        self.replica = replica
        self.start = start
        self.stop = stop
        self.table_filter = table_filter
        self.history = history
        self.schemas = history if history is not None else schemas
        self.follower = None if history is None else HistoryFollower(
            history, table_filter, table_filter.schemas_possibly_included)
        # a history read from information_schema after the start: exact from this position
        self._exact_from = None
        self._ambiguous_from = None
        if history is not None and history.exact_from:
            self._exact_from = position_key(history.exact_from["file"], int(history.exact_from["pos"]))
            before = history.exact_from.get("read_after")
            if before:
                self._ambiguous_from = position_key(before["file"], int(before["pos"]))
        self._seed_decoded: set = set()     # tables whose rows were decoded with a later seed
        self._checked_maps: dict = {}       # table id -> the TABLE_MAP checked against the history
        self._cut = False                   # a rename between captured tables ends the batch
        self._file = start.file or ""       # the binlog file being read
        self.limits = (max_rows, max_bytes, max_seconds)
        self.progress_seconds = progress_seconds
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        if workers is None:
            workers = default_workers()
        if max_rows is not None:
            workers = 0  # the row limit is checked at every transaction boundary: rows counted here
        self.writer = StagingWriter(staging_dir, workers=workers, masking=masking, storage_options=storage_options)
        self.flavor = replica.info.flavor
        self.gtid_state = start.gtid if start.gtid is not None else (
            empty_gtid_state(self.flavor))
        self.boundary = start
        self.tracker = TransactionTracker()
        self.transactions = 0
        self.bytes_read = 0
        self.started = time.monotonic()
        self._last_log = self.started
        self._resume_at: Optional[tuple] = None   # events before it were staged already
        self._processed: Optional[tuple] = None   # end of the last event handled

    @property
    def txn(self) -> Optional[Transaction]:
        """The transaction being read (None at a transaction boundary)."""
        return self.tracker.current

    # ---------------------------------------------------------------- stop rules
    def _reached_stop(self, file: str, pos: int) -> bool:
        if self.stop.has_coordinates:
            return position_key(file, pos) >= position_key(self.stop.file, self.stop.position)
        return False

    def _stop_by_gtid(self) -> bool:
        if self.stop.has_coordinates or self.stop.gtid is None:
            return False
        return self.gtid_state.contains(self.stop.gtid)

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
        self.boundary = Checkpoint(file=file, position=next_pos, gtid=self.gtid_state,
                                   flavor=self.flavor, server_id=self.replica.info.server_id,
                                   server_uuid=self.replica.info.server_uuid)

    def _committed(self, done: TransactionCommitted) -> None:
        if done.transaction is not None:
            if done.gtid:
                self.gtid_state = self.gtid_state.add(done.gtid)
            self.transactions += 1
        self._boundary(done.file, done.end)

    def _handle(self, file: str, event, next_pos: int, pos: int) -> None:
        """Apply one event; ``pos``/``next_pos`` are those of the outer event."""
        if isinstance(event, TransactionPayloadEvent):
            for inner in event.events:
                self._handle(file, inner, next_pos, pos)
            return
        for result in self.tracker.feed(file, event, pos, next_pos):
            if isinstance(result, Statement):
                self._record_ddl(file, pos, result.event, result.gtid)
            elif isinstance(result, TransactionCommitted):
                self._committed(result)
        txn = self.txn  # rows open a transaction when none is
        if not isinstance(event, RowsEvent) or event.skipped or txn is None:
            return
        if self._resume_at is not None and position_key(file, pos) < self._resume_at:
            return  # staged before the connection was lost
        if self.history is not None and self._checked_maps.get(event.table_map.table_id) is not event.table_map:
            self._check_table_map(event.table_map, file, pos)
        self.writer.add_rows(event, binlog_file=file, gtid=txn.gtid, txn=txn.id)

    def _check_table_map(self, tm, file: str, pos: int) -> None:
        key = (tm.schema, tm.table)
        if self._exact_from is not None and position_key(file, pos) < self._exact_from:
            if tm.names_from != "metadata":
                self._seed_decoded.add(self.history.key(*key))
        else:
            tdef = self.history.get(*key)
            if tdef is None:
                raise SchemaDivergenceError(
                    f"table {tm.schema}.{tm.table} has rows but is not in the schema history "
                    "(created in a way the history did not follow)", position=f"{file}:{pos}")
            check_table_map(tm, tdef, f"{file}:{pos}")
        self._checked_maps[tm.table_id] = tm

    def _ddl_error(self, exc: Exception, file: str, pos: int, query: str) -> DdlSyntaxError:
        message = exc.message if isinstance(exc, DdlSyntaxError) else str(exc)
        return DdlSyntaxError(f"{message}; the statement: {query!r}", position=f"{file}:{pos}",
                              hint="the schema history cannot follow it, so the dump stopped and "
                                   "published nothing; see docs/schema-changes.md: exclude the "
                                   "table, or take a new snapshot from a position after it")

    def _may_concern_us(self, event: QueryEvent) -> bool:
        """Whether a statement the parser cannot read may name a followed database."""
        followed = self.table_filter.schemas_possibly_included
        if followed(event.schema or ""):
            return True
        try:
            return any(t.is_name and followed(t.text) for t in tokenize(event.query))
        except DdlSyntaxError:
            return True

    def _record_ddl(self, file: str, pos: int, event: QueryEvent, gtid: Optional[str]) -> None:
        if statement_kind(event.query) is None:
            return
        if self._resume_at is not None and position_key(file, pos) < self._resume_at:
            return  # handled before the connection was lost
        try:
            stmt = parse_ddl(event.query)
        except DdlSyntaxError as exc:
            if self._may_concern_us(event):
                raise self._ddl_error(exc, file, pos, event.query) from None
            return
        if stmt is None:
            return
        default = event.schema or ""
        try:
            names = [r.resolve(default) for r in named_tables(stmt)]
            if self.follower is None:
                ops = statement_ops(stmt, default, self.table_filter)
            elif not self.follower.concerns_us(stmt, default):
                return
            elif self._exact_from is not None and position_key(file, pos) < self._exact_from:
                ops = self._before_seed(stmt, default, names, file, pos)
            else:
                ops = self.follower.apply(stmt, default)
        except DdlSyntaxError as exc:
            raise self._ddl_error(exc, file, pos, event.query) from None
        captured = [t for t in names if self.table_filter(*t)]
        if not ops and not captured:
            return
        kind = statement_kind(event.query).lower()
        if any(isinstance(op, MoveOp) for op in ops):
            self._cut = True  # the merge moves tables at the end of a batch
        self.writer.add_ddl({"file": file, "pos": pos, "gtid": gtid,
                             "schema": event.schema, "kind": kind,
                             # "schema.table" texts, and the names apart (either may hold dots)
                             "tables": [f"{s}.{t}" for s, t in captured or names],
                             "table_names": [[s, t] for s, t in captured or names],
                             "query": event.query, "ops": ops_to_json(ops),
                             "ts": dt.datetime.fromtimestamp(event.header.timestamp, dt.timezone.utc).isoformat()})

    def _before_seed(self, stmt, default: str, names: list, file: str, pos: int) -> list:
        """A statement before the position the history was read at: the history already has
        its effect. Rows of its tables decoded before it used the later schema: refuse."""
        where = f"{file}:{pos}"
        if self._ambiguous_from is not None and position_key(file, pos) >= self._ambiguous_from:
            raise SeedConflictError(
                "this schema change ran while the schema history was read from information_schema",
                position=where, hint="run the dump again: it reads the history anew")
        for name in names:
            if self.history.key(*name) in self._seed_decoded:
                raise SeedConflictError(
                    f"rows of {name[0]}.{name[1]} before this schema change were decoded with its "
                    f"schema read later (at {self.history.exact_from['file']}:"
                    f"{self.history.exact_from['pos']}), which may not be theirs", position=where)
        return statement_ops(stmt, default, self.table_filter)

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
        try:
            return self._stream_once()
        except SchemaMismatchError as exc:
            if self.history is None:
                raise
            # the codec compared a TABLE_MAP with the history's schema of the table
            raise SchemaDivergenceError(f"{exc.message}: the table's schema history does not match the binlog",
                                        position=f"{self._file}:{exc.offset}") from None

    def _stream_once(self) -> bool:
        self.tracker.reset()
        for file, event in self._stream_from(self.boundary):
            self._file = file
            if event.header.log_pos == 0 or isinstance(event, FormatDescriptionEvent):
                continue  # artificial ROTATE/FDE the server sends first, or a file's header
            pos = event.pos
            if not self.tracker.in_transaction and self._reached_stop(file, pos):
                return True
            next_pos = event.header.log_pos
            self.bytes_read += max(0, next_pos - pos)
            if isinstance(event, RotateEvent):
                # end of a file: the dump continues in the next one
                if not self.tracker.in_transaction:
                    self.boundary = Checkpoint(file=event.next_file, position=event.position,
                                               gtid=self.gtid_state, flavor=self.flavor,
                                               server_id=self.replica.info.server_id,
                                               server_uuid=self.replica.info.server_uuid)
                continue
            if isinstance(event, IncidentEvent):
                raise DumpError(f"the binlog has an incident event at {file}:{pos} "
                                f"({event.message or event.incident}): "
                                "the server lost changes there; take a new snapshot (backfill mode 'snapshot')")
            self._handle(file, event, next_pos, pos)
            idle = not self.tracker.in_transaction
            if idle and isinstance(event, _FILE_HEADERS):
                self._boundary(file, next_pos)  # a file's header events: no transaction in between
            self._processed = position_key(file, next_pos)
            if self._exact_from is not None and idle and self._processed >= self._exact_from:
                self._exact_from = self._ambiguous_from = None  # the history is exact from here
                self.history.exact_from = None
            if idle:
                if self._cut:
                    log.info("binlog dump stops at %s, after a rename between captured tables", self.boundary)
                    return True
                if self._stop_by_gtid():
                    return True
                limit = self._limit_reached()
                if limit:
                    log.info("binlog dump stops at %s: %s reached", self.boundary, limit)
                    return True
            self._progress(file, pos)
        self.tracker.end_of_stream()
        return self._reached_stop(*self._boundary_key()) if self.boundary.has_coordinates else False

    def _boundary_key(self) -> tuple:
        return self.boundary.file, self.boundary.position


def seed_history_now(replica: ReplicaConnection, connect, table_filter: TableFilter,
                     start: Checkpoint) -> SchemaHistory:
    """Read the schema history from information_schema now, between two reads of the server's
    position: the history is exact from the second on; a schema change between the two
    cannot be placed (see :meth:`BoundedDump._before_seed`)."""
    from ..schema_history import seed_history

    before = replica.master_status()
    conn = connect()
    try:
        history = seed_history(conn, table_filter.schemas_possibly_included, replica.info.flavor)
    finally:
        conn.close()
    after = replica.master_status()
    exact = {"file": after[0], "pos": after[1], "read_after": {"file": before[0], "pos": before[1]}}
    if start.has_coordinates and position_key(start.file, start.position) >= position_key(after[0], after[1]):
        exact = None
    history.exact_from = exact
    return history


def run_dump(replica: ReplicaConnection, *, staging_dir, start: Optional[Checkpoint] = None,
             stop: Union[str, Checkpoint] = "current", store: Optional[CheckpointStore] = None,
             key: Optional[str] = None, tables: Optional[TableFilter] = None, schemas=None,
             max_rows: Optional[int] = None, max_bytes: Optional[int] = None,
             max_seconds: Optional[float] = None, history: Optional[SchemaHistory] = None,
             seed_connect=None, **options) -> DumpResult:
    """Dump from ``start`` (default: the stored checkpoint ``key``) to ``stop``.

    ``stop="current"`` is the server's position when the dump starts. The result's ``end`` is
    the transaction boundary where the dump stopped; the published manifest records it.

    The schema history (see :mod:`.schema_history`) decodes rows with the schema valid at
    their position and follows the DDL: ``history`` when given, else the one the store keeps
    with the start checkpoint, else, with ``seed_connect`` (a callable that opens a plain
    connection), one read from information_schema now, which is exact only from the server's
    position at that read on. The manifest records the history at the dump's end.
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
                gtid = parse_gtid_state(info.flavor, gtid_text)
            stop = Checkpoint(file=file, position=pos, gtid=gtid, flavor=info.flavor)
    if not start.has_coordinates and start.gtid is None:
        raise DumpError(f"start checkpoint {start} has neither coordinates nor GTIDs")
    # on another server than the checkpoint's (a failover) the dump resumes by GTID; the
    # manifest keeps the checkpoint as its start, so the batch follows the stored one
    resume = resume_point(start, info.server_id, info.server_uuid)
    if resume is not start:
        gtid_text = replica.master_status()[2]
        require_not_behind(resume, parse_gtid_state(info.flavor, gtid_text) if gtid_text else None)
    table_filter = tables or TableFilter()
    if history is None and store is not None and key is not None:
        stored = store.load_schema_history(key)
        if stored is not None and stored[0] == start:
            history = SchemaHistory.from_json(stored[1])
    if history is None and seed_connect is not None:
        history = seed_history_now(replica, seed_connect, table_filter, start)
    dump = BoundedDump(replica, start=resume, stop=stop, staging_dir=staging_dir,
                       table_filter=table_filter, schemas=schemas, max_rows=max_rows,
                       max_bytes=max_bytes, max_seconds=max_seconds, history=history, **options)
    try:
        if resume.has_coordinates and stop.has_coordinates and \
                position_key(resume.file, resume.position) >= position_key(stop.file, stop.position):
            end = start
        else:
            end = dump.run()
        server = {"host": replica.host, "port": replica.port, "flavor": info.flavor,
                  "version": info.version, "server_id": info.server_id,
                  "server_uuid": info.server_uuid}
        dump_id = f"{start.file or 'gtid'}.{start.position or 0}-{end.file}.{end.position}"
        extra_history = {"schema_history": history.to_json()} if history is not None else {}
        manifest = dump.writer.publish(
            dump_id=dump_id, start=start.to_json(), end=end.to_json(), server=server,
            extra={**extra_history, "tables_filter": dump.table_filter.to_json(), "transactions": dump.transactions,
                   "binlog_bytes": dump.bytes_read, "started_at": started_at.isoformat(),
                   "duration_seconds": round(time.monotonic() - started, 3)})
    except BaseException:
        dump.writer.abort()
        raise
    rows = {f"{t['schema']}.{t['table']}": t["rows"] for t in manifest.tables}
    return DumpResult(manifest, start, end, rows, dump.transactions)


__all__ = ["BoundedDump", "DumpError", "DumpResult", "run_dump"]
