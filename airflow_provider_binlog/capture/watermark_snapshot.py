"""Lock-free snapshot by key chunks and binlog watermarks (the DBLog / Flink CDC algorithm,
with watermarks read as binlog positions: no writes to the source, no lock, no RELOAD grant, no
transaction longer than one chunk's read).

Each table is read in chunks of its key order (``WHERE key > last ORDER BY key LIMIT n``, one
autocommit statement each). After each chunk the server's binlog position is read: the chunk's
high watermark ``hw``. The binlog is followed up to ``hw`` (one short stream from where it was
left), and each row change read there is either

- *replayed* on the chunk in memory, when its key lies in the chunk's key range: the read may or
  may not have seen it, and replaying every change in order over a state that already holds
  some of them ends in the state at ``hw`` (each change sets the columns of its image, or
  removes the key);
- *staged* as a change at its own position, when its key lies in a chunk already read (of this
  table or of a table done): the chunk was read before the change;
- *dropped*, when its key lies in a range not read yet: that read comes later and sees it.

The chunk's rows are staged as inserts just before ``hw`` (they sort before any change at or
after ``hw``), so the merge, which applies the batch in binlog order after an implicit TRUNCATE
at the batch start, ends with each table as it was at the batch end — the last watermark —
exactly as a consistent snapshot taken there. The incremental loads continue from that end.

A schema change of a captured table during the snapshot stops it with an error (run it again).
Key ranges are compared in Python: chunked tables need keys that compare alike in Python and in
the server (numbers, dates and times, binary strings); a table whose key holds text with a
collation is read in one chunk.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from decimal import Decimal
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence, Union

import pyarrow as pa

from . import arrow_reader
from .consistent_table import read_table_consistently
from ..checkpoints import Checkpoint
from ..codec import constants as C
from ..codec.events import (
    ABSENT,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMap,
    TransactionPayloadEvent,
    XidEvent,
)
from ..codec.gtid import MariadbGtidPosition, parse_gtid_state
from ..codec.mariadb_text import TEXT_FORMS
from ..codec.positions import position_key
from ..schema_history import SchemaHistory, seed_history
from ..schema_history.ddl import DdlSyntaxError, named_tables, parse_ddl, statement_kind
from .snapshot import (
    SnapshotError,
    _convert_rows,
    _converter,
    binlog_status_row,
    estimated_rows,
    list_tables,
    quote_identifier,
    select_list,
    snapshot_binlog_position,
    table_map_from_information_schema,
)
from ..staging import Manifest, StagingWriter
from ..staging.contract import arrow_type_for
from ..staging.masking import Masking
from ..staging.storage import StorageOptions
from ..tables import TableFilter

log = logging.getLogger(__name__)
UTC = dt.timezone.utc
#: rows per chunk, by default, of a table read into Arrow, and of one read with pymysql
ARROW_CHUNK_ROWS, CHUNK_ROWS = 50_000, 10_000
#: chunk rows sort before every change at their position: their row indexes start here
_FIRST_INDEX = -(2 ** 31)
#: streams in a row that end before the watermark with no transaction read, before giving up
_STALLS = 5
#: key column types whose order is the same in Python and in the server
_ORDERED_TYPES = frozenset({
    C.MYSQL_TYPE_TINY, C.MYSQL_TYPE_SHORT, C.MYSQL_TYPE_INT24, C.MYSQL_TYPE_LONG,
    C.MYSQL_TYPE_LONGLONG, C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_DATETIME2,
    C.MYSQL_TYPE_TIMESTAMP2, C.MYSQL_TYPE_TIME2, C.MYSQL_TYPE_YEAR})


def _binlog_status(conn, flavor: str, gtid: bool = True) -> tuple[str, int, Optional[str]]:
    """The server's binlog position now (and its GTID state, unless ``gtid`` is False: MariaDB
    finds it by reading the binlog file up to the position, too slow for every chunk)."""
    with conn.cursor() as cur:
        row = binlog_status_row(cur)
        if row is None:
            raise SnapshotError("the server has no binary log (log_bin is OFF)")
        file, pos = row[0], int(row[1])
        if not gtid:
            return file, pos, None
        if flavor == "mariadb":
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            state = cur.fetchone()[0]
        else:
            state = row[4] if len(row) > 4 else None
    return file, pos, state or None


#: tries to read MariaDB's GTID state between two equal binlog positions
_QUIET_TRIES = 5
#: tries, and seconds between them, of a read whose snapshot is still before the follower's position
_VISIBLE_TRIES, _VISIBLE_WAIT = 400, 0.005


def _start_position(conn, flavor: str) -> tuple[str, int, Optional[str]]:
    """The first watermark and the GTID state there. Every transaction before it is visible to
    the first chunk's read: MariaDB reads each chunk in (or after) a consistent snapshot, whose
    exact binlog position is at or after it.

    MariaDB: the position of a consistent snapshot (every transaction before it committed in
    the engine), and its GTID state ``@@gtid_binlog_pos`` read between two binlog positions
    equal to it (no transaction written meanwhile, none in flight); only on a server too busy
    for that, ``BINLOG_GTID_POS`` finds it by reading the binlog file from its start (seconds,
    on a large file)."""
    if flavor != "mariadb":
        return _binlog_status(conn, flavor)
    with conn.cursor() as cur:
        for attempt in range(_QUIET_TRIES + 1):
            file, pos = _committed_position(cur)
            if attempt == _QUIET_TRIES:
                break
            first = binlog_status_row(cur)
            cur.execute("SELECT @@gtid_binlog_pos")
            state = cur.fetchone()[0]
            second = binlog_status_row(cur)
            if first is None or second is None:
                raise SnapshotError("the server has no binary log (log_bin is OFF)")
            if (file, pos) == (first[0], int(first[1])) == (second[0], int(second[1])):
                return file, pos, state or None
            time.sleep(0.01 * (attempt + 1))
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        gtid = cur.fetchone()[0]
    return file, pos, gtid or None


def chunk_key(conn, tm: TableMap) -> list[int]:
    """The column indexes the table is chunked by: its primary key, else its first unique key
    of NOT NULL columns; raises :class:`SnapshotError` naming the table when it has neither."""
    key = usable_key(conn, tm)
    if key is None:
        raise SnapshotError(
            f"{tm.schema}.{tm.table} has neither a primary key nor a unique key of NOT NULL columns, "
            f"so it cannot be read in chunks; give it one, or read it in one consistent transaction")
    return key


def usable_key(conn, tm: TableMap) -> Optional[list[int]]:
    """The column indexes the table can be chunked by (see :func:`chunk_key`); None when it
    has no usable key."""
    if tm.primary_key:
        return list(tm.primary_key)
    with conn.cursor() as cur:
        cur.execute("SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 "
                    "ORDER BY INDEX_NAME, SEQ_IN_INDEX", (tm.schema, tm.table))
        indexes: dict[str, list[str]] = {}
        for index, column in cur.fetchall():
            indexes.setdefault(index, []).append(column)
    by_name = {c.name: c for c in tm.columns}
    for index in sorted(indexes):
        cols = [by_name.get(n) for n in indexes[index]]
        if all(c is not None and not c.nullable for c in cols):
            return [c.index for c in cols if c is not None]
    return None


@dataclass
class _Table:
    tm: TableMap
    key: list[int]
    ordered: bool                      # its key compares alike in Python and in the server
    done_upto: Optional[tuple] = None  # keys at or below this are in chunks read (None: none)
    finished: bool = False             # every chunk read
    rows: int = 0
    chunks: int = 0
    arrow: Optional[arrow_reader.ArrowChunkReader] = None  # reads its chunks into Arrow
    arrow_chunks: int = 0              # chunks read into Arrow (by this process)
    key_forms: Optional[list] = None   # per key column: bytes -> the text a read returns (or None)
    #: no usable key: read in one consistent transaction (.consistent_table), at this position
    #: once read; the binlog's changes from there on are staged, those before it dropped
    consistent: bool = False
    read_from: Optional[tuple[str, int]] = None


@dataclass
class _Chunk:
    """The chunk being read: its key range ``(after, upto]`` (None: open) and its rows, as
    Arrow arrays (read straight into Arrow) until a change of the binlog concerns them."""
    table: _Table
    after: Optional[tuple]
    upto: Optional[tuple]
    rows: dict = field(default_factory=dict)   # key -> row tuple (None: known only as partial)
    arrays: Optional[list] = None              # one per column, in its staging type

    def holds(self, key: tuple) -> bool:
        return (self.after is None or key > self.after) and (self.upto is None or key <= self.upto)

    def materialize(self) -> None:
        """The rows as Python tuples, for a change to be replayed on them."""
        if self.arrays is not None:
            columns = [a.to_pylist() for a in self.arrays]
            key = self.table.key
            self.rows = {tuple(r[i] for i in key): r for r in zip(*columns)}
            self.arrays = None


#: the chunks being read: one, several (of different tables, read at once), or none
_Open = Union[_Chunk, Sequence[_Chunk], None]


def _chunk_of(chunks: _Open, table: _Table) -> Optional[_Chunk]:
    if chunks is None or isinstance(chunks, _Chunk):
        return chunks if chunks is not None and chunks.table is table else None
    return next((c for c in chunks if c.table is table), None)


class _Follower:
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

    def follow_to(self, file: str, pos: int, chunk: _Open) -> None:
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
                    self._handle(at_file, at, event, chunk)
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

    def _handle(self, file: str, at: int, event: Any, chunk: _Open) -> None:
        if isinstance(event, (GtidEvent, MariadbGtidEvent)):
            # a transaction (or a statement of its own, a DDL) opens: no boundary until it ends
            self.gtid, self.txn_start, self.in_txn, self.begun = event.gtid, (file, at), True, False
        elif isinstance(event, XidEvent):
            self._commit(chunk)
        elif isinstance(event, TransactionPayloadEvent):
            for inner in event.events:
                self._handle(file, at, inner, chunk)
        elif isinstance(event, QueryEvent):
            self._check_query(file, at, event, chunk)
        elif isinstance(event, RowsEvent) and not event.skipped and event.table_map is not None:
            table = self.tables.get((event.table_map.schema, event.table_map.table))
            self.in_txn = self.begun = True
            if table is not None:
                self.pending.append((file, at, event, table, self.gtid, self.txn_start))

    def _commit(self, chunk: _Open) -> None:
        """The transaction's changes, in order, now that it committed."""
        gtid = self.gtid
        for file, at, event, table, txn_gtid, txn_start in self.pending:
            self.gtid, self.txn_start = txn_gtid, txn_start
            self._rows(file, at, event, table, chunk)
        self.pending.clear()
        self._count_gtid(gtid)
        self.in_txn, self.begun, self.gtid, self.txn_start = False, False, None, None

    def _check_query(self, file: str, at: int, event: QueryEvent, chunk: _Open) -> None:
        query = event.query
        if query == "BEGIN":
            self.txn_start = self.txn_start or (file, at)
            self.in_txn = self.begun = True
            return
        if event.is_commit:
            self._commit(chunk)
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

    def _rows(self, file: str, at: int, event: RowsEvent, table: _Table, chunk: _Open) -> None:
        """Replay the event's rows on the chunk being read, and stage what concerns keys read:
        a key change whose one key is read and the other not keeps only that half (the delete
        of the old key, or the insert of the new one); the rest is read later."""
        staged: list[tuple[int, str, Any]] = []  # (row index in the event, kind, row)
        current = _chunk_of(chunk, table)
        if table.consistent:  # read at one position: its changes after it, every row
            if table.read_from is not None and _at_or_after((file, at), table.read_from):
                staged = [(index, event.kind, row) for index, row in enumerate(event.rows)]
        for index, row in enumerate(() if table.consistent else event.rows):
            before, after = (row if event.kind == "update" else
                             (row, None) if event.kind == "delete" else (None, row))
            if current is not None:
                self._replay(current, event.kind, before, after)
            old = self._key(table, before) if before is not None else None
            new = self._key(table, after) if after is not None else None
            if event.kind == "update" and new is None:
                new = old  # a MINIMAL after image without the (unchanged) key
            read_old = old is not None and self._read_already(table, old)
            read_new = new is not None and self._read_already(table, new)
            if event.kind != "update" or old == new or (read_old and read_new):
                if read_old or read_new:
                    staged.append((index, event.kind, row))
            elif read_old:
                staged.append((index, "delete", before))
            elif read_new:
                if ABSENT in after:
                    raise SnapshotError(
                        f"{table.tm.schema}.{table.tm.table}: a key change at {file}:{at} moved a row not read "
                        f"yet to a key already read with a partial row image (binlog_row_image MINIMAL); "
                        f"take the snapshot again or with binlog_row_image=FULL")
                staged.append((index, "insert", after))
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

    @staticmethod
    def _key(table: _Table, image) -> Optional[tuple]:
        key = tuple(image[i] for i in table.key)
        if any(v is ABSENT for v in key):
            return None
        if table.key_forms is not None:
            key = tuple(f(v) if f is not None and isinstance(v, (bytes, bytearray)) else v
                        for f, v in zip(table.key_forms, key))
        return key

    @staticmethod
    def _read_already(table: _Table, key: tuple) -> bool:
        return table.finished or (table.done_upto is not None and key <= table.done_upto)

    def _replay(self, chunk: _Chunk, kind: str, before, after) -> None:
        table = chunk.table
        old_key = self._key(table, before) if before is not None else None
        new_key = self._key(table, after) if after is not None else old_key
        if after is not None and new_key is None:  # a MINIMAL update image without its key
            new_key = old_key
        if not ((old_key is not None and chunk.holds(old_key)) or (new_key is not None and chunk.holds(new_key))):
            return  # neither key in the chunk's range
        chunk.materialize()
        previous = chunk.rows.get(old_key) if old_key is not None else None
        if old_key is not None and chunk.holds(old_key) and (kind == "delete" or new_key != old_key):
            chunk.rows.pop(old_key, None)
            self.replayed += 1
        if after is None or new_key is None or not chunk.holds(new_key):
            return
        base = chunk.rows.get(new_key, previous if new_key != old_key else None)
        if ABSENT in after:
            if base is None and kind == "update":
                chunk.rows[new_key] = None  # known only in part: a later change must complete it
                return
            merged = tuple(a if a is not ABSENT else (b if base is not None else ABSENT)
                           for a, b in zip(after, base or after))
        else:
            merged = tuple(after)
        chunk.rows[new_key] = merged
        self.replayed += 1


