"""Checks that a server can feed a CDC load, each failure saying which setting to change."""
from __future__ import annotations

from dataclasses import dataclass, field

import pymysql

from .errors import BinlogAccessDeniedError, ReplicaError


class PreflightError(ReplicaError):
    """The server is configured in a way a row-based CDC load cannot work with."""


@dataclass
class PreflightReport:
    settings: dict
    warnings: list = field(default_factory=list)

    @property
    def full_row_metadata(self) -> bool:
        return self.settings.get("binlog_row_metadata", "").upper() == "FULL"


_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id",
              "binlog_checksum", "gtid_mode", "log_bin_compress", "binlog_row_value_options")
_GRANTS_OK = ("ALL PRIVILEGES", "REPLICATION SLAVE", "REPLICATION REPLICA")


def preflight(replica) -> PreflightReport:
    """Read the server's binlog settings and the user's grants; raise :class:`PreflightError`
    for a setting that makes CDC impossible, return warnings for the ones that degrade it."""
    if replica.conn is None:
        replica.connect()
    with replica.conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s)" % ",".join(["%s"] * len(_VARIABLES)),
                    _VARIABLES)
        settings = {name.lower(): str(value) for name, value in cur.fetchall()}
        try:
            cur.execute("SHOW GRANTS")
            grants = " ".join(row[0] for row in cur.fetchall()).upper()
        except pymysql.err.MySQLError:
            grants = ""
    report = PreflightReport(settings)
    if settings.get("log_bin", "OFF").upper() not in ("ON", "1"):
        raise PreflightError("binary logging is off (log_bin=OFF)",
                             "start the server with log_bin (and binlog_format=ROW)")
    fmt = settings.get("binlog_format", "").upper()
    if fmt != "ROW":
        raise PreflightError(f"binlog_format is {fmt or 'unknown'}; row changes are only logged with ROW",
                             "set binlog_format=ROW in the server configuration (and SET GLOBAL "
                             "binlog_format='ROW'), then run a new snapshot")
    if str(replica.server_id) == settings.get("server_id"):
        raise PreflightError(f"the connection's server_id {replica.server_id} equals the server's own",
                             "choose a server_id no replica of this server uses (connection extra 'server_id')")
    if grants and not any(g in grants for g in _GRANTS_OK):
        raise BinlogAccessDeniedError(
            f"user {replica.user} lacks the REPLICATION SLAVE privilege",
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO the user "
            "(MariaDB 10.5+: REPLICATION SLAVE, BINLOG MONITOR)")
    image = settings.get("binlog_row_image", "FULL").upper()
    if image != "FULL":
        report.warnings.append(
            f"binlog_row_image={image}: updates log only changed columns; absent columns keep their "
            "current value in the lakehouse. FULL is recommended")
    if settings.get("binlog_row_metadata", "MINIMAL").upper() != "FULL":
        report.warnings.append(
            "binlog_row_metadata is not FULL: column names and ENUM/SET labels come from the "
            "load's schema history (seeded from information_schema at the snapshot, following "
            "the DDL in the binlog); FULL adds a cross-check of the names")
    return report
