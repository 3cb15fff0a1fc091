"""The watermark snapshot's Arrow reader (connectorx) stages the same values, of the same types,
as the pymysql reader, for every column type it reads, with masking; what it cannot read
(zero dates, TIME, JSON, BIT) is read with pymysql, or refused by name with reader='arrow'."""
from __future__ import annotations

import pyarrow as pa
from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.capture.arrow_reader import ArrowChunkReader
from airflow_provider_binlog.replica import ReplicaConnection
from airflow_provider_binlog.capture.snapshot import SnapshotError
from airflow_provider_binlog.staging.masking import Masking
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot

DB = "arrowread"
COLUMNS = {
    "ti": "TINYINT", "tb": "TINYINT(1)", "tu": "TINYINT UNSIGNED", "si": "SMALLINT", "su": "SMALLINT UNSIGNED",
    "mi": "MEDIUMINT", "mu": "MEDIUMINT UNSIGNED", "i": "INT", "iu": "INT UNSIGNED", "bi": "BIGINT",
    "bu": "BIGINT UNSIGNED", "f": "FLOAT", "d": "DOUBLE", "de": "DECIMAL(12,2)", "de28": "DECIMAL(28,10)",
    "da": "DATE", "dt0": "DATETIME", "dt6": "DATETIME(6)", "ts3": "TIMESTAMP(3) NULL", "ts0": "TIMESTAMP NULL",
    "y": "YEAR", "c": "CHAR(5)", "vc": "VARCHAR(20)", "tx": "TEXT", "l1": "VARCHAR(10) CHARACTER SET latin1",
    "bn": "BINARY(4)", "vb": "VARBINARY(10)", "bl": "BLOB", "en": "ENUM('a','b')", "st": "SET('x','y')",
    "u": "UUID", "i6": "INET6", "secret": "VARCHAR(30)",
}
EXTREMES = ("-128, 1, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808, "
            "18446744073709551615, 1.5, -2.25e300, -1234567890.12, 123456789012345678.0123456789, "
            "'1000-01-01', '9999-12-31 23:59:59', '2024-02-29 12:34:56.123456', '2038-01-19 03:14:07.999', "
            "'1970-01-01 00:00:01', 2155, 'ab', 'héllo', 'tëxt 😀', 'é', X'00010203', X'ff00', X'deadbeef', "
            "'b', 'x,y', '123e4567-e89b-12d3-a456-426614174000', '::ffff:1.2.3.4', 'card-4111'")


def replica(server):
    return lambda: ReplicaConnection(server.host, server.port, server.user, server.password, server_id=4646)


def url(server) -> str:
    return ArrowChunkReader.url_for(server.host, server.port, server.user, server.password, "information_schema")


def snapshot(server, path, table: str, reader: str, **kwargs):
    return take_watermark_snapshot(lambda: server.connect(), replica(server), staging_dir=path,
                                   tables=TableFilter([f"{DB}.{table}"]), flavor="mariadb",
                                   server={"server_id": server.server_id}, reader=reader, arrow_url=url(server),
                                   **kwargs)


def staged(manifest) -> pa.Table:
    (entry,) = manifest.tables
    table = pa.concat_tables([read_parquet(p) for p in manifest.files(entry)])
    return table.sort_by([("_row", "ascending")])


@pytest.fixture(scope="module")
def source(mariadb):
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    mariadb.execute(f"CREATE TABLE {DB}.types (id INT PRIMARY KEY, "
                    + ", ".join(f"{k} {v}" for k, v in COLUMNS.items()) + ")")
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.types (id) VALUES (1)")  # every column NULL (or its default)
        cur.execute(f"INSERT INTO {DB}.types VALUES (2, {EXTREMES})")
        cur.executemany(f"INSERT INTO {DB}.types (id, i, de, dt6, vc, ts3, secret) VALUES "
                        f"(%s, %s, %s, '2024-01-01 00:00:00' + INTERVAL %s SECOND, %s, "
                        f"'2024-01-01 00:00:00' + INTERVAL %s SECOND, %s)",
                        [(k, k * 3, k / 100, k, f"v{k}", k, f"s{k}") for k in range(3, 1003)])
        cur.execute("SET SESSION sql_mode = ''")  # zero dates, as old applications wrote them
        cur.execute(f"CREATE TABLE {DB}.zeros (id INT PRIMARY KEY, da DATE, dt DATETIME, ts TIMESTAMP NULL)")
        cur.executemany(f"INSERT INTO {DB}.zeros VALUES (%s, %s, %s, %s)",
                        [(k, "2024-01-02", "2024-01-02 03:04:05", "2024-01-02 03:04:05") for k in range(1, 51)]
                        + [(51, "0000-00-00", "0000-00-00 00:00:00", "0000-00-00 00:00:00")]
                        + [(k, "2024-01-02", "2024-01-02 03:04:05", None) for k in range(52, 101)])
        cur.execute(f"CREATE TABLE {DB}.stamps (at TIMESTAMP(3) NOT NULL PRIMARY KEY, f FLOAT, v INT)")
        cur.executemany(f"INSERT INTO {DB}.stamps VALUES ('2024-03-01 00:00:00' + INTERVAL %s MINUTE, %s, %s)",
                        [(k * 37, 1.2345678 * k, k) for k in range(100)])
        cur.execute(f"CREATE TABLE {DB}.others (id INT PRIMARY KEY, t TIME(3), j JSON, b BIT(5))")
        cur.execute(f"INSERT INTO {DB}.others VALUES (1, '-12:34:56.5', '{{\"a\": 1.50}}', b'10101'), "
                    f"(2, NULL, NULL, NULL)")
    conn.close()
    return mariadb


