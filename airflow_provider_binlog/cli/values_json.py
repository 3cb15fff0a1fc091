"""JSON encoding of decoded column values, as the ``decode`` CLI writes them.

JSON encoding of a column value: integers as numbers (exact, unsigned included), floats as
numbers, DECIMAL as an exact string, DATE ``YYYY-MM-DD``, DATETIME/TIMESTAMP
``YYYY-MM-DD HH:MM:SS[.fraction to the column's fsp]`` (TIMESTAMP in UTC), TIME
``[-]HH:MM:SS[.fraction]``, YEAR and BIT as numbers, ENUM/SET as MySQL prints them, text as
strings, binary as base64, JSON as the JSON value, GEOMETRY as base64 of the stored bytes,
VECTOR as a list of floats. Zero/invalid dates stay the strings MySQL prints.

:class:`RowRenderer` keeps one encoder per column per table map and builds the JSON object of a
row image.
"""
from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal
from typing import Any, Callable, Iterable, Union

from ..codec import constants as C
from ..codec.events import ABSENT, Column, JsonDiffs, TableMap
from ..codec.values import format_datetime, format_time

#: One decoded value of a column (a row value) -> its JSON-compatible value.
JsonEncoder = Callable[[Any], object]


def _b64(value: Union[bytes, bytearray]) -> str:
    return base64.b64encode(value).decode("ascii")


def column_fsp(col: Column) -> int:
    if col.hires_fsp:
        return col.hires_fsp
    return col.meta if col.type in (C.MYSQL_TYPE_TIME2, C.MYSQL_TYPE_DATETIME2,
                                    C.MYSQL_TYPE_TIMESTAMP2) else 0


def json_encoder(col: Column) -> JsonEncoder:
    """A function turning one decoded value of ``col`` into a JSON-compatible value."""
    fsp = column_fsp(col)
    t = col.type

    def generic(v: Any) -> object:
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
            from ..codec.json_text import to_json_compatible
            return {"json_diffs": [{"op": d.operation, "path": d.path,
                                    "value": to_json_compatible(d.value)} for d in v.diffs]}
        return str(v)

    if t == C.MYSQL_TYPE_JSON:
        def encode_json(v: Any) -> object:
            if isinstance(v, JsonDiffs):
                return generic(v)
            from ..codec.json_text import to_json_compatible
            return to_json_compatible(v)
        return encode_json
    if t == C.MYSQL_TYPE_GEOMETRY:
        return lambda v: _b64(v) if isinstance(v, (bytes, bytearray)) else v
    return generic


class RowRenderer:
    """Caches one encoder per column per table map."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[TableMap, tuple[tuple[str, JsonEncoder], ...]]] = {}

    def encoders(self, tm: TableMap) -> tuple[tuple[str, JsonEncoder], ...]:
        key = id(tm)
        entry = self._cache.get(key)
        if entry is None or entry[0] is not tm:
            entry = (tm, tuple((c.name, json_encoder(c)) for c in tm.columns))
            self._cache[key] = entry
        return entry[1]

    def as_json_dict(self, tm: TableMap, values: Iterable[Any]) -> dict[str, object]:
        return {name: enc(v) for (name, enc), v in zip(self.encoders(tm), values) if v is not ABSENT}
