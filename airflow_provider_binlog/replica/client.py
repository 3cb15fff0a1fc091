"""A replication connection on pymysql: register as a replica and stream decoded events.

pymysql handles authentication (every plugin it supports, caching_sha2_password included) and
TLS; this module adds the replica handshake and hands every event packet to the sans-IO codec.
"""
from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Iterator, Optional

import pymysql

from ..codec import BinlogError, EventDecoder
from ..codec.events import Event, RotateEvent
from ..codec.gtid import Flavor
from . import _pymysql, protocol
from .errors import (
    BinlogAccessDeniedError,
    BinlogPurgedError,
    ReplicaError,
    ReplicationConnectionLost,
    ServerUnavailableError,
)

ER_ACCESS_DENIED = 1045
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_MASTER_FATAL_READING_BINLOG = 1236
CR_SERVER_LOST = (2013, 2006)
CR_CANNOT_CONNECT = (2002, 2003, 2013, 2006)   # refused, unreachable, lost during the handshake
ER_SERVER_SHUTDOWN = (1053, 1927)             # shutdown in progress, connection killed
LOG_EVENT_ARTIFICIAL_F = 0x20
# the ER_MASTER_FATAL_READING_BINLOG texts that mean "no longer there" (file or GTIDs purged)
_PURGED_MESSAGE = re.compile(r"could not find first log file|purged|not in the master's binlog|"
                             r"could not find gtid|is not in the binlog|no longer|not found in the binlog",
                             re.I)
MARIA_SLAVE_CAPABILITY_MINE = 4


@dataclass(frozen=True)
class ServerInfo:
    version: str
    flavor: Flavor
    server_id: int
    server_uuid: Optional[str]
    binlog_checksum: str   # "CRC32" | "NONE"


def _gtid_text(value) -> str:
    return str(value) if value is not None else ""