def test_the_arrow_reader_stages_every_type_as_the_pymysql_reader_does(source, tmp_path):
    masking = Masking.parse({"hash": [f"{DB}.types.secret"], "truncate": {f"{DB}.types.tx": 2}}, secret="k")
    # the server's own time zone is not UTC: TIMESTAMP values must not move
    source.execute("SET GLOBAL time_zone = '+05:00'")
    try:
        by_arrow = snapshot(source, tmp_path / "a", "types", "arrow", chunk_rows=300, read_connections=2,
                            masking=masking)
    finally:
        source.execute("SET GLOBAL time_zone = SYSTEM")
    by_rows = snapshot(source, tmp_path / "p", "types", "pymysql", chunk_rows=300, masking=masking)
    assert by_arrow.data["snapshot_stats"]["arrow_chunks"] == 4  # 1002 rows in chunks of 300
    assert by_rows.data["snapshot_stats"]["arrow_chunks"] == 0
    a, p = staged(by_arrow), staged(by_rows)
    assert a.schema == p.schema
    assert a.num_rows == p.num_rows == 1002
    assert a.column("_after").to_pylist() == p.column("_after").to_pylist()
    extremes = a.column("_after")[1].as_py()
    assert extremes["bu"] == 18446744073709551615 and extremes["ts3"].isoformat() == "2038-01-19T03:14:07.999000+00:00"
    assert extremes["tx"] == "të" and extremes["secret"] != "card-4111" and len(extremes["secret"]) == 64


def test_zero_dates_are_read_with_pymysql_from_the_chunk_holding_them(source, tmp_path):
    by_arrow = snapshot(source, tmp_path / "a", "zeros", "auto", chunk_rows=40)
    by_rows = snapshot(source, tmp_path / "p", "zeros", "pymysql", chunk_rows=40)
    # chunk 1 (ids 1..40) into Arrow; chunk 2 holds the zero dates: it and chunk 3 by pymysql
    assert (by_arrow.data["snapshot_stats"]["arrow_chunks"], by_arrow.data["snapshot_stats"]["chunks"]) == (1, 3)
    assert staged(by_arrow).column("_after").to_pylist() == staged(by_rows).column("_after").to_pylist()
    assert by_arrow.data["invalid_temporals"] == by_rows.data["invalid_temporals"] == 3
    zero = staged(by_arrow).column("_after")[50].as_py()
    assert zero == {"id": 51, "da": None, "dt": None, "ts": None}


def test_types_the_arrow_reader_does_not_read_go_through_pymysql_or_are_refused_by_name(source, tmp_path):
    auto = snapshot(source, tmp_path / "a", "others", "auto")
    assert auto.data["snapshot_stats"]["arrow_chunks"] == 0
    rows = staged(auto).column("_after").to_pylist()
    assert rows[0] == {"id": 1, "t": -45296500000, "j": '{"a": 1.50}', "b": 21}
    with pytest.raises(SnapshotError, match=r"arrowread\.others: column t is time"):
        snapshot(source, tmp_path / "b", "others", "arrow")


def test_a_zero_timestamp_read_into_arrow_is_null_and_counted(source, tmp_path):
    source.execute(f"CREATE TABLE IF NOT EXISTS {DB}.zero_ts (id INT PRIMARY KEY, ts TIMESTAMP NULL)")
    conn = source.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute(f"REPLACE INTO {DB}.zero_ts VALUES (1, '0000-00-00 00:00:00'), (2, '2001-02-03 04:05:06'), "
                    f"(3, NULL)")
    conn.close()
    got = snapshot(source, tmp_path / "a", "zero_ts", "arrow")
    assert got.data["snapshot_stats"]["arrow_chunks"] == 1
    assert [r["ts"] for r in staged(got).column("_after").to_pylist()] == [
        None, pa.scalar(981173106_000000, pa.timestamp("us", tz="UTC")).as_py(), None]
    assert got.data["invalid_temporals"] == 1


def test_a_timestamp_key_chunks_in_utc_whatever_the_servers_time_zone(source, tmp_path):
    """Chunk bounds of a TIMESTAMP key go to connectorx's own connections as UTC text: with the
    server's time zone +05:00, no row is skipped or read twice; FLOAT values are the stored
    single-precision values (as the binlog has them) through both readers."""
    source.execute("SET GLOBAL time_zone = '+05:00'")
    try:
        by_arrow = snapshot(source, tmp_path / "a", "stamps", "arrow", chunk_rows=30)
        by_rows = snapshot(source, tmp_path / "p", "stamps", "pymysql", chunk_rows=30)
    finally:
        source.execute("SET GLOBAL time_zone = SYSTEM")
    assert by_arrow.data["snapshot_stats"]["arrow_chunks"] == by_arrow.data["snapshot_stats"]["chunks"] == 4
    a, p = staged(by_arrow).column("_after").to_pylist(), staged(by_rows).column("_after").to_pylist()
    assert a == p and [r["v"] for r in a] == list(range(100))
    assert a[7]["f"] == float(pa.array([1.2345678 * 7], pa.float32())[0].as_py())
