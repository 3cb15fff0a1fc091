"""Replication protocol packets (pure functions, no I/O).

COM_REGISTER_SLAVE, COM_BINLOG_DUMP and COM_BINLOG_DUMP_GTID payloads, and the framing of the
packets a server sends back during a dump (``00`` + one event, ``FE`` = end of stream).
"""
from __future__ import annotations

import struct
from typing import Optional

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_THROUGH_POSITION = 0x02
BINLOG_THROUGH_GTID = 0x04
MARIADB_BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02


def _lenstr(value: str) -> bytes:
    raw = value.encode("utf-8")[:255]
    return struct.pack("<B", len(raw)) + raw


def register_slave_payload(server_id: int, hostname: str = "", user: str = "", password: str = "",
                           port: int = 0) -> bytes:
    return (struct.pack("<I", server_id) + _lenstr(hostname) + _lenstr(user) + _lenstr(password)
            + struct.pack("<HII", port, 0, 0))


def binlog_dump_payload(file: str, position: int, server_id: int, *, non_block: bool,
                        annotate_rows: bool = False) -> bytes:
    flags = (BINLOG_DUMP_NON_BLOCK if non_block else 0) | \
        (MARIADB_BINLOG_SEND_ANNOTATE_ROWS_EVENT if annotate_rows else 0)
    return struct.pack("<IHI", position, flags, server_id) + file.encode("utf-8")


def binlog_dump_gtid_payload(gtid_set_encoded: bytes, server_id: int, *, file: str = "",
                             position: int = 4, non_block: bool) -> bytes:
    flags = BINLOG_THROUGH_GTID | (BINLOG_DUMP_NON_BLOCK if non_block else 0)
    name = file.encode("utf-8")
    return (struct.pack("<HII", flags, server_id, len(name)) + name + struct.pack("<Q", position)
            + struct.pack("<I", len(gtid_set_encoded)) + gtid_set_encoded)


def event_from_packet(packet: bytes) -> Optional[bytes]:
    """The event bytes of a dump packet, or None at the end of a non-blocking dump."""
    if not packet:
        raise ValueError("empty replication packet")
    marker = packet[0]
    if marker == 0x00:
        return packet[1:]
    if marker == 0xFE and len(packet) < 9:
        return None
    raise ValueError(f"unexpected replication packet starting with 0x{marker:02x}")
