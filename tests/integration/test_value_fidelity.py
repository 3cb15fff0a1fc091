"""Every value the staging files can hold lands in Iceberg unchanged: DATE/DATETIME over
MySQL's whole range (also next to zero dates), BIT(64) as unsigned 64-bit numbers, and
MariaDB UUID/INET6/INET4 as the text the server prints. Both ways rows are staged (decoded
row by row into tuples, and decoded straight into columns) give the same values."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column, EventHeader, RowsEvent, TableMap
from airflow_provider_binlog.codec.mariadb_text import inet4_text, inet6_text, uuid_text
from airflow_provider_binlog.codec.rows import (DeferredRows, compile_columns_decoder,
                                                compile_rows_decoder)
from airflow_provider_binlog.staging import StagingWriter
from airflow_provider_binlog.staging.convert import ColumnStager, Counters

ZERO = ()  # a zero date: 0000-00-00 (00:00:00)
UUID = "123e4567-e89b-12d3-a456-426655440000"
COLUMNS = (
    Column(0, "id", C.MYSQL_TYPE_LONG, 0, nullable=False, primary_key=True),
    Column(1, "d", C.MYSQL_TYPE_DATE, 0),
    Column(2, "dtm", C.MYSQL_TYPE_DATETIME2, 6),
    Column(3, "bt", C.MYSQL_TYPE_BIT, 8 << 8),                 # BIT(64)
    Column(4, "b8", C.MYSQL_TYPE_BIT, 1 << 8),                 # BIT(8)
    Column(5, "u", C.MYSQL_TYPE_STRING, 16, text=False, data_type="uuid"),
    Column(6, "i6", C.MYSQL_TYPE_STRING, 16, text=False, data_type="inet6"),
    Column(7, "i4", C.MYSQL_TYPE_STRING, 4, text=False, data_type="inet4"),
)
# (id, date, datetime, BIT(64), BIT(8), UUID bytes, INET6 bytes, INET4 bytes)
SOURCE = [
    (1, (1000, 1, 1), (1000, 1, 1, 0, 0, 0, 0), 2**64 - 1, 255,
     bytes.fromhex(UUID.replace("-", "")), bytes.fromhex("00000000000000000000ffff01020304"),
     bytes([1, 2, 3, 4])),
    (2, (9999, 12, 31), (9999, 12, 31, 23, 59, 59, 999999), 2**63, 1,
     bytes(16), bytes.fromhex("20010db8000000000000000000000000"), bytes(4)),
    (3, ZERO, ZERO, 0, 0, None, None, None),
    (4, (1582, 10, 10), (1582, 10, 10, 12, 0, 0, 1), 2**63 - 1, 128,
     bytes([0xff] * 16), bytes.fromhex("00000000000000000000000001020304"), bytes([255] * 4)),
]
EXPECTED = {
    1: (dt.date(1000, 1, 1), dt.datetime(1000, 1, 1), Decimal(2**64 - 1), 255, UUID,
        "::ffff:1.2.3.4", "1.2.3.4"),
    2: (dt.date(9999, 12, 31), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), Decimal(2**63), 1,
        "00000000-0000-0000-0000-000000000000", "2001:db8::", "0.0.0.0"),
    3: (None, None, Decimal(0), 0, None, None, None),
    4: (dt.date(1582, 10, 10), dt.datetime(1582, 10, 10, 12, 0, 0, 1), Decimal(2**63 - 1), 128,
        "ffffffff-ffff-ffff-ffff-ffffffffffff", "::1.2.3.4", "255.255.255.255"),
}
NAMES = ("d", "dtm", "bt", "b8", "u", "i6", "i4")


def _date(v) -> bytes:
    y, m, d = v or (0, 0, 0)
    return (y << 9 | m << 5 | d).to_bytes(3, "little")


def _datetime2(v) -> bytes:
    y, mo, d, h, mi, s, us = v or (0,) * 7
    packed = ((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s
    return (packed + 0x8000000000).to_bytes(5, "big") + us.to_bytes(3, "big")


def _fixed(v: bytes) -> bytes:
    v = v.rstrip(b"\x00")  # as the server logs BINARY(n)
    return bytes([len(v)]) + v


def row_image(row) -> bytes:
    """The binlog row image of one SOURCE row (every column present)."""
    id_, d, dtm, bt, b8, u, i6, i4 = row
    nulls = sum(1 << i for i, v in enumerate(row) if v is None)
    out = bytes([nulls]) + id_.to_bytes(4, "little") + _date(d) + _datetime2(dtm)
    out += bt.to_bytes(8, "big") + bytes([b8])
    return out + b"".join(_fixed(v) for v in (u, i6, i4) if v is not None)


def rows_bytes() -> bytes:
    return b"".join(row_image(r) for r in SOURCE)


ALL = (1 << len(COLUMNS)) - 1


def test_row_and_column_decoders_stage_the_same_exact_values():
    data = rows_bytes()
    tuples, _ = compile_rows_decoder(COLUMNS, ALL)(data, 0, len(data))
    columns = [[] for _ in COLUMNS]
    assert compile_columns_decoder(COLUMNS, ALL)(data, 0, len(data), columns, None)[0] == 4
    for values in ([list(c) for c in zip(*tuples)], columns):
        counters = Counters()
        staged = [ColumnStager(col, counters).array(v).to_pylist() for col, v in zip(COLUMNS, values)]
        assert {r[0]: tuple(r[1:]) for r in zip(*staged)} == EXPECTED
        assert counters.invalid_temporals == 2  # row 3's date and datetime


def test_valid_dates_next_to_a_zero_date_keep_their_values():
    """The column decoders give days/microseconds for valid dates and MySQL's text for zero
    dates: a column holding both stages the numbers, not nulls."""
    counters = Counters()
    days = ColumnStager(COLUMNS[1], counters).array([-354285, "0000-00-00", 2932896])
    micros = ColumnStager(COLUMNS[2], counters).array(
        [-30610224000000000, "0000-00-00 00:00:00.000000", 253402300799999999])
    assert days.to_pylist() == [dt.date(1000, 1, 1), None, dt.date(9999, 12, 31)]
    assert micros.to_pylist() == [dt.datetime(1000, 1, 1), None,
                                  dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]
    assert counters.invalid_temporals == 2


@pytest.mark.parametrize("hex_bytes, text", [
    # what MariaDB 10.11 prints for these INET6 values (SELECT), one case per rendering rule
    ("20010db8000000000000000000000000", "2001:db8::"),
    ("00000000000000000000ffff01020304", "::ffff:1.2.3.4"),
    ("00000000000000000000ffff00000000", "::ffff:0.0.0.0"),
    ("00000000000000000000000001020304", "::1.2.3.4"),
    ("00000000000000000000000000010000", "::0.1.0.0"),
    ("00000000000000000000000000000102", "::102"),
    ("00000000000000000000000000000001", "::1"),
    ("00000000000000000000000000000000", "::"),
    ("00010000000000000000000000000000", "1::"),
    ("0000000000000000ffff000001020304", "::ffff:0:102:304"),
    ("00000000000000000000fffe01020304", "::fffe:102:304"),
    ("00010000000000020000000000000003", "1:0:0:2::3"),
    ("00010000000000020000000300000000", "1::2:0:3:0:0"),
    ("fe800000000000000001000000000000", "fe80::1:0:0:0"),
    ("00000001000200030004000500060007", "::1:2:3:4:5:6:7"),
    ("00010002000300040005000600000000", "1:2:3:4:5:6::"),
    ("ffffffffffffffffffffffffffffffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
])
def test_inet6_text_is_mariadbs_rendering(hex_bytes, text):
    assert inet6_text(bytes.fromhex(hex_bytes)) == text
    assert inet6_text(bytes.fromhex(hex_bytes).rstrip(b"\x00")) == text  # as the binlog has it


def test_uuid_and_inet4_text():
    assert uuid_text(bytes.fromhex("123e4567e89b12d3a456426655440000")) == UUID
    assert uuid_text(b"") == "00000000-0000-0000-0000-000000000000"
    assert inet4_text(b"\x0a") == "10.0.0.0"
    with pytest.raises(ValueError, match="17 bytes"):
        uuid_text(bytes(17))


# --------------------------------------------------------------------------- Spark + Iceberg


def _stage(root, tm: TableMap, deferred: bool):
    writer = StagingWriter(root)
    data = rows_bytes()
    header = EventHeader(1_700_000_000, 30, 1, len(data) + 100, 200, 0)
    if deferred:
        rows = DeferredRows(tm, data, 0, len(data), ALL, None, "mariadb", "mysql-bin.000001", 100,
                            compile_columns_decoder(tm.columns, ALL))
        event = RowsEvent(header, 100, "insert", tm.table_id, tm, 0, (), deferred=rows)
    else:
        rows, _ = compile_rows_decoder(tm.columns, ALL)(data, 0, len(data))
        event = RowsEvent(header, 100, "insert", tm.table_id, tm, 0, tuple(rows))
    writer.add_rows(event, binlog_file="mysql-bin.000001", gtid=None, txn="mysql-bin.000001:4")
    return writer.publish(dump_id=f"fid-{tm.table}", start={"file": "mysql-bin.000001", "pos": 4},
                          end={"file": "mysql-bin.000001", "pos": 300}, server={"flavor": "mariadb"})


def test_iceberg_keeps_the_whole_date_range_bit64_and_mariadb_text(spark, tmp_path):
    pytest.importorskip("pyspark")
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    got_types = {}
    for deferred, table in ((True, "by_columns"), (False, "by_rows")):
        tm = TableMap(1, "s", table, COLUMNS)
        manifest = _stage(tmp_path / table, tm, deferred)
        assert json.loads(manifest.path.read_text())["invalid_temporals"] == 2
        apply_manifests(spark, [manifest], MergeOptions(namespace=f"fidelity_{table}"))
        name = f"lake.fidelity_{table}.s__{table}"
        got = {r["id"]: tuple(r[n] for n in NAMES) for r in spark.table(name).collect()}
        assert got == EXPECTED, table
        micros = dict(spark.sql(f"SELECT id, unix_micros(to_utc_timestamp(dtm, 'UTC')) "
                                f"FROM {name}").collect())
        assert micros[1] == -30610224000000000 and micros[2] == 253402300799999999
        got_types[table] = {f.name: f.dataType.simpleString() for f in spark.table(name).schema.fields}
    assert got_types["by_rows"] == got_types["by_columns"] == {
        "id": "int", "d": "date", "dtm": "timestamp_ntz", "bt": "decimal(20,0)", "b8": "bigint",
        "u": "string", "i6": "string", "i4": "string"}


def test_a_bit64_column_of_a_table_that_holds_it_as_bigint_is_refused_with_the_remedy(spark, tmp_path):
    """A BIT(64) column staged before as a bigint (as BIT(1..63) still is) cannot become
    decimal(20,0) in Iceberg: the merge commits nothing and says how to recover."""
    from airflow_provider_binlog.merge.errors import SchemaEvolutionError
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    def batch(root, bits, start, end):
        tm = TableMap(1, "s", "bits", (COLUMNS[0], Column(1, "b", C.MYSQL_TYPE_BIT, bits)))
        writer = StagingWriter(root)
        header = EventHeader(1_700_000_000, 30, 1, 100, end, 0)
        writer.add_rows(RowsEvent(header, start, "insert", 1, tm, 0, ((start, 2**31),)),
                        binlog_file="mysql-bin.000001", gtid=None, txn=f"mysql-bin.000001:{start}")
        return writer.publish(dump_id=f"bits-{start}", start={"file": "mysql-bin.000001", "pos": start},
                              end={"file": "mysql-bin.000001", "pos": end}, server={"flavor": "mysql"})

    first = batch(tmp_path / "a", 4 << 8, 4, 100)        # BIT(32): bigint
    second = batch(tmp_path / "b", 8 << 8, 100, 200)     # BIT(64): decimal(20,0)
    apply_manifests(spark, [first], MergeOptions(namespace="fidelity_bits"))
    with pytest.raises(SchemaEvolutionError,
                       match=r"'b' changed from bigint to decimal\(20,0\).*Recreate the table"):
        apply_manifests(spark, [first, second], MergeOptions(namespace="fidelity_bits"))
    rows = spark.table("lake.fidelity_bits.s__bits").collect()
    assert [(r["id"], r["b"]) for r in rows] == [(4, 2**31)]


# --------------------------------------------------------------------------- live MariaDB


@pytest.mark.mariadb
def test_mariadb_uuid_and_inet_are_staged_as_the_server_prints_them(mariadb_factory, tmp_path):
    """MINIMAL row metadata: the dump reads the table's schema (UUID/INET6/INET4 DATA_TYPE)
    from information_schema, as the hook does. Staged through the column decoders (the
    dump) and through decoded tuples (the row decoders), compared with SELECT."""
    from airflow_provider_binlog.codec import read_binlog_file
    from airflow_provider_binlog.capture.dump import run_dump
    from airflow_provider_binlog.replica.schemas import read_table_schema
    from airflow_provider_binlog.common.tables import TableFilter
    from tests.integration.test_dump_live import here, replica

    server = mariadb_factory(binlog_row_metadata="MINIMAL")
    server.execute("CREATE DATABASE IF NOT EXISTS fid")
    server.execute("DROP TABLE IF EXISTS fid.t")
    server.execute("CREATE TABLE fid.t (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4, "
                   "bt BIT(64), d DATE, dtm DATETIME(6))")
    start = here(server)
    values = [
        (1, UUID, "::ffff:1.2.3.4", "1.2.3.4", 2**64 - 1, "1000-01-01", "1000-01-01 00:00:00"),
        (2, "550e8400-e29b-41d4-a716-446655440000", "2001:db8::", "0.0.0.0", 2**63,
         "9999-12-31", "9999-12-31 23:59:59.999999"),
        (3, "1ef21d2f-1207-6660-8c4f-419efbd44d48", "::1.2.3.4", "255.255.255.255", 0,
         "0000-00-00", "0000-00-00 00:00:00"),
        (4, "00000000-0000-0000-0000-000000000000", "::", "10.0.0.1", 1, None, None),
        (5, None, None, None, None, "2024-02-29", "2024-02-29 12:34:56.000001"),
    ]
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")  # zero dates allowed
        cur.executemany("INSERT INTO fid.t VALUES (%s, %s, %s, %s, %s, %s, %s)", values)
        cur.execute("SELECT id, u, i6, i4, CAST(bt AS UNSIGNED), d, dtm FROM fid.t")
        selected = cur.fetchall()
    schema_conn = server.connect()
    schema = read_table_schema(schema_conn, "fid", "t")
    schema_conn.close()
    conn.close()
    assert [c.data_type for c in schema.columns][1:4] == ["uuid", "inet6", "inet4"]
    # zero dates (which pymysql returns as text) are staged as null
    expected = {r[0]: (r[1], r[2], r[3], None if r[4] is None else Decimal(r[4]),
                       *(None if isinstance(v, str) else v for v in r[5:])) for r in selected}
    assert expected[1][:3] == (UUID, "::ffff:1.2.3.4", "1.2.3.4")
    assert expected[3][4:] == (None, None)

    def staged(manifest):
        out = {}
        for entry in manifest.tables:
            for path in manifest.files(entry):
                for row in read_parquet(path).column("_after").to_pylist():
                    out[row["id"]] = (row["u"], row["i6"], row["i4"], row["bt"], row["d"], row["dtm"])
        return out

    rc = replica(server)
    dumped = run_dump(rc, staging_dir=tmp_path / "dump", start=start, tables=TableFilter(["fid.t"]),
                      schemas={("fid", "t"): schema})
    rc.close()
    assert staged(dumped.manifest) == expected
    assert json.loads(dumped.manifest.path.read_text())["invalid_temporals"] == 2

    writer = StagingWriter(tmp_path / "rows")
    for event in read_binlog_file(server.binlog_path(start.file), start_position=start.position,
                                  schemas={("fid", "t"): schema}):
        if isinstance(event, RowsEvent) and event.table_map and event.table_map.table == "t":
            writer.add_rows(event, binlog_file=start.file, gtid=None, txn="t")
    by_rows = writer.publish(dump_id="rows", start=start.to_json(), end=dumped.end.to_json(),
                             server={"flavor": "mariadb"})
    assert staged(by_rows) == expected


@pytest.mark.mariadb
def test_a_snapshot_stages_bit_and_mariadb_types_as_the_binlog_does(mariadb):
    """An initial snapshot describes its tables from information_schema: BIT(n) keeps its
    width (BIT(64) is decimal(20,0) there too) and UUID/INET6/INET4 are text."""
    from airflow_provider_binlog.capture.snapshot import table_map_from_information_schema
    from airflow_provider_binlog.staging.contract import arrow_type_for, bit_width

    mariadb.execute("CREATE DATABASE IF NOT EXISTS fid")
    mariadb.execute("DROP TABLE IF EXISTS fid.snap")
    mariadb.execute("CREATE TABLE fid.snap (id INT PRIMARY KEY, bt BIT(64), b13 BIT(13), b1 BIT(1), "
                    "u UUID, i6 INET6, i4 INET4)")
    conn = mariadb.connect()
    try:
        tm = table_map_from_information_schema(conn, "fid", "snap", "mariadb")
    finally:
        conn.close()
    bits = [c for c in tm.columns if c.type == C.MYSQL_TYPE_BIT]
    assert [bit_width(c) for c in bits] == [64, 13, 1]
    assert [str(arrow_type_for(c)) for c in tm.columns] == [
        "int32", "decimal128(20, 0)", "int64", "int64", "string", "string", "string"]
