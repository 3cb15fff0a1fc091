"""Initial snapshot: a consistent read of the selected tables with the binlog coordinates of
that exact point, staged like a dump so the merge can load it and the incremental loads can
continue from those coordinates with no gap and no duplicate.

MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and the ``binlog_snapshot_file`` /
``binlog_snapshot_position`` status of that transaction (no lock). MySQL: a short
``FLUSH TABLES WITH READ LOCK`` while the snapshot transaction starts and the position is read
(needs the RELOAD privilege), released before any row is read.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal
from typing import Callable, Optional

import pymysql

from ..checkpoints import Checkpoint
from ..codec import constants as C
from ..codec.events import Column, TableMap
from ..codec.gtid import Flavor, parse_gtid_state
from ..errors import ProviderError
from ..replica.information_schema import enum_labels, estimated_rows, list_tables, table_columns
from ..schema_history import seed_history
from ..staging import Manifest, StagingWriter
from ..staging.masking import Masking
from ..staging.storage import StorageOptions
from ..common.tables import TableFilter

log = logging.getLogger(__name__)
UTC = dt.timezone.utc


class SnapshotError(ProviderError):
    """A snapshot that cannot be taken; the message says what to change."""


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def select_list(tm: TableMap) -> str:
    """The table's columns for a snapshot's SELECT. FLOAT is read as a DOUBLE (``col * 1e0``):
    the server prints a FLOAT as text with 6 significant digits, and the binlog has its stored
    value. A product keeps the sign of a zero, where ``col + 0e0`` would turn -0 into +0."""
    return ", ".join(f"{quote_identifier(c.name)} * 1e0 AS {quote_identifier(c.name)}"
                     if c.type == C.MYSQL_TYPE_FLOAT else quote_identifier(c.name) for c in tm.columns)


_TYPES = {
    "tinyint": C.MYSQL_TYPE_TINY, "smallint": C.MYSQL_TYPE_SHORT, "mediumint": C.MYSQL_TYPE_INT24,
    "int": C.MYSQL_TYPE_LONG, "integer": C.MYSQL_TYPE_LONG, "bigint": C.MYSQL_TYPE_LONGLONG,
    "float": C.MYSQL_TYPE_FLOAT, "double": C.MYSQL_TYPE_DOUBLE, "real": C.MYSQL_TYPE_DOUBLE,
    "decimal": C.MYSQL_TYPE_NEWDECIMAL, "numeric": C.MYSQL_TYPE_NEWDECIMAL,
    "date": C.MYSQL_TYPE_DATE, "datetime": C.MYSQL_TYPE_DATETIME2,
    "timestamp": C.MYSQL_TYPE_TIMESTAMP2, "time": C.MYSQL_TYPE_TIME2, "year": C.MYSQL_TYPE_YEAR,
    "char": C.MYSQL_TYPE_STRING, "binary": C.MYSQL_TYPE_STRING, "inet4": C.MYSQL_TYPE_STRING,
    "inet6": C.MYSQL_TYPE_STRING, "uuid": C.MYSQL_TYPE_STRING,
    "varchar": C.MYSQL_TYPE_VARCHAR, "varbinary": C.MYSQL_TYPE_VARCHAR,
    "enum": C.MYSQL_TYPE_ENUM, "set": C.MYSQL_TYPE_SET, "bit": C.MYSQL_TYPE_BIT,
    "json": C.MYSQL_TYPE_JSON, "vector": C.MYSQL_TYPE_VECTOR,
}
_BLOBS = ("tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob")
_GEOMETRY = ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection")


def table_map_from_information_schema(conn, schema: str, table: str, flavor: str) -> Optional[TableMap]:
    """A TableMap equal to the one the binlog carries for the table (same staged layout)."""
    rows = table_columns(conn, schema, table)
    if not rows:
        return None
    columns = []
    for i, row in enumerate(rows):
        name, charset, key, nullable = row.name, row.charset, row.column_key, row.is_nullable
        prec, scale, dtp = row.numeric_precision, row.numeric_scale, row.datetime_precision
        data_type, column_type = row.data_type.lower(), row.column_type.lower()
        if data_type in _BLOBS:
            t = C.MYSQL_TYPE_BLOB
        elif data_type in _GEOMETRY:
            t = C.MYSQL_TYPE_GEOMETRY
        elif data_type == "json" and flavor == Flavor.MARIADB:
            t = C.MYSQL_TYPE_BLOB  # MariaDB JSON is LONGTEXT
        else:
            t = _TYPES.get(data_type)
            if t is None:
                raise SnapshotError(f"{schema}.{table}.{name}: unsupported column type {column_type}")
        meta = 0
        if t == C.MYSQL_TYPE_NEWDECIMAL:
            meta = (int(prec) << 8) | int(scale or 0)
        elif t in (C.MYSQL_TYPE_DATETIME2, C.MYSQL_TYPE_TIMESTAMP2, C.MYSQL_TYPE_TIME2):
            meta = int(dtp or 0)
        elif t == C.MYSQL_TYPE_BIT:  # as the TABLE_MAP has it: whole bytes << 8 | bits
            meta = (int(prec) // 8) << 8 | int(prec) % 8
        binary = charset is None and t in (C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_BLOB)
        text = None
        if t in (C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_BLOB):
            text = not binary
        columns.append(Column(
            index=i, name=name, type=t, meta=meta, nullable=nullable == "YES",
            unsigned="unsigned" in column_type, codec=None if binary else "utf-8", text=text,
            enum_values=enum_labels(column_type) if data_type == "enum" else None,
            set_values=enum_labels(column_type) if data_type == "set" else None,
            primary_key=key == "PRI", data_type=data_type))
    pk = tuple(c.index for c in columns if c.primary_key)
    return TableMap(table_id=0, schema=schema, table=table, columns=tuple(columns), primary_key=pk,
                    names_from="schema")


def _converter(col: Column):
    """pymysql result value -> the value the binlog codec would have decoded."""
    t = col.type
    if t == C.MYSQL_TYPE_BIT:
        return lambda v: int.from_bytes(v, "big") if isinstance(v, (bytes, bytearray)) else v
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return lambda v: v.replace(tzinfo=UTC) if isinstance(v, dt.datetime) else v
    if t == C.MYSQL_TYPE_JSON:
        return lambda v: json.loads(v, parse_float=Decimal) if isinstance(v, (str, bytes)) else v
    if t == C.MYSQL_TYPE_SET:
        order = {label: i for i, label in enumerate(col.set_values or ())}
        return lambda v: ",".join(sorted(v, key=order.get)) if isinstance(v, (set, frozenset)) else v
    return None


def _convert_rows(rows, converters):
    if not any(converters):
        return rows
    return [tuple(v if f is None or v is None else f(v) for v, f in zip(row, converters)) for row in rows]


def binlog_status_row(cur) -> Optional[tuple]:
    """The row of ``SHOW BINARY LOG STATUS`` (MySQL 8.4+), else of ``SHOW MASTER STATUS``
    (earlier MySQL, MariaDB): file, position, ..., and on MySQL the executed GTID set at 4."""
    for sql in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            cur.execute(sql)
            return cur.fetchone()
        except pymysql.err.ProgrammingError:
            continue
    raise SnapshotError("cannot read the binlog position (SHOW MASTER STATUS)")


def snapshot_binlog_position(cur) -> tuple[str, int]:
    """MariaDB: the binlog position of the consistent snapshot the transaction holds — every
    transaction committed before it is seen, none after (no race with commits in flight)."""
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    status = {k.lower(): v for k, v in cur.fetchall()}
    return status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])


def snapshot_position(conn, flavor: str) -> tuple[str, int, Optional[str]]:
    """Start a consistent-snapshot transaction on ``conn`` and return its binlog file, position
    and GTID state (MariaDB: no lock; MySQL: a short ``FLUSH TABLES WITH READ LOCK``)."""
    with conn.cursor() as cur:
        if flavor == Flavor.MARIADB:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            file, pos = snapshot_binlog_position(cur)
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            gtid = cur.fetchone()[0]
            return file, pos, gtid
        try:
            cur.execute("FLUSH TABLES WITH READ LOCK")
        except pymysql.err.OperationalError as exc:
            raise SnapshotError(f"cannot take the snapshot lock (FLUSH TABLES WITH READ LOCK): "
                                f"{exc.args[-1]}; GRANT RELOAD ON *.* to the user") from None
        try:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            row = binlog_status_row(cur)
        finally:
            cur.execute("UNLOCK TABLES")
        return row[0], int(row[1]), (row[4] if len(row) > 4 else None)


def take_snapshot(connect, *, staging_dir, tables: TableFilter, flavor: str, server: dict,
                  chunk_rows: int = 10_000,
                  progress: Optional[Callable[[str, int, int], None]] = None,
                  masking: Optional[Masking] = None,
                  estimates: Optional[Callable[[dict[str, int]], None]] = None,
                  storage_options: Optional[StorageOptions] = None) -> Manifest:
    """Read the selected tables consistently and publish them as a snapshot batch.

    ``connect()`` returns a new pymysql connection (autocommit). The manifest has
    ``"mode": "snapshot"`` and ``start == end`` = the snapshot's binlog coordinates.
    ``progress(table, rows_just_read, rows_read_of_the_table)`` is called after each chunk,
    ``estimates({schema.table: estimated rows})`` once the tables are known.
    ``masking`` excludes and masks columns as the rows are staged (see :mod:`.staging.masking`).
    """
    conn = connect()
    writer = StagingWriter(staging_dir, masking=masking, storage_options=storage_options)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        selected = list_tables(conn, tables)
        if estimates is not None:
            estimates(estimated_rows(conn, selected))
        maps = {}
        for schema, table in selected:
            tm = table_map_from_information_schema(conn, schema, table, flavor)
            if tm is not None:
                maps[(schema, table)] = tm
        file, pos, gtid_text = snapshot_position(conn, flavor)
        # the schema history the incremental dumps start from: every table of the captured
        # databases as of the snapshot's position
        history = seed_history(conn, tables.schemas_possibly_included, flavor)
        for key, tm in maps.items():
            tdef = history.get(*key)
            if tdef is None or tdef.column_names != tuple(c.name for c in tm.columns):
                raise SnapshotError(f"the schema of {key[0]}.{key[1]} changed while the snapshot "
                                    "started; run the snapshot again")
        taken_at = dt.datetime.now(UTC)
        gtid = None
        if gtid_text:
            gtid = parse_gtid_state(flavor, gtid_text)
        checkpoint = Checkpoint(file=file, position=pos, gtid=gtid, flavor=flavor,
                                server_id=server.get("server_id"), server_uuid=server.get("server_uuid"))
        for (schema, table), tm in maps.items():
            _copy_table(conn, writer, tm, file, pos, gtid_text or None, taken_at, chunk_rows, progress)
        conn.rollback()
        # taken again at the same position (a repair while the source is idle), it is another batch
        dump_id = f"snapshot-{file}.{pos}-{taken_at:%Y%m%dT%H%M%S%fZ}"
        return writer.publish(dump_id=dump_id, start=checkpoint.to_json(), end=checkpoint.to_json(),
                              server=server,
                              extra={"mode": "snapshot", "tables_filter": tables.to_json(),
                                     "schema_history": history.to_json(),
                                     "snapshot_tables": [f"{s}.{t}" for s, t in maps]})
    except BaseException:
        writer.abort()
        raise
    finally:
        conn.close()


def _copy_table(conn, writer: StagingWriter, tm: TableMap, file: str, pos: int,
                gtid: Optional[str], taken_at: dt.datetime, chunk_rows: int,
                progress: Optional[Callable[[str, int, int], None]] = None) -> int:
    """Stage every row of ``tm``'s table as read in the transaction open on ``conn`` (in key
    order when it has a primary key) as the snapshot's rows at ``file:pos``; an empty table is
    staged too, so the merge empties it. Returns the rows staged.

    The rows come from one statement streamed from the server, not from pages of ``WHERE
    (key) > (last)``: the server orders ENUM and SET keys by their index but compares them with
    a value as strings, and collations compare keys that differ in case or trailing spaces as
    equal, so pages would skip or repeat rows. The rows staged are then compared with the
    table's ``COUNT(*)`` in the same transaction: a difference raises :class:`SnapshotError`
    with both numbers, before anything is published."""
    name = f"{tm.schema}.{tm.table}"
    written = 0
    cols = select_list(tm)
    source = f"{quote_identifier(tm.schema)}.{quote_identifier(tm.table)}"
    converters = [_converter(c) for c in tm.columns]
    order = ", ".join(quote_identifier(tm.columns[i].name) for i in tm.primary_key)
    with conn.cursor() as cur:  # a slow stager must not make the server drop the stream
        cur.execute("SET SESSION net_write_timeout = GREATEST(@@net_write_timeout, 3600)")
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT {cols} FROM {source}" + (f" ORDER BY {order}" if order else ""))
        while True:
            rows = cur.fetchmany(chunk_rows)
            if not rows:
                break
            n = writer.add_snapshot_rows(tm, _convert_rows(rows, converters), binlog_file=file,
                                         position=pos, gtid=gtid, taken_at=taken_at, first_index=written)
            written += n
            if progress is not None and n:
                progress(name, n, written)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {source}")
        counted = int(cur.fetchone()[0])
    if counted != written:
        raise SnapshotError(f"{name}: the snapshot staged {written} rows, but its COUNT(*) is {counted} "
                            f"in the same transaction; nothing was published: take the snapshot again, "
                            f"and report the table's definition if it happens again")
    if written == 0:
        writer.add_snapshot_rows(tm, [], binlog_file=file, position=pos, gtid=gtid,
                                 taken_at=taken_at, first_index=0)
    log.info("snapshot of %s.%s: %d rows", tm.schema, tm.table, written)
    return written
