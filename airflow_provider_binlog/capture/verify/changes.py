"""The keys the binlog changed between two positions: what tells a verification which rows of
the source may differ from Iceberg only because the two were read at different positions.

:class:`KeyChanges` follows the binlog from a table's Iceberg checkpoint, a whole transaction at
a time (a stream the server ends early is read again from the last transaction boundary, as
the watermark snapshot's follower does), and keeps, per table, every key a committed row change
touched (both keys of a key change). A schema statement on a verified table is kept too: rows
before and after it cannot be compared."""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from ...codec.events import QueryEvent, RotateEvent, RowsEvent, TransactionPayloadEvent
from ...codec.positions import position_key
from ...common.tables import TableFilter
from ...schema_history.ddl import DdlSyntaxError, named_tables, parse_ddl, statement_kind
from ..transactions import Statement, TransactionCommitted, TransactionTracker
from ..watermark.chunks import Table, row_key
from .canonical import VerifyError

#: streams in a row that end before the target with no transaction read, before giving up
_STALLS = 5


class KeyChanges:
    """The keys changed since ``start`` of the tables ``tables`` (``(schema, table)`` -> the
    watermark snapshot's :class:`~..watermark.chunks.Table`, for its key)."""

    def __init__(self, replica_factory: Callable[[], Any], tables: dict[tuple[str, str], Table], history: Any,
                 start: tuple[str, int]) -> None:
        self.replica_factory = replica_factory
        self.tables = tables
        self.history = history
        self.table_filter = TableFilter([f"{s}.{t}" for s, t in tables])
        self.file, self.pos = start
        self.changed: dict[tuple[str, str], set] = {name: set() for name in tables}
        #: a schema statement on a verified table: ``(schema, table)`` -> ``file:pos``
        self.schema_changed: dict[tuple[str, str], str] = {}
        self.tracker = TransactionTracker()
        self.pending: list[tuple[tuple[str, str], str, Any]] = []

    @property
    def position(self) -> tuple[str, int]:
        return self.file, self.pos

    def keys(self, name: tuple[str, str]) -> set:
        return self.changed[name]

    def follow_to(self, file: str, pos: int) -> None:
        """Read the binlog from where it was left to ``(file, pos)`` (a transaction boundary)."""
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
                        continue
                    if position_key(at_file, at) >= stop:
                        self.file, self.pos = file, pos
                        break
                    self._handle(at_file, at, event)
                    if not self.tracker.in_transaction:
                        if isinstance(event, RotateEvent):
                            self.file, self.pos = event.next_file, event.position
                        else:
                            self.file, self.pos = at_file, event.header.log_pos
            finally:
                replica.close()
                self.pending.clear()
                self.tracker.reset()
            if position_key(self.file, self.pos) < stop and (self.file, self.pos) == before:
                stalls += 1
                if stalls >= _STALLS:
                    raise VerifyError(f"the binlog stream ended at {self.file}:{self.pos}, before {file}:{pos}, "
                                      f"{stalls} times", position=f"{self.file}:{self.pos}",
                                      hint="verify again; the binlog since the Iceberg checkpoint must be readable")
                time.sleep(0.05 * stalls)
            else:
                stalls = 0

    def _handle(self, file: str, at: int, event: Any, next_pos: Optional[int] = None) -> None:
        next_pos = event.header.log_pos if next_pos is None else next_pos
        if isinstance(event, TransactionPayloadEvent):
            for inner in event.events:
                self._handle(file, at, inner, next_pos)
            return
        for result in self.tracker.feed(file, event, at, next_pos):
            if isinstance(result, Statement):
                self._statement(file, at, result.event)
            elif isinstance(result, TransactionCommitted):
                for name, kind, rows in self.pending:
                    self._rows(name, kind, rows)
                self.pending.clear()
        if isinstance(event, RowsEvent) and not event.skipped and event.table_map is not None:
            name = (event.table_map.schema, event.table_map.table)
            if name in self.tables:
                self.pending.append((name, event.kind, event.rows))

    def _rows(self, name: tuple[str, str], kind: str, rows: Any) -> None:
        table = self.tables[name]
        changed = self.changed[name]
        for row in rows:
            images = row if kind == "update" else (row,)
            for image in images:
                key = row_key(table, image)
                if key is not None:
                    changed.add(key)

    def _statement(self, file: str, at: int, event: QueryEvent) -> None:
        query = event.query
        if statement_kind(query) is None:
            return
        try:
            stmt = parse_ddl(query)
            if stmt is None:
                return
            names = {r.resolve(event.schema or "") for r in named_tables(stmt)}
        except DdlSyntaxError:
            names = {n for n in self.tables if n[0] == event.schema or n[0] in query}
        for name in names:
            if name in self.tables:
                self.schema_changed.setdefault(name, f"{file}:{at}")


__all__ = ["KeyChanges"]
