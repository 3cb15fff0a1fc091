"""A watermark snapshot's tables read chunk after chunk: each chunk read, the binlog followed
to its high watermark (the changes replayed on it), the chunk staged, the progress sealed."""
from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

from .. import arrow_reader
from ..consistent_table import read_table_consistently
from ..snapshot import SnapshotError, _converter
from ...staging import StagingWriter
from .chunks import Chunk, Table
from .follower import Follower
from .positions import binlog_status, visibility_guard
from .reads import read_chunk, read_chunk_arrow, table_sql

log = logging.getLogger(__name__)
#: chunk rows sort before every change at their position: their row indexes start here
_FIRST_INDEX = -(2 ** 31)


def stage_chunk(writer: StagingWriter, t: Table, chunk: Chunk, full: bool, hw_file: str, hw_pos: int,
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


def read_table(conn, flavor: str, writer: StagingWriter, follower: Follower, t: Table, chunk_rows: int,
               taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
               seal: Callable[[], None]) -> None:
    """Read the rest of one table, a chunk at a time."""
    tm = t.tm
    name = f"{tm.schema}.{tm.table}"
    cols, source, key_cols = table_sql(t)
    converters = [_converter(c) for c in tm.columns]
    limit = chunk_rows if t.ordered else None  # a text key: the table in one chunk
    while not t.finished:
        if t.arrow is not None:
            invalid = t.arrow.invalid_temporals
            try:
                chunk, full, hw_file, hw_pos, seconds = read_chunk_arrow(
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
            chunk, full, hw_file, hw_pos, seconds = read_chunk(conn, flavor, t, cols, source, key_cols,
                                                               converters, t.done_upto, limit,
                                                               follower.txn_end)
        follower.longest_read = max(follower.longest_read, seconds)
        follower.follow_to(hw_file, hw_pos, chunk)
        staged_rows = stage_chunk(writer, t, chunk, full, hw_file, hw_pos, taken_at)
        seal()
        if progress is not None and staged_rows:
            progress(name, staged_rows, t.rows)
    log.info("watermark snapshot of %s: %d rows in %d chunks", name, t.rows, t.chunks)


def read_consistently(conn, flavor: str, writer: StagingWriter, follower: Follower, t: Table, chunk_rows: int,
                      taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
                      seal: Callable[[], None]) -> None:
    """Read a table without a usable key in one consistent transaction (..consistent_table)."""
    t.read_from, t.rows = read_table_consistently(conn, flavor, writer, t.tm, chunk_rows=chunk_rows,
                                                  taken_at=taken_at, progress=progress)
    t.chunks, t.finished = 1, True
    seal()


def _fall_back(t: Table, exc: Exception) -> None:
    log.warning("watermark snapshot of %s.%s: %s; this chunk and the next ones are read with pymysql",
                t.tm.schema, t.tm.table, exc)
    t.arrow = None


def read_round(conn, flavor: str, writer: StagingWriter, follower: Follower, tables: list[Table],
               chunk_rows: int, taken_at: dt.datetime, progress: Optional[Callable[[str, int, int], None]],
               seal: Callable[[], None], pool: ThreadPoolExecutor) -> None:
    """The next chunk of each of several tables, read into Arrow at once (one connection each);
    the binlog is then followed to one high watermark with every chunk open, so that each
    ends in its state there."""
    after = follower.txn_end
    visibility_guard(conn, flavor, after)
    began = time.monotonic()

    def read(t: Table):
        _, source, key_cols = table_sql(t)
        return read_chunk_arrow(conn, flavor, t, source, key_cols, t.done_upto,
                                chunk_rows if t.ordered else None, after, alone=False)

    futures = [(t, t.arrow.invalid_temporals if t.arrow else 0, pool.submit(read, t)) for t in tables]
    done: list[tuple[Table, Chunk, bool]] = []
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
    hw_file, hw_pos, _ = binlog_status(conn, flavor, gtid=False)
    follower.follow_to(hw_file, hw_pos, [c for _, c, _ in done])
    staged = [(t, stage_chunk(writer, t, chunk, full, hw_file, hw_pos, taken_at)) for t, chunk, full in done]
    seal()
    for t, staged_rows in staged:
        if progress is not None and staged_rows:
            progress(f"{t.tm.schema}.{t.tm.table}", staged_rows, t.rows)
        if t.finished:
            log.info("watermark snapshot of %s.%s: %d rows in %d chunks", t.tm.schema, t.tm.table, t.rows,
                     t.chunks)
