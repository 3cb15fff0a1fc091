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
from typing import Any, Callable, Optional

from .checkpoint import Checkpoint
from .codec import constants as C
from .codec.events import (
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
from .codec.gtid import MariadbGtidPosition, MysqlGtidSet
from .codec.positions import position_key
from .schema_history import SchemaHistory, seed_history
from .schema_history.ddl import DdlSyntaxError, named_tables, parse_ddl, statement_kind
from .snapshot import (
    SnapshotError,
    _convert_rows,
    _converter,
    binlog_status_row,
    list_tables,
    quote_identifier,
    snapshot_binlog_position,
    table_map_from_information_schema,
)
from .staging import Manifest, StagingWriter
from .staging.masking import Masking
from .tables import TableFilter

log = logging.getLogger(__name__)
UTC = dt.timezone.utc
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


def _start_position(conn, flavor: str) -> tuple[str, int, Optional[str]]:
    """The first watermark. MariaDB: that of a consistent snapshot, so that no transaction
    written to the binlog before it can still be invisible to the first chunk's read."""
    if flavor != "mariadb":
        return _binlog_status(conn, flavor)
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        file, pos = snapshot_binlog_position(cur)
        cur.execute("COMMIT")
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        gtid = cur.fetchone()[0]
    return file, pos, gtid or None


def chunk_key(conn, tm: TableMap) -> list[int]:
    """The column indexes the table is chunked by: its primary key, else its first unique key
    of NOT NULL columns; raises :class:`SnapshotError` naming the table when it has neither."""
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
    raise SnapshotError(
        f"{tm.schema}.{tm.table} has neither a primary key nor a unique key of NOT NULL columns, "
        f"so it cannot be read in chunks; give it one, leave it out of the watermark snapshot "
        f"(exclude=) and take it with snapshot_mode='consistent', or use that mode for the source")


@dataclass
class _Table:
    tm: TableMap
    key: list[int]
    ordered: bool                      # its key compares alike in Python and in the server
    done_upto: Optional[tuple] = None  # keys at or below this are in chunks read (None: none)
    finished: bool = False             # every chunk read
    rows: int = 0
    chunks: int = 0


@dataclass
class _Chunk:
    """The chunk being read: its key range ``(after, upto]`` (None: open) and its rows."""
    table: _Table
    after: Optional[tuple]
    upto: Optional[tuple]
    rows: dict = field(default_factory=dict)   # key -> row tuple (None: known only as partial)

    def holds(self, key: tuple) -> bool:
        return (self.after is None or key > self.after) and (self.upto is None or key <= self.upto)


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
        self.gtid: Optional[str] = None
        self.txn_start: Optional[tuple[str, int]] = None
        self.staged_changes = 0
        self.replayed = 0
        self.longest_read = 0.0  # seconds of the longest chunk read (one autocommit statement)
        self.in_txn = False        # inside a transaction: its rows wait in pending for its commit
        self.begun = False         # its BEGIN (or a first rows event) was read
        self.pending: list[tuple] = []

    def follow_to(self, file: str, pos: int, chunk: Optional[_Chunk]) -> None:
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

    def _handle(self, file: str, at: int, event: Any, chunk: Optional[_Chunk]) -> None:
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

    def _commit(self, chunk: Optional[_Chunk]) -> None:
        """The transaction's changes, in order, now that it committed."""
        for file, at, event, table, gtid, txn_start in self.pending:
            self.gtid, self.txn_start = gtid, txn_start
            self._rows(file, at, event, table, chunk)
        self.pending.clear()
        self.in_txn, self.begun, self.gtid, self.txn_start = False, False, None, None

    def _check_query(self, file: str, at: int, event: QueryEvent, chunk: Optional[_Chunk]) -> None:
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

    def _rows(self, file: str, at: int, event: RowsEvent, table: _Table, chunk: Optional[_Chunk]) -> None:
        """Replay the event's rows on the chunk being read, and stage what concerns keys read:
        a key change whose one key is read and the other not keeps only that half (the delete
        of the old key, or the insert of the new one); the rest is read later."""
        staged: list[tuple[int, str, Any]] = []  # (row index in the event, kind, row)
        for index, row in enumerate(event.rows):
            before, after = (row if event.kind == "update" else
                             (row, None) if event.kind == "delete" else (None, row))
            if chunk is not None and chunk.table is table:
                self._replay(chunk, event.kind, before, after)
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
        return None if any(v is ABSENT for v in key) else key

    @staticmethod
    def _read_already(table: _Table, key: tuple) -> bool:
        return table.finished or (table.done_upto is not None and key <= table.done_upto)

    def _replay(self, chunk: _Chunk, kind: str, before, after) -> None:
        table = chunk.table
        old_key = self._key(table, before) if before is not None else None
        new_key = self._key(table, after) if after is not None else old_key
        if after is not None and new_key is None:  # a MINIMAL update image without its key
            new_key = old_key
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
                            tables: TableFilter, flavor: str, server: dict, chunk_rows: int = 10_000,
                            progress: Optional[Callable[[str, int, int], None]] = None,
                            masking: Optional[Masking] = None, resume_key: Optional[str] = None) -> Manifest:
    """Read the selected tables by key chunks between binlog watermarks and publish them as a
    snapshot batch from the first watermark (``start``) to the last (``end``): staged chunk
    rows, and the changes of rows already read made while the snapshot went on.

    ``connect()`` opens a plain pymysql connection (autocommit), ``replica_factory()`` a
    :class:`~airflow_provider_binlog.replica.ReplicaConnection` (it reads the binlog as server
    id 0, next to any running load).

    With ``resume_key``, the staged work is sealed after every chunk; a snapshot with the same
    key whose process died (killed, a lost worker) is continued where its last chunk was
    sealed, so at most the chunk being read then is read again."""
    if chunk_rows < 1:
        raise SnapshotError(f"chunk_rows must be at least 1, not {chunk_rows}")
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
            key = chunk_key(conn, tm)
            ordered = all(tm.columns[i].type in _ORDERED_TYPES or tm.columns[i].text is False for i in key)
            state[(schema, table)] = _Table(tm, key, ordered)
        resumed = StagingWriter.resume(staging_dir, resume_key, {k: t.tm for k, t in state.items()},
                                       masking=masking) if resume_key else None
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
            resumed_rows = sum(t.rows for t in state.values())
            log.info("watermark snapshot %s resumed at %s:%d, %d rows staged before", resume_key,
                     saved["follower"][0], saved["follower"][1], resumed_rows)
        else:
            writer = StagingWriter(staging_dir, masking=masking)
            start_file, start_pos, start_gtid = _start_position(conn, flavor)
            history = seed_history(conn, tables.schemas_possibly_included, flavor)
            taken_at = dt.datetime.now(UTC)
            saved = {"follower": [start_file, start_pos], "replayed": 0, "changes": 0}
            resumed_rows = 0
        for (schema, table), t in state.items():
            tdef = history.get(schema, table)
            if tdef is None or tdef.column_names != tuple(c.name for c in t.tm.columns):
                raise SnapshotError(f"the schema of {schema}.{table} changed while the snapshot started; "
                                    f"run the snapshot again")
        follower = _Follower(replica_factory, state, history, tables, writer, tuple(saved["follower"]))
        follower.replayed, follower.staged_changes = saved["replayed"], saved["changes"]

        def seal() -> None:
            if resume_key:
                writer.seal({
                    "resume_key": resume_key, "start": [start_file, start_pos, start_gtid],
                    "history": history.to_json(), "taken_at": taken_at.isoformat(),
                    "follower": [follower.file, follower.pos], "replayed": follower.replayed,
                    "changes": follower.staged_changes,
                    "tables": {f"{k[0]}\x00{k[1]}": {"done_upto": _encode_key(t.done_upto), "finished": t.finished,
                                                      "rows": t.rows, "chunks": t.chunks}
                               for k, t in state.items()}})

        for t in state.values():
            if not t.finished:
                _read_table(conn, flavor, writer, follower, t, chunk_rows, taken_at, progress, seal)
        end_file, end_pos, end_gtid = _binlog_status(conn, flavor)
        follower.follow_to(end_file, end_pos, None)

        def checkpoint(file: str, pos: int, gtid_text: Optional[str]) -> Checkpoint:
            gtid = None
            if gtid_text:
                gtid = MariadbGtidPosition.parse(gtid_text) if flavor == "mariadb" else MysqlGtidSet.parse(gtid_text)
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


