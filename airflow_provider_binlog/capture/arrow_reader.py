"""Reads rows of a table straight into Arrow arrays of their staging types with connectorx (a
Rust client that fills Arrow buffers itself: no Python object per value), for the chunks of the
watermark snapshot. pymysql builds a Python object per value, about 140k rows/s for five
columns; this reader keeps pace with ``mariadb-dump``.

Only columns whose values connectorx returns exactly are read this way (:func:`arrow_readable`
says why a table is not): integers, FLOAT/DOUBLE, DECIMAL up to 28 digits with up to 10 after
the point, DATE, DATETIME, TIMESTAMP (read as ``UNIX_TIMESTAMP(column)``, so that no time zone
applies), YEAR, text, binary strings, ENUM, SET and MariaDB's UUID/INET4/INET6. A chunk whose
values it cannot read (zero dates such as ``'0000-00-00'``) raises :class:`ArrowReadError`,
and the caller reads it with pymysql instead. No TLS: a connection that needs it is read with
pymysql.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Sequence
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from ..codec import constants as C
from ..codec.events import Column, TableMap
from ..errors import ProviderError
from ..staging.contract import arrow_type_for

log = logging.getLogger(__name__)

_INTEGERS = frozenset({C.MYSQL_TYPE_TINY, C.MYSQL_TYPE_SHORT, C.MYSQL_TYPE_INT24, C.MYSQL_TYPE_LONG,
                       C.MYSQL_TYPE_LONGLONG, C.MYSQL_TYPE_YEAR})
_SAME_TYPE = frozenset({C.MYSQL_TYPE_FLOAT, C.MYSQL_TYPE_DOUBLE, C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_DATETIME2,
                        C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET})
_STRINGS = frozenset({C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_BLOB})
#: the session of every connection connectorx opens
_SESSION = ["SET time_zone = '+00:00'"]
#: DECIMAL values connectorx carries exactly (as a 96-bit decimal, returned as decimal(38,10))
_DECIMAL_DIGITS, _DECIMAL_SCALE = 28, 10


class ArrowReadError(ProviderError):
    """connectorx could not read the rows (a value it cannot convert, a connection it cannot
    open); the caller reads them with pymysql instead."""


def available() -> bool:
    try:
        import connectorx  # noqa: F401
    except ImportError:
        return False
    return True


def arrow_readable(tm: TableMap) -> Optional[str]:
    """None when every column of the table can be read into Arrow exactly, else why not."""
    for col in tm.columns:
        t = col.type
        if col.data_type == "json":
            return f"column {col.name} is JSON"
        if t in _INTEGERS or t in _SAME_TYPE or t == C.MYSQL_TYPE_TIMESTAMP2:
            continue
        if t == C.MYSQL_TYPE_NEWDECIMAL:
            precision, scale = col.meta >> 8, col.meta & 0xFF
            if precision <= _DECIMAL_DIGITS and scale <= _DECIMAL_SCALE:
                continue
            return f"column {col.name} is DECIMAL({precision},{scale})"
        if t in _STRINGS:
            continue
        return f"column {col.name} is {col.data_type or col.type_name}"
    return None


def splittable(col: Column) -> bool:
    """Whether a key column's range can be split between connections (connectorx splits
    64-bit signed integer ranges)."""
    return col.type in _INTEGERS and not (col.type == C.MYSQL_TYPE_LONGLONG and col.unsigned)


def _select_expression(col: Column) -> str:
    name = "`" + col.name.replace("`", "``") + "`"
    if col.type == C.MYSQL_TYPE_TIMESTAMP2:
        # the stored UTC instant whatever the session's time zone; 0 is the zero timestamp
        return f"CAST(UNIX_TIMESTAMP({name}) * 1000000 AS SIGNED) AS {name}"
    return name


def _expected(col: Column, arrow: pa.DataType) -> bool:
    """Whether connectorx returned the column as the type it is read exactly as (a type that
    could have rounded a value, as a float for a 64-bit integer, is refused)."""
    t = col.type
    if t == C.MYSQL_TYPE_TIMESTAMP2 or t in _INTEGERS:
        if t == C.MYSQL_TYPE_LONGLONG and col.unsigned:
            return arrow == pa.uint64()
        return pa.types.is_integer(arrow)
    if t == C.MYSQL_TYPE_FLOAT:
        return arrow == pa.float32()
    if t == C.MYSQL_TYPE_DOUBLE:
        return arrow == pa.float64()
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        return pa.types.is_decimal(arrow)
    if t == C.MYSQL_TYPE_DATE:
        return arrow == pa.date32()
    if t == C.MYSQL_TYPE_DATETIME2:
        return pa.types.is_timestamp(arrow) and arrow.tz is None
    if pa.types.is_null(arrow):
        return True  # no non-null value in the chunk
    return pa.types.is_string(arrow) or pa.types.is_large_string(arrow) or (
        col.text is False and (pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow)))


def _staging_array(col: Column, array: pa.ChunkedArray) -> tuple[pa.Array, int]:
    """The column's array in its staging type, and how many zero timestamps became null."""
    target = arrow_type_for(col)
    if not _expected(col, array.type):
        raise ArrowReadError(f"column {col.name}: connectorx returned {array.type} for "
                             f"{col.data_type or col.type_name}")
    array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if col.type == C.MYSQL_TYPE_TIMESTAMP2:
        micros = array.cast(pa.int64())
        zero = pc.equal(micros, 0)
        zeros = pc.sum(zero).as_py() or 0
        if zeros:
            micros = pc.if_else(zero, pa.scalar(None, pa.int64()), micros)
        return micros.cast(target), zeros
    if array.type == target:
        return array, 0
    return array.cast(target), 0  # a safe cast: it raises rather than change a value


