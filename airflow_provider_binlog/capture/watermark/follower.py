"""The binlog follower of a watermark snapshot: reads the binlog from where it was left up to
each watermark, a whole transaction at a time, stops the snapshot at a schema statement on a
captured table, and stages the changes :func:`.chunks.apply_rows_event` keeps."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable, Optional

from ...codec.events import (
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TransactionPayloadEvent,
    XidEvent,
)
from ...codec.gtid import MariadbGtidPosition
from ...codec.positions import position_key
from ...schema_history.ddl import DdlSyntaxError, named_tables, parse_ddl, statement_kind
from ...staging import StagingWriter
from ...tables import TableFilter
from ..snapshot import SnapshotError
from .chunks import OpenChunks, Table, apply_rows_event, chunk_of

UTC = dt.timezone.utc
#: streams in a row that end before the watermark with no transaction read, before giving up
_STALLS = 5


class Follower:
    """Follows the binlog from the snapshot's start, watermark after watermark."""

    def __init__(self, replica_factory: Callable[[], Any], tables: dict, history, table_filter: TableFilter,
                 writer: StagingWriter, start: tuple[str, int]) -> None:
        self.replica_factory = replica_factory
        self.tables = tables
        self.history = history
        self.table_filter = table_filter
        self.writer = writer
        self.file, self.pos = start
        #: where the last transaction read ends (the start: a consistent snapshot's position):
        #: a read must see every transaction up to it (None: not known, after an older resume)
        self.txn_end: Optional[tuple[str, int]] = (self.file, self.pos)
        self.gtid: Optional[str] = None
        #: MariaDB: the GTID state at (file, pos), when the state at the start was known
        self.gtid_state: Optional[MariadbGtidPosition] = None
        self.txn_start: Optional[tuple[str, int]] = None
        self.staged_changes = 0
        self.replayed = 0
        self.longest_read = 0.0  # seconds of the longest chunk read (one autocommit statement)
        self.in_txn = False        # inside a transaction: its rows wait in pending for its commit
        self.begun = False         # its BEGIN (or a first rows event) was read
        self.pending: list[tuple] = []

    def follow_to(self, file: str, pos: int, chunks: OpenChunks) -> None:
        """Read the binlog from where it was left to ``(file, pos)`` (a transaction boundary).

        Changes are applied a whole transaction at a time, at its commit. A stream the server
        ends before the watermark (MariaDB ends a non-blocking dump at the end of each binlog
        file; a server may not have sent what it has not synced yet) is read again from the
        last transaction boundary reached, the transaction it cut short from its start."""
        stop = position_key(file, pos)
        stalls = 0
        while position_key(self.file, self.pos) < stop:
            before = (self.file, self.pos)
            replica = self.replica_factory()
            try:
                for at_file, event in replica.stream(self.file, self.pos, non_block=True, register=False,
                                                     table_filter=self.table_filter, schemas=self.history):
                    at = getattr(event, "pos", None)
                    if at is None or event.header.log_pos == 0:
                        continue  # artificial events: the format description, the file's name
                    if position_key(at_file, at) >= stop:
                        self.file, self.pos = file, pos
                        break
                    self._handle(at_file, at, event, chunks)
                    if not self.in_txn:  # a transaction boundary
                        if isinstance(event, (XidEvent, QueryEvent, TransactionPayloadEvent)):
                            self.txn_end = (at_file, event.header.log_pos)  # a transaction's end
                        if isinstance(event, RotateEvent):
                            self.file, self.pos = event.next_file, event.position
                        else:
                            self.file, self.pos = at_file, event.header.log_pos
            finally:
                replica.close()
                self.pending.clear()  # a transaction the stream cut short: read again from its start
                self.in_txn, self.begun, self.gtid, self.txn_start = False, False, None, None
            if position_key(self.file, self.pos) < stop and (self.file, self.pos) == before:
                stalls += 1  # nothing complete came (a transaction not synced yet): a moment, again
                if stalls >= _STALLS:
                    raise SnapshotError(f"the binlog stream ended at {self.file}:{self.pos}, before the "
                                        f"watermark {file}:{pos} the server reported, {stalls} times; take the "
                                        f"snapshot again")
                time.sleep(0.05 * stalls)
            else:
                stalls = 0

    def _handle(self, file: str, at: int, event: Any, chunks: OpenChunks) -> None:
        if isinstance(event, (GtidEvent, MariadbGtidEvent)):
            # a transaction (or a statement of its own, a DDL) opens: no boundary until it ends
            self.gtid, self.txn_start, self.in_txn, self.begun = event.gtid, (file, at), True, False
        elif isinstance(event, XidEvent):
            self._commit(chunks)
        elif isinstance(event, TransactionPayloadEvent):
            for inner in event.events:
                self._handle(file, at, inner, chunks)
        elif isinstance(event, QueryEvent):
            self._check_query(file, at, event, chunks)
        elif isinstance(event, RowsEvent) and not event.skipped and event.table_map is not None:
            table = self.tables.get((event.table_map.schema, event.table_map.table))
            self.in_txn = self.begun = True
            if table is not None:
                self.pending.append((file, at, event, table, self.gtid, self.txn_start))

    def _commit(self, chunks: OpenChunks) -> None:
        """The transaction's changes, in order, now that it committed."""
        gtid = self.gtid
        for file, at, event, table, txn_gtid, txn_start in self.pending:
            self.gtid, self.txn_start = txn_gtid, txn_start
            self._rows(file, at, event, table, chunks)
        self.pending.clear()
        self._count_gtid(gtid)
        self.in_txn, self.begun, self.gtid, self.txn_start = False, False, None, None

    def _check_query(self, file: str, at: int, event: QueryEvent, chunks: OpenChunks) -> None:
        query = event.query
        if query == "BEGIN":
            self.txn_start = self.txn_start or (file, at)
            self.in_txn = self.begun = True
            return
        if event.is_commit:
            self._commit(chunks)
            return
        if self.begun:
            return  # SAVEPOINT and the like, inside the transaction
        # a statement of its own (DDL): it ends where it ends, a transaction boundary
        self._count_gtid(self.gtid)
        self.in_txn, self.gtid, self.txn_start = False, None, None
        if statement_kind(query) is None:
            return
        try:
            stmt = parse_ddl(query)
            if stmt is None:
                return  # no table's schema changes
            concerned = any(r.resolve(event.schema or "") in self.tables for r in named_tables(stmt))
        except DdlSyntaxError:  # unreadable: it concerns us if it may name a captured database
            schemas = {s for s, _ in self.tables}
            concerned = event.schema in schemas or any(s in query for s in schemas)
        if concerned:
            raise SnapshotError(f"a schema statement on a captured table ran during the snapshot at "
                                f"{file}:{at} ({query[:200]!r}); take the snapshot again")

    def _count_gtid(self, gtid: Optional[str]) -> None:
        if self.gtid_state is not None and gtid:
            self.gtid_state = self.gtid_state.advance(gtid)

    def _rows(self, file: str, at: int, event: RowsEvent, table: Table, chunks: OpenChunks) -> None:
        """Replay the committed event's rows on its table's chunk being read, and stage what
        concerns keys read (see :func:`.chunks.apply_rows_event`)."""
        staged, replayed = apply_rows_event(table, chunk_of(chunks, table), event.kind, event.rows, (file, at))
        self.replayed += replayed
        if not staged:
            return
        txn = self.gtid if self.gtid else "%s:%d" % (self.txn_start or (file, at))
        commit_ts = dt.datetime.fromtimestamp(event.header.timestamp, UTC)
        # runs of one kind and consecutive rows, each keeping its rows' indexes in the event;
        # staged with the table's layout of the chunks (the same columns): one part file
        run: list[tuple[int, str, Any]] = []
        for item in staged + [(-1, "", None)]:
            if run and (item[1] != run[-1][1] or item[0] != run[-1][0] + 1):
                self.writer.add_decoded_rows(table.tm, run[0][1], [r for _, _, r in run], binlog_file=file,
                                             position=at, gtid=self.gtid, txn=txn, commit_ts=commit_ts,
                                             first_index=run[0][0])
                run = []
            run.append(item)
        self.staged_changes += len(staged)
