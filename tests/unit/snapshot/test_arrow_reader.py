"""The Arrow reader's choices without a server: which tables it reads, which key ranges it
splits, and that a type connectorx returns other than the exact one is refused."""
from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_binlog.capture.arrow_reader import ArrowReadError, _staging_array, arrow_readable, splittable
from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column, TableMap


def table(*columns: Column) -> TableMap:
    return TableMap(1, "s", "t", columns, primary_key=(0,))


def test_tables_with_a_type_not_read_exactly_are_named_with_the_column():
    key = Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True)
    assert arrow_readable(table(key, Column(1, "d", C.MYSQL_TYPE_NEWDECIMAL, (28 << 8) | 10))) is None
    assert arrow_readable(table(key, Column(1, "d", C.MYSQL_TYPE_NEWDECIMAL, (30 << 8) | 2))) == \
        "column d is DECIMAL(30,2)"
    assert arrow_readable(table(key, Column(1, "t", C.MYSQL_TYPE_TIME2, 0, data_type="time"))) == "column t is time"
    assert arrow_readable(table(key, Column(1, "j", C.MYSQL_TYPE_BLOB, 4, data_type="json"))) == "column j is JSON"


def test_only_signed_integer_keys_are_split_between_connections():
    assert splittable(Column(0, "id", C.MYSQL_TYPE_LONG, 0))
    assert splittable(Column(0, "id", C.MYSQL_TYPE_LONG, 0, unsigned=True))
    assert not splittable(Column(0, "id", C.MYSQL_TYPE_LONGLONG, 0, unsigned=True))
    assert not splittable(Column(0, "id", C.MYSQL_TYPE_DATETIME2, 0))


def test_a_type_that_could_have_rounded_values_is_refused():
    bu = Column(0, "n", C.MYSQL_TYPE_LONGLONG, 0, unsigned=True)
    with pytest.raises(ArrowReadError, match="returned double"):
        _staging_array(bu, pa.chunked_array([pa.array([2.0 ** 53 + 1], pa.float64())]))
    staged, _ = _staging_array(bu, pa.chunked_array([pa.array([2 ** 64 - 1], pa.uint64())]))
    assert staged.type == pa.decimal128(20, 0) and staged[0].as_py() == 2 ** 64 - 1


def test_zero_timestamps_become_null_and_are_counted():
    ts = Column(0, "at", C.MYSQL_TYPE_TIMESTAMP2, 3)
    staged, zeros = _staging_array(ts, pa.chunked_array([pa.array([0, 1_000_000, None], pa.int64())]))
    assert zeros == 1 and staged.type == pa.timestamp("us", tz="UTC")
    assert staged.cast(pa.int64()).to_pylist() == [None, 1_000_000, None]
