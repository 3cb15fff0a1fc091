"""The verification's pieces that need no server: the canonical form of floats and text from
Arrow, the key-range masks on Iceberg's rows, differing ranges merged, the report's words, the
catalogs PyIceberg reads, and the verify DAG's plan of a repair."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_binlog.capture.verify.canonical import BYTES, FLOAT, MICROS, TEXT, ColumnForm, hmac_sql
from airflow_provider_binlog.capture.verify.source import KeyRange, range_sql
from airflow_provider_binlog.merge.verify.canonical_arrow import column_text, crc32s, row_texts
from airflow_provider_binlog.merge.verify.compare import merged
from airflow_provider_binlog.merge.verify.iceberg import in_range
from airflow_provider_binlog.merge.verify.report import CHANGED, MISSING, KeyRangeReport, TableReport


def test_floats_are_written_as_their_significand_and_exponent():
    values = pa.array([0.0, -0.0, 1.0, -1.5, 5e-324, 2.0 ** 60 - 256, None], pa.float64())
    assert column_text(values, ColumnForm("f", FLOAT, "")).to_pylist() == [
        "0", "0", "4503599627370496p-52", "-6755399441055744p-52", "1p-1074", "9007199254740990p7", None]
    # FLOAT 0.1 is 13421773 × 2^-27, as the double of its stored value
    assert column_text(pa.array([0.1], pa.float32()), ColumnForm("f", FLOAT, "")).to_pylist() == [
        f"{13421773 << 29}p-56"]


def test_text_and_bytes_carry_their_length_and_a_row_joins_its_columns_with_nulls_as_n():
    table = pa.table({"s": pa.array(["é,", None], pa.large_string()), "b": pa.array([b"\x00:", b""]),
                      "t": pa.array([dt.datetime(1970, 1, 1, 0, 0, 1), None], pa.timestamp("us", "UTC"))})
    forms = [ColumnForm("s", TEXT, ""), ColumnForm("b", BYTES, ""), ColumnForm("t", MICROS, "")]
    texts = row_texts(table, forms)
    assert texts.to_pylist() == ["3:é,,2:\x00:,1000000".encode(), b"N,0:,N"]
    import zlib
    assert crc32s(texts).tolist() == [zlib.crc32("3:é,,2:\x00:,1000000".encode()), zlib.crc32(b"N,0:,N")]


def test_the_hmac_in_sql_uses_the_keys_pads():
    sql = hmac_sql(b"k", "v")
    assert sql.startswith("SHA2(CONCAT(X'" + bytes(b ^ 0x5C for b in b"k".ljust(64, b"\0")).hex() + "'")
    assert "X'" + bytes(b ^ 0x36 for b in b"k".ljust(64, b"\0")).hex() + "', v)" in sql


def test_key_ranges_select_icebergs_rows_as_the_server_compares_row_values():
    keys = pa.table({"a": pa.array([1, 1, 2, 2, 3], pa.int32()), "b": pa.array([5, 9, 1, 7, 0], pa.int64())})
    assert in_range(keys, KeyRange((1, 5), (2, 7))).to_pylist() == [False, True, True, True, False]
    assert in_range(keys, KeyRange((1, 5), None), [(2, 1)]).to_pylist() == [False, True, False, True, True]
    assert in_range(keys, KeyRange(keys=((2, 7), (3, 0)))).to_pylist() == [False, False, False, True, True]
    assert range_sql_text() == ("(`a`, `b`) > (%s, %s) AND (`a`, `b`) <= (%s, %s) AND (`a`, `b`) NOT IN "
                                "((%s, %s))", [1, 5, 2, 7, 2, 1])


def range_sql_text():
    from types import SimpleNamespace

    table = SimpleNamespace(key_sql="`a`, `b`")
    return range_sql(table, KeyRange((1, 5), (2, 7)), [(2, 1)])  # type: ignore[arg-type]


def test_time_keys_and_unsigned_keys_become_arrow_scalars_of_icebergs_types():
    keys = pa.table({"t": pa.array([-1_000_000, 0, 5_000_000], pa.int64())})
    assert in_range(keys, KeyRange((dt.timedelta(seconds=-1),), (dt.timedelta(seconds=4),))).to_pylist() == [
        False, True, False]
    big = pa.table({"u": pa.array([Decimal(2 ** 64 - 1), Decimal(1)], pa.decimal128(20, 0))})
    assert in_range(big, KeyRange((2 ** 63,), None)).to_pylist() == [True, False]


def test_consecutive_differing_ranges_of_one_kind_are_merged_across_no_equal_part():
    parts = [KeyRangeReport([1], [1], CHANGED, 1, 1), KeyRangeReport([2], [2], CHANGED, 1, 1), None,
             KeyRangeReport([4], [4], CHANGED, 1, 1), KeyRangeReport([5], [9], MISSING, 5, 0)]
    assert [(r.first, r.last, r.how, r.source_rows) for r in merged(parts)] == [
        ([1], [2], CHANGED, 2), ([4], [4], CHANGED, 1), ([5], [9], MISSING, 5)]


def test_a_reports_words_and_json():
    report = TableReport("shop.a", "ns.shop__a", chunks=3, equal=2, rows=300, seconds=2.0,
                         differing=[KeyRangeReport([5], [9], MISSING, 5, 0)], position="b.1:4", checkpoint="b.1:4")
    assert report.status() == "differs" and not report.verified_equal
    assert report.lines()[1] == "  differs: keys 5 .. 9: missing in Iceberg (source 5 rows, Iceberg 0)"
    assert report.to_json()["rows_per_second"] == 150.0


def test_the_catalogs_pyiceberg_reads_come_from_the_merges_settings():
    pytest.importorskip("airflow")
    from airflow_provider_binlog.capture.verify.canonical import VerifyError
    from airflow_provider_binlog.operators.verify import catalog_spec
    from airflow_provider_binlog.spark.catalogs import IcebergCatalog

    jdbc = IcebergCatalog("lake", "jdbc", "jdbc:postgresql://pg:5432/iceberg", "s3a://lake/w",
                          {"jdbc.user": "ice", "jdbc.password": "p@ss"})
    spec = catalog_spec("lake", iceberg_catalog=jdbc)
    assert (spec.type, dict(spec.properties)) == ("sql", {"uri": "postgresql+psycopg://ice:p%40ss@pg:5432/iceberg",
                                                          "warehouse": "s3a://lake/w"})
    rest = catalog_spec("lake", iceberg_catalog=IcebergCatalog("lake", "rest", "https://cat", None, {"token": "t"}))
    assert (rest.type, dict(rest.properties)) == ("rest", {"token": "t", "uri": "https://cat"})
    assert catalog_spec("lake", warehouse="/w").type == "hadoop"
    with pytest.raises(VerifyError, match="is not read by the verification"):
        catalog_spec("lake", iceberg_catalog=IcebergCatalog("lake", "hive", "thrift://h:9083"))


def test_a_repair_plans_the_tables_that_differ_and_the_view_words_them():
    pytest.importorskip("airflow")
    from airflow_provider_binlog.operators.verify_dag import differing_tables
    from airflow_provider_binlog.plugins.verified import table_line

    report = {"tables": {"s.b": {"differing": [{"first": [1]}]}, "s.a": {"differing": []},
                         "s.c": {"differing": [{"first": [2]}]}}}
    assert differing_tables(report) == ["s.b", "s.c"] and differing_tables(None) == []
    assert table_line("s.a", {"status": "equal", "position": "f.1:9", "checkpoint": "f.1:4"}, "2026-11-28") == \
        "s.a: verified equal as of 2026-11-28 (source at f.1:9, Iceberg at f.1:4)"
