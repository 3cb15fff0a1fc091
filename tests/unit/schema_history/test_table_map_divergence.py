"""Each check that compares a TABLE_MAP event with the schema history (``schema_history/check.py``)
refuses, on its own, the one difference it is there for, naming the table, the column and both
values; a TABLE_MAP that agrees with the history passes.

The history is followed from a CREATE TABLE statement, as the dump follows the binlog's DDL; the
TABLE_MAP is real event bytes read by the codec's reader with the history as its ``schemas``
source, as the dump configures it. ``FULL`` means ``binlog_row_metadata=FULL`` (column names and
signedness in the optional metadata), ``MINIMAL`` that the binlog carries neither.
"""
from __future__ import annotations

import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import TableMap
from airflow_provider_binlog.codec.table_map import parse_table_map
from airflow_provider_binlog.schema_history import (HistoryFollower, SchemaDivergenceError, SchemaHistory,
                                                    check_table_map)
from airflow_provider_binlog.schema_history.ddl import parse_ddl

POSITION = "mysql-bin.000007:1234"


# -- inputs ----------------------------------------------------------------------------------
def _history(create_table: str) -> SchemaHistory:
    """The history after one CREATE TABLE in database ``s``."""
    history = SchemaHistory(flavor="mariadb", databases={"s": ("utf8mb4", None)})
    HistoryFollower(history, lambda s, t: True, lambda s: True).apply(parse_ddl(create_table), "s")
    return history


# type code and type metadata as the server writes them in a TABLE_MAP event
def _int() -> tuple:
    return C.MYSQL_TYPE_LONG, b""


def _bigint() -> tuple:
    return C.MYSQL_TYPE_LONGLONG, b""


def _decimal(precision: int, scale: int) -> tuple:
    return C.MYSQL_TYPE_NEWDECIMAL, bytes([precision, scale])


def _temporal(code: int, fsp: int) -> tuple:
    return code, bytes([fsp])


