"""MySQL binary JSON: values of JSON columns and partial-update diffs.

MySQL (5.7 and later) stores a JSON column (binlog column type 245) in its
own binary format, and row events carry that binary value unchanged.  This
module turns it into plain Python values, renders those values the way
MySQL prints JSON text, and handles the JSON diffs that
``PARTIAL_UPDATE_ROWS_EVENT`` carries instead of a full after-image.

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

import base64
import datetime
import json
import struct
from dataclasses import dataclass
from decimal import Decimal

from .binary_decimal import check_decimal_shape, decimal_binary_size, decode_binary_decimal
from .errors import CorruptEventError

__all__ = [
    "JsonDiff",
    "JsonOpaque",
    "apply_json_diffs",
    "decode_binary_decimal",
    "decode_json_binary",
    "decimal_binary_size",
    "parse_json_diffs",
    "to_json_compatible",
    "to_mysql_json_text",
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

# MySQL field types that may appear inside an opaque value.
MYSQL_TYPE_TIMESTAMP = 7
MYSQL_TYPE_DATE = 10
MYSQL_TYPE_TIME = 11
MYSQL_TYPE_DATETIME = 12
MYSQL_TYPE_VAR_STRING = 253
MYSQL_TYPE_NEWDECIMAL = 246

# MySQL refuses documents nested deeper than 100 levels; allow some slack
# but stop runaway recursion on damaged data.
_MAX_DEPTH = 150

_U16 = struct.Struct("<H").unpack_from
_I16 = struct.Struct("<h").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct("<d").unpack_from
_HEADER_SMALL = struct.Struct("<HH").unpack_from
_HEADER_LARGE = struct.Struct("<II").unpack_from

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
_NUMBERS = {
    JSONB_INT16: (2, _I16), JSONB_UINT16: (2, _U16), JSONB_INT32: (4, _I32), JSONB_UINT32: (4, _U32),
    JSONB_INT64: (8, _I64), JSONB_UINT64: (8, _U64), JSONB_DOUBLE: (8, _F64),
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


@dataclass(frozen=True)
class JsonDiff:
    """One logical change of a JSON column, from PARTIAL_UPDATE_ROWS_EVENT.

    ``operation`` is ``"replace"``, ``"insert"`` or ``"remove"``; ``path``
    the MySQL JSON path it applies to (e.g. ``$.a[2]."x y"``); ``value``
    the decoded new value (None for ``"remove"``).
    """

    operation: str
    path: str
    value: object


def _corrupt(message: str) -> CorruptEventError:
    return CorruptEventError("malformed binary JSON: " + message)


# --------------------------------------------------------------------------
# Binary JSON decoding
# --------------------------------------------------------------------------

def decode_json_binary(data) -> object:
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


def _literal(code: int, pos: int) -> object:
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
_ENTRY_TABLES = {kind: [None] * (_TABLE_CACHE_LIMIT + 1) for kind in ("BH", "BI", "HH", "IH")}


def _entry_table(kind: str, count: int):
    unpack = struct.Struct("<" + kind * count).unpack_from
    if count <= _TABLE_CACHE_LIMIT:
        _ENTRY_TABLES[kind][count] = unpack
    return unpack


def _container(buf: bytes, pos: int, end: int, large: int, is_object: bool, depth: int):
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

    values = []
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
    keys = []
    append = keys.append
    try:
        for off, length in zip(pairs, pairs):
            if off < header or off + length > size:
                raise _corrupt(f"key at offset {off} (length {length}) of entry {len(keys)} of the object "
                               f"at byte {pos} is outside the object (header {header}, size {size})")
            start = pos + off
            append(buf[start:start + length].decode())
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
        packed = _I64(buf, start)[0]
        if field_type == MYSQL_TYPE_TIME:
            return _unpack_time(packed, start)
        return _unpack_datetime(packed, field_type == MYSQL_TYPE_DATE, start)
    return JsonOpaque(field_type, buf[start:stop])


_TEMPORAL_TYPES = frozenset((MYSQL_TYPE_DATE, MYSQL_TYPE_TIME, MYSQL_TYPE_DATETIME, MYSQL_TYPE_TIMESTAMP))


def _unpack_datetime(packed: int, date_only: bool, pos: int):
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


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------

# Double-quote a string the way MySQL's JSON printer does: only '"', '\\'
# and control characters below 0x20 are escaped (\b \t \n \f \r, else
# \u00xx in lowercase hex); everything else, non-ASCII included, is kept.
# The standard library's non-ASCII-escaping JSON string encoder follows
# exactly these rules.
_quote = json.encoder.encode_basestring


def _format_double(value: float) -> str:
    """Print a double like MySQL's JSON printer (my_gcvt, then ".0" if integral).

    The digits are the shortest that round-trip (as Python's repr).  The
    choice between fixed and exponent notation follows my_gcvt with the
    field width MySQL uses for JSON (34): magnitudes below 1e-15 and from
    1e15 up (unless 17 significant digits fit, e.g. 1234567890123456.8) use
    exponent notation without "+" or leading zeros ("1e-16", "1e15",
    "1e100"); everything else fixed notation ("0.000000000000001",
    "100000000000000.0", "2.5").
    """
    if 1e-4 <= abs(value) < 1e15:
        # Python's repr prints these with the same shortest digits in fixed
        # notation, with ".0" on integral values: identical to MySQL.
        return repr(value)
    if value == 0.0:
        return "-0.0" if str(value)[0] == "-" else "0.0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple))
    decpt = len(digits) + exponent           # value = 0.<digits> * 10**decpt
    digits = digits.rstrip("0") or "0"
    length = len(digits)
    width = 33 if sign else 34
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    if decpt <= 0:
        have_space = length - decpt + 2 <= width
    elif decpt < length:
        have_space = length + 1 <= width
    else:
        have_space = decpt <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_fixed = (
        (have_space or (decpt <= width and (decpt >= -1 or (decpt == -2 and (length > 1 or not force_e)))
                        and not force_e))
        and (not have_space or (decpt >= -14 and (decpt <= 15 or length > decpt)))
    )
    if use_fixed:
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < length:
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - length) + ".0"
    else:
        exp = decpt - 1
        text = digits[0] + ("." + digits[1:] if length > 1 else "") + "e" + str(exp)
    return "-" + text if sign else text


def _format_time(value: datetime.timedelta) -> str:
    micro = value // _ONE_MICROSECOND
    sign = ""
    if micro < 0:
        sign = "-"
        micro = -micro
    seconds, micro = divmod(micro, 1000000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{micro:06d}"


_ONE_MICROSECOND = datetime.timedelta(microseconds=1)


def _format_datetime(value: datetime.datetime) -> str:
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}")


def _opaque_text(value: JsonOpaque) -> str:
    """Unquoted text MySQL prints for an opaque value."""
    if value.type_code == MYSQL_TYPE_VAR_STRING:
        # MySQL prints VAR_STRING opaques as plain strings.
        try:
            return value.data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    encoded = base64.b64encode(value.data).decode("ascii")
    if len(encoded) > 76:  # MySQL's base64 breaks lines every 76 characters
        encoded = "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
    return f"base64:type{value.type_code}:{encoded}"


def to_mysql_json_text(value) -> str:
    """Render a decoded value as MySQL prints JSON (``CAST(col AS CHAR)``).

    Separators are ``", "`` and ``": "``; strings are escaped like MySQL
    (non-ASCII kept); doubles use MySQL's notation (``2.5``, ``3.0``,
    ``1e100``); decimals print their exact digits unquoted; dates, datetimes
    and times print as quoted strings (``"2012-03-18"``,
    ``"2012-03-18 11:30:45.000000"``, ``"-01:02:03.000000"``); other opaque
    values as ``"base64:typeNN:<base64>"``.
    """
    return _render(value)


def _render(value) -> str:
    kind = type(value)
    if kind is str:
        return _quote(value)
    if kind is int:
        return int.__repr__(value)
    if kind is dict:
        return "{" + ", ".join([_quote(k) + ": " + _render(v) for k, v in value.items()]) + "}"
    if kind is list:
        return "[" + ", ".join([_render(v) for v in value]) + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is float:
        if value - value != 0.0:
            raise ValueError(f"JSON cannot represent {value!r}")
        return _format_double(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON cannot represent {value!r}")
        return format(value, "f")
    if isinstance(value, datetime.datetime):
        return '"' + _format_datetime(value) + '"'
    if isinstance(value, datetime.date):
        return '"' + value.isoformat() + '"'
    if isinstance(value, datetime.timedelta):
        return '"' + _format_time(value) + '"'
    if isinstance(value, JsonOpaque):
        return _quote(_opaque_text(value))
    if isinstance(value, str):
        return _quote(str(value))
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _render(float(value))
    if isinstance(value, dict):
        return _render(dict(value))
    if isinstance(value, (list, tuple)):
        return _render(list(value))
    raise TypeError(f"cannot render {kind.__name__} as MySQL JSON")


def to_json_compatible(value) -> object:
    """Convert a decoded value to plain JSON-serialisable Python.

    Containers, strings, ints, floats, booleans and None are kept (a fresh
    copy of the containers is returned).  The MySQL-specific scalars become
    what MySQL's JSON text shows for them:

    * :class:`~decimal.Decimal`: an ``int`` when the value is integral
      (``Decimal("9.00")`` -> ``9``, exact at any size), otherwise the exact
      decimal digits as a ``str`` (``"123.456"``); never a lossy float.
    * date -> ``"YYYY-MM-DD"``, datetime -> ``"YYYY-MM-DD HH:MM:SS.ffffff"``,
      timedelta (TIME) -> ``"[-]HH:MM:SS.ffffff"``.
    * :class:`JsonOpaque` -> ``"base64:typeNN:<base64>"`` (a VAR_STRING
      opaque holding UTF-8 text -> that text, as MySQL prints it).
    """
    kind = type(value)
    if kind is dict:
        return {k: to_json_compatible(v) for k, v in value.items()}
    if kind is list:
        return [to_json_compatible(v) for v in value]
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON cannot represent {value!r}")
        if value == value.to_integral_value():
            return int(value)
        return format(value, "f")
    if isinstance(value, datetime.datetime):
        return _format_datetime(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _format_time(value)
    if isinstance(value, JsonOpaque):
        return _opaque_text(value)
    if isinstance(value, (str, int, float)):
        return value
    if isinstance(value, dict):
        return {k: to_json_compatible(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_compatible(v) for v in value]
    raise TypeError(f"cannot convert {kind.__name__} to JSON")


# --------------------------------------------------------------------------
# Partial updates (PARTIAL_UPDATE_ROWS_EVENT JSON diffs)
# --------------------------------------------------------------------------

_OPERATIONS = ("replace", "insert", "remove")


def _read_packed_int(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read a MySQL packed integer (net_field_length); return (value, next_pos)."""
    if pos >= end:
        raise CorruptEventError(f"JSON diff: {what} is missing at byte {pos}")
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    if first == 252:
        size = 2
    elif first == 253:
        size = 3
    elif first == 254:
        size = 8
    else:
        raise CorruptEventError(f"JSON diff: {what} at byte {pos} starts with invalid byte 0x{first:02x}")
    if pos + 1 + size > end:
        raise CorruptEventError(f"JSON diff: {what} at byte {pos} is cut off")
    return int.from_bytes(buf[pos + 1:pos + 1 + size], "little"), pos + 1 + size


