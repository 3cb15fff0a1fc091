"""One table of a watermark snapshot read in one consistent transaction instead of key chunks:
the fallback for a table without a usable key (no primary key, no unique key of NOT NULL
columns), whose rows the binlog's changes cannot be matched to in a chunk.

The transaction's binlog position comes with it (:func:`.snapshot.snapshot_position`: on
MariaDB no lock; on MySQL a short ``FLUSH TABLES WITH READ LOCK``). The rows are staged as the
snapshot's rows at that position, streamed from the server a chunk at a time; the watermark
follower then stages the table's binlog changes from that position on, and drops those before
it (the read holds them). Such a table is merged as a change log (it has no key), so a row it
holds twice stays twice.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Callable, Optional

from ..codec.events import TableMap
from ..codec.gtid import Flavor
from ..staging import StagingWriter
from .snapshot import _copy_table, snapshot_position

log = logging.getLogger(__name__)


def read_table_consistently(conn: Any, flavor: str, writer: StagingWriter, tm: TableMap, *, chunk_rows: int,
                            taken_at: dt.datetime,
                            progress: Optional[Callable[[str, int, int], None]] = None) -> tuple[tuple[str, int], int]:
    """Stage every row of ``tm``'s table as read in one consistent transaction on ``conn`` (an
    autocommit connection, whose transaction is ended here), as the consistent snapshot copies
    a table (:func:`.snapshot._copy_table`). Returns the binlog position the read is at and the
    rows staged; ``progress(table, rows_just_staged, rows_staged)`` after each chunk."""
    name = f"{tm.schema}.{tm.table}"
    log.info("watermark snapshot: %s has no usable key (no primary key, no unique key of NOT NULL columns): "
             "read in one consistent transaction instead%s", name,
             "" if flavor == Flavor.MARIADB else " (a short FLUSH TABLES WITH READ LOCK to take its position)")
    with conn.cursor() as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    file, pos, gtid = snapshot_position(conn, flavor)
    try:
        staged = _copy_table(conn, writer, tm, file, pos, gtid or None, taken_at, chunk_rows, progress)
    finally:
        conn.rollback()
    log.info("watermark snapshot of %s: %d rows read consistently at %s:%d", name, staged, file, pos)
    return (file, pos), staged