def _bit(width: int) -> tuple:
    return C.MYSQL_TYPE_BIT, bytes([width % 8, width // 8])


def _varchar(max_bytes: int) -> tuple:
    return C.MYSQL_TYPE_VARCHAR, max_bytes.to_bytes(2, "little")


def _table_map(history: SchemaHistory, columns: list, *, names=None, unsigned=None) -> TableMap:
    """A TABLE_MAP event of ``s.t`` with ``columns`` (``(type code, metadata bytes)``), read by the
    codec. ``names`` and ``unsigned`` (one flag per numeric column) go into the optional metadata
    (``binlog_row_metadata=FULL``) when given."""
    types = bytes(code for code, _ in columns)
    metas = b"".join(meta for _, meta in columns)
    body = (1).to_bytes(6, "little") + b"\x01\x00" + b"\x01s\x00" + b"\x01t\x00"
    body += bytes([len(columns)]) + types + bytes([len(metas)]) + metas + b"\xff" * ((len(columns) + 7) // 8)
    if unsigned is not None:
        bits = bytearray((len(unsigned) + 7) // 8)
        for k, flag in enumerate(unsigned):
            if flag:
                bits[k >> 3] |= 0x80 >> (k & 7)
        body += bytes([C.OPT_SIGNEDNESS, len(bits)]) + bytes(bits)
    if names is not None:
        field = b"".join(bytes([len(n)]) + n.encode() for n in names)
        body += bytes([C.OPT_COLUMN_NAME, len(field)]) + field
    return parse_table_map(body, 0, len(body), 6, schemas=history, flavor="mariadb")


def _refusal(history: SchemaHistory, tm: TableMap) -> SchemaDivergenceError:
    with pytest.raises(SchemaDivergenceError) as info:
        check_table_map(tm, history.get("s", "t"), POSITION)
    assert info.type is SchemaDivergenceError
    assert info.value.position == POSITION
    return info.value


# -- a TABLE_MAP that agrees ---------------------------------------------------------------------
AGREEING_TABLE = ("CREATE TABLE t (id INT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(10), d DECIMAL(10,2), "
                  "tm TIME(3), dt DATETIME(6), ts TIMESTAMP(0) NULL, b BIT(12), n BIGINT)")
AGREEING_COLUMNS = [_int(), _varchar(40), _decimal(10, 2), _temporal(C.MYSQL_TYPE_TIME2, 3),
                    _temporal(C.MYSQL_TYPE_DATETIME2, 6), _temporal(C.MYSQL_TYPE_TIMESTAMP2, 0), _bit(12), _bigint()]


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_a_table_map_that_agrees_with_the_history_in_every_checked_property_passes(metadata):
    history = _history(AGREEING_TABLE)
    if metadata == "FULL":  # names compare without regard to case; numeric columns: id, d, n
        tm = _table_map(history, AGREEING_COLUMNS, names=["ID", "name", "d", "tm", "dt", "ts", "b", "N"],
                        unsigned=[True, False, False])
    else:
        tm = _table_map(history, AGREEING_COLUMNS)
    assert check_table_map(tm, history.get("s", "t"), POSITION) is None


# -- one test per check ------------------------------------------------------------------------
def test_a_column_count_that_differs_from_the_history_is_refused_naming_both_counts_and_column_lists():
    history = _history("CREATE TABLE t (id INT, a INT)")
    tm = _table_map(history, [_int(), _int(), _int()], names=["id", "a", "z"])
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: the binlog has 3 columns, the history 2. "
        "Binlog: (id LONG, a LONG, z LONG); history: (id int, a int)")


def test_a_column_name_that_differs_from_the_history_with_full_metadata_is_refused_naming_both_names():
    history = _history("CREATE TABLE t (id INT, a INT)")
    tm = _table_map(history, [_int(), _int()], names=["id", "b"])
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (a) is named 'b' in the binlog. "
        "Binlog: (id LONG, b LONG); history: (id int, a int)")


def test_a_column_type_that_differs_from_the_history_is_refused_naming_both_types():
    history = _history("CREATE TABLE t (id INT, a INT)")
    tm = _table_map(history, [_int(), _bigint()], names=["id", "a"])
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (a): the history says int but the binlog "
        "logs type LONGLONG. Binlog: (id LONG, a LONGLONG); history: (id int, a int)")


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_a_decimal_precision_that_differs_from_the_history_is_refused_naming_both_precisions(metadata):
    history = _history("CREATE TABLE t (id INT, d DECIMAL(10,2))")
    tm = _table_map(history, [_int(), _decimal(12, 2)], names=["id", "d"] if metadata == "FULL" else None)
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (d): the history says decimal(10,2) but the "
        "binlog logs decimal(12,2). Binlog: (id LONG, d NEWDECIMAL); history: (id int, d decimal)")


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_a_decimal_scale_that_differs_from_the_history_is_refused_naming_both_scales(metadata):
    history = _history("CREATE TABLE t (id INT, d DECIMAL(10,2))")
    tm = _table_map(history, [_int(), _decimal(10, 4)], names=["id", "d"] if metadata == "FULL" else None)
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (d): the history says decimal(10,2) but the "
        "binlog logs decimal(10,4). Binlog: (id LONG, d NEWDECIMAL); history: (id int, d decimal)")


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
@pytest.mark.parametrize("sql_type, code", [("TIME", C.MYSQL_TYPE_TIME2), ("DATETIME", C.MYSQL_TYPE_DATETIME2),
                                            ("TIMESTAMP", C.MYSQL_TYPE_TIMESTAMP2)])
def test_fractional_second_digits_that_differ_from_the_history_are_refused_naming_both_digit_counts(
        sql_type, code, metadata):
    history = _history(f"CREATE TABLE t (id INT, w {sql_type}(3) NULL)")
    tm = _table_map(history, [_int(), _temporal(code, 6)], names=["id", "w"] if metadata == "FULL" else None)
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (w): the history says 3 fractional digits, "
        f"the binlog 6. Binlog: (id LONG, w {C.COLUMN_TYPE_NAMES[code]}); history: (id int, w {sql_type.lower()})")


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_a_bit_width_that_differs_from_the_history_is_refused_naming_both_widths(metadata):
    history = _history("CREATE TABLE t (id INT, b BIT(5))")
    tm = _table_map(history, [_int(), _bit(12)], names=["id", "b"] if metadata == "FULL" else None)
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (b): the history says bit(5), the binlog bit(12). "
        "Binlog: (id LONG, b BIT); history: (id int, b bit)")


def test_an_unsigned_column_where_the_history_says_signed_is_refused_with_full_metadata_naming_the_column():
    history = _history("CREATE TABLE t (id INT, a INT)")
    tm = _table_map(history, [_int(), _int()], names=["id", "a"], unsigned=[False, True])
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (a): the history says signed, the binlog not. "
        "Binlog: (id LONG, a LONG); history: (id int, a int)")


def test_a_signed_column_where_the_history_says_unsigned_is_refused_with_full_metadata_naming_the_column():
    history = _history("CREATE TABLE t (id INT, a INT UNSIGNED)")
    tm = _table_map(history, [_int(), _int()], names=["id", "a"], unsigned=[False, False])
    assert _refusal(history, tm).message == (
        "table s.t does not match the schema history: column 2 (a): the history says unsigned, the binlog not. "
        "Binlog: (id LONG, a LONG); history: (id int, a int)")