def parse_json_diffs(data) -> list[JsonDiff]:
    """Parse the diff vector of a partially updated JSON column.

    ``data`` is the column's payload in the after-image of a
    PARTIAL_UPDATE_ROWS_EVENT when its partial bit is set, without the
    4-byte length in front of it.  It holds diffs until the data ends::

        operation (1 byte: 0 replace, 1 insert, 2 remove)
        path length (packed integer), path (utf8 JSON path)
        unless remove: value length (packed integer), binary JSON value
    """
    if type(data) is not bytes:
        data = bytes(data)
    end = len(data)
    pos = 0
    diffs = []
    while pos < end:
        op_code = data[pos]
        if op_code > 2:
            raise CorruptEventError(f"JSON diff: unknown operation {op_code} at byte {pos}")
        operation = _OPERATIONS[op_code]
        path_len, pos = _read_packed_int(data, pos + 1, end, "path length")
        if pos + path_len > end:
            raise CorruptEventError(f"JSON diff: path of {path_len} bytes at byte {pos} runs past the end ({end})")
        try:
            path = data[pos:pos + path_len].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptEventError(f"JSON diff: path at byte {pos} is not valid UTF-8") from None
        if not path.lstrip().startswith("$"):
            raise CorruptEventError(f"JSON diff: path {path!r} does not start with '$'")
        pos += path_len
        value = None
        if op_code != 2:
            value_len, pos = _read_packed_int(data, pos, end, "value length")
            if value_len == 0:
                raise CorruptEventError(f"JSON diff: empty value for {operation} at {path!r}")
            if pos + value_len > end:
                raise CorruptEventError(f"JSON diff: value of {value_len} bytes at byte {pos} runs past the end ({end})")
            value = _value(data, data[pos], pos + 1, pos + value_len, 0)
            pos += value_len
        diffs.append(JsonDiff(operation, path, value))
    return diffs


