"""Turn the decoded values of one column into its staging (Arrow) array.

A column arrives as a list of values in the codec's numeric form (unscaled DECIMAL integers,
days and microseconds since the epoch for temporals; see
:func:`~airflow_provider_binlog.codec.rows.compile_columns_decoder`), in the usual Python form
(``Decimal``, ``datetime``: the tuple-decoding path and initial snapshots), or a mix of both.
:meth:`ColumnStager.array` builds the Arrow array from a list in either form without a Python
call per value; only values of other types (zero dates, undecodable text, JSON documents,
MariaDB UUID/INET6/INET4 bytes rendered as text, ...) are converted one by one.
"""
from __future__ import annotations

import datetime as dt
from decimal import MAX_PREC, Context, Decimal
from typing import Any, Callable, NoReturn, Optional

import pyarrow as pa

from ..codec import constants as C
from ..codec.events import Column, JsonDiffs
from ..codec.mariadb_text import TEXT_FORMS
from ..errors import ProviderError
from .contract import arrow_type_for

_MICROSECOND = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_EXACT = Context(prec=MAX_PREC)
_NONE = type(None)
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError)


class StagingValueError(ProviderError, ValueError):
    """A decoded value that the staging layout cannot hold; the message says what to change."""


class Counters:
    """Values the staging layout had to alter, reported in the manifest."""

    def __init__(self) -> None:
        self.invalid_temporals = 0
        self.replaced_text = 0


def _types(*types: type) -> frozenset[type]:
    return frozenset((_NONE,) + types)


class ColumnStager:
    """Builds the staging array of one column.

    ``storage`` is the Arrow type the numeric form is loaded as, ``finish`` turns that array
    into the column's type (a zero-copy view, or a cast), ``numeric``/``python`` are the value
    types loadable as they are in each form, and ``convert`` turns any other non-None value
    into the storage form (or None)."""

    __slots__ = ("column", "arrow", "storage", "finish", "numeric", "python", "convert")

    def __init__(self, column: Column, counters: Counters) -> None:
        self.column = column
        self.arrow = arrow_type_for(column)
        self.storage: pa.DataType = self.arrow
        self.finish: Optional[Callable[[Any], Any]] = None
        self.numeric: frozenset[type] = frozenset()
        self.python: frozenset[type] = frozenset()
        self.convert: Callable[[Any], Any] = _refuse(column)
        _configure(self, column, counters)

    def array(self, values: list[Any]) -> pa.Array:
        types = set(map(type, values))
        if types <= self.numeric:
            try:
                return self._finish(pa.array(values, self.storage))
            except _ARROW_ERRORS:
                pass  # converted below
        elif types <= self.python:
            try:
                return pa.array(values, self.arrow)
            except _ARROW_ERRORS:
                pass
        convert = self.convert
        return self._finish(pa.array([None if v is None else convert(v) for v in values], self.storage))

    def _finish(self, array: pa.Array) -> pa.Array:
        return array if self.finish is None else self.finish(array)


def _refuse(column: Column) -> Callable[[Any], Any]:
    def convert(v: Any) -> NoReturn:
        raise StagingValueError(f"column {column.name} ({column.type_name}): cannot stage a "
                                f"{type(v).__name__} value")
    return convert


def _view(arrow: pa.DataType) -> Callable[[Any], Any]:
    return lambda array: array.view(arrow)