def take_watermark_snapshot(connect: Callable[[], Any], replica_factory: Callable[[], Any], *, staging_dir,
                            tables: TableFilter, flavor: str, server: dict, chunk_rows: Optional[int] = None,
                            progress: Optional[Callable[[str, int, int], None]] = None,
                            masking: Optional[Masking] = None, resume_key: Optional[str] = None,
                            arrow_url: Optional[str] = None, reader: str = "auto",
                            read_connections: int = 1,
                            estimates: Optional[Callable[[dict[str, int]], None]] = None,
                            storage_options: Optional[StorageOptions] = None) -> Manifest:
    """Read the selected tables by key chunks between binlog watermarks and publish them as a
    snapshot batch from the first watermark (``start``) to the last (``end``): staged chunk
    rows, and the changes of rows already read made while the snapshot went on.

    ``connect()`` opens a plain pymysql connection (autocommit), ``replica_factory()`` a
    :class:`~airflow_provider_binlog.replica.ReplicaConnection` (it reads the binlog as server
    id 0, next to any running load).

    With ``resume_key``, the staged work is sealed after every chunk; a snapshot with the same
    key whose process died (killed, a lost worker) is continued where its last chunk was
    sealed, so at most the chunk being read then is read again.

    ``reader``: ``"arrow"`` reads chunks straight into Arrow with connectorx
    (:mod:`.arrow_reader`; ``arrow_url`` is its ``mysql://`` address), ``"pymysql"`` row by
    row, ``"auto"`` (the default) with connectorx where it can (an ``arrow_url``, connectorx
    installed, every column of the table of a type it reads exactly), else with pymysql.
    ``read_connections`` is the connection budget: up to that many tables read into Arrow have a
    chunk read at once, and a chunk of the last such table, when it is keyed by one integer
    column, is split between that many connections.

    ``progress(table, rows_just_read, rows_read_of_the_table)`` is called after each chunk,
    ``estimates({schema.table: estimated rows})`` once the tables are known.

    ``chunk_rows`` (rows per chunk) defaults to :data:`ARROW_CHUNK_ROWS` for a table read into
    Arrow and :data:`CHUNK_ROWS` for one read with pymysql (a chunk's read costs a few
    milliseconds besides its rows, which an Arrow read of 10,000 rows does not dwarf)."""
    if chunk_rows is not None and chunk_rows < 1:
        raise SnapshotError(f"chunk_rows must be at least 1, not {chunk_rows}")
    if reader not in ("auto", "arrow", "pymysql"):
        raise SnapshotError(f"reader is 'auto', 'arrow' or 'pymysql', not {reader!r}")
    if read_connections < 1:
        raise SnapshotError(f"read_connections must be at least 1, not {read_connections}")
    if reader == "arrow" and (arrow_url is None or not arrow_reader.available()):
        raise SnapshotError("reader='arrow' needs connectorx installed (pip install connectorx) and a "
                            "connection without TLS; use reader='auto' or 'pymysql'")
    use_arrow = reader != "pymysql" and arrow_url is not None and arrow_reader.available()
    conn = connect()
    writer: Optional[StagingWriter] = None
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
        selected = list_tables(conn, tables)
        state: dict[tuple[str, str], _Table] = {}
        for schema, table in selected:
            tm = table_map_from_information_schema(conn, schema, table, flavor)
            if tm is None:
                continue
            key = usable_key(conn, tm)
            if key is None:  # read in one consistent transaction
                state[(schema, table)] = _Table(tm, [], False, consistent=True)
                continue
            # MariaDB UUID/INET keys: read as text, decoded from the binlog as bytes; neither
            # order is the server's, so such a table is read in one chunk
            forms = [TEXT_FORMS.get(tm.columns[i].data_type or "") for i in key]
            ordered = all((tm.columns[i].type in _ORDERED_TYPES or tm.columns[i].text is False) and f is None
                          for i, f in zip(key, forms))
            state[(schema, table)] = t = _Table(tm, key, ordered)
            if any(forms):
                t.key_forms = forms
            if use_arrow:
                why = arrow_reader.arrow_readable(tm)
                if why is None:
                    t.arrow = arrow_reader.ArrowChunkReader(arrow_url, tm, read_connections)
                elif reader == "arrow":
                    raise SnapshotError(f"{schema}.{table}: {why}, which connectorx does not read exactly; "
                                        f"use reader='auto' (such tables are read with pymysql)")
                else:
                    log.info("watermark snapshot: %s.%s read with pymysql: %s", schema, table, why)
        if estimates is not None:
            estimates(estimated_rows(conn, list(state)))
        resumed = StagingWriter.resume(staging_dir, resume_key, {k: t.tm for k, t in state.items()},
                                       masking=masking, storage_options=storage_options) if resume_key else None
        if resumed is not None:
            writer, saved = resumed
            start_file, start_pos, start_gtid = saved["start"]
            history = SchemaHistory.from_json(saved["history"])
            taken_at = dt.datetime.fromisoformat(saved["taken_at"])
            for name, info in saved["tables"].items():
                t = state.get(tuple(name.split("\x00", 1)))  # type: ignore[arg-type]
                if t is None:
                    raise SnapshotError(f"{name.replace(chr(0), '.')} is no longer selected or gone; the "
                                        f"snapshot to resume cannot go on: start it over")
                t.done_upto = _decode_key(info["done_upto"])
                t.finished, t.rows, t.chunks = info["finished"], info["rows"], info["chunks"]
                read_from = info.get("read_from")
                t.read_from = (read_from[0], int(read_from[1])) if read_from else None
            resumed_rows = sum(t.rows for t in state.values())
            log.info("watermark snapshot %s resumed at %s:%d, %d rows staged before", resume_key,
                     saved["follower"][0], saved["follower"][1], resumed_rows)
        else:
            writer = StagingWriter(staging_dir, masking=masking, storage_options=storage_options)
            start_file, start_pos, start_gtid = _start_position(conn, flavor)
            history = seed_history(conn, tables.schemas_possibly_included, flavor)
            taken_at = dt.datetime.now(UTC)
            saved = {"follower": [start_file, start_pos], "replayed": 0, "changes": 0,
                     "follower_gtid": (start_gtid or "") if flavor == "mariadb" else None}
            resumed_rows = 0
        for (schema, table), t in state.items():
            tdef = history.get(schema, table)
            if tdef is None or tdef.column_names != tuple(c.name for c in t.tm.columns):
                raise SnapshotError(f"the schema of {schema}.{table} changed while the snapshot started; "
                                    f"run the snapshot again")
        follower = _Follower(replica_factory, state, history, tables, writer, tuple(saved["follower"]))
        follower.replayed, follower.staged_changes = saved["replayed"], saved["changes"]
        if saved.get("follower_gtid") is not None:
            follower.gtid_state = MariadbGtidPosition.parse(saved["follower_gtid"])
        if resumed is not None:
            saved_end = saved.get("follower_txn_end")
            follower.txn_end = (saved_end[0], int(saved_end[1])) if saved_end else None

        def seal() -> None:
            if resume_key:
                writer.seal({
                    "resume_key": resume_key, "start": [start_file, start_pos, start_gtid],
                    "history": history.to_json(), "taken_at": taken_at.isoformat(),
                    "follower": [follower.file, follower.pos], "replayed": follower.replayed,
                    "follower_gtid": None if follower.gtid_state is None else str(follower.gtid_state),
                    "follower_txn_end": follower.txn_end,
                    "changes": follower.staged_changes,
                    "tables": {f"{k[0]}\x00{k[1]}": {"done_upto": _encode_key(t.done_upto), "finished": t.finished,
                                                      "rows": t.rows, "chunks": t.chunks,
                                                      "read_from": t.read_from}
                               for k, t in state.items()}})

        # several tables read into Arrow: a chunk of each of up to read_connections at once;
        # the last such table (or a table read with pymysql): its chunks one after another,
        # each over the budget when its key is one integer column
        with ThreadPoolExecutor(read_connections, thread_name_prefix="snapshot-read") as pool:
            while True:
                pending = [t for t in state.values() if not t.finished]
                if not pending:
                    break
                in_arrow = [t for t in pending if t.arrow is not None]
                if read_connections > 1 and len(in_arrow) > 1:
                    _read_round(conn, flavor, writer, follower, in_arrow[:read_connections],
                                chunk_rows or ARROW_CHUNK_ROWS, taken_at, progress, seal, pool)
                elif pending[0].consistent:
                    _read_consistently(conn, flavor, writer, follower, pending[0], chunk_rows or CHUNK_ROWS,
                                       taken_at, progress, seal)
                else:
                    t = pending[0]
                    _read_table(conn, flavor, writer, follower, t,
                                chunk_rows or (ARROW_CHUNK_ROWS if t.arrow is not None else CHUNK_ROWS), taken_at,
                                progress, seal)
        # MariaDB: the GTID state at the end is the start's and the transactions followed since
        end_file, end_pos, end_gtid = _binlog_status(conn, flavor, gtid=follower.gtid_state is None)
        follower.follow_to(end_file, end_pos, None)
        if follower.gtid_state is not None:
            end_gtid = str(follower.gtid_state) or None

        def checkpoint(file: str, pos: int, gtid_text: Optional[str]) -> Checkpoint:
            gtid = None
            if gtid_text:
                gtid = parse_gtid_state(flavor, gtid_text)
            return Checkpoint(file=file, position=pos, gtid=gtid, flavor=flavor,
                              server_id=server.get("server_id"), server_uuid=server.get("server_uuid"))

        # the schema valid at the end, for the incremental loads (no schema change ran since the start)
        history = seed_history(conn, tables.schemas_possibly_included, flavor)
        chunks = sum(t.chunks for t in state.values())
        log.info("watermark snapshot: %d tables in %d chunks, %d rows replayed on chunks, %d changes staged, "
                 "%s:%d .. %s:%d", len(state), chunks, follower.replayed, follower.staged_changes,
                 start_file, start_pos, end_file, end_pos)
        return writer.publish(
            dump_id=f"snapshot-{start_file}.{start_pos}-{end_file}.{end_pos}-{taken_at:%Y%m%dT%H%M%S%fZ}",
            start=checkpoint(start_file, start_pos, start_gtid).to_json(),
            end=checkpoint(end_file, end_pos, end_gtid).to_json(), server=server,
            extra={"mode": "snapshot", "snapshot_method": "watermark", "tables_filter": tables.to_json(),
                   "schema_history": history.to_json(), "snapshot_tables": [f"{s}.{t}" for s, t in state],
                   "snapshot_stats": {"chunks": chunks, "replayed": follower.replayed,
                                      "changes": follower.staged_changes, "resumed": resumed is not None,
                                      "arrow_chunks": sum(t.arrow_chunks for t in state.values()),
                                      "resumed_after_rows": resumed_rows,
                                      "longest_chunk_read_seconds": round(follower.longest_read, 4)}})
    except BaseException as exc:
        if writer is not None:
            if resume_key and not isinstance(exc, SnapshotError):
                writer.release()  # sealed: a rerun with the same key continues it
            else:
                writer.abort()
        raise
    finally:
        conn.close()


