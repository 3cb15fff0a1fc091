"""Row image decoding: one compiled decoder function per (table, column-presence) pair.

Decoding rows is the hot path of the codec. Instead of interpreting the column list for every
value, a Python function specialised to the table's column types is generated once per table
map and row-image shape, and reused for every row: no per-value dispatch, precompiled struct
readers, plain ``bytes`` slicing.
"""
from __future__ import annotations

import struct
from datetime import date as _date
from datetime import datetime as _datetime
from datetime import timedelta as _timedelta
from decimal import MAX_PREC, Context, Decimal
from typing import Any, Callable, Optional, cast

from . import constants as C
from . import values as V
from ._bytes import F32, F64, I16, I32, I64, U16, U32, U64
from .charsets import decode_text as _charset_decode_text
from .errors import CorruptEventError, UnsupportedColumnTypeError
from .events import ABSENT, Column, JsonDiffs, TableMap
from .gtid import Flavor

_INT_READERS = {
    (C.MYSQL_TYPE_SHORT, False): ("I16", 2), (C.MYSQL_TYPE_SHORT, True): ("U16", 2),
    (C.MYSQL_TYPE_LONG, False): ("I32", 4), (C.MYSQL_TYPE_LONG, True): ("U32", 4),
    (C.MYSQL_TYPE_LONGLONG, False): ("I64", 8), (C.MYSQL_TYPE_LONGLONG, True): ("U64", 8),
    (C.MYSQL_TYPE_FLOAT, False): ("F32", 4), (C.MYSQL_TYPE_FLOAT, True): ("F32", 4),
    (C.MYSQL_TYPE_DOUBLE, False): ("F64", 8), (C.MYSQL_TYPE_DOUBLE, True): ("F64", 8),
}
_LEN_READERS = {1: "buf[p]", 2: "U16(buf, p)[0]", 3: "int.from_bytes(buf[p:p + 3], 'little')",
                4: "U32(buf, p)[0]"}


def _set_text(mask: int, labels: tuple[str, ...]) -> str:
    return ",".join(label for i, label in enumerate(labels) if mask >> i & 1)


