"""MySQL binary JSON decoded into Python values.

MySQL (5.7 and later) stores a JSON column (binlog column type 245) in its
own binary format, and row events carry that binary value unchanged.  This
module turns it into plain Python values; :mod:`.json_text` renders them as
MySQL prints JSON, :mod:`.json_diff` handles the partial updates.

Binary layout (all integers little-endian)::

    doc          ::= type value
    type         ::= 0x00 small object | 0x01 large object
                   | 0x02 small array  | 0x03 large array
                   | 0x04 literal      | 0x05 int16  | 0x06 uint16
                   | 0x07 int32        | 0x08 uint32 | 0x09 int64
                   | 0x0a uint64       | 0x0b double | 0x0c utf8mb4 string
                   | 0x0f opaque (any other MySQL type)
    object       ::= count size key-entry* value-entry* key* value*
    array        ::= count size value-entry* value*
    count, size  ::= uint16 (small) | uint32 (large)
    key-entry    ::= key-offset (uint16 | uint32) key-length (uint16)
    value-entry  ::= type offset-or-inlined-value (uint16 | uint32)
    string       ::= var-length utf8mb4-bytes
    opaque       ::= field-type (uint8) var-length bytes
    var-length   ::= 1..5 bytes, 7 bits each, low bits first, high bit = more

Offsets in key and value entries count from the first byte after the
container's type byte.  Literals and 16-bit integers are stored inside the
value entry itself ("inlined"); large containers also inline 32-bit
integers.  Object keys are stored sorted by (byte length, bytes); decoded
dicts keep that stored order.

Decoded Python types: dict, list, str, int, float, True/False/None,
:class:`decimal.Decimal` (opaque NEWDECIMAL), :class:`datetime.date`
(opaque DATE), :class:`datetime.datetime` (opaque DATETIME and TIMESTAMP),
:class:`datetime.timedelta` (opaque TIME) and :class:`JsonOpaque` for any
other opaque type.  A DATE or DATETIME that Python cannot represent (zero
dates such as ``0000-00-00``, or invalid dates stored under
``ALLOW_INVALID_DATES``) is returned as the string MySQL would print.

Every offset and length is checked against the buffer; malformed input
raises :class:`~airflow_provider_binlog.codec.errors.CorruptEventError`
and nothing partially decoded is returned.
"""
from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from ._bytes import F64, I16, I32, I64, U16, U32, U64
from .binary_decimal import check_decimal_shape, decimal_binary_size, decode_binary_decimal
from .constants import (
    MYSQL_TYPE_DATE,
    MYSQL_TYPE_DATETIME,
    MYSQL_TYPE_NEWDECIMAL,
    MYSQL_TYPE_TIME,
    MYSQL_TYPE_TIMESTAMP,
)
from .errors import CorruptEventError

__all__ = [
    "JSONB_DOUBLE", "JSONB_INT16", "JSONB_INT32", "JSONB_INT64", "JSONB_LARGE_ARRAY",
    "JSONB_LARGE_OBJECT", "JSONB_LITERAL", "JSONB_OPAQUE", "JSONB_SMALL_ARRAY",
    "JSONB_SMALL_OBJECT", "JSONB_STRING", "JSONB_UINT16", "JSONB_UINT32", "JSONB_UINT64",
    "JsonOpaque", "decode_json_binary", "decode_json_value",
]

# --------------------------------------------------------------------------
# Type codes
# --------------------------------------------------------------------------

JSONB_SMALL_OBJECT = 0x00
JSONB_LARGE_OBJECT = 0x01
JSONB_SMALL_ARRAY = 0x02
JSONB_LARGE_ARRAY = 0x03
JSONB_LITERAL = 0x04
JSONB_INT16 = 0x05
JSONB_UINT16 = 0x06
JSONB_INT32 = 0x07
JSONB_UINT32 = 0x08
JSONB_INT64 = 0x09
JSONB_UINT64 = 0x0A
JSONB_DOUBLE = 0x0B
JSONB_STRING = 0x0C
JSONB_OPAQUE = 0x0F

_LITERAL_NULL = 0x00
_LITERAL_TRUE = 0x01
_LITERAL_FALSE = 0x02

# MySQL refuses documents nested deeper than 100 levels; allow some slack
# but stop runaway recursion on damaged data.
_MAX_DEPTH = 150

#: An unpacker of fixed-size fields (a ``struct.Struct(...).unpack_from``).
_Unpack = Callable[[bytes, int], tuple[Any, ...]]

_HEADER_SMALL: _Unpack = struct.Struct("<HH").unpack_from
_HEADER_LARGE: _Unpack = struct.Struct("<II").unpack_from