def _encode_key(key: Optional[tuple]) -> Optional[list]:
    """A chunk key as JSON: each value tagged with its type."""
    if key is None:
        return None
    out: list = []
    for v in key:
        if isinstance(v, bool) or v is None:
            raise SnapshotError(f"cannot record the chunk key value {v!r}")
        if isinstance(v, int):
            out.append(["i", v])
        elif isinstance(v, Decimal):
            out.append(["d", str(v)])
        elif isinstance(v, dt.datetime):
            out.append(["ts", v.isoformat()])
        elif isinstance(v, dt.date):
            out.append(["date", v.isoformat()])
        elif isinstance(v, dt.timedelta):
            out.append(["td", v.days, v.seconds, v.microseconds])
        elif isinstance(v, (bytes, bytearray)):
            out.append(["b", bytes(v).hex()])
        else:
            out.append(["s", str(v)])
    return out


def _decode_key(data: Optional[list]) -> Optional[tuple]:
    if data is None:
        return None
    out: list = []
    for item in data:
        tag = item[0]
        out.append(item[1] if tag in ("i", "s") else Decimal(item[1]) if tag == "d"
                   else dt.datetime.fromisoformat(item[1]) if tag == "ts"
                   else dt.date.fromisoformat(item[1]) if tag == "date"
                   else dt.timedelta(days=item[1], seconds=item[2], microseconds=item[3]) if tag == "td"
                   else bytes.fromhex(item[1]))
    return tuple(out)


