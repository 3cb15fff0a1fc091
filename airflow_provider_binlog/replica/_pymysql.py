"""The only place that touches pymysql's private API.

A replication dump is a command whose answer is an endless sequence of packets, which
pymysql's public cursor API cannot express. These two functions are pinned by
``tests/test_replica_pymysql_adapter.py`` so an incompatible pymysql release fails loudly.
"""
from __future__ import annotations

import pymysql


def send_command(conn: pymysql.connections.Connection, command: int, payload: bytes) -> None:
    conn._execute_command(command, payload)


def read_packet(conn: pymysql.connections.Connection) -> bytes:
    """Read one (reassembled) packet; pymysql raises its own errors for error packets."""
    return conn._read_packet().get_all_data()