def _parse_path(path: str) -> list[tuple]:
    """Parse a simple MySQL JSON path into legs.

    Legs are ``("member", name)`` or ``("cell", index, from_end)``; accepted
    syntax: ``$``, ``.name``, ``."quoted name"``, ``[N]``, ``[last]``,
    ``[last-N]``, with optional blanks between tokens.  Wildcards, ``**``
    and ranges cannot address a single location and are rejected.
    """
    n = len(path)
    i = 0

    def skip(i):
        while i < n and path[i].isspace():
            i += 1
        return i

    def fail(reason):
        return CorruptEventError(f"JSON diff: cannot apply path {path!r}: {reason}")

    i = skip(i)
    if i >= n or path[i] != "$":
        raise fail("it does not start with '$'")
    i += 1
    legs: list[tuple] = []
    while True:
        i = skip(i)
        if i >= n:
            return legs
        c = path[i]
        if c == ".":
            i = skip(i + 1)
            if i < n and path[i] == '"':
                j = i + 1
                while j < n and path[j] != '"':
                    j += 2 if path[j] == "\\" else 1
                if j >= n:
                    raise fail("unterminated quoted member name")
                try:
                    name = json.loads(path[i:j + 1])
                except ValueError:
                    raise fail("invalid quoted member name") from None
                i = j + 1
            else:
                j = i
                while j < n and path[j] not in '.[*"' and not path[j].isspace():
                    j += 1
                if j == i:
                    raise fail("wildcards and empty member names are not supported"
                               if j < n and path[j] == "*" else "missing member name")
                name = path[i:j]
                i = j
            legs.append(("member", name))
        elif c == "[":
            i = skip(i + 1)
            from_end = path.startswith("last", i)
            index = 0
            if from_end:
                i = skip(i + 4)
                if i < n and path[i] == "-":
                    i = skip(i + 1)
                    j = i
                    while j < n and path[j].isdigit():
                        j += 1
                    if j == i:
                        raise fail("missing number after 'last-'")
                    index = int(path[i:j])
                    i = j
            else:
                j = i
                while j < n and "0" <= path[j] <= "9":
                    j += 1
                if j == i:
                    raise fail("array wildcards are not supported" if i < n and path[i] == "*"
                               else "invalid array index")
                index = int(path[i:j])
                i = j
            i = skip(i)
            if i >= n or path[i] != "]":
                raise fail("array ranges are not supported" if path.startswith("to", i)
                           else "missing ']'")
            i += 1
            legs.append(("cell", index, from_end))
        else:
            raise fail(f"unexpected {c!r} at position {i}")


