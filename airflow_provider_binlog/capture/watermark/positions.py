"""The server's binlog positions a watermark snapshot reads (its start, each chunk's high
watermark, its end), and the wait until a read sees every transaction the follower read."""
from __future__ import annotations

import time
from typing import Optional

from ...codec.gtid import Flavor
from ...codec.positions import position_key
from ..snapshot import SnapshotError, binlog_status_row, snapshot_binlog_position

#: tries to read MariaDB's GTID state between two equal binlog positions
_QUIET_TRIES = 5
#: tries, and seconds between them, of a read whose snapshot is still before the follower's position
VISIBLE_TRIES, VISIBLE_WAIT = 400, 0.005


def binlog_status(conn, flavor: str, gtid: bool = True) -> tuple[str, int, Optional[str]]:
    """The server's binlog position now (and its GTID state, unless ``gtid`` is False: MariaDB
    finds it by reading the binlog file up to the position, too slow for every chunk)."""
    with conn.cursor() as cur:
        row = binlog_status_row(cur)
        if row is None:
            raise SnapshotError("the server has no binary log (log_bin is OFF)")
        file, pos = row[0], int(row[1])
        if not gtid:
            return file, pos, None
        if flavor == Flavor.MARIADB:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            state = cur.fetchone()[0]
        else:
            state = row[4] if len(row) > 4 else None
    return file, pos, state or None


def start_position(conn, flavor: str) -> tuple[str, int, Optional[str]]:
    """The first watermark and the GTID state there. Every transaction before it is visible to
    the first chunk's read: MariaDB reads each chunk in (or after) a consistent snapshot, whose
    exact binlog position is at or after it.

    MariaDB: the position of a consistent snapshot (every transaction before it committed in
    the engine), and its GTID state ``@@gtid_binlog_pos`` read between two binlog positions
    equal to it (no transaction written meanwhile, none in flight); only on a server too busy
    for that, ``BINLOG_GTID_POS`` finds it by reading the binlog file from its start (seconds,
    on a large file)."""
    if flavor != Flavor.MARIADB:
        return binlog_status(conn, flavor)
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


def _committed_position(cur) -> tuple[str, int]:
    """MariaDB: the position of a consistent snapshot, opened and closed: every transaction of
    the binlog before it is committed in the engine."""
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    position = snapshot_binlog_position(cur)
    cur.execute("COMMIT")
    return position


def at_or_after(position: tuple[str, int], after: Optional[tuple[str, int]]) -> bool:
    """Whether binlog ``position`` is at or after ``after`` (always, when ``after`` is None)."""
    return after is None or position_key(*position) >= position_key(*after)


def not_visible(after: tuple[str, int]) -> SnapshotError:
    """The error of a read whose snapshot stayed before ``after`` (the follower's position)."""
    return SnapshotError(f"transactions in the binlog before {after[0]}:{after[1]} stayed uncommitted in the "
                         f"engine for {VISIBLE_TRIES * VISIBLE_WAIT:.0f} s and more; take the snapshot again")


def visibility_guard(conn, flavor: str, after: Optional[tuple[str, int]]) -> None:
    """MariaDB: return once a consistent snapshot's position is at or after ``after`` (the
    follower's position): every transaction the follower read is then committed in the engine
    and visible to any read that starts later. (A transaction is written to the binlog, where
    the follower may read it, before the engine commits it.)"""
    if flavor != Flavor.MARIADB or after is None:
        return
    with conn.cursor() as cur:
        for _ in range(VISIBLE_TRIES):
            if at_or_after(_committed_position(cur), after):
                return
            time.sleep(VISIBLE_WAIT)
    raise not_visible(after)
