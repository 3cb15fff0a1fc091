"""JSON encodings of decoded values (the documented ``decode --format jsonl`` contract)."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column
from airflow_provider_binlog.codec.render import json_encoder


def enc(type_code, value, meta=0, **kw):
    return json_encoder(Column(index=0, name="c", type=type_code, meta=meta, **kw))(value)


def test_decimal_is_an_exact_plain_string_even_for_scaled_zero():
    assert enc(C.MYSQL_TYPE_NEWDECIMAL, Decimal("0E-30"), 65 << 8 | 30) == "0." + "0" * 30
    assert enc(C.MYSQL_TYPE_NEWDECIMAL, Decimal("-12.50"), 10 << 8 | 2) == "-12.50"


def test_temporal_values_follow_the_column_fsp():
    assert enc(C.MYSQL_TYPE_DATETIME2, dt.datetime(2024, 1, 2, 3, 4, 5, 120000), 2) == "2024-01-02 03:04:05.12"
    assert enc(C.MYSQL_TYPE_DATETIME2, dt.datetime(1, 1, 1), 0) == "0001-01-01 00:00:00"
    utc = dt.timezone.utc
    assert enc(C.MYSQL_TYPE_TIMESTAMP2, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc), 6) == "2024-01-02 03:04:05.000000"
    assert enc(C.MYSQL_TYPE_TIME2, -dt.timedelta(hours=838, minutes=59, seconds=59), 0) == "-838:59:59"
    assert enc(C.MYSQL_TYPE_TIME2, -dt.timedelta(microseconds=500000), 1) == "-00:00:00.5"
    assert enc(C.MYSQL_TYPE_DATE, dt.date(999, 1, 2)) == "0999-01-02"
    assert enc(C.MYSQL_TYPE_DATE, "0000-00-00") == "0000-00-00"


def test_binary_geometry_and_vector_encodings():
    assert enc(C.MYSQL_TYPE_BLOB, b"\x00\xff", 2) == "AP8="
    assert enc(C.MYSQL_TYPE_GEOMETRY, b"\x00\x00\x00\x00\x01", 4) == "AAAAAAE="
    assert enc(C.MYSQL_TYPE_VECTOR, (1.5, -2.0), 4) == [1.5, -2.0]
    assert enc(C.MYSQL_TYPE_LONGLONG, 18446744073709551615, unsigned=True) == 18446744073709551615