def _read_chunk(conn, flavor: str, t: _Table, cols: str, source: str, key_cols: str, converters: list,
                last: Optional[tuple], limit: Optional[int],
                after: Optional[tuple[str, int]]) -> tuple[_Chunk, bool, str, int, float]:
    """One chunk read with pymysql: the chunk, whether it was full, its high watermark and the
    seconds of the read. On MariaDB the read's snapshot must be at or after ``after`` (the
    follower's position: what it read is before the chunk's read), else it is read again."""
    sql = f"SELECT {cols} FROM {source}"
    args: list = []
    if last is not None:
        sql += f" WHERE ({key_cols}) > ({', '.join(['%s'] * len(last))})"
        args += list(last)
    sql += f" ORDER BY {key_cols}"
    if limit is not None:
        sql += " LIMIT %s"
        args.append(limit)
    with conn.cursor() as cur:
        for attempt in range(_VISIBLE_TRIES):
            began = time.monotonic()
            if flavor == "mariadb":  # the read and its exact binlog position, in one short transaction
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute(sql, args)
            fetched = cur.fetchall()
            if flavor != "mariadb":
                break
            hw_file, hw_pos = snapshot_binlog_position(cur)
            cur.execute("COMMIT")
            if _at_or_after((hw_file, hw_pos), after):
                break
            time.sleep(_VISIBLE_WAIT)  # a transaction the follower read is not committed yet: again
        else:
            raise _not_visible(after)
        seconds = time.monotonic() - began
        rows = _convert_rows(fetched, converters)
    if flavor != "mariadb":  # read after the chunk: what the read saw is before it
        hw_file, hw_pos, _ = _binlog_status(conn, flavor, gtid=False)
    full = limit is not None and len(rows) == limit
    upto = tuple(rows[-1][i] for i in t.key) if full else None
    chunk = _Chunk(t, last, upto, {tuple(r[i] for i in t.key): tuple(r) for r in rows})
    return chunk, full, hw_file, hw_pos, seconds


