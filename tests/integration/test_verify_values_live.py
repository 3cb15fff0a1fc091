"""The canonical form of verification, live: for every column type of docs/types.md (the
all-types table, zero and invalid dates, DECIMAL(65,30), FLOAT and DOUBLE at their limits and
subnormals, BIT(1) and BIT(64), GEOMETRY, INET4) and for hashed and truncated columns, the text
the server computes in SQL equals, row by row, the text computed with Arrow from the rows as a
snapshot stages them, read both into Arrow and with pymysql."""
from __future__ import annotations


import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.capture.snapshot import table_map_from_information_schema
from airflow_provider_binlog.capture.verify.canonical import column_forms, row_hash_sql, row_text_sql
from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.merge.verify.canonical_arrow import crc32s, row_texts
from airflow_provider_binlog.staging.masking import Masking
from airflow_provider_binlog.staging.row_files import staged_view
from tests.all_types import ALL_TYPES, all_types_row
from tests.integration.test_watermark_snapshot_live import arrow_url, replica_factory

pytestmark = pytest.mark.mariadb

DB = "verify_values"
EDGES = ("id INT PRIMARY KEY, d0 DATE, t0 DATETIME, ts TIMESTAMP(6) NULL, big DECIMAL(65,30), f FLOAT, "
         "db DOUBLE, b1 BIT(1), b64 BIT(64), g GEOMETRY, ip4 INET4, yr YEAR, tu TINYINT UNSIGNED, "
         "l1 VARCHAR(20) CHARACTER SET latin1, ch CHAR(5), tm0 TIME")
EDGE_ROWS = [
    (1, "0000-00-00", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "-0.000000000000000000000000000001",
     "1.401298464324817e-45", "4.9e-324", 1, 2 ** 64 - 1, "POINT(1 2)", "1.2.3.4", 0, 255, "café", "a  ", "-838:59:59"),
    (2, "2024-00-15", "2024-05-00 10:00:00", "2038-01-19 03:14:07.999999", "99999999999999999999999999999999999.9"
     "99999999999999999999999999999", "3.4028234663852886e38", "1.7976931348623157e308", 0, 0, None, None, 2155, 0,
     "", "", "838:59:59"),
    (3, "0000-01-01", "1000-01-01 00:00:00", "1970-01-01 00:00:01", "0", "-0.1", "-2.2250738585072014e-308", None,
     2 ** 63, "LINESTRING(0 0, 1 1)", "255.255.255.255", 1901, 1, "ÿ", None, "00:00:00"),
    (4, "2024-02-30", "9999-12-31 23:59:59", None, "1", "0", "0.1", 1, 1, None, "0.0.0.0", None, None, None, "x",
     None),
    (5, "9999-12-31", None, None, None, None, "1e-310", None, None, None, None, 2024, 128, "a,b", "é", "-00:00:01"),
    # the largest doubles below 2^60 and 2^1: LOG2 rounds them up to the power of two
    (6, None, None, None, None, "16777215", "1152921504606846720", None, None, None, None, None, None, None, None,
     None),
    (7, None, None, None, None, "-1.9999999", "1.9999999999999998", None, None, None, None, None, None, None, None,
     None),
]
MASKED = ("id INT PRIMARY KEY, email VARCHAR(100), phone VARCHAR(20), blob_ VARBINARY(20), n BIGINT UNSIGNED, "
          "born DATE, amount DECIMAL(10,2), secret_ VARCHAR(10), f FLOAT")
MASKED_ROWS = [(1, "ann@example.com", "+41 79 123 45 67", b"\x00\x01\xff", 2 ** 64 - 1, "1990-05-04", "12.50", "x",
                1.5),
               (2, "bé@example.com", "12", b"", 0, "0000-00-00", "-0.01", None, None),
               (3, None, None, None, None, None, None, "y", 2.0)]
MASKING = {"hash": ["verify_values.masked.email", "verify_values.masked.blob_", "verify_values.masked.n",
                    "verify_values.masked.born", "verify_values.masked.amount", "verify_values.masked.f"],
           "truncate": {"verify_values.masked.phone": 4}, "exclude": ["verify_values.masked.secret_"]}