class ReplicaConnection:
    """One replica session. ``connect_kwargs`` go to :func:`pymysql.connect` (ssl, timeouts …)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 3306, user: str = "root",
                 password: str = "", *, server_id: int = 65001, flavor: str = "auto",
                 heartbeat_seconds: float = 30.0, **connect_kwargs) -> None:
        if flavor not in ("auto", Flavor.MYSQL, Flavor.MARIADB):
            raise ValueError(f"flavor must be auto, mysql or mariadb, not {flavor!r}")
        self.host, self.port, self.user = host, port, user
        self._password = password
        self.server_id = server_id
        self.requested_flavor = flavor
        self.heartbeat_seconds = heartbeat_seconds
        self.connect_kwargs = connect_kwargs
        self.conn: Optional[pymysql.connections.Connection] = None
        self.info: Optional[ServerInfo] = None

    def __repr__(self) -> str:  # never show the password
        return f"ReplicaConnection({self.user}@{self.host}:{self.port}, server_id={self.server_id})"

    # ------------------------------------------------------------------ session
    def connect(self) -> ServerInfo:
        try:
            self.conn = pymysql.connect(host=self.host, port=self.port, user=self.user,
                                        password=self._password, autocommit=True,
                                        charset="utf8mb4", **self.connect_kwargs)
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            text = str(exc.args[-1]) if exc.args else ""
            if code == ER_ACCESS_DENIED:
                raise BinlogAccessDeniedError(
                    f"access denied for {self.user}@{self.host}:{self.port}: {text}",
                    "check the user name and password of the connection, and its TLS "
                    "settings if the server requires secure transport") from None
            transient = code in CR_CANNOT_CONNECT + ER_SERVER_SHUTDOWN and not re.search(
                r"ssl|certificate|tls", text, re.I)
            error = ServerUnavailableError if transient else ReplicaError
            raise error(f"cannot connect to {self.host}:{self.port}: {exc.args[-1]}",
                        "check host, port, TLS options and that the server is up") from None
        version = self._scalar("SELECT VERSION()")
        requested = self.requested_flavor
        flavor = Flavor.of_server_version(version) if requested == "auto" else Flavor.of(requested)
        server_uuid = self._scalar("SELECT @@server_uuid") if flavor is Flavor.MYSQL else None
        self.info = ServerInfo(version, flavor, int(self._scalar("SELECT @@server_id")),
                               server_uuid, str(self._scalar("SELECT @@global.binlog_checksum")).upper())
        return self.info

    def _scalar(self, sql: str):
        with self.conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
        return row[0] if row else None

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def __enter__(self):
        if self.conn is None:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def master_status(self) -> tuple:
        """(file, position, executed GTID set text) of the server now."""
        if self.conn is None:
            self.connect()
        row = None
        for sql in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
            try:
                with self.conn.cursor() as cur:
                    cur.execute(sql)
                    row = cur.fetchone()
                break
            except pymysql.err.ProgrammingError:
                continue
            except pymysql.err.OperationalError as exc:
                if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
                    raise BinlogAccessDeniedError(
                        f"{self.user} may not read the binlog position",
                        "GRANT REPLICATION CLIENT (MariaDB: BINLOG MONITOR) ON *.* to the user") from None
                raise
        if row is None:
            raise ReplicaError("the server has binary logging disabled",
                               "start it with log_bin (and binlog_format=ROW)")
        gtid = row[4] if len(row) > 4 else None
        if self.info and self.info.flavor == Flavor.MARIADB:
            gtid = self._scalar("SELECT @@global.gtid_binlog_pos")
        return row[0], int(row[1]), gtid or ""

    # ------------------------------------------------------------------ dump
    def _prepare_session(self, gtid=None) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @master_heartbeat_period = %s", (int(self.heartbeat_seconds * 1e9),))
            if self.info.flavor == Flavor.MARIADB:
                cur.execute("SET @mariadb_slave_capability = %s", (MARIA_SLAVE_CAPABILITY_MINE,))
                if gtid is not None:
                    cur.execute("SET @slave_connect_state = %s", (_gtid_text(gtid),))
                    cur.execute("SET @slave_gtid_strict_mode = 0")
                    cur.execute("SET @slave_gtid_ignore_duplicates = 0")

    def stream(self, file: Optional[str] = None, position: int = 4, *, gtid=None,
               non_block: bool = True, decoder: Optional[EventDecoder] = None,
               register: bool = True, **decoder_kwargs) -> Iterator[tuple[str, Event]]:
        """Yield ``(binlog file, event)`` from (file, position) or from a GTID set/position.

        With ``non_block`` the server ends the stream when it reaches its current end. With
        ``register=False`` the session neither registers as a replica nor uses the server id
        (it reads as server id 0, as ``mysqlbinlog`` does): a short read next to a running
        load, which a replica of the same server id would displace.
        """
        server_id = self.server_id if register else 0
        if self.conn is None:
            self.connect()
        info = self.info
        try:
            self._prepare_session(gtid)
            if register:
                _pymysql.send_command(self.conn, protocol.COM_REGISTER_SLAVE,
                                      protocol.register_slave_payload(self.server_id, socket.gethostname()))
                _pymysql.read_packet(self.conn)
            if gtid is not None and info.flavor == Flavor.MYSQL:
                payload = protocol.binlog_dump_gtid_payload(gtid.encode(), server_id, non_block=non_block)
                _pymysql.send_command(self.conn, protocol.COM_BINLOG_DUMP_GTID, payload)
            else:
                if gtid is not None:  # MariaDB: position comes from @slave_connect_state
                    file, position = "", 4
                if file is None:
                    raise ValueError("give a binlog file (and position) or a GTID position")
                payload = protocol.binlog_dump_payload(file, position, server_id, non_block=non_block,
                                                       annotate_rows=info.flavor == Flavor.MARIADB)
                _pymysql.send_command(self.conn, protocol.COM_BINLOG_DUMP, payload)
        except pymysql.err.MySQLError as exc:
            raise self._translate(exc, file, gtid) from None
        decoder = decoder or EventDecoder(
            f"{self.host}:{self.port}", checksum_alg=1 if info.binlog_checksum == "CRC32" else 0,
            from_stream=True, **decoder_kwargs)
        current_file = file or ""
        current_pos = position
        try:
            while True:
                try:
                    packet = _pymysql.read_packet(self.conn)
                except pymysql.err.MySQLError as exc:
                    raise self._translate(exc, current_file, gtid) from None
                data = protocol.event_from_packet(packet)
                if data is None:
                    return
                size = int.from_bytes(data[9:13], "little")
                log_pos = int.from_bytes(data[13:17], "little")
                flags = int.from_bytes(data[17:19], "little")
                artificial = bool(flags & LOG_EVENT_ARTIFICIAL_F) or log_pos == 0
                pos = current_pos if artificial or log_pos < size else log_pos - size
                try:
                    event = decoder.decode(data, pos)
                except BinlogError as exc:  # name the binlog file, not only the server
                    exc.source = f"{self.host}:{self.port} {current_file}"
                    raise exc.at(None, None) from None
                if isinstance(event, RotateEvent):
                    # a real ROTATE is the last event of its file; an artificial one names
                    # the file the stream continues in
                    if artificial:
                        current_file, current_pos = event.next_file, event.position
                        yield current_file, event
                    else:
                        yield current_file, event
                        current_file, current_pos = event.next_file, event.position
                    continue
                if not artificial:
                    current_pos = log_pos
                yield current_file, event
        finally:
            # a replication session cannot run other commands after a dump: the next
            # call opens a new one
            self.close()

    def _translate(self, exc: Exception, file, gtid) -> Exception:
        code = exc.args[0] if exc.args else None
        text = exc.args[-1] if exc.args else str(exc)
        if code == ER_MASTER_FATAL_READING_BINLOG and not _PURGED_MESSAGE.search(text or ""):
            # the server cannot read its own binlog (damaged, truncated, an event too large)
            where = f"GTIDs {gtid}" if gtid is not None else f"binlog {file}"
            return ReplicaError(f"the server failed reading {where}: {text}",
                                "the binlog on the server is damaged or truncated at that point; "
                                "check the server's binlog files (mariadb-binlog / mysqlbinlog), "
                                "or take a new snapshot (backfill mode 'snapshot') to go past it")
        if code == ER_MASTER_FATAL_READING_BINLOG:
            first = self._first_available()
            where = f"GTIDs {gtid}" if gtid is not None else f"binlog {file}"
            return BinlogPurgedError(
                f"the server can no longer serve {where}: {text}; the oldest available is {first}",
                "the binlogs after the checkpoint were purged: take a new snapshot (backfill "
                "mode 'snapshot') and raise binlog_expire_logs_seconds / expire_logs_days")
        if code in (ER_ACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED):
            return BinlogAccessDeniedError(
                f"{self.user} may not read the binlog: {text}",
                "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO the user")
        if code in CR_SERVER_LOST + ER_SERVER_SHUTDOWN:
            return ReplicationConnectionLost(f"replication stream lost: {text}",
                                             "reconnect and resume from the last transaction boundary")
        return ReplicaError(f"replication failed: {text}")

    def _first_available(self) -> str:
        try:
            probe = pymysql.connect(host=self.host, port=self.port, user=self.user,
                                    password=self._password, **self.connect_kwargs)
            with probe.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                files = cur.fetchall()
                purged = ""
                try:
                    cur.execute("SELECT @@global.gtid_purged")
                    purged = cur.fetchone()[0] or ""
                except pymysql.err.MySQLError:
                    pass
            probe.close()
            first = files[0][0] if files else "none"
            return f"{first}" + (f" (gtid_purged {purged})" if purged else "")
        except pymysql.err.MySQLError:
            return "unknown"