def _committed_position(cur) -> tuple[str, int]:
    """MariaDB: the position of a consistent snapshot, opened and closed: every transaction of
    the binlog before it is committed in the engine."""
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    position = snapshot_binlog_position(cur)
    cur.execute("COMMIT")
    return position


def _at_or_after(position: tuple[str, int], after: Optional[tuple[str, int]]) -> bool:
    return after is None or position_key(*position) >= position_key(*after)


def _not_visible(after: tuple[str, int]) -> SnapshotError:
    return SnapshotError(f"transactions in the binlog before {after[0]}:{after[1]} stayed uncommitted in the "
                         f"engine for {_VISIBLE_TRIES * _VISIBLE_WAIT:.0f} s and more; take the snapshot again")


def _visibility_guard(conn, flavor: str, after: Optional[tuple[str, int]]) -> None:
    """MariaDB: return once a consistent snapshot's position is at or after ``after`` (the
    follower's position): every transaction the follower read is then committed in the engine
    and visible to any read that starts later. (A transaction is written to the binlog, where
    the follower may read it, before the engine commits it.)"""
    if flavor != "mariadb" or after is None:
        return
    with conn.cursor() as cur:
        for _ in range(_VISIBLE_TRIES):
            if _at_or_after(_committed_position(cur), after):
                return
            time.sleep(_VISIBLE_WAIT)
    raise _not_visible(after)