def _cell_position(leg: tuple, size: int) -> tuple[int, bool]:
    """Resolve an array leg against an array of ``size`` elements.

    Returns (position, within_bounds) like MySQL's Json_array_index: a
    position past the end is clamped to ``size`` (``last-N`` to 0).
    """
    index, from_end = leg[1], leg[2]
    if from_end:
        return (size - index - 1 if index < size else 0), index < size
    return min(index, size), index < size


def _copy(value):
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value


def _key_order(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8")
    return len(encoded), encoded


def _insert_member(obj: dict, key: str, value) -> None:
    """Add a member where MySQL stores it (keys sorted by length, then bytes)."""
    keys = list(obj)
    order = [_key_order(k) for k in keys]
    if order != sorted(order):
        obj[key] = value  # not in MySQL's order: just append
        return
    new = _key_order(key)
    index = next((i for i, o in enumerate(order) if o > new), len(keys))
    if index == len(keys):
        obj[key] = value
        return
    tail = [(k, obj.pop(k)) for k in keys[index:]]
    obj[key] = value
    obj.update(tail)


def apply_json_diffs(document, diffs) -> object:
    """Apply JSON diffs to a decoded document; return the new document.

    Implements MySQL's replica-side semantics (``apply_json_diffs``):

    * ``replace``: the location must exist; its value is replaced.
    * ``insert``: the parent must exist.  In an object the member must not
      exist yet (it is added in MySQL's key order); in an array the value is
      inserted at the index (an index past the end appends).
    * ``remove``: the member or element must exist and is removed.

    The root itself cannot be replaced, inserted or removed, and no
    auto-wrapping happens.  A diff that cannot be applied raises
    :class:`CorruptEventError`.  The input document is not modified: the
    result is a new tree.
    """
    if document is None:
        raise CorruptEventError("JSON diff: cannot apply diffs to a NULL JSON document")
    doc = _copy(document)
    for diff in diffs:
        path = diff.path
        legs = _parse_path(path)
        if not legs:
            raise CorruptEventError(f"JSON diff: cannot {diff.operation} the document root ({path!r})")
        parent = doc
        for leg in legs[:-1]:
            parent = _step(parent, leg, path)
        leg = legs[-1]
        operation = diff.operation
        if operation == "replace":
            if leg[0] == "member":
                if type(parent) is not dict or leg[1] not in parent:
                    raise CorruptEventError(f"JSON diff: replace target {path!r} does not exist")
                parent[leg[1]] = _copy(diff.value)
            else:
                if type(parent) is not list:
                    raise CorruptEventError(f"JSON diff: replace target {path!r} does not exist")
                position, within = _cell_position(leg, len(parent))
                if not within:
                    raise CorruptEventError(f"JSON diff: replace target {path!r} does not exist")
                parent[position] = _copy(diff.value)
        elif operation == "insert":
            if leg[0] == "member" and type(parent) is dict:
                if leg[1] in parent:
                    raise CorruptEventError(f"JSON diff: insert target {path!r} already exists")
                _insert_member(parent, leg[1], _copy(diff.value))
            elif leg[0] == "cell" and type(parent) is list:
                position, _ = _cell_position(leg, len(parent))
                parent.insert(position, _copy(diff.value))
            else:
                raise CorruptEventError(f"JSON diff: cannot insert at {path!r}: the parent is not "
                                        f"an {'object' if leg[0] == 'member' else 'array'}")
        elif operation == "remove":
            if type(parent) is dict:
                if leg[0] != "member" or leg[1] not in parent:
                    raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
                del parent[leg[1]]
            elif type(parent) is list:
                if leg[0] != "cell":
                    raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
                position, within = _cell_position(leg, len(parent))
                if not within:
                    raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
                del parent[position]
            else:
                raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
        else:
            raise CorruptEventError(f"JSON diff: unknown operation {operation!r}")
    return doc


def _step(node, leg: tuple, path: str):
    """Follow one leg of a path to an existing member or element."""
    if leg[0] == "member":
        if type(node) is dict and leg[1] in node:
            return node[leg[1]]
    elif type(node) is list:
        position, within = _cell_position(leg, len(node))
        if within:
            return node[position]
    raise CorruptEventError(f"JSON diff: path {path!r} does not exist in the document")
