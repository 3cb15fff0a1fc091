"""Where a server's binlog is now, how far a checkpoint lags behind it, and whether the
binlogs the checkpoint needs are still on the server.

Used by the Airflow sensor and trigger; imports no Airflow code.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Optional

import pymysql

from ..checkpoints import Checkpoint
from ..codec.positions import split_binlog_file_name
from ..codec.events import GtidEvent, MariadbGtidEvent, QueryEvent
from ..codec.gtid import Flavor, MariadbGtidPosition, MysqlGtidSet, parse_gtid_state
from .client import ReplicaConnection
from .errors import BinlogPurgedError, ReplicaError
from .identity import require_not_behind, resume_point

log = logging.getLogger(__name__)

RESNAPSHOT_HINT = ("the binlogs after the checkpoint were purged: take a new snapshot (backfill mode "
                   "'snapshot') and keep binlogs longer (binlog_expire_logs_seconds / expire_logs_days)")


@dataclass(frozen=True)
class ServerState:
    """A server's binlog at one moment: current position, retained files, purged GTIDs."""

    target: Checkpoint                 # the current position, as a checkpoint to stop at
    binlogs: tuple                     # ((file name, size in bytes), ...) oldest first
    gtid_purged: str = ""              # MySQL @@gtid_purged ("" on MariaDB)

    @property
    def oldest_file(self) -> Optional[str]:
        return self.binlogs[0][0] if self.binlogs else None


@dataclass
class PositionCheck:
    """A checkpoint compared with the server's current position."""

    start: Checkpoint
    target: Checkpoint
    lag: dict
    oldest_binlog: Optional[str]
    files_of_headroom: Optional[int]
    warnings: list = field(default_factory=list)

    @property
    def has_new_data(self) -> bool:
        if self.lag.get("transactions") is not None:
            return self.lag["transactions"] > 0
        return bool(self.lag.get("bytes"))

    def meets(self, min_bytes: Optional[int] = None, min_transactions: Optional[int] = None) -> bool:
        """New data, and at least ``min_bytes`` binlog bytes and ``min_transactions``
        transactions behind. An unknown lag (None) counts as meeting its threshold when
        there is new data."""
        if not self.has_new_data:
            return False
        nbytes, ntx = self.lag.get("bytes"), self.lag.get("transactions")
        if min_bytes and nbytes is not None and nbytes < min_bytes:
            return False
        if min_transactions and ntx is not None and ntx < min_transactions:
            return False
        return True

    def to_json(self) -> dict:
        return {"start": self.start.to_json(), "target": self.target.to_json(), "lag": dict(self.lag),
                "has_new_data": self.has_new_data, "oldest_binlog": self.oldest_binlog,
                "files_of_headroom": self.files_of_headroom, "warnings": list(self.warnings)}

    def describe(self) -> str:
        lag = self.lag
        parts = [f"{lag.get(k)} {k}" for k in ("bytes", "files", "transactions", "seconds")
                 if lag.get(k) is not None]
        return (f"binlog lag from [{self.start}] to [{self.target}]: "
                + (", ".join(parts) if parts else "unknown"))


def _query(conn, sql: str, args=None) -> list:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def _scalar(conn, sql: str, args=None):
    rows = _query(conn, sql, args)
    return rows[0][0] if rows else None


def read_server_state(replica: ReplicaConnection) -> ServerState:
    """The current position (SHOW BINARY LOG STATUS, or SHOW MASTER STATUS on older servers and
    MariaDB, with ``gtid_binlog_pos`` on MariaDB), the retained binlogs and the purged GTIDs."""
    if replica.conn is None:
        replica.connect()
    info = replica.info
    file, pos, gtid_text = replica.master_status()
    gtid = None
    if gtid_text:
        gtid = parse_gtid_state(info.flavor, gtid_text)
    target = Checkpoint(file=file, position=pos, gtid=gtid, flavor=info.flavor,
                        server_id=info.server_id, server_uuid=info.server_uuid)
    try:
        binlogs = tuple((row[0], int(row[1])) for row in _query(replica.conn, "SHOW BINARY LOGS"))
    except pymysql.err.OperationalError as exc:
        raise ReplicaError(f"{replica.user} may not list the binlogs: {exc.args[-1]}",
                           "GRANT REPLICATION CLIENT (MariaDB: BINLOG MONITOR) ON *.* to the user") from None
    purged = ""
    if info.flavor == Flavor.MYSQL:
        purged = str(_scalar(replica.conn, "SELECT @@global.gtid_purged") or "")
    return ServerState(target, binlogs, purged)