def _read_chunk_arrow(conn, flavor: str, t: _Table, source: str, key_cols: str, last: Optional[tuple],
                      limit: Optional[int], after: Optional[tuple[str, int]], *,
                      alone: bool = True) -> tuple[_Chunk, bool, str, int, float]:
    """One chunk read into Arrow with connectorx (see :func:`_read_chunk`); raises
    :class:`~.arrow_reader.ArrowReadError` when connectorx cannot read it.

    connectorx reads on connections of its own, each chunk's read one statement (or one per
    connection of the budget). On MariaDB it starts once a consistent snapshot is at or past
    ``after``, the end of the last transaction the follower read (:func:`_visibility_guard`):
    every transaction the follower read is visible to it, and the changes after that up to the
    high watermark, read after it, are replayed."""
    reader = t.arrow
    if reader is None:
        raise arrow_reader.ArrowReadError(f"{t.tm.schema}.{t.tm.table}: no Arrow reader")
    if alone:
        _visibility_guard(conn, flavor, after)
    where = ""
    if last is not None:
        where = f"({key_cols}) > ({', '.join(conn.escape(v) for v in last)})"
    key_col = t.tm.columns[t.key[0]]
    split: Optional[tuple[str, int, int]] = None
    upto: Optional[tuple] = None
    full = empty = False
    if alone and reader.connections > 1 and limit is not None and len(t.key) == 1 \
            and arrow_reader.splittable(key_col):
        # the chunk's last key first (an index read), then the range over the connections
        rest = source + (f" WHERE {where}" if where else "")
        with conn.cursor() as cur:
            cur.execute(f"SELECT {key_cols} FROM {rest} ORDER BY {key_cols} LIMIT 1 OFFSET %s", (limit - 1,))
            row = cur.fetchone()
            full = row is not None
            if full:
                high = int(row[0])
            else:
                cur.execute(f"SELECT MAX({key_cols}) FROM {rest}")
                top = cur.fetchone()[0]
                high = int(top) if top is not None else 0
            cur.execute(f"SELECT MIN({key_cols}) FROM {rest}")
            bottom = cur.fetchone()[0]
        if bottom is None:
            empty = True  # nothing left
        else:
            split = (key_col.name, int(bottom), high)
            where = (where + " AND " if where else "") + f"{key_cols} <= {high}"
            upto = (high,) if full else None
    began = time.monotonic()
    if empty:
        arrays: Sequence[Any] = [pa.array([], type=arrow_type_for(c)) for c in t.tm.columns]
    else:
        arrays = reader.read(where, f"ORDER BY {key_cols}" + (f" LIMIT {int(limit)}" if limit is not None else ""),
                             split)
    seconds = time.monotonic() - began
    hw_file, hw_pos = "", 0
    if alone:
        hw_file, hw_pos, _ = _binlog_status(conn, flavor, gtid=False)
    n = len(arrays[0]) if arrays else 0
    if split is None:
        full = limit is not None and n == limit
        if full:
            upto = tuple(arrays[i][n - 1].as_py() for i in t.key)
    chunk = _Chunk(t, last, upto, arrays=list(arrays))
    return chunk, full, hw_file, hw_pos, seconds