def _vector(data: bytes) -> tuple[float, ...]:
    return struct.unpack("<%df" % (len(data) // 4), data[: len(data) // 4 * 4])


def _decode_text(data: bytes, codec: str) -> str | bytes:
    # charsets.decode_text applies the server's table where it differs from Python's codec
    # (latin1 0x81/0x8D/0x8F/0x90/0x9D, ...); bytes when the value is not valid text.
    try:
        return _charset_decode_text(data, codec)
    except LookupError:
        return data


def _json_value(data: bytes) -> Any:
    from .json_binary import decode_json_binary
    return decode_json_binary(data)


def _json_diffs(data: bytes) -> JsonDiffs:
    from .json_diff import parse_json_diffs
    return JsonDiffs(tuple(parse_json_diffs(data)))


_MISSING = object()

_GLOBALS: dict[str, Any] = {
    "ABSENT": ABSENT, "MISSING": _MISSING, "DAY_MICROS": None, "DATE_DAYS": None,
    "I16": I16, "U16": U16, "I32": I32, "U32": U32, "I64": I64, "U64": U64,
    "F32": F32, "F64": F64, "decode_decimal": V.decode_decimal, "decode_date": V.decode_date,
    "decode_datetime2": V.decode_datetime2, "decode_timestamp2": V.decode_timestamp2,
    "decode_time2": V.decode_time2, "decode_time_v1": V.decode_time_v1,
    "decode_datetime_v1": V.decode_datetime_v1, "decode_timestamp_v1": V.decode_timestamp_v1,
    "set_text": _set_text, "vector": _vector, "decode_text": _decode_text, "json_value": _json_value,
    "json_diffs": _json_diffs, "UnicodeDecodeError": UnicodeDecodeError,
    "decode_mariadb_hires_timestamp": V.decode_mariadb_hires_timestamp,
    "decode_mariadb_hires_datetime": V.decode_mariadb_hires_datetime,
    "decode_mariadb_hires_time": V.decode_mariadb_hires_time,
    "Decimal": Decimal, "DECIMAL_CONTEXT": Context(prec=MAX_PREC), "datetime": _datetime,
    "timedelta": _timedelta, "EPOCH": V.EPOCH,
    "U32BE": struct.Struct(">I").unpack_from, "U64BE": struct.Struct(">Q").unpack_from,
}


def _text_lines(col: Column, v: str, consts: dict[str, Any], numeric: bool = False) -> list[str]:
    """Turn raw bytes in ``s`` into the column value (numeric form: UTF-8 text stays bytes)."""
    if col.text is False or col.codec is None or (numeric and col.codec == "utf-8"):
        return [f"{v} = s"]
    if col.codec == "utf-8":
        # decode() without arguments is UTF-8 (strict) and faster than decode('utf-8')
        return ["try:", f"    {v} = s.decode()", "except UnicodeDecodeError:", f"    {v} = s"]
    return [f"{v} = decode_text(s, {col.codec!r})"]


# Inlined decoders for DECIMAL, DATETIME2 and TIMESTAMP2. They handle the common case (the
# bytes are there, the value is valid) and hand anything else to the function in .values /
# .binary_decimal, which produces the exact same value or error. ``blen`` is len(buf).

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _read_be(size: int) -> str:
    if size == 4:
        return "U32BE(buf, p)[0]"
    if size == 8:
        return "U64BE(buf, p)[0]"
    return f"int.from_bytes(buf[p:p + {size}], 'big')"


def _decimal_lines(v: str, precision: int, scale: int, consts: dict[str, Any],
                   numeric: bool = False) -> list[str]:
    call = f"{v}, p = decode_decimal(buf, p, {precision}, {scale})"
    if not (1 <= precision <= 18 and 0 <= scale <= precision):
        return [call]
    int_words, lead_digits = divmod(precision - scale, 9)
    frac_words, trail_digits = divmod(scale, 9)
    # digit groups, most significant first: (bytes, decimal digits)
    groups = [(4, 9)] * (int_words + frac_words)
    if lead_digits:
        groups.insert(0, (_DIG2BYTES[lead_digits], lead_digits))
    if trail_digits:
        groups.append((_DIG2BYTES[trail_digits], trail_digits))
    # one big-endian struct field per group (two for a 3-byte group)
    fmt, widths, exprs = "", [], []
    for nbytes, _ in groups:
        k = len(widths)
        if nbytes == 3:
            fmt += "BH"
            widths += [8, 16]
            exprs.append(f"(f{k} << 16 | f{k + 1})")
        else:
            fmt += {1: "B", 2: "H", 4: "I"}[nbytes]
            widths.append(8 * nbytes)
            exprs.append(f"f{k}")
    name = "DEC_" + fmt
    consts[name] = struct.Struct(">" + fmt).unpack_from
    size = sum(n for n, _ in groups)
    top = 1 << (widths[0] - 1)  # the sign bit, set for positive values
    fields = ", ".join(f"f{k}" for k in range(len(widths)))
    checks = " and ".join(f"{e} < {10 ** digits}" for e, (_, digits) in zip(exprs, groups))
    value = exprs[0]
    for e, (_, digits) in zip(exprs[1:], groups[1:]):
        value = f"({value}) * {10 ** digits} + {e}"

    def finish(unscaled: str) -> list[str]:
        # exact: the context has the largest precision; -0 gives 0 as decode_decimal does
        make = f"Decimal({unscaled})" + (f".scaleb(-{scale}, DECIMAL_CONTEXT)" if scale else "")
        if numeric:
            make = unscaled
        return [f"    if {checks}:", f"        {v} = {make}", f"        p += {size}",
                "    else:", "        " + call]

    lines = [f"if p + {size} <= blen:",
             f"    {fields}{',' if len(widths) == 1 else ''} = {name}(buf, p)",
             f"    if f0 >= {top}:",
             f"        f0 -= {top}"]
    lines += ["    " + line for line in finish(value)]
    lines += ["    else:",  # negative: every byte inverted
              f"        f0 ^= {top - 1}"]
    lines += [f"        f{k} ^= {(1 << w) - 1}" for k, w in enumerate(widths) if k]
    lines += ["    " + line for line in finish(f"-({value})")]
    lines += ["else:", "    " + call]
    return lines


def _fraction(fsp: int) -> tuple[int, str]:
    """(bytes, expression for the microseconds in the low bytes of ``x``) of a fraction."""
    if fsp <= 0:
        return 0, "0"
    if fsp <= 2:
        return 1, "(x & 255) * 10000"
    if fsp <= 4:
        return 2, "(x & 65535) * 100"
    return 3, "x & 16777215"


def _datetime2_lines(v: str, fsp: int, numeric: bool = False) -> list[str]:
    """DATETIME2 as a naive ``datetime`` (numeric: microseconds since 1970-01-01, the value
    read as UTC); negative values and what ``datetime`` rejects get the fallback's value."""
    frac_bytes, micro = _fraction(fsp)
    size = 5 + frac_bytes
    fallback = f"decode_datetime2(buf, p, {fsp})"
    shift = f" >> {8 * frac_bytes}" if frac_bytes else ""
    if numeric:
        value = ["    k = d >> 17",
                 "    dm = DAY_MICROS.get(k, MISSING)",
                 "    if dm is MISSING:",
                 "        dm = day_micros(k)",
                 f"    us = {micro}",
                 "    h = (d >> 12) & 31",
                 "    mi = (d >> 6) & 63",
                 "    sec = d & 63",
                 "    if dm is not None and d >= 0 and h < 24 and mi < 60 and sec < 60 and us < 1000000:",
                 f"        {v} = dm + h * 3600000000 + mi * 60000000 + sec * 1000000 + us",
                 "    else:",
                 f"        {v} = {fallback}[0]"]
    else:
        value = ["    if d >= 0:",  # negative values are printed by the fallback
                 "        y = d >> 22",
                 "        try:",
                 f"            {v} = datetime(y // 13, y % 13, (d >> 17) & 31, (d >> 12) & 31, "
                 f"(d >> 6) & 63, d & 63, {micro})",
                 "        except ValueError:",
                 f"            {v} = {fallback}[0]",
                 "    else:",
                 f"        {v} = {fallback}[0]"]
    return [f"if p + {size} <= blen:",
            f"    x = {_read_be(size)}",
            f"    d = (x{shift}) - 549755813888",
            *value,
            f"    p += {size}",
            "else:",
            f"    {v}, p = {fallback}"]


def _day_micros(key: int) -> Optional[int]:
    """Microseconds from 1970-01-01 to the day packed as DATETIME2 packs it
    ((year * 13 + month) << 5 | day), or None for a day ``datetime`` rejects."""
    ym = key >> 5
    try:
        days: Optional[int] = (_date(ym // 13, ym % 13, key & 31).toordinal() - _EPOCH_ORDINAL) * 86_400_000_000
    except ValueError:
        days = None
    return _remember(_DAY_MICROS, key, days)


def _date_days(packed: int) -> Optional[int]:
    """Days from 1970-01-01 to a DATE packed as the binlog packs it (day, month, year in
    5, 4 and 15 bits), or None for a date ``date`` rejects."""
    try:
        days: Optional[int] = _date(packed >> 9, (packed >> 5) & 15, packed & 31).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        days = None
    return _remember(_DATE_DAYS, packed, days)


def _remember(cache: dict[int, Optional[int]], key: int, value: Optional[int]) -> Optional[int]:
    """Store ``value`` in one of the day caches, which are emptied past 100,000 entries."""
    if len(cache) > 100_000:
        cache.clear()
    cache[key] = value
    return value


_EPOCH_ORDINAL = _date(1970, 1, 1).toordinal()
_DAY_MICROS: dict[int, Optional[int]] = {}
_DATE_DAYS: dict[int, Optional[int]] = {}


def _date_numeric_lines(v: str) -> list[str]:
    return ["if p + 3 <= blen:",
            "    x = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16)",
            f"    {v} = DATE_DAYS.get(x, MISSING)",
            f"    if {v} is MISSING:",
            f"        {v} = date_days(x)",
            f"    if {v} is None:",
            f"        {v} = decode_date(buf, p)[0]",
            "    p += 3",
            "else:",
            f"    {v}, p = decode_date(buf, p)"]


def _timestamp2_lines(v: str, fsp: int, numeric: bool = False) -> list[str]:
    """TIMESTAMP2 as a UTC ``datetime`` (numeric: microseconds since the epoch)."""
    frac_bytes, micro = _fraction(fsp)
    size = 4 + frac_bytes
    fallback = f"decode_timestamp2(buf, p, {fsp})"
    sec = f"x >> {8 * frac_bytes}" if frac_bytes else "x"
    value = f"({sec}) * 1000000 + ({micro})" if numeric else f"EPOCH + timedelta(0, {sec}, {micro})"
    return [f"if p + {size} <= blen:",
            f"    x = {_read_be(size)}",
            "    if x:",  # zero is the text '0000-00-00 00:00:00'
            f"        {v} = {value}",
            "    else:",
            f"        {v} = {fallback}[0]",
            f"    p += {size}",
            "else:",
            f"    {v}, p = {fallback}"]


# long: one branch per MySQL column type, each generating that type's decode statements
def _value_lines(col: Column, v: str, consts: dict[str, Any], partial_bit: int | None,
                 numeric: bool = False) -> list[str]:
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
        return _decimal_lines(v, meta >> 8, meta & 0xFF, consts, numeric)
    if t == C.MYSQL_TYPE_YEAR:
        return [f"{v} = buf[p]", "p += 1", f"if {v}: {v} += 1900"]
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        if numeric:
            return _date_numeric_lines(v)
        return [f"{v}, p = decode_date(buf, p)"]
    if t == C.MYSQL_TYPE_DATETIME2:
        return _datetime2_lines(v, meta, numeric)
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return _timestamp2_lines(v, meta, numeric)
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
                *pad, *_text_lines(col, v, consts, numeric)]
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
        return lines + _text_lines(col, v, consts, numeric)
    if t == C.MYSQL_TYPE_NULL:
        return [f"{v} = None"]
    raise UnsupportedColumnTypeError(
        f"column {col.name} has type {col.type_name} ({t}), which row events cannot be decoded for")


def null_bitmap_lines(present: int) -> list[str]:
    """Generated statements reading a row image's null bitmap at ``p`` into ``nb`` (none when no
    column is present), for an image with the columns the bitmap ``present`` names."""
    nb_bytes = (bin(present).count("1") + 7) // 8
    if nb_bytes == 1:
        return ["nb = buf[p]", "p += 1"]
    if nb_bytes:
        return [f"nb = int.from_bytes(buf[p:p + {nb_bytes}], 'little')", f"p += {nb_bytes}"]
    return []


def _image_lines(columns: tuple[Column, ...], present: int, partial_json: bool, prefix: str,
                 consts: dict[str, Any], numeric: bool = False) -> tuple[list[str], str]:
    """Statements that decode one row image at ``p`` (values in ``<prefix><column index>``),
    and the expression of its values tuple."""
    lines = null_bitmap_lines(present)
    out = []
    bit = 0
    json_k = 0
    checked, unchecked = [], []  # every null bit tested / those of NOT NULL columns not
    not_null = 0
    for col in columns:
        partial_bit = None
        if partial_json and col.type == C.MYSQL_TYPE_JSON:
            partial_bit = json_k  # partial bits count every JSON column of the table
            json_k += 1
        if not (present >> col.index) & 1:
            out.append("ABSENT")
            continue
        v = f"{prefix}{col.index}"
        out.append(v)
        body = _value_lines(col, v, consts, partial_bit, numeric)
        block = [f"if nb & {1 << bit}:", f"    {v} = None", "else:"]
        block += ["    " + line for line in body]
        checked += block
        if col.nullable:
            unchecked += block
        else:
            not_null |= 1 << bit
            unchecked += body
        bit += 1
    if bin(not_null).count("1") >= 2:
        # The null bits of NOT NULL columns are clear: test them at once, not one by one (the
        # general code still decodes an image where one is set).
        lines.append(f"if not nb & {not_null}:")
        lines += ["    " + line for line in unchecked]
        lines.append("else:")
        lines += ["    " + line for line in checked]
    else:
        lines += checked
    return lines, f"({', '.join(out)}{',' if len(out) == 1 else ''})"


def _compile(lines: list[str], consts: dict[str, Any], name: str) -> Callable[..., Any]:
    source = "\n".join(lines)
    namespace = dict(_GLOBALS)
    namespace.update(consts)
    exec(compile(source, "<row decoder>", "exec"), namespace)
    fn = namespace[name]
    fn.source = source  # kept for debugging
    return cast("Callable[..., Any]", fn)


def compile_image_decoder(columns: tuple[Column, ...], present: int, *,
                          partial_json: bool = False) -> Callable[..., Any]:
    """Build ``decode(buf, p[, pj]) -> (values_tuple, new_p)`` for one row image.

    ``present`` is the columns-present bitmap as an int (bit i = column i). ``pj`` is the
    partial-JSON bitmap of a PARTIAL_UPDATE_ROWS after image: one bit per JSON column of the
    table, in column order.
    """
    consts: dict[str, Any] = {}
    body, row = _image_lines(columns, present, partial_json, "v", consts)
    args = "buf, p, pj" if partial_json else "buf, p"
    lines = [f"def decode({args}):", "    blen = len(buf)"]
    lines += ["    " + line for line in body]
    lines.append(f"    return {row}, p")
    return _compile(lines, consts, "decode")


def compile_rows_decoder(columns: tuple[Column, ...], present: int,
                         present_after: int | None = None) -> Callable[..., Any]:
    """Build ``decode_rows(buf, p, end) -> (rows_list, new_p)`` for the rows of one event.

    It decodes row images from ``p`` while ``p < end``: one values tuple per row, or with
    ``present_after`` (UPDATE_ROWS) a ``(before, after)`` pair of them. Same values as
    :func:`compile_image_decoder`, without a function call per image.
    """
    consts: dict[str, Any] = {}
    body, row = _image_lines(columns, present, False, "v" if present_after is None else "b", consts)
    if present_after is not None:
        after, after_row = _image_lines(columns, present_after, False, "a", consts)
        body += after
        row = f"({row}, {after_row})"
    lines = ["def decode_rows(buf, p, end):", "    blen = len(buf)", "    rows = []",
             "    append = rows.append", "    while p < end:"]
    lines += ["        " + line for line in body]
    lines += [f"        append({row})", "    return rows, p"]
    return _compile(lines, consts, "decode_rows")


def compile_columns_decoder(columns: tuple[Column, ...], present: int,
                            present_after: int | None = None) -> Callable[..., Any]:
    """Build ``decode_columns(buf, p, end, before, after) -> (row_count, new_p)``.

    It decodes the rows of one event like :func:`compile_rows_decoder`, but appends each value
    to a per-column list instead of building a tuple per row: ``before[i]`` receives the
    values of column ``i`` (of the only image, or the before image of an update) and
    ``after[i]`` those of the after image, for the columns present in the image only. Values
    take their *numeric form*, the cheapest to turn into columnar arrays:

    - DECIMAL(p, s) with p <= 18: the unscaled integer (``value * 10**s``);
    - DATE: days since 1970-01-01; DATETIME(fsp): microseconds since 1970-01-01T00:00 (the
      value read as UTC); TIMESTAMP(fsp): microseconds since the Unix epoch;
    - text in a UTF-8 character set (utf8mb3, utf8mb4): its bytes, not yet validated;

    where the bytes hold a valid value. Every other value (other types, zero or invalid dates,
    legacy temporal formats) is what the row decoders return, so a column may mix both forms.
    """
    consts: dict[str, Any] = {}
    body, _ = _image_lines(columns, present, False, "b", consts, numeric=True)
    sinks = [f"b{c.index}" for c in columns if (present >> c.index) & 1]
    body += [f"{s}_append({s})" for s in sinks]
    setup = [f"{s}_append = before[{s[1:]}].append" for s in sinks]
    if present_after is not None:
        after, _ = _image_lines(columns, present_after, False, "a", consts, numeric=True)
        after_sinks = [f"a{c.index}" for c in columns if (present_after >> c.index) & 1]
        body += after + [f"{s}_append({s})" for s in after_sinks]
        setup += [f"{s}_append = after[{s[1:]}].append" for s in after_sinks]
    lines = ["def decode_columns(buf, p, end, before, after):", "    blen = len(buf)",
             "    count = 0"]
    lines += ["    " + line for line in setup]
    lines += ["    while p < end:"]
    lines += ["        " + line for line in body]
    lines += ["        count += 1", "    return count, p"]
    consts.update(DAY_MICROS=_DAY_MICROS, DATE_DAYS=_DATE_DAYS, day_micros=_day_micros,
                  date_days=_date_days)
    return _compile(lines, consts, "decode_columns")


def rows_end_mismatch(tm: TableMap, p: int, end: int) -> str:
    return (f"row data of {tm.qualified_name} ends at {p} but the event ends at {end}: the "
            f"event does not match its TABLE_MAP")


#: what reading bytes that do not hold what they should can raise
DECODE_ERRORS = (IndexError, struct.error, ValueError, UnicodeDecodeError, OverflowError,
                 KeyError, TypeError)


def row_data_error(tm: TableMap, flavor: Optional[str], exc: Exception) -> CorruptEventError:
    """The error for row data that cannot be decoded with the table's TABLE_MAP."""
    legacy = [c.name for c in tm.columns if c.type in (7, 11, 12) and not c.hires_fsp]
    if flavor == Flavor.MARIADB and legacy:
        return CorruptEventError(
            f"row data of {tm.qualified_name} does not match its TABLE_MAP ({exc})",
            hint=f"columns {', '.join(legacy)} use the pre-10.1 MariaDB temporal format whose "
                 "fractional-second precision is not in the binlog; pass the table schema "
                 "(ColumnSchema.datetime_precision) to decode them")
    if isinstance(exc, CorruptEventError):
        return exc
    return CorruptEventError(f"row data of {tm.qualified_name}: {exc}")


class DeferredRows:
    """The undecoded rows of one rows event, decoded on demand straight into columns.

    :meth:`decode_into` appends the values of column ``i`` to ``before[i]`` (the only image,
    or the before image of an update) and to ``after[i]`` (the after image), for the columns
    present in each image (``present`` / ``present_after`` bitmaps), in their numeric form
    (see :func:`compile_columns_decoder`), and returns the number of rows. Errors are raised
    as the decoder raises them, with the event's source and offset. The fields are plain
    data (the row bytes are ``data[start:end]``), so the rows can be decoded in another
    process: :meth:`rebuild` there, with a cache of compiled decoders.
    """
    __slots__ = ("table_map", "data", "start", "end", "present", "present_after", "flavor",
                 "source", "pos", "_decode")

    def __init__(self, table_map: TableMap, data: bytes, start: int, end: int, present: int,
                 present_after: Optional[int], flavor: Optional[str], source: Optional[str], pos: int,
                 decode: Callable[..., tuple[int, int]]) -> None:
        self.table_map, self.data, self.start, self.end = table_map, data, start, end
        self.present, self.present_after = present, present_after
        self.flavor, self.source, self.pos, self._decode = flavor, source, pos, decode

    @classmethod
    def rebuild(cls, table_map: TableMap, data: bytes, start: int, end: int, present: int,
                present_after: Optional[int], flavor: Optional[str], source: Optional[str], pos: int,
                cache: dict[Any, Any]) -> "DeferredRows":
        """Deferred rows with the column decoder from ``cache`` (keyed by table map)."""
        key = (id(table_map), present, present_after)
        hit = cache.get(key)
        if hit is None or hit[0] is not table_map:
            hit = cache[key] = (table_map, compile_columns_decoder(table_map.columns, present,
                                                                   present_after))
        return cls(table_map, data, start, end, present, present_after, flavor, source, pos, hit[1])

    def decode_into(self, before: list[list[Any]], after: Optional[list[list[Any]]] = None) -> int:
        try:
            n, p = self._decode(self.data, self.start, self.end, before, after)
            if p != self.end:
                raise CorruptEventError(rows_end_mismatch(self.table_map, p, self.end))
        except (CorruptEventError, *DECODE_ERRORS) as exc:
            raise row_data_error(self.table_map, self.flavor, exc).at(self.source, self.pos) from None
        return n