def _mariadb_gtid_at(replica: ReplicaConnection, file: str, pos: int) -> Optional[MariadbGtidPosition]:
    """The server's GTID state at binlog coordinates (MariaDB ``BINLOG_GTID_POS``)."""
    try:
        text = _scalar(replica.conn, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    except pymysql.err.MySQLError as exc:
        log.debug("BINLOG_GTID_POS(%s, %s) failed: %s", file, pos, exc)
        return None
    if text is None:
        return None
    return MariadbGtidPosition(text)


def _mysql_new_transactions(start: MysqlGtidSet, now: MysqlGtidSet) -> MysqlGtidSet:
    """GTIDs of ``now`` committed after ``start``: per source, those above the highest number
    ``start`` holds. Holes below it (a checkpoint that only recorded the GTIDs it saw) are
    not counted as lag."""
    top: dict = {}
    for uuid, tag, _first, last in start.ranges():
        top[(uuid, tag)] = max(top.get((uuid, tag), 0), last)
    ranges = []
    for uuid, tag, first, last in now.ranges():
        low = max(first, top.get((uuid, tag), 0) + 1)
        if low <= last:
            ranges.append((uuid, tag, low, last))
    return MysqlGtidSet.from_ranges(ranges)


def _mariadb_new_transactions(start: MariadbGtidPosition, now: MariadbGtidPosition) -> int:
    total = 0
    for gtid in now:
        mine = start.get(gtid.domain_id)
        total += max(0, gtid.seq_no - (mine.seq_no if mine is not None else 0))
    return total


def _mariadb_range_text(start: MariadbGtidPosition, now: MariadbGtidPosition) -> str:
    """``0-1-5..0-1-9`` per domain that moved: from the checkpoint's GTID to the server's."""
    parts = []
    for gtid in now:
        mine = start.get(gtid.domain_id)
        if mine is None or gtid.seq_no > mine.seq_no:
            parts.append(f"{mine if mine is not None else f'{gtid.domain_id}-none'}..{gtid}")
    return ",".join(parts)


def _file_lag_bytes(binlogs: tuple, start: Checkpoint, target: Checkpoint) -> Optional[int]:
    if start.file == target.file:
        return max(0, target.position - start.position)
    sizes = dict(binlogs)
    lo, hi = start.file_index, target.file_index
    total = 0
    for name, size in binlogs:
        index = split_binlog_file_name(name)[1]
        if name == start.file:
            total += max(0, size - start.position)
        elif lo < index < hi:
            total += size
    if start.file not in sizes:
        return None
    return total + target.position


# long: one branch per checkpoint kind (file position, MySQL GTIDs, MariaDB GTIDs), each with its
# own refusals
def check_position(replica: ReplicaConnection, start: Checkpoint, *, retention_margin_files: int = 1,
                   state: Optional[ServerState] = None) -> PositionCheck:
    """Compare ``start`` with the server's current position.

    Raises :class:`BinlogPurgedError` when binlogs the checkpoint needs are gone (its file is
    older than the oldest retained one, or GTIDs after it are in ``gtid_purged``), and
    :class:`ReplicaError` when the checkpoint is ahead of the server or from another binlog
    series. A checkpoint fewer than ``retention_margin_files`` files after the oldest
    retained binlog (and not in the current file) gets a warning.
    """
    if state is None:
        state = read_server_state(replica)
    info = replica.info
    target = state.target
    warnings: list = []
    oldest = state.oldest_file
    headroom = None
    lag: dict = {"bytes": None, "files": None, "transactions": None, "gtids": None}

    if start.flavor is not None and start.flavor != info.flavor:
        raise ReplicaError(f"the checkpoint is a {start.flavor} position but the server is {info.flavor}",
                           "use a checkpoint taken from this server")
    # a checkpoint of another server (a failover): its GTIDs, not its coordinates
    resumed = resume_point(start, info.server_id, info.server_uuid)
    if resumed is not start:
        require_not_behind(resumed, target.gtid)
        start = resumed

    if start.has_coordinates:
        if start.file_basename != target.file_basename:
            raise ReplicaError(
                f"checkpoint file {start.file} is not of the server's binlog series "
                f"({target.file_basename}.*)",
                "the server's log_bin basename changed or this is another server: take a new snapshot")
        if (start.file_index, start.position) > (target.file_index, target.position):
            raise ReplicaError(
                f"the checkpoint [{start}] is ahead of the server's position [{target}]",
                "the server's binlogs were reset (RESET MASTER) or this is another server: "
                "take a new snapshot")
        if oldest is not None:
            oldest_index = split_binlog_file_name(oldest)[1]
            headroom = start.file_index - oldest_index
            retained = {name for name, _ in state.binlogs}
            if headroom < 0 or start.file not in retained:
                raise BinlogPurgedError(
                    f"binlog {start.file} of the checkpoint [{start}] is no longer on the server; "
                    f"the oldest retained binlog is {oldest}", RESNAPSHOT_HINT)
            if start.file != target.file and headroom < retention_margin_files:
                warnings.append(
                    f"the checkpoint's binlog {start.file} is {headroom} file(s) after the oldest "
                    f"retained one ({oldest}); it may be purged before the next load: load more "
                    "often or keep binlogs longer")
        lag["files"] = target.file_index - start.file_index
        lag["bytes"] = _file_lag_bytes(state.binlogs, start, target)

    if info.flavor == Flavor.MARIADB:
        now = target.gtid if isinstance(target.gtid, MariadbGtidPosition) else MariadbGtidPosition()
        at_start = None
        if start.has_coordinates:
            at_start = _mariadb_gtid_at(replica, start.file, start.position)
        elif isinstance(start.gtid, MariadbGtidPosition):
            at_start = start.gtid
            if oldest is not None:
                first = _mariadb_gtid_at(replica, oldest, 4)
                gone = [g for g in (first or ()) if start.gtid.get(g.domain_id) is not None
                        and start.gtid.get(g.domain_id).seq_no < g.seq_no]
                if gone:
                    raise BinlogPurgedError(
                        f"the transactions after the checkpoint's GTID position {start.gtid} are no "
                        f"longer on the server: the oldest retained binlog {oldest} starts at "
                        f"{first}", RESNAPSHOT_HINT)
        if at_start is not None:
            lag["transactions"] = _mariadb_new_transactions(at_start, now)
            lag["gtids"] = _mariadb_range_text(at_start, now)
    elif isinstance(start.gtid, MysqlGtidSet):
        purged = MysqlGtidSet(state.gtid_purged)
        if not start.has_coordinates and not purged.issubset(start.gtid):
            missing = purged.subtract(start.gtid)
            raise BinlogPurgedError(
                f"GTIDs the checkpoint has not loaded were purged from the server: {missing} "
                f"(gtid_purged {purged})", RESNAPSHOT_HINT)
        if isinstance(target.gtid, MysqlGtidSet):
            new = _mysql_new_transactions(start.gtid, target.gtid)
            lag["transactions"] = new.count()
            lag["gtids"] = str(new)

    if start.has_coordinates and (start.file, start.position) == (target.file, target.position):
        lag["transactions"] = 0 if lag["transactions"] is not None else None
        lag["bytes"] = 0
    check = PositionCheck(start=start, target=target, lag=lag, oldest_binlog=oldest,
                          files_of_headroom=headroom, warnings=warnings)
    lag["seconds"] = 0.0 if not check.has_new_data else lag_seconds(replica, start)
    return check


#: Events that begin a transaction: the source time of the first one after a checkpoint is
#: when the oldest change not loaded was made.
_TRANSACTION_STARTS = (MariadbGtidEvent, GtidEvent, QueryEvent)


def lag_seconds(replica: ReplicaConnection, start: Checkpoint, *, max_events: int = 64) -> Optional[float]:
    """Seconds of source time the load is behind: the server's clock now less the timestamp of
    the first transaction after ``start`` (read with a short binlog read that registers no
    replica, so it never displaces the load's own); ``None`` when it cannot be read (no
    coordinates, no such event among the first ``max_events``, the read refused)."""
    if not start.has_coordinates:
        return None
    probe = copy.copy(replica)
    probe.conn = None
    try:
        now = float(_scalar(replica.conn, "SELECT UNIX_TIMESTAMP()"))
        for n, (_file, event) in enumerate(probe.stream(start.file, start.position, non_block=True,
                                                          register=False, defer_rows=True)):
            if isinstance(event, _TRANSACTION_STARTS) and event.header.timestamp:
                return max(0.0, round(now - event.header.timestamp, 3))
            if n >= max_events:
                break
    except Exception as exc:  # best effort: the lag in seconds is then unknown, the check stands
        log.debug("the source time after [%s] cannot be read: %s", start, exc)
    finally:
        close = getattr(probe, "close", None)
        if close is not None:
            close()
    return None


__all__ = ["PositionCheck", "RESNAPSHOT_HINT", "ServerState", "check_position", "read_server_state"]