def _table_sql(t: _Table) -> tuple[str, str, str]:
    """The table's column list, its name and its key columns, quoted for SQL."""
    tm = t.tm
    return (select_list(tm),
            f"{quote_identifier(tm.schema)}.{quote_identifier(tm.table)}",
            ", ".join(quote_identifier(tm.columns[i].name) for i in t.key))


def _stage_chunk(writer: StagingWriter, t: _Table, chunk: _Chunk, full: bool, hw_file: str, hw_pos: int,
                 taken_at: dt.datetime) -> int:
    """Stage a chunk, once the binlog was followed to its high watermark, and advance its table."""
    tm = t.tm
    if chunk.arrays is not None:  # no change concerned it: staged as read
        staged_rows = writer.add_snapshot_arrays(tm, chunk.arrays, binlog_file=hw_file, position=hw_pos,
                                                 gtid=None, taken_at=taken_at, first_index=_FIRST_INDEX + t.rows)
        if not staged_rows and t.rows == 0:
            writer.add_snapshot_rows(tm, [], binlog_file=hw_file, position=hw_pos, gtid=None,
                                     taken_at=taken_at, first_index=_FIRST_INDEX)
    else:
        unknown = [k for k, v in chunk.rows.items() if v is None]
        if unknown:
            raise SnapshotError(f"{tm.schema}.{tm.table}: {len(unknown)} row(s) changed during the read of their "
                                f"chunk with partial row images (binlog_row_image MINIMAL) and cannot be completed; "
                                f"take the snapshot again or with binlog_row_image=FULL")
        staged = [chunk.rows[k] for k in sorted(chunk.rows)]
        staged_rows = len(staged)
        if staged or t.rows == 0:
            writer.add_snapshot_rows(tm, staged, binlog_file=hw_file, position=hw_pos, gtid=None,
                                     taken_at=taken_at, first_index=_FIRST_INDEX + t.rows)
    t.rows += staged_rows
    t.chunks += 1
    if full:
        t.done_upto = chunk.upto
    else:
        t.finished = True
    return staged_rows


