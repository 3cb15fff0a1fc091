"""One chunk of a watermark snapshot read from the server, with pymysql or into Arrow with
connectorx, and the binlog position that is its high watermark."""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence

import pyarrow as pa

from .. import arrow_reader
from ..snapshot import _convert_rows, quote_identifier, select_list, snapshot_binlog_position
from ...codec.gtid import Flavor
from ...staging.contract import arrow_type_for
from .chunks import Chunk, Table
from .positions import VISIBLE_TRIES, VISIBLE_WAIT, at_or_after, binlog_status, not_visible, visibility_guard


def read_chunk(conn, flavor: str, t: Table, cols: str, source: str, key_cols: str, converters: list,
               last: Optional[tuple], limit: Optional[int],
               after: Optional[tuple[str, int]]) -> tuple[Chunk, bool, str, int, float]:
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
        for attempt in range(VISIBLE_TRIES):
            began = time.monotonic()
            if flavor == Flavor.MARIADB:  # the read and its exact binlog position, in one short transaction
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute(sql, args)
            fetched = cur.fetchall()
            if flavor != Flavor.MARIADB:
                break
            hw_file, hw_pos = snapshot_binlog_position(cur)
            cur.execute("COMMIT")
            if at_or_after((hw_file, hw_pos), after):
                break
            time.sleep(VISIBLE_WAIT)  # a transaction the follower read is not committed yet: again
        else:
            raise not_visible(after)
        seconds = time.monotonic() - began
        rows = _convert_rows(fetched, converters)
    if flavor != Flavor.MARIADB:  # read after the chunk: what the read saw is before it
        hw_file, hw_pos, _ = binlog_status(conn, flavor, gtid=False)
    full = limit is not None and len(rows) == limit
    upto = tuple(rows[-1][i] for i in t.key) if full else None
    chunk = Chunk(t, last, upto, {tuple(r[i] for i in t.key): tuple(r) for r in rows})
    return chunk, full, hw_file, hw_pos, seconds


def read_chunk_arrow(conn, flavor: str, t: Table, source: str, key_cols: str, last: Optional[tuple],
                     limit: Optional[int], after: Optional[tuple[str, int]], *,
                     alone: bool = True) -> tuple[Chunk, bool, str, int, float]:
    """One chunk read into Arrow with connectorx (see :func:`read_chunk`); raises
    :class:`~airflow_provider_binlog.capture.arrow_reader.ArrowReadError` when connectorx
    cannot read it.

    connectorx reads on connections of its own, each chunk's read one statement (or one per
    connection of the budget). On MariaDB it starts once a consistent snapshot is at or past
    ``after``, the end of the last transaction the follower read (:func:`visibility_guard`):
    every transaction the follower read is visible to it, and the changes after that up to the
    high watermark, read after it, are replayed."""
    reader = t.arrow
    if reader is None:
        raise arrow_reader.ArrowReadError(f"{t.tm.schema}.{t.tm.table}: no Arrow reader")
    if alone:
        visibility_guard(conn, flavor, after)
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
        hw_file, hw_pos, _ = binlog_status(conn, flavor, gtid=False)
    n = len(arrays[0]) if arrays else 0
    if split is None:
        full = limit is not None and n == limit
        if full:
            upto = tuple(arrays[i][n - 1].as_py() for i in t.key)
    chunk = Chunk(t, last, upto, arrays=list(arrays))
    return chunk, full, hw_file, hw_pos, seconds


def table_sql(t: Table) -> tuple[str, str, str]:
    """The table's column list, its name and its key columns, quoted for SQL."""
    tm = t.tm
    return (select_list(tm),
            f"{quote_identifier(tm.schema)}.{quote_identifier(tm.table)}",
            ", ".join(quote_identifier(tm.columns[i].name) for i in t.key))
