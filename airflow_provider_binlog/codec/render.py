"""Rendering decoded values for people and for JSON: the encodings of the ``decode`` CLI.

JSON encoding of a column value: integers as numbers (exact, unsigned included), floats as
numbers, DECIMAL as an exact string, DATE ``YYYY-MM-DD``, DATETIME/TIMESTAMP
``YYYY-MM-DD HH:MM:SS[.fraction to the column's fsp]`` (TIMESTAMP in UTC), TIME
``[-]HH:MM:SS[.fraction]``, YEAR and BIT as numbers, ENUM/SET as MySQL prints them, text as
strings, binary as base64, JSON as the JSON value, GEOMETRY as base64 of the stored bytes,
VECTOR as a list of floats. Zero/invalid dates stay the strings MySQL prints.
"""
from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal
from typing import Callable

from . import constants as C
from .events import ABSENT, Column, JsonDiffs, TableMap
from .values import format_datetime, format_time


def _b64(value) -> str:
    return base64.b64encode(value).decode("ascii")


def column_fsp(col: Column) -> int:
    if col.hires_fsp:
        return col.hires_fsp
    return col.meta if col.type in (C.MYSQL_TYPE_TIME2, C.MYSQL_TYPE_DATETIME2,
                                    C.MYSQL_TYPE_TIMESTAMP2) else 0


def json_encoder(col: Column) -> Callable:
    """A function turning one decoded value of ``col`` into a JSON-compatible value."""
    fsp = column_fsp(col)
    t = col.type

    def generic(v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (bytes, bytearray)):
            return _b64(v)
        if isinstance(v, Decimal):
            return format(v, "f")  # str() would print a scaled zero as 0E-30
        if isinstance(v, dt.datetime):
            return format_datetime(v, fsp)
        if isinstance(v, dt.date):
            return "%04d-%02d-%02d" % (v.year, v.month, v.day)
        if isinstance(v, dt.timedelta):
            return format_time(v, fsp)
        if isinstance(v, tuple):
            return list(v)
        if isinstance(v, JsonDiffs):
            from .mysql_json import to_json_compatible
            return {"json_diffs": [{"op": d.operation, "path": d.path,
                                    "value": to_json_compatible(d.value)} for d in v.diffs]}
        return str(v)

    if t == C.MYSQL_TYPE_JSON:
        def encode_json(v):
            if isinstance(v, JsonDiffs):
                return generic(v)
            from .mysql_json import to_json_compatible
            return to_json_compatible(v)
        return encode_json
    if t == C.MYSQL_TYPE_GEOMETRY:
        return lambda v: _b64(v) if isinstance(v, (bytes, bytearray)) else v
    return generic


class RowRenderer:
    """Caches one encoder per column per table map."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple] = {}

    def encoders(self, tm: TableMap) -> tuple:
        key = id(tm)
        entry = self._cache.get(key)
        if entry is None or entry[0] is not tm:
            entry = (tm, tuple((c.name, json_encoder(c)) for c in tm.columns))
            self._cache[key] = entry
        return entry[1]

    def as_json_dict(self, tm: TableMap, values) -> dict:
        return {name: enc(v) for (name, enc), v in zip(self.encoders(tm), values) if v is not ABSENT}


def sql_literal(value, col: Column) -> str:
    """A value the way mysqlbinlog -v shows it in its pseudo-SQL."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, (bytes, bytearray)):
        return "x'" + bytes(value).hex() + "'"
    if col.type == C.MYSQL_TYPE_JSON:
        from .mysql_json import to_mysql_json_text
        return "'" + to_mysql_json_text(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    encoded = json_encoder(col)(value)
    if isinstance(encoded, list):
        return "[" + ", ".join(repr(x) for x in encoded) + "]"
    text = str(encoded)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