@pytest.fixture(scope="module")
def tables(mariadb):
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    mariadb.execute(f"CREATE TABLE {DB}.all_types ({ALL_TYPES}) DEFAULT CHARSET=utf8mb4")
    conn = mariadb.connect()
    with conn.cursor() as cur:
        for i in range(1, 12):
            cur.execute(f"INSERT INTO {DB}.all_types VALUES ({', '.join(['%s'] * 27)})", all_types_row(i))
        cur.execute(f"INSERT INTO {DB}.all_types (id) VALUES (99)")  # every other column null
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
        cur.execute(f"CREATE TABLE {DB}.edges ({EDGES}) DEFAULT CHARSET=utf8mb4")
        for row in EDGE_ROWS:
            values = list(row)
            geometry = values[9]
            values[9] = None
            cur.execute(f"INSERT INTO {DB}.edges VALUES ({', '.join(['%s'] * 9)}, "
                        f"{'ST_GeomFromText(%s)' if geometry else '%s'}, {', '.join(['%s'] * 6)})",
                        values[:9] + [geometry] + values[10:])
        cur.execute(f"CREATE TABLE {DB}.masked ({MASKED}) DEFAULT CHARSET=utf8mb4")
        cur.executemany(f"INSERT INTO {DB}.masked VALUES ({', '.join(['%s'] * 9)})", MASKED_ROWS)
    conn.close()
    return ["all_types", "edges", "masked"]


def _staged(manifest, table: str) -> pa.Table:
    entry = next(e for e in manifest.tables if e["table"] == table)
    parts = [staged_view(pq.ParquetFile(path)).read() for path in manifest.files(entry)]
    after = pa.concat_tables(parts).column("_after").combine_chunks()
    return pa.Table.from_arrays(after.flatten(), names=[f.name for f in after.type])


def _source(mariadb, table: str, masking) -> tuple[list, dict, dict]:
    conn = mariadb.connect()
    try:
        tm = table_map_from_information_schema(conn, DB, table, "mariadb")
        forms, left_out = column_forms(tm, masking)
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(f"SELECT id, {row_text_sql(forms)}, {row_hash_sql(forms)} FROM {DB}.{table}")
            rows = cur.fetchall()
    finally:
        conn.close()
    texts = {r[0]: bytes(r[1]) if isinstance(r[1], (bytes, bytearray)) else r[1].encode() for r in rows}
    return forms, texts, {r[0]: int(r[2]) for r in rows}


@pytest.mark.parametrize("reader", ["arrow", "pymysql"])
def test_the_server_and_arrow_give_every_row_the_same_canonical_text_and_hash(mariadb, tables, tmp_path, reader):
    masking = Masking.parse(MASKING, secret="k3y-of-the-hashes")
    manifest = take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb), staging_dir=tmp_path,
                                       tables=TableFilter([f"{DB}.*"]), flavor="mariadb",
                                       server={"server_id": mariadb.server_id}, masking=masking,
                                       arrow_url=arrow_url(mariadb), reader="auto" if reader == "arrow" else reader)
    for table in tables:
        forms, sql_texts, sql_hashes = _source(mariadb, table, masking)
        staged = _staged(manifest, table)
        texts = row_texts(staged, forms)
        ids = staged.column("id").to_pylist()
        arrow_texts = dict(zip(ids, texts.to_pylist()))
        assert arrow_texts == sql_texts, table
        assert dict(zip(ids, crc32s(texts).tolist())) == sql_hashes, table
    edges = _source(mariadb, "edges", None)[1]
    assert edges[1].split(b",")[1:4] == [b"N", b"N", b"N"]  # zero dates: null, as staged
    assert edges[1].split(b",")[5:7] == [b"4503599627370496p-201", b"1p-1074"]  # FLOAT's and DOUBLE's least subnormals
    assert edges[6].split(b",")[5:7] == [b"9007198717870080p-29", b"9007199254740990p7"]  # 2^24 - 1, 2^60 - 2^8
    assert edges[3].split(b",")[1:3] == [b"N", str(-354285 * 86_400_000_000).encode()]  # year 0; 1000-01-01
    masked = _source(mariadb, "masked", masking)[1]
    assert masked[1].split(b",")[2] == b"4:+41 "  # truncated to 4 characters
    assert masked[2].split(b",")[1][:3] == b"64:"  # the hash's hex digits


def test_columns_left_out_are_named_with_their_reason(mariadb, tables):
    conn = mariadb.connect()
    try:
        tm = table_map_from_information_schema(conn, DB, "masked", "mariadb")
    finally:
        conn.close()
    forms, left_out = column_forms(tm, Masking.parse(MASKING, secret="k"))
    assert [(f.name, f.kind, f.masked) for f in forms] == [
        ("id", "int", None), ("email", "text", "hash"), ("phone", "text", "truncate 4"), ("blob_", "text", "hash"),
        ("n", "text", "hash"), ("born", "text", "hash"), ("amount", "text", "hash")]
    assert left_out == {"secret_": "excluded by masking: not in Iceberg",
                        "f": "hashed by masking: a hashed FLOAT is not compared"}
    forms, left_out = column_forms(tm, Masking.parse(MASKING, secret="k"), compare_hashed=False)
    assert [f.name for f in forms] == ["id", "phone"]
    assert sorted(left_out) == ["amount", "blob_", "born", "email", "f", "n", "secret_"]