_TYPE_NAMES = {
    JSONB_SMALL_OBJECT: "small object",
    JSONB_LARGE_OBJECT: "large object",
    JSONB_SMALL_ARRAY: "small array",
    JSONB_LARGE_ARRAY: "large array",
    JSONB_LITERAL: "literal",
    JSONB_INT16: "int16",
    JSONB_UINT16: "uint16",
    JSONB_INT32: "int32",
    JSONB_UINT32: "uint32",
    JSONB_INT64: "int64",
    JSONB_UINT64: "uint64",
    JSONB_DOUBLE: "double",
    JSONB_STRING: "string",
    JSONB_OPAQUE: "opaque",
}
# Numbers stored outside the value entry: type -> (size, unpacker).
_NUMBERS: dict[int, tuple[int, _Unpack]] = {
    JSONB_INT16: (2, I16), JSONB_UINT16: (2, U16), JSONB_INT32: (4, I32), JSONB_UINT32: (4, U32),
    JSONB_INT64: (8, I64), JSONB_UINT64: (8, U64), JSONB_DOUBLE: (8, F64),
}


@dataclass(frozen=True)
class JsonOpaque:
    """An opaque JSON scalar of a MySQL type this module does not interpret.

    ``type_code`` is the MySQL field type (``enum_field_types``) stored in
    the value, ``data`` the raw payload.  MySQL prints it as
    ``"base64:type<type_code>:<base64 of data>"``.
    """

    type_code: int
    data: bytes


def _corrupt(message: str) -> CorruptEventError:
    return CorruptEventError("malformed binary JSON: " + message)


# --------------------------------------------------------------------------
# Binary JSON decoding
# --------------------------------------------------------------------------

def decode_json_binary(data: Union[bytes, bytearray, memoryview]) -> object:
    """Decode one binary JSON value (the bytes of a JSON column).

    ``data`` is bytes, bytearray or memoryview.  Zero-length data decodes to
    None: MySQL writes an empty value for a JSON null in some cases.
    """
    if type(data) is not bytes:
        data = bytes(data)
    end = len(data)
    if end == 0:
        return None
    return _value(data, data[0], 1, end, 0)


def decode_json_value(buf: bytes, pos: int, end: int) -> object:
    """Decode the binary JSON value whose type byte is at ``pos`` within ``buf[:end]``.

    Errors name byte offsets in ``buf`` (e.g. of the JSON diff vector that
    embeds the value).
    """
    return _value(buf, buf[pos], pos + 1, end, 0)


