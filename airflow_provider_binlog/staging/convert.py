"""Per-column conversion of decoded values into the staging (Arrow) representation."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Callable

import pyarrow as pa

from ..codec import constants as C
from ..codec.events import Column, JsonDiffs
from .contract import arrow_type_for

_MICROSECOND = dt.timedelta(microseconds=1)


class StagingValueError(ValueError):
    """A decoded value that the staging layout cannot hold; the message says what to change."""


class Counters:
    """Values the staging layout had to alter, reported in the manifest."""

    def __init__(self) -> None:
        self.invalid_temporals = 0
        self.replaced_text = 0


def identity(v):
    return v


def _passing(fn: Callable, *types: type) -> Callable:
    """Mark ``fn`` as returning values of exactly these types (and None) unchanged, so that
    a column holding nothing else can be staged without calling it per value."""
    fn.passes = frozenset((type(None),) + types)
    return fn


def converter_for(col: Column, counters: Counters) -> Callable:
    """The function converting one non-None decoded value of ``col``; it is :func:`identity`
    when there is nothing to convert, and may carry a ``passes`` set (see ``_passing``)."""
    t = col.type
    arrow = arrow_type_for(col)

    if t == C.MYSQL_TYPE_LONGLONG and col.unsigned:
        return lambda v: None if v is None else Decimal(v)
    if t in (C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DECIMAL):
        if pa.types.is_string(arrow):
            return lambda v: None if v is None else format(v, "f")
        return identity
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE, C.MYSQL_TYPE_DATETIME, C.MYSQL_TYPE_DATETIME2,
             C.MYSQL_TYPE_TIMESTAMP, C.MYSQL_TYPE_TIMESTAMP2):
        def temporal(v):
            if isinstance(v, str):  # zero or invalid date, as MySQL prints it
                counters.invalid_temporals += 1
                return None
            return v
        return _passing(temporal, dt.datetime, dt.date)
    if t in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2):
        return lambda v: None if v is None else v // _MICROSECOND
    if t == C.MYSQL_TYPE_BIT:
        return lambda v: v if v is None or v < (1 << 63) else v - (1 << 64)
    if t in (C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET):
        return _passing(lambda v: v if v is None or isinstance(v, str) else str(v), str)
    if t == C.MYSQL_TYPE_JSON:
        from ..codec.mysql_json import to_mysql_json_text

        def json_text(v):
            if isinstance(v, JsonDiffs):
                raise StagingValueError(
                    f"column {col.name}: a partial JSON update cannot be applied because the "
                    "before image lacks the document; set binlog_row_image=FULL or "
                    "binlog_row_value_options='' on the server")
            return None if v is None else to_mysql_json_text(v)
        return json_text
    if t == C.MYSQL_TYPE_VECTOR:
        return lambda v: None if v is None else list(v)
    if pa.types.is_binary(arrow):
        return _passing(lambda v: v.encode("utf-8") if isinstance(v, str) else v, bytes)
    if pa.types.is_string(arrow):
        def text(v):
            if isinstance(v, (bytes, bytearray)):
                counters.replaced_text += 1
                return bytes(v).decode("utf-8", "replace")
            return v
        return _passing(text, str)
    return identity
