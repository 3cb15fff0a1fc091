"""The binlog follower of a watermark snapshot: reads the binlog from where it was left up to
each watermark, a whole transaction at a time, stops the snapshot at a schema statement on a
captured table, and stages the changes :func:`.chunks.apply_rows_event` keeps."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable, Optional

from ...codec.events import QueryEvent, RotateEvent, RowsEvent, TransactionPayloadEvent
from ...codec.gtid import MariadbGtidPosition
from ...codec.positions import position_key
from ...schema_history.ddl import DdlSyntaxError, named_tables, parse_ddl, statement_kind
from ...staging import StagingWriter
from ...common.tables import TableFilter
from ..snapshot import SnapshotError
from ..transactions import Statement, Transaction, TransactionCommitted, TransactionTracker
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
        #: MariaDB: the GTID state at (file, pos), when the state at the start was known
        self.gtid_state: Optional[MariadbGtidPosition] = None
        self.staged_changes = 0
        self.replayed = 0
        self.longest_read = 0.0  # seconds of the longest chunk read (one autocommit statement)
        self.tracker = TransactionTracker()
        self.pending: list[tuple] = []  # the rows of the transaction being read, until its commit

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
                    if not self.tracker.in_transaction:  # a transaction boundary
                        if isinstance(event, RotateEvent):
                            self.file, self.pos = event.next_file, event.position
                        else:
                            self.file, self.pos = at_file, event.header.log_pos
            finally:
                replica.close()
                self.pending.clear()  # a transaction the stream cut short: read again from its start
                self.tracker.reset()
            if position_key(self.file, self.pos) < stop and (self.file, self.pos) == before:
                stalls += 1  # nothing complete came (a transaction not synced yet): a moment, again
                if stalls >= _STALLS:
                    raise SnapshotError(f"the binlog stream ended at {self.file}:{self.pos}, before the "
                                        f"watermark {file}:{pos} the server reported, {stalls} times; take the "
                                        f"snapshot again")
                time.sleep(0.05 * stalls)
            else:
                stalls = 0

    def _handle(self, file: str, at: int, event: Any, chunks: OpenChunks, next_pos: Optional[int] = None) -> None:
        """One event at ``file:at`` ending at ``next_pos`` (default: its own end); the events a
        TRANSACTION_PAYLOAD holds, at the payload's positions."""
        next_pos = event.header.log_pos if next_pos is None else next_pos
        if isinstance(event, TransactionPayloadEvent):
            for inner in event.events:
                self._handle(file, at, inner, chunks, next_pos)
            return
        for result in self.tracker.feed(file, event, at, next_pos):
            if isinstance(result, Statement):  # a SAVEPOINT and the like are no schema statements
                self._check_statement(file, at, result.event)
            elif isinstance(result, TransactionCommitted):
                self._commit(result, chunks)
        if isinstance(event, RowsEvent) and not event.skipped and event.table_map is not None:
            table = self.tables.get((event.table_map.schema, event.table_map.table))
            if table is not None:
                self.pending.append((file, at, event, table, self.tracker.current))

    def _commit(self, done: TransactionCommitted, chunks: OpenChunks) -> None:
        """The transaction's changes, in order, now that it committed."""
        for file, at, event, table, txn in self.pending:
            self._rows(file, at, event, table, chunks, txn)
        self.pending.clear()
        self._count_gtid(done.gtid)
        self.txn_end = (done.file, done.end)  # a transaction's end

    def _check_statement(self, file: str, at: int, event: QueryEvent) -> None:
        """A schema statement on a captured table stops the snapshot (also one inside a
        transaction, as MariaDB's ``CREATE TABLE ... SELECT``)."""
        query = event.query
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
            self.gtid_state = self.gtid_state.add(gtid)

    def _rows(self, file: str, at: int, event: RowsEvent, table: Table, chunks: OpenChunks,
              txn: Optional[Transaction] = None) -> None:
        """Replay the committed event's rows (of ``txn``) on its table's chunk being read, and
        stage what concerns keys read (see :func:`.chunks.apply_rows_event`)."""
        staged, replayed = apply_rows_event(table, chunk_of(chunks, table), event.kind, event.rows, (file, at))
        self.replayed += replayed
        if not staged:
            return
        gtid = txn.gtid if txn is not None else None
        txn_id = txn.id if txn is not None else f"{file}:{at}"
        commit_ts = dt.datetime.fromtimestamp(event.header.timestamp, UTC)
        # runs of one kind and consecutive rows, each keeping its rows' indexes in the event;
        # staged with the table's layout of the chunks (the same columns): one part file
        run: list[tuple[int, str, Any]] = []
        for item in staged + [(-1, "", None)]:
            if run and (item[1] != run[-1][1] or item[0] != run[-1][0] + 1):
                self.writer.add_decoded_rows(table.tm, run[0][1], [r for _, _, r in run], binlog_file=file,
                                             position=at, gtid=gtid, txn=txn_id, commit_ts=commit_ts,
                                             first_index=run[0][0])
                run = []
            run.append(item)
        self.staged_changes += len(staged)