def _read_var_length(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read MySQL's variable-length length field; return (length, next_pos)."""
    if pos < end:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
    length = 0
    shift = 0
    for i in range(5):
        if pos + i >= end:
            raise _corrupt(f"{what} length is cut off at byte {pos + i}")
        byte = buf[pos + i]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if length > 0xFFFFFFFF:
                raise _corrupt(f"{what} length {length} exceeds 32 bits")
            return length, pos + i + 1
        shift += 7
    raise _corrupt(f"{what} length field at byte {pos} is longer than 5 bytes")


def _value(buf: bytes, t: int, pos: int, end: int, depth: int) -> object:
    """Decode the value of type ``t`` whose bytes start at ``pos``.

    ``end`` bounds the bytes the value may use (the end of the enclosing
    container, or of the whole buffer at top level).
    """
    if t == JSONB_STRING:
        length, start = _read_var_length(buf, pos, end, "string")
        stop = start + length
        if stop > end:
            raise _corrupt(f"string of {length} bytes at byte {start} runs past the end ({end})")
        try:
            return buf[start:stop].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _corrupt(f"string at byte {start} is not valid UTF-8 ({exc.reason})") from None
    if t <= JSONB_LARGE_ARRAY:
        return _container(buf, pos, end, t & 1, t < JSONB_SMALL_ARRAY, depth + 1)
    if JSONB_INT16 <= t <= JSONB_DOUBLE:
        size, unpack = _NUMBERS[t]
        if pos + size > end:
            raise _corrupt(f"{_TYPE_NAMES[t]} at byte {pos} needs {size} bytes, only {end - pos} left")
        value = unpack(buf, pos)[0]
        if t == JSONB_DOUBLE and value - value != 0.0:  # NaN or infinity: not JSON
            raise _corrupt(f"double at byte {pos} is not finite ({value!r})")
        return value
    if t == JSONB_LITERAL:
        if pos >= end:
            raise _corrupt(f"literal at byte {pos} is cut off")
        return _literal(buf[pos], pos)
    if t == JSONB_OPAQUE:
        return _opaque(buf, pos, end)
    raise _corrupt(f"unknown value type 0x{t:02x} (value at byte {pos})")


def _literal(code: int, pos: int) -> Optional[bool]:
    if code == _LITERAL_NULL:
        return None
    if code == _LITERAL_TRUE:
        return True
    if code == _LITERAL_FALSE:
        return False
    raise _corrupt(f"unknown literal 0x{code:02x} at byte {pos}")


_TABLE_CACHE_LIMIT = 256
# Per-kind caches indexed by element count: unpackers reading ``count``
# consecutive entries in one call.  "BH"/"BI": value entries (type,
# offset-or-inlined value) of small/large containers; "HH"/"IH": key entries
# (offset, length).
_ENTRY_TABLES: dict[str, list[Optional[_Unpack]]] = {
    kind: [None] * (_TABLE_CACHE_LIMIT + 1) for kind in ("BH", "BI", "HH", "IH")}


def _entry_table(kind: str, count: int) -> _Unpack:
    unpack: _Unpack = struct.Struct("<" + kind * count).unpack_from
    if count <= _TABLE_CACHE_LIMIT:
        _ENTRY_TABLES[kind][count] = unpack
    return unpack


# long: the hot loop of binary JSON decoding, kept inline because calls per value cost measurably
def _container(buf: bytes, pos: int, end: int, large: int, is_object: bool, depth: int
               ) -> Union[dict[str, object], list[object]]:
    avail = end - pos
    if large:
        if avail < 8:
            raise _corrupt(f"large container header at byte {pos} is cut off")
        count, size = _HEADER_LARGE(buf, pos)
        header = 8 + count * (11 if is_object else 5)
        key_entries = pos + 8
        entries = key_entries + (count * 6 if is_object else 0)
    else:
        if avail < 4:
            raise _corrupt(f"small container header at byte {pos} is cut off")
        count, size = _HEADER_SMALL(buf, pos)
        header = 4 + count * (7 if is_object else 3)
        key_entries = pos + 4
        entries = key_entries + (count * 4 if is_object else 0)
    if size > avail:
        raise _corrupt(f"container at byte {pos} claims {size} bytes, only {avail} available")
    if header > size:
        raise _corrupt(f"container at byte {pos} with {count} elements needs a {header}-byte "
                       f"header but is only {size} bytes")
    if not count:
        return {} if is_object else []
    cend = pos + size

    values: list[object] = []
    append = values.append
    kind = "BI" if large else "BH"
    unpack = _ENTRY_TABLES[kind][count] if count <= _TABLE_CACHE_LIMIT else None
    flat = (unpack or _entry_table(kind, count))(buf, entries)
    pairs = iter(flat)
    index = 0
    try:
        for t, off in zip(pairs, pairs):
            if t == JSONB_STRING:
                if off < header or off >= size:
                    break
                start = pos + off
                length = buf[start]
                if length < 0x80:
                    start += 1
                    stop = start + length
                    if stop > cend:
                        raise _corrupt(f"string of {length} bytes at byte {start} runs past the end ({cend})")
                    append(buf[start:stop].decode())
                else:
                    append(_value(buf, t, start, cend, depth))
            elif t == JSONB_INT16:
                off &= 0xFFFF
                append(off - 0x10000 if off & 0x8000 else off)
            elif t == JSONB_LITERAL:
                append(_literal(off & 0xFF, entries + index * (5 if large else 3) + 1))
            elif t == JSONB_UINT16:
                append(off & 0xFFFF)
            elif t <= JSONB_LARGE_ARRAY:
                if off < header or off >= size:
                    break
                if depth >= _MAX_DEPTH:
                    raise _corrupt(f"containers nested deeper than {_MAX_DEPTH} levels")
                append(_container(buf, pos + off, cend, t & 1, t < JSONB_SMALL_ARRAY, depth + 1))
            elif large and t == JSONB_INT32:
                append(off - 0x100000000 if off & 0x80000000 else off)
            elif large and t == JSONB_UINT32:
                append(off)
            else:
                if off < header or off >= size:
                    break
                append(_value(buf, t, pos + off, cend, depth))
            index += 1
    except UnicodeDecodeError as exc:
        raise _corrupt(f"string in the container at byte {pos} is not valid UTF-8 ({exc.reason})") from None
    if index != count:
        raise _corrupt(f"value offset {flat[2 * index + 1]} of entry {index} of the container at byte {pos} "
                       f"is outside the container (header {header}, size {size})")

    if not is_object:
        return values

    kind = "IH" if large else "HH"
    unpack = _ENTRY_TABLES[kind][count] if count <= _TABLE_CACHE_LIMIT else None
    flat = (unpack or _entry_table(kind, count))(buf, key_entries)
    pairs = iter(flat)
    keys: list[str] = []
    append_key = keys.append
    try:
        for off, length in zip(pairs, pairs):
            if off < header or off + length > size:
                raise _corrupt(f"key at offset {off} (length {length}) of entry {len(keys)} of the object "
                               f"at byte {pos} is outside the object (header {header}, size {size})")
            start = pos + off
            append_key(buf[start:start + length].decode())
    except UnicodeDecodeError as exc:
        raise _corrupt(f"object key in the object at byte {pos} is not valid UTF-8 ({exc.reason})") from None
    result = dict(zip(keys, values))
    if len(result) != count:
        raise _corrupt(f"object at byte {pos} repeats a key")
    return result


def _opaque(buf: bytes, pos: int, end: int) -> object:
    if pos >= end:
        raise _corrupt(f"opaque value at byte {pos} is cut off")
    field_type = buf[pos]
    length, start = _read_var_length(buf, pos + 1, end, "opaque")
    stop = start + length
    if stop > end:
        raise _corrupt(f"opaque value of {length} bytes at byte {start} runs past the end ({end})")
    if field_type == MYSQL_TYPE_NEWDECIMAL:
        if length < 2:
            raise _corrupt(f"decimal at byte {start} is {length} bytes, too short for precision and scale")
        precision = buf[start]
        scale = buf[start + 1]
        check_decimal_shape(precision, scale)
        if decimal_binary_size(precision, scale) != length - 2:
            raise _corrupt(f"decimal({precision},{scale}) at byte {start} has {length - 2} payload "
                           f"bytes, expected {decimal_binary_size(precision, scale)}")
        return decode_binary_decimal(buf, start + 2, precision, scale)[0]
    if field_type in _TEMPORAL_TYPES:
        if length != 8:
            raise _corrupt(f"temporal value (type {field_type}) at byte {start} is {length} bytes, expected 8")
        packed: int = I64(buf, start)[0]
        if field_type == MYSQL_TYPE_TIME:
            return _unpack_time(packed, start)
        return _unpack_datetime(packed, field_type == MYSQL_TYPE_DATE, start)
    return JsonOpaque(field_type, buf[start:stop])


_TEMPORAL_TYPES = frozenset((MYSQL_TYPE_DATE, MYSQL_TYPE_TIME, MYSQL_TYPE_DATETIME, MYSQL_TYPE_TIMESTAMP))


def _unpack_datetime(packed: int, date_only: bool, pos: int) -> Union[datetime.date, str]:
    """Decode MySQL's packed datetime (TIME_to_longlong_datetime_packed).

    Layout of the absolute value: ``((ymd << 17) | hms) << 24 | microseconds``
    with ``ymd = (year * 13 + month) << 5 | day`` and
    ``hms = hour << 12 | minute << 6 | second``.
    """
    if packed < 0:
        raise _corrupt(f"packed date/datetime at byte {pos} is negative")
    micro = packed & 0xFFFFFF
    whole = packed >> 24
    ymd = whole >> 17
    hms = whole & 0x1FFFF
    day = ymd & 0x1F
    year, month = divmod(ymd >> 5, 13)
    hour = hms >> 12
    minute = (hms >> 6) & 0x3F
    second = hms & 0x3F
    if year > 9999 or hour > 23 or minute > 59 or second > 59 or micro > 999999:
        raise _corrupt(f"packed date/datetime at byte {pos} is out of range "
                       f"({year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micro})")
    try:
        if date_only:
            return datetime.date(year, month, day)
        return datetime.datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        # Zero or invalid dates (0000-00-00, 2020-02-30): keep MySQL's text.
        if date_only:
            return f"{year:04d}-{month:02d}-{day:02d}"
        return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"


def _unpack_time(packed: int, pos: int) -> datetime.timedelta:
    """Decode MySQL's packed time (TIME_to_longlong_time_packed).

    Layout of the absolute value: ``(hour << 12 | minute << 6 | second) << 24
    | microseconds``; a negative time is the negated packed value.
    """
    negative = packed < 0
    if negative:
        packed = -packed
    micro = packed & 0xFFFFFF
    hms = packed >> 24
    hour = hms >> 12
    minute = (hms >> 6) & 0x3F
    second = hms & 0x3F
    if hour > 1023 or minute > 59 or second > 59 or micro > 999999:
        raise _corrupt(f"packed time at byte {pos} is out of range")
    value = datetime.timedelta(hours=hour, minutes=minute, seconds=second, microseconds=micro)
    return -value if negative else value
