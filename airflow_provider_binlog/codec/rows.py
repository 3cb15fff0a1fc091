"""Row image decoding: one compiled decoder function per (table, column-presence) pair.

Decoding rows is the hot path of the codec. Instead of interpreting the column list for every
value, a Python function specialised to the table's column types is generated once per table
map and row-image shape, and reused for every row: no per-value dispatch, precompiled struct
readers, plain ``bytes`` slicing.
"""
from __future__ import annotations

import struct
from typing import Callable

from . import constants as C
from . import values as V
from ._bytes import F32, F64, I16, I32, I64, U16, U32, U64
from .errors import UnsupportedColumnTypeError
from .events import ABSENT, Column, JsonDiffs

_INT_READERS = {
    (C.MYSQL_TYPE_SHORT, False): ("I16", 2), (C.MYSQL_TYPE_SHORT, True): ("U16", 2),
    (C.MYSQL_TYPE_LONG, False): ("I32", 4), (C.MYSQL_TYPE_LONG, True): ("U32", 4),
    (C.MYSQL_TYPE_LONGLONG, False): ("I64", 8), (C.MYSQL_TYPE_LONGLONG, True): ("U64", 8),
    (C.MYSQL_TYPE_FLOAT, False): ("F32", 4), (C.MYSQL_TYPE_FLOAT, True): ("F32", 4),
    (C.MYSQL_TYPE_DOUBLE, False): ("F64", 8), (C.MYSQL_TYPE_DOUBLE, True): ("F64", 8),
}
_LEN_READERS = {1: "buf[p]", 2: "U16(buf, p)[0]", 3: "int.from_bytes(buf[p:p + 3], 'little')",
                4: "U32(buf, p)[0]"}


def _set_text(mask: int, labels: tuple) -> str:
    return ",".join(label for i, label in enumerate(labels) if mask >> i & 1)


