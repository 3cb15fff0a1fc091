"""Events read over the replication protocol equal the events decoded from the binlog file."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.codec import read_binlog_file
from airflow_provider_binlog.codec.events import RowsEvent
from airflow_provider_binlog.replica import (BinlogAccessDeniedError, BinlogPurgedError,
                                             ReplicaConnection)
from airflow_provider_binlog.replica import _pymysql, protocol


def _replica(server, **kw):
    kw.setdefault("user", server.user)
    kw.setdefault("password", server.password)
    return ReplicaConnection(server.host, server.port, server_id=900 + server.port % 100, **kw)


@pytest.fixture(scope="module")
def workload(mariadb):
    mariadb.execute("CREATE DATABASE IF NOT EXISTS replica_t")
    mariadb.execute("DROP TABLE IF EXISTS replica_t.items")
    mariadb.execute("CREATE TABLE replica_t.items (id INT PRIMARY KEY, name VARCHAR(20), "
                    "price DECIMAL(8,2), seen DATETIME(6))")
    mariadb.flush_binary_logs()
    start_file, start_pos = mariadb.master_status()
    for i in range(50):
        mariadb.execute("INSERT INTO replica_t.items VALUES (%s, %s, %s, '2024-01-02 03:04:05.123456')",
                        (i, f"item-{i}", i * 1.25))
    mariadb.execute("UPDATE replica_t.items SET name = 'changed' WHERE id < 10")
    mariadb.execute("DELETE FROM replica_t.items WHERE id >= 40")
    end_file, end_pos = mariadb.master_status()
    assert end_file == start_file
    return start_file, start_pos, end_pos


def test_streamed_events_equal_the_file_decode(mariadb, workload):
    start_file, start_pos, end_pos = workload
    with _replica(mariadb) as rc:
        # the server starts with an artificial ROTATE and FORMAT_DESCRIPTION (log_pos 0)
        # (the server is shared: later tests may have written past end_pos already)
        streamed = []
        for f, e in rc.stream(start_file, start_pos):
            if f != start_file or e.pos >= end_pos:
                break
            if e.header.log_pos:
                streamed.append((f, e))
    from_file = [e for e in read_binlog_file(mariadb.binlog_path(start_file), start_position=start_pos,
                                             stop_position=end_pos) if e.pos >= start_pos]
    assert [e.pos for _, e in streamed] == [e.pos for e in from_file]
    assert [e for _, e in streamed if isinstance(e, RowsEvent)] == [e for e in from_file if isinstance(e, RowsEvent)]
    rows = [r for _, e in streamed if isinstance(e, RowsEvent) for r in e.rows]
    assert len(rows) == 50 + 10 + 10


def test_mariadb_gtid_dump_starts_at_the_same_event_as_the_file_position(mariadb, workload):
    start_file, start_pos, _ = workload
    with _replica(mariadb) as rc:
        by_pos = [e for _, e in rc.stream(start_file, start_pos) if isinstance(e, RowsEvent)]
    first_gtid = next(e for e in read_binlog_file(mariadb.binlog_path(start_file), start_position=start_pos)
                      if e.type_name == "MARIA_GTID" and e.pos >= start_pos)
    before = f"{first_gtid.domain_id}-{first_gtid.header.server_id}-{first_gtid.seq_no - 1}"
    from airflow_provider_binlog.codec.gtid import MariadbGtidPosition
    with _replica(mariadb) as rc:
        by_gtid = [e for _, e in rc.stream(gtid=MariadbGtidPosition.parse(before)) if isinstance(e, RowsEvent)]
    assert by_gtid == by_pos


def test_purged_binlog_is_a_typed_error_naming_the_oldest_file(mariadb):
    with _replica(mariadb) as rc:
        with pytest.raises(BinlogPurgedError) as info:
            list(rc.stream("mariadb-bin.999999", 4))
    assert "oldest available is mariadb-bin." in str(info.value)
    assert "snapshot" in info.value.hint


def test_bad_password_is_access_denied_without_echoing_it(mariadb):
    with pytest.raises(BinlogAccessDeniedError) as info:
        _replica(mariadb, password="wrong-secret-pw").connect()
    assert "wrong-secret-pw" not in str(info.value)


def test_pymysql_private_api_used_by_the_adapter_is_present():
    import pymysql.connections as c
    assert callable(getattr(c.Connection, "_execute_command"))
    assert callable(getattr(c.Connection, "_read_packet"))
    assert callable(getattr(c.MysqlPacket, "get_all_data"))
    assert _pymysql.send_command and _pymysql.read_packet


def test_dump_packets_are_framed_as_the_protocol_says():
    assert protocol.binlog_dump_payload("mysql-bin.000002", 154, 7, non_block=True) == \
        b"\x9a\x00\x00\x00\x01\x00\x07\x00\x00\x00mysql-bin.000002"
    assert protocol.event_from_packet(b"\x00abc") == b"abc"
    assert protocol.event_from_packet(b"\xfe\x00\x00\x02\x00") is None
    reg = protocol.register_slave_payload(5, "h", "u", "p", 3306)
    assert reg == b"\x05\x00\x00\x00\x01h\x01u\x01p\xea\x0c" + b"\x00" * 8