class ArrowChunkReader:
    """Reads chunks of one table with connectorx over ``connections`` connections (a range of
    a single integer key split between them)."""

    def __init__(self, url: str, tm: TableMap, connections: int = 1) -> None:
        if connections < 1:
            raise ValueError(f"connections must be at least 1, not {connections}")
        why = arrow_readable(tm)
        if why is not None:
            raise ArrowReadError(f"{tm.schema}.{tm.table}: {why}: not read into Arrow")
        self.url = url
        self.tm = tm
        self.connections = connections
        self.select = ", ".join(_select_expression(c) for c in tm.columns)
        self.source = "`" + tm.schema.replace("`", "``") + "`.`" + tm.table.replace("`", "``") + "`"
        self.invalid_temporals = 0

    @staticmethod
    def url_for(host: str, port: int, user: str, password: Optional[str], database: str) -> str:
        return (f"mysql://{quote(user, safe='')}:{quote(password or '', safe='')}@{host}:{int(port)}/"
                f"{quote(database, safe='')}")

    def read(self, where: str = "", tail: str = "", split: Optional[tuple[str, int, int]] = None
             ) -> Sequence[pa.Array]:
        """The rows of ``SELECT <columns> FROM <table> [WHERE where] [tail]`` as one array per
        column. ``split`` = (integer column, lowest, highest value) reads the range over the
        reader's connections, in as many statements (no order, no tail then)."""
        import connectorx

        sql = f"SELECT {self.select} FROM {self.source}" + (f" WHERE {where}" if where else "")
        kwargs: dict[str, Any] = {}
        if split is not None and self.connections > 1 and split[2] > split[1]:
            column, low, high = split
            kwargs = {"partition_on": column, "partition_num": self.connections, "partition_range": (low, high + 1)}
        else:
            sql += (" " + tail if tail else "")
        try:
            # key bounds in the WHERE clause are UTC text, as the snapshot's own session reads them
            table = connectorx.read_sql(self.url, sql, return_type="arrow", pre_execution_query=_SESSION, **kwargs)
        except BaseException as exc:  # connectorx raises RuntimeError, and PanicException (a BaseException)
            if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            raise ArrowReadError(f"{self.tm.schema}.{self.tm.table}: connectorx: {str(exc)[:300]}") from exc
        if table.num_columns != len(self.tm.columns):
            raise ArrowReadError(f"{self.tm.schema}.{self.tm.table}: connectorx returned {table.num_columns} "
                                 f"columns, not {len(self.tm.columns)}")
        out, invalid = [], 0
        try:
            for col, array in zip(self.tm.columns, table.columns):
                staged, zeros = _staging_array(col, array)
                out.append(staged)
                invalid += zeros
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArrowReadError) as exc:
            raise ArrowReadError(f"{self.tm.schema}.{self.tm.table}: {exc}") from exc
        self.invalid_temporals += invalid
        if kwargs and out and len(out[0]) > 1:  # the connections' parts come in any order: key order
            key = [c.name for c in self.tm.columns].index(kwargs["partition_on"])
            order = pc.sort_indices(out[key])
            out = [a.take(order) for a in out]
        return out


__all__ = ["ArrowChunkReader", "ArrowReadError", "arrow_readable", "available", "splittable"]