def _read_table(conn, flavor: str, writer: StagingWriter, follower: _Follower, t: _Table, chunk_rows: int,
                taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
                seal: Callable[[], None]) -> None:
    tm = t.tm
    name = f"{tm.schema}.{tm.table}"
    cols = ", ".join(quote_identifier(c.name) for c in tm.columns)
    source = f"{quote_identifier(tm.schema)}.{quote_identifier(tm.table)}"
    key_cols = ", ".join(quote_identifier(tm.columns[i].name) for i in t.key)
    converters = [_converter(c) for c in tm.columns]
    limit = chunk_rows if t.ordered else None  # a text key: the table in one chunk
    last: Optional[tuple] = t.done_upto
    while True:
        with conn.cursor() as cur:
            if flavor == "mariadb":  # the read and its exact binlog position, in one short transaction
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            sql = f"SELECT {cols} FROM {source}"
            args: list = []
            if last is not None:
                sql += f" WHERE ({key_cols}) > ({', '.join(['%s'] * len(last))})"
                args += list(last)
            sql += f" ORDER BY {key_cols}"
            if limit is not None:
                sql += " LIMIT %s"
                args.append(limit)
            began = time.monotonic()
            cur.execute(sql, args)
            fetched = cur.fetchall()
            if flavor == "mariadb":
                hw_file, hw_pos = snapshot_binlog_position(cur)
                cur.execute("COMMIT")
            follower.longest_read = max(follower.longest_read, time.monotonic() - began)
            rows = _convert_rows(fetched, converters)
        if flavor != "mariadb":  # read after the chunk: what the read saw is before it
            hw_file, hw_pos, _ = _binlog_status(conn, flavor, gtid=False)
        full = limit is not None and len(rows) == limit
        upto = tuple(rows[-1][i] for i in t.key) if full else None
        chunk = _Chunk(t, last, upto, {tuple(r[i] for i in t.key): tuple(r) for r in rows})
        follower.follow_to(hw_file, hw_pos, chunk)
        unknown = [k for k, v in chunk.rows.items() if v is None]
        if unknown:
            raise SnapshotError(f"{name}: {len(unknown)} row(s) changed during the read of their chunk with "
                                f"partial row images (binlog_row_image MINIMAL) and cannot be completed; "
                                f"take the snapshot again or with binlog_row_image=FULL")
        staged = [chunk.rows[k] for k in sorted(chunk.rows)]
        if staged or t.rows == 0:
            writer.add_snapshot_rows(tm, staged, binlog_file=hw_file, position=hw_pos, gtid=None,
                                     taken_at=taken_at, first_index=_FIRST_INDEX + t.rows)
        t.rows += len(staged)
        t.chunks += 1
        if full:
            t.done_upto = last = upto
        else:
            t.finished = True
        seal()
        if progress is not None and staged:
            progress(name, len(staged), t.rows)
        if t.finished:
            break
    log.info("watermark snapshot of %s: %d rows in %d chunks", name, t.rows, t.chunks)


__all__ = ["chunk_key", "take_watermark_snapshot"]