def _vector(data: bytes) -> tuple:
    return struct.unpack("<%df" % (len(data) // 4), data[: len(data) // 4 * 4])


def _decode_text(data: bytes, codec: str):
    try:
        return data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return data


def _json_value(data: bytes):
    from .mysql_json import decode_json_binary
    return decode_json_binary(data)


def _json_diffs(data: bytes):
    from .mysql_json import parse_json_diffs
    return JsonDiffs(tuple(parse_json_diffs(data)))


_GLOBALS = {
    "ABSENT": ABSENT, "I16": I16, "U16": U16, "I32": I32, "U32": U32, "I64": I64, "U64": U64,
    "F32": F32, "F64": F64, "decode_decimal": V.decode_decimal, "decode_date": V.decode_date,
    "decode_datetime2": V.decode_datetime2, "decode_timestamp2": V.decode_timestamp2,
    "decode_time2": V.decode_time2, "decode_time_v1": V.decode_time_v1,
    "decode_datetime_v1": V.decode_datetime_v1, "decode_timestamp_v1": V.decode_timestamp_v1,
    "set_text": _set_text, "vector": _vector, "decode_text": _decode_text, "json_value": _json_value,
    "json_diffs": _json_diffs, "UnicodeDecodeError": UnicodeDecodeError,
    "decode_mariadb_hires_timestamp": V.decode_mariadb_hires_timestamp,
    "decode_mariadb_hires_datetime": V.decode_mariadb_hires_datetime,
    "decode_mariadb_hires_time": V.decode_mariadb_hires_time,
}


def _text_lines(col: Column, v: str, consts: dict) -> list[str]:
    """Turn raw bytes in ``s`` into the column value."""
    if col.text is False or col.codec is None:
        return [f"{v} = s"]
    if col.codec == "utf-8":
        return ["try:", f"    {v} = s.decode('utf-8')", "except UnicodeDecodeError:", f"    {v} = s"]
    return [f"{v} = decode_text(s, {col.codec!r})"]


def _value_lines(col: Column, v: str, consts: dict, partial_bit: int | None) -> list[str]:
    t, meta = col.type, col.meta
    if col.hires_fsp:
        kind = {C.MYSQL_TYPE_TIMESTAMP: "timestamp", C.MYSQL_TYPE_DATETIME: "datetime",
                C.MYSQL_TYPE_TIME: "time"}[t]
        return [f"{v}, p = decode_mariadb_hires_{kind}(buf, p, {col.hires_fsp})"]
    if t == C.MYSQL_TYPE_TINY:
        if col.unsigned:
            return [f"{v} = buf[p]", "p += 1"]
        return [f"{v} = buf[p]", "p += 1", f"if {v} > 127: {v} -= 256"]
    if (t, col.unsigned) in _INT_READERS:
        reader, size = _INT_READERS[(t, col.unsigned)]
        return [f"{v} = {reader}(buf, p)[0]", f"p += {size}"]
    if t == C.MYSQL_TYPE_INT24:
        return [f"{v} = int.from_bytes(buf[p:p + 3], 'little', signed={not col.unsigned})", "p += 3"]
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        return [f"{v}, p = decode_decimal(buf, p, {meta >> 8}, {meta & 0xFF})"]
    if t == C.MYSQL_TYPE_YEAR:
        return [f"{v} = buf[p]", "p += 1", f"if {v}: {v} += 1900"]
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        return [f"{v}, p = decode_date(buf, p)"]
    if t == C.MYSQL_TYPE_DATETIME2:
        return [f"{v}, p = decode_datetime2(buf, p, {meta})"]
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return [f"{v}, p = decode_timestamp2(buf, p, {meta})"]
    if t == C.MYSQL_TYPE_TIME2:
        return [f"{v}, p = decode_time2(buf, p, {meta})"]
    if t == C.MYSQL_TYPE_TIME:
        return [f"{v}, p = decode_time_v1(buf, p)"]
    if t == C.MYSQL_TYPE_DATETIME:
        return [f"{v}, p = decode_datetime_v1(buf, p)"]
    if t == C.MYSQL_TYPE_TIMESTAMP:
        return [f"{v}, p = decode_timestamp_v1(buf, p)"]
    if t in (C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING, C.MYSQL_TYPE_STRING):
        width = 1 if meta < 256 else 2
        pad = []
        if t == C.MYSQL_TYPE_STRING and col.text is False:
            # BINARY(n) (and MariaDB INET6/INET4/UUID) are n bytes; the binlog strips trailing 0x00
            pad = [f"if n < {meta}: s += bytes({meta} - n)"]
        return [f"n = {_LEN_READERS[width]}", f"p += {width}", "s = buf[p:p + n]", "p += n",
                *pad, *_text_lines(col, v, consts)]
    if t == C.MYSQL_TYPE_ENUM:
        size = meta & 0xFF
        lines = [f"{v} = {_LEN_READERS[size]}", f"p += {size}"]
        if col.enum_values:
            labels = ("",) + tuple(col.enum_values)
            name = f"E{col.index}"
            consts[name] = labels
            lines.append(f"if {v} < {len(labels)}: {v} = {name}[{v}]")
        return lines
    if t == C.MYSQL_TYPE_SET:
        size = meta & 0xFF
        lines = [f"{v} = int.from_bytes(buf[p:p + {size}], 'little')", f"p += {size}"]
        if col.set_values:
            name = f"S{col.index}"
            consts[name] = tuple(col.set_values)
            lines.append(f"{v} = set_text({v}, {name})")
        return lines
    if t == C.MYSQL_TYPE_BIT:
        nbytes = ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8
        return [f"{v} = int.from_bytes(buf[p:p + {nbytes}], 'big')", f"p += {nbytes}"]
    if t in C.BLOB_TYPES or t in (C.MYSQL_TYPE_GEOMETRY, C.MYSQL_TYPE_JSON, C.MYSQL_TYPE_VECTOR):
        width = meta if meta in _LEN_READERS else 4
        lines = [f"n = {_LEN_READERS[width]}", f"p += {width}", "s = buf[p:p + n]", "p += n"]
        if t == C.MYSQL_TYPE_JSON:
            if partial_bit is not None:
                return lines + [f"if pj & {1 << partial_bit}: {v} = json_diffs(s)",
                                f"else: {v} = json_value(s)"]
            return lines + [f"{v} = json_value(s)"]
        if t == C.MYSQL_TYPE_VECTOR:
            return lines + [f"{v} = vector(s)"]
        if t == C.MYSQL_TYPE_GEOMETRY:
            return lines + [f"{v} = s"]
        return lines + _text_lines(col, v, consts)
    if t == C.MYSQL_TYPE_NULL:
        return [f"{v} = None"]
    raise UnsupportedColumnTypeError(
        f"column {col.name} has type {col.type_name} ({t}), which row events cannot be decoded for")


def compile_image_decoder(columns: tuple, present: int, *, partial_json: bool = False) -> Callable:
    """Build ``decode(buf, p[, pj]) -> (values_tuple, new_p)`` for one row image.

    ``present`` is the columns-present bitmap as an int (bit i = column i). ``pj`` is the
    partial-JSON bitmap of a PARTIAL_UPDATE_ROWS after image: one bit per JSON column of the
    table, in column order.
    """
    n_present = bin(present).count("1")
    nb_bytes = (n_present + 7) // 8
    args = "buf, p, pj" if partial_json else "buf, p"
    lines = [f"def decode({args}):"]
    if nb_bytes:
        lines.append(f"    nb = int.from_bytes(buf[p:p + {nb_bytes}], 'little')")
        lines.append(f"    p += {nb_bytes}")
    consts: dict = {}
    out = []
    bit = 0
    json_k = 0
    for col in columns:
        partial_bit = None
        if partial_json and col.type == C.MYSQL_TYPE_JSON:
            partial_bit = json_k  # partial bits count every JSON column of the table
            json_k += 1
        if not (present >> col.index) & 1:
            out.append("ABSENT")
            continue
        v = f"v{col.index}"
        out.append(v)
        body = _value_lines(col, v, consts, partial_bit)
        lines.append(f"    if nb & {1 << bit}:")
        lines.append(f"        {v} = None")
        lines.append("    else:")
        lines.extend("        " + line for line in body)
        bit += 1
    lines.append(f"    return ({', '.join(out)}{',' if len(out) == 1 else ''}), p")
    source = "\n".join(lines)
    namespace = dict(_GLOBALS)
    namespace.update(consts)
    exec(compile(source, "<row decoder>", "exec"), namespace)
    fn = namespace["decode"]
    fn.source = source  # kept for debugging
    return fn