# long: one branch per MySQL column type choosing its Arrow conversion
def _configure(s: ColumnStager, col: Column, counters: Counters) -> None:
    t = col.type
    arrow = s.arrow

    def invalid_temporal(_v: Any) -> None:
        counters.invalid_temporals += 1
        return None

    if t == C.MYSQL_TYPE_NULL:
        s.numeric = s.python = _types()
    elif t == C.MYSQL_TYPE_LONGLONG and col.unsigned:
        s.storage, s.finish = pa.uint64(), (lambda a: a.cast(arrow))
        s.numeric, s.python = _types(int), _types(Decimal)
        s.convert = int
    elif pa.types.is_integer(arrow) and t != C.MYSQL_TYPE_BIT and t not in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2):
        s.numeric = s.python = _types(int)
    elif pa.types.is_floating(arrow):
        s.numeric = s.python = _types(float, int)
    elif t in (C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DECIMAL):
        scale = col.meta & 0xFF
        if pa.types.is_string(arrow):  # beyond 38 digits: the exact digits as text
            s.python = _types(str)
            s.convert = lambda v: format(v, "f") if isinstance(v, Decimal) else str(v)
        elif arrow.precision <= 18:  # unscaled integers fit int64
            s.storage, s.finish = pa.int64(), (lambda a: a.cast(pa.decimal128(19, 0)).view(arrow))
            s.numeric, s.python = _types(int), _types(Decimal)
            s.convert = lambda v: int(v.scaleb(scale, _EXACT)) if isinstance(v, Decimal) else v
        else:
            s.numeric = s.python = _types(Decimal)
            s.convert = lambda v: Decimal(v).scaleb(-scale, _EXACT) if isinstance(v, int) else v
    elif t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        s.storage, s.finish = pa.int32(), _view(arrow)
        s.numeric, s.python = _types(int), _types(dt.date)

        def date_days(v: Any) -> Optional[int]:
            if isinstance(v, int):  # numeric form, in a column that also holds other values
                return v
            if isinstance(v, dt.date):
                return v.toordinal() - _EPOCH_ORDINAL
            return invalid_temporal(v)  # zero or invalid date, as MySQL prints it
        s.convert = date_days
    elif t in (C.MYSQL_TYPE_DATETIME, C.MYSQL_TYPE_DATETIME2, C.MYSQL_TYPE_TIMESTAMP,
               C.MYSQL_TYPE_TIMESTAMP2):
        s.storage, s.finish = pa.int64(), _view(arrow)
        s.numeric, s.python = _types(int), _types(dt.datetime)

        def micros(v: Any) -> Optional[int]:
            if isinstance(v, int):  # numeric form, in a column that also holds other values
                return v
            if isinstance(v, dt.datetime):
                # naive values are wall time read as UTC, as Arrow reads them
                return (v - (_EPOCH_NAIVE if v.tzinfo is None else _EPOCH)) // _MICROSECOND
            if isinstance(v, dt.date):
                return (v.toordinal() - _EPOCH_ORDINAL) * 86_400_000_000
            return invalid_temporal(v)
        s.convert = micros
    elif t in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2):
        s.numeric = _types(int)
        s.convert = lambda v: v // _MICROSECOND if isinstance(v, dt.timedelta) else int(v)
    elif t == C.MYSQL_TYPE_BIT:
        s.numeric = s.python = _types(int)
        s.convert = int
        if pa.types.is_decimal(arrow):  # BIT(64): unsigned 64-bit values
            s.storage, s.finish = pa.uint64(), (lambda a: a.cast(arrow))
    elif t in (C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET):
        s.numeric = s.python = _types(str)
        s.convert = str  # the index / bitmask when the labels are unknown
    elif t == C.MYSQL_TYPE_JSON:
        from ..codec.json_text import to_mysql_json_text

        def json_text(v: Any) -> Any:  # every value: a JSON string scalar is text too, quoted
            if isinstance(v, JsonDiffs):
                raise StagingValueError(
                    f"column {col.name}: a partial JSON update cannot be applied because the "
                    "before image lacks the document; set binlog_row_image=FULL or "
                    "binlog_row_value_options='' on the server")
            return to_mysql_json_text(v)
        s.convert = json_text
    elif t == C.MYSQL_TYPE_VECTOR:
        s.convert = list
    elif pa.types.is_string(arrow) and col.data_type in TEXT_FORMS:
        # MariaDB UUID/INET6/INET4: the bytes the binlog holds as the server's text (a
        # snapshot reads that text already)
        render = TEXT_FORMS[col.data_type]
        s.python = _types(str)

        def fixed_text(v: Any) -> str:
            if isinstance(v, str):
                return v
            try:
                return render(v)
            except ValueError as exc:
                raise StagingValueError(f"column {col.name} ({col.data_type}): {exc}") from None
        s.convert = fixed_text
    elif pa.types.is_binary(arrow):
        s.numeric = s.python = _types(bytes)
        s.convert = lambda v: v.encode("utf-8") if isinstance(v, str) else bytes(v)
    elif pa.types.is_string(arrow):
        # UTF-8 text arrives as bytes (numeric form): loaded as binary and validated by the
        # cast; bytes that are not UTF-8 (in either form) are replaced, and counted
        s.storage, s.finish = pa.binary(), (lambda a: a.cast(pa.string()))
        s.numeric, s.python = _types(bytes), _types(str)

        def text(v: object) -> bytes:
            if isinstance(v, (bytes, bytearray)):
                try:
                    v = bytes(v).decode("utf-8")
                except UnicodeDecodeError:
                    counters.replaced_text += 1
                    v = bytes(v).decode("utf-8", "replace")
                return v.encode("utf-8")
            return str(v).encode("utf-8")
        s.convert = text