def _read_table(conn, flavor: str, writer: StagingWriter, follower: _Follower, t: _Table, chunk_rows: int,
                taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
                seal: Callable[[], None]) -> None:
    """Read the rest of one table, a chunk at a time."""
    tm = t.tm
    name = f"{tm.schema}.{tm.table}"
    cols, source, key_cols = _table_sql(t)
    converters = [_converter(c) for c in tm.columns]
    limit = chunk_rows if t.ordered else None  # a text key: the table in one chunk
    while not t.finished:
        if t.arrow is not None:
            invalid = t.arrow.invalid_temporals
            try:
                chunk, full, hw_file, hw_pos, seconds = _read_chunk_arrow(
                    conn, flavor, t, source, key_cols, t.done_upto, limit, follower.txn_end)
            except arrow_reader.ArrowReadError as exc:
                if t.arrow.connections > 1:  # maybe the split (connectorx's own SQL): try on one connection
                    log.warning("watermark snapshot of %s: %s; read again on one connection", name, exc)
                    t.arrow.connections = 1
                else:
                    _fall_back(t, exc)
                continue
            writer.counters.invalid_temporals += t.arrow.invalid_temporals - invalid
            t.arrow_chunks += 1
        else:
            chunk, full, hw_file, hw_pos, seconds = _read_chunk(conn, flavor, t, cols, source, key_cols,
                                                                converters, t.done_upto, limit,
                                                                follower.txn_end)
        follower.longest_read = max(follower.longest_read, seconds)
        follower.follow_to(hw_file, hw_pos, chunk)
        staged_rows = _stage_chunk(writer, t, chunk, full, hw_file, hw_pos, taken_at)
        seal()
        if progress is not None and staged_rows:
            progress(name, staged_rows, t.rows)
    log.info("watermark snapshot of %s: %d rows in %d chunks", name, t.rows, t.chunks)


def _read_consistently(conn, flavor: str, writer: StagingWriter, follower: _Follower, t: _Table, chunk_rows: int,
                       taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
                       seal: Callable[[], None]) -> None:
    """Read a table without a usable key in one consistent transaction (.consistent_table)."""
    t.read_from, t.rows = read_table_consistently(conn, flavor, writer, t.tm, chunk_rows=chunk_rows,
                                                  taken_at=taken_at, progress=progress)
    t.chunks, t.finished = 1, True
    seal()


def _fall_back(t: _Table, exc: Exception) -> None:
    log.warning("watermark snapshot of %s.%s: %s; this chunk and the next ones are read with pymysql",
                t.tm.schema, t.tm.table, exc)
    t.arrow = None


def _read_round(conn, flavor: str, writer: StagingWriter, follower: _Follower, tables: list[_Table],
                chunk_rows: int, taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
                seal: Callable[[], None], pool: ThreadPoolExecutor) -> None:
    """The next chunk of each of several tables, read into Arrow at once (one connection each);
    the binlog is then followed to one high watermark with every chunk open, so that each
    ends in its state there."""
    after = follower.txn_end
    _visibility_guard(conn, flavor, after)
    began = time.monotonic()

    def read(t: _Table):
        _, source, key_cols = _table_sql(t)
        return _read_chunk_arrow(conn, flavor, t, source, key_cols, t.done_upto,
                                 chunk_rows if t.ordered else None, after, alone=False)

    futures = [(t, t.arrow.invalid_temporals if t.arrow else 0, pool.submit(read, t)) for t in tables]
    done: list[tuple[_Table, _Chunk, bool]] = []
    for t, invalid, future in futures:
        try:
            chunk, full, _, _, _ = future.result()
        except arrow_reader.ArrowReadError as exc:
            _fall_back(t, exc)  # read again later, with pymysql
            continue
        if t.arrow is not None:
            writer.counters.invalid_temporals += t.arrow.invalid_temporals - invalid
        t.arrow_chunks += 1
        done.append((t, chunk, full))
    follower.longest_read = max(follower.longest_read, time.monotonic() - began)
    hw_file, hw_pos, _ = _binlog_status(conn, flavor, gtid=False)
    follower.follow_to(hw_file, hw_pos, [c for _, c, _ in done])
    staged = [(t, _stage_chunk(writer, t, chunk, full, hw_file, hw_pos, taken_at)) for t, chunk, full in done]
    seal()
    for t, staged_rows in staged:
        if progress is not None and staged_rows:
            progress(f"{t.tm.schema}.{t.tm.table}", staged_rows, t.rows)
        if t.finished:
            log.info("watermark snapshot of %s.%s: %d rows in %d chunks", t.tm.schema, t.tm.table, t.rows,
                     t.chunks)


__all__ = ["chunk_key", "take_watermark_snapshot", "usable_key"]
