"""The column readers of the generated row-bytes renderer (:mod:`.jsonl_codegen`).

Per column type, the statements reading one value from the row bytes at ``p`` (as the codec's
row decoders read it) and leaving its JSON text (:func:`fixed_column`, :func:`variable_lines`);
the bytes templates the lines are written with (:class:`Template`); the names the generated
code runs with (:func:`fused_globals`).
"""
from __future__ import annotations

import datetime as dt
import struct
from binascii import b2a_base64 as _b2a_base64
from json.encoder import encode_basestring as _encode_basestring
from typing import Any, Callable, Optional, TypeVar

from ..codec import constants as C
from ..codec import values as V
from ..codec.rows import _decode_text as _text_value
from ..codec.rows import _fraction, _json_value
from ..codec.events import Column

_K = TypeVar("_K")
_V = TypeVar("_V")

#: ``convert(x, j, fields, at)`` of :class:`Fixed`: statements leaving a column's JSON text in ``x``.
Convert = Callable[[str, str, list[str], str], list[str]]

_STRUCTS = {name: struct.Struct(fmt).unpack_from for name, fmt in (
    ("U16", "<H"), ("U32", "<I"))}
_LENGTHS = {1: "buf[p]", 2: "U16(buf, p)[0]", 3: "int.from_bytes(buf[p:p + 3], 'little')",
            4: "U32(buf, p)[0]"}
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()

# JSON texts of date and time parts
_DATETIME_DAYS: dict[int, bytes] = {}   # DATETIME2 day bits ((year * 13 + month) << 5 | day) -> b"YYYY-MM-DD" | b""
_EPOCH_DAYS: dict[int, bytes] = {}      # days since 1970-01-01 -> b"YYYY-MM-DD"
_DATES: dict[int, bytes] = {}           # DATE as packed in the row -> its JSON text (UTF-8)


def remember(cache: dict[_K, _V], key: _K, value: _V, limit: int = 100_000) -> _V:
    if len(cache) > limit:
        cache.clear()
    cache[key] = value
    return value


def _datetime_day(key: int) -> bytes:
    """``key``: the day bits of a DATETIME2 value; b"" for a day datetime() rejects (the
    codec's fallback decides)."""
    ym = key >> 5
    try:
        text = dt.date(ym // 13, ym % 13, key & 31).isoformat().encode()
    except ValueError:
        text = b""
    return remember(_DATETIME_DAYS, key, text)


def _epoch_day(days: int) -> bytes:
    return remember(_EPOCH_DAYS, days, dt.date.fromordinal(_EPOCH_ORDINAL + days).isoformat().encode())


def _set_text(mask: int, labels: tuple[str, ...]) -> str:
    return ",".join(label for i, label in enumerate(labels) if mask >> i & 1)


def _vector(data: bytes) -> tuple[float, ...]:
    return struct.unpack("<%df" % (len(data) // 4), data[: len(data) // 4 * 4])


_FUSED_GLOBALS: dict[str, Any] = {}


def fused_globals() -> dict[str, Any]:
    """The names the generated renderers use (built on first use)."""
    if not _FUSED_GLOBALS:
        _FUSED_GLOBALS.update({
            **_STRUCTS, "ESC": _encode_basestring, "B64": _b2a_base64, "FLOAT_REPR": float.__repr__,
            "D2": tuple(b"%02d" % i for i in range(100)),
            "HOURS": tuple(b"%02d" % h if h < 24 else b"" for h in range(32)),  # DATETIME2 hour bits
            "MINSEC": tuple(b"%02d:%02d" % (k >> 6, k & 63) if k >> 6 < 60 and k & 63 < 60 else b""
                            for k in range(4096)),  # DATETIME2 minute and second bits
            "CLOCK_MINUTES": tuple(b"%02d:%02d" % divmod(s, 60) for s in range(3600)),
            "DATETIME_DAYS": _DATETIME_DAYS, "EPOCH_DAYS": _EPOCH_DAYS, "DATES": _DATES,
            "datetime_day": _datetime_day, "epoch_day": _epoch_day, "remember": remember,
            "set_text": _set_text, "vector": _vector, "text_value": _text_value, "json_value": _json_value,
            "UnicodeDecodeError": UnicodeDecodeError,
            "decode_decimal": V.decode_decimal, "decode_date": V.decode_date,
            "decode_datetime2": V.decode_datetime2, "decode_timestamp2": V.decode_timestamp2,
            "decode_time2": V.decode_time2, "decode_time_v1": V.decode_time_v1,
            "decode_datetime_v1": V.decode_datetime_v1, "decode_timestamp_v1": V.decode_timestamp_v1,
            "decode_mariadb_hires_timestamp": V.decode_mariadb_hires_timestamp,
            "decode_mariadb_hires_datetime": V.decode_mariadb_hires_datetime,
            "decode_mariadb_hires_time": V.decode_mariadb_hires_time,
        })
    return _FUSED_GLOBALS


def _base64(data: str) -> str:
    return f"b'\"' + B64({data}, newline=False) + b'\"'"


def _bytes_literal(data: bytes) -> str:
    """``data`` as a bytes literal in generated source."""
    return "b'" + "".join(chr(c) if 32 <= c < 127 and c not in b"\\'" else "\\x%02x" % c
                          for c in data) + "'"


class Template:
    """A bytes %-format expression: literal text and formatted values."""

    fmt: bytes
    args: list[str]

    def __init__(self) -> None:
        self.fmt, self.args = b"", []

    def text(self, data: bytes) -> "Template":
        self.fmt += data.replace(b"%", b"%%")
        return self

    def value(self, directive: str, expr: str) -> "Template":
        self.fmt += directive.encode()
        self.args.append(expr)
        return self

    def extend(self, other: "Template") -> "Template":
        self.fmt += other.fmt
        self.args += other.args
        return self

    def digits(self, expr: str, digits: int) -> "Template":
        """The int ``expr`` (< 10**digits) with ``digits`` digits."""
        return self.value("%b", f"D2[{expr}]") if digits == 2 else self.value(f"%0{digits}d", expr)

    def source(self) -> str:
        if not self.args:
            return _bytes_literal(self.fmt.replace(b"%%", b"%"))
        return f"{_bytes_literal(self.fmt)} % ({', '.join(self.args)},)"


def _big_endian_parts(size: int) -> list[tuple[str, int]]:
    """Struct codes reading ``size`` bytes big-endian, most significant first, with their widths."""
    parts = {1: "B", 2: "H", 3: "BH", 4: "I", 5: "BI", 6: "HI", 7: "BHI", 8: "Q"}[size]
    return [(code, {"B": 8, "H": 16, "I": 32, "Q": 64}[code]) for code in parts]


def _combine(fields: list[str], widths: list[int]) -> str:
    """The integer that big-endian fields of these widths make together."""
    expr, shift = [], 0
    for name, width in reversed(list(zip(fields, widths))):
        expr.insert(0, f"{name} << {shift}" if shift else name)
        shift += width
    return expr[0] if len(expr) == 1 else "(" + " | ".join(expr) + ")"


class Fixed:
    """A column read at a fixed offset from ``p`` as struct fields (``order``: '<' or '>');
    ``convert`` leaves the JSON text in bytes, or an int where ``is_int``."""

    def __init__(self, order: str, codes: str, convert: Optional[Convert], is_int: bool = False,
                 identity: bool = False) -> None:
        self.order, self.codes, self.convert, self.is_int = order, codes, convert, is_int
        self.identity = identity  # one field, which is the value (an int)
        self.size = struct.calcsize("<" + codes)


def _decimal_fixed(precision: int, scale: int) -> Optional[Fixed]:
    if not (1 <= precision <= 18 and 0 <= scale <= precision):
        return None
    int_words, lead_digits = divmod(precision - scale, 9)
    frac_words, trail_digits = divmod(scale, 9)
    groups = [(4, 9)] * int_words  # (bytes, digits), most significant first
    if lead_digits:
        groups.insert(0, (_DIG2BYTES[lead_digits], lead_digits))
    n_int = len(groups)
    groups += [(4, 9)] * frac_words
    if trail_digits:
        groups.append((_DIG2BYTES[trail_digits], trail_digits))
    codes = "".join(c for nbytes, _ in groups for c, _ in _big_endian_parts(nbytes))

    def convert(x: str, j: str, f: list[str], at: str) -> list[str]:
        k, exprs, widths = 0, [], []
        for nbytes, _ in groups:
            parts = _big_endian_parts(nbytes)
            exprs.append(_combine(f[k:k + len(parts)], [w for _, w in parts]))
            widths += [w for _, w in parts]
            k += len(parts)
        top = 1 << (widths[0] - 1)  # the sign bit, set for positive values
        checks = " and ".join(f"{e} < {10 ** d}" for e, (_, d) in zip(exprs, groups))
        whole = exprs[0]
        for e, (_, d) in zip(exprs[1:n_int], groups[1:n_int]):
            whole = f"({whole}) * {10 ** d} + {e}"
        if not n_int:
            whole = "0"

        # Decimal(unscaled).scaleb(-scale) printed with format "f": the integer part without
        # leading zeros, then exactly ``scale`` digits; a negative zero prints as zero
        def text(sign: bytes) -> str:
            t = Template().text(b'"' + sign).value("%d", whole)
            if scale:
                t.text(b".")
                for e, (_, d) in zip(exprs[n_int:], groups[n_int:]):
                    t.digits(e, d)
            return t.text(b'"').source()
        zero = _bytes_literal(b'"0' + (b"." + b"0" * scale if scale else b"") + b'"')
        nonzero = " or ".join(exprs)
        slow = f"{x} = {j}(decode_decimal(buf, {at}, {precision}, {scale})[0])"
        return [f"if {f[0]} >= {top}:",
                f"    {f[0]} -= {top}",
                f"    if {checks}:",
                f"        {x} = {text(b'')}",
                "    else:",
                f"        {slow}",
                "else:",  # negative: every byte inverted
                f"    {f[0]} ^= {top - 1}",
                *[f"    {name} ^= {(1 << w) - 1}" for name, w in zip(f[1:], widths[1:])],
                f"    if {checks}:",
                f"        {x} = {text(b'-')} if {nonzero} else {zero}",
                "    else:",
                f"        {slow}"]
    return Fixed(">", codes, convert)


def _fraction_text(t: Template, fsp: int) -> Template:
    """The microseconds in ``us`` as format_fraction(us, fsp) prints them."""
    if fsp <= 0:
        return t
    return t.text(b".").digits("us" if fsp == 6 else f"us // {10 ** (6 - fsp)}", fsp)


def _datetime2_fixed(fsp: int) -> Optional[Fixed]:
    if not 0 <= fsp <= 6:
        return None
    frac_bytes, micro = _fraction(fsp)
    parts = _big_endian_parts(5 + frac_bytes)
    shift = f" >> {8 * frac_bytes}" if frac_bytes else ""

    def convert(x: str, j: str, f: list[str], at: str) -> list[str]:
        raw = _combine(f, [w for _, w in parts])
        lines = [] if len(f) == 1 else [f"x = {raw}"]
        raw = f[0] if len(f) == 1 else "x"
        micro_of_raw = micro.replace("x", raw)
        return [*lines,
                f"d = ({raw}{shift}) - 549755813888",
                "day = DATETIME_DAYS.get(d >> 17)",
                "if day is None:",
                "    day = datetime_day(d >> 17)",
                "hh = HOURS[d >> 12 & 31]",
                "ms = MINSEC[d & 4095]",
                f"us = {micro_of_raw}",
                # a negative d has a negative day key, which no date has
                "if day and hh and ms and us < 1000000:",
                f"    {x} = " + _fraction_text(Template().text(b'"').value("%b", "day").text(b" ").value(
                    "%b", "hh").text(b":").value("%b", "ms"), fsp).text(b'"').source(),
                "else:",
                f"    {x} = {j}(decode_datetime2(buf, {at}, {fsp})[0])"]
    return Fixed(">", "".join(c for c, _ in parts), convert)


def _timestamp2_fixed(fsp: int) -> Optional[Fixed]:
    if not 0 <= fsp <= 6:
        return None
    frac_bytes, micro = _fraction(fsp)
    codes = "I" + {0: "", 1: "B", 2: "H", 3: "BH"}[frac_bytes]
    widths = [32] + [{"B": 8, "H": 16}[c] for c in codes[1:]]

    def convert(x: str, j: str, f: list[str], at: str) -> list[str]:
        sec = f"x >> {8 * frac_bytes}" if frac_bytes else "x"
        return [f"x = {_combine(f, widths)}",
                f"us = {micro}",
                "if x and us < 1000000:",  # zero is the text '0000-00-00 00:00:00'
                f"    days, sod = divmod({sec}, 86400)",
                "    day = EPOCH_DAYS.get(days)",
                "    if day is None:",
                "        day = epoch_day(days)",
                "    hh, ms = divmod(sod, 3600)",
                f"    {x} = " + _fraction_text(Template().text(b'"').value("%b", "day").text(b" ").value(
                    "%b", "D2[hh]").text(b":").value("%b", "CLOCK_MINUTES[ms]"), fsp).text(b'"').source(),
                "else:",
                f"    {x} = {j}(decode_timestamp2(buf, {at}, {fsp})[0])"]
    return Fixed(">", codes, convert)


def fixed_column(col: Column, consts: dict[str, Any]) -> Optional[Fixed]:
    """How to read a fixed-width column of ``col``'s type from struct fields, or None."""
    t, meta = col.type, col.meta
    if col.hires_fsp:
        return None
    simple = {C.MYSQL_TYPE_TINY: "Bb", C.MYSQL_TYPE_SHORT: "Hh", C.MYSQL_TYPE_LONG: "Ii",
              C.MYSQL_TYPE_LONGLONG: "Qq"}
    if t in simple:  # an int formats as json.dumps writes it
        return Fixed("<", simple[t][0 if col.unsigned else 1], None, True, True)
    if t in (C.MYSQL_TYPE_FLOAT, C.MYSQL_TYPE_DOUBLE):
        # float.__repr__ is what json.dumps writes for a finite float (NaN, Infinity: fallback)
        return Fixed("<", "f" if t == C.MYSQL_TYPE_FLOAT else "d", lambda x, j, f, at: [
            f"{x} = FLOAT_REPR({f[0]}).encode() if {f[0]} - {f[0]} == 0.0 else {j}({f[0]})"])
    if t == C.MYSQL_TYPE_INT24:
        if col.unsigned:
            return Fixed("<", "BH", lambda x, j, f, at: [f"{x} = {f[0]} | {f[1]} << 8"], True)
        return Fixed("<", "Bh", lambda x, j, f, at: [f"{x} = {f[0]} | {f[1]} << 8"], True)
    if t == C.MYSQL_TYPE_YEAR:
        return Fixed("<", "B", lambda x, j, f, at: [f"{x} = {f[0]} + 1900 if {f[0]} else 0"], True)
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        return _decimal_fixed(meta >> 8, meta & 0xFF)
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        return Fixed("<", "BH", lambda x, j, f, at: [
            f"k = {f[0]} | {f[1]} << 8",
            f"{x} = DATES.get(k)",
            f"if {x} is None:",
            f"    {x} = remember(DATES, k, {j}(decode_date(buf, {at})[0]))"])
    if t == C.MYSQL_TYPE_DATETIME2:
        return _datetime2_fixed(meta)
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return _timestamp2_fixed(meta)
    if t == C.MYSQL_TYPE_ENUM and (meta & 0xFF) in (1, 2):
        if not col.enum_values:
            return Fixed("<", "BH"[(meta & 0xFF) - 1], None, True, True)
        labels = ("",) + tuple(col.enum_values)
        name = f"E{col.index}"
        consts[name] = tuple(_encode_basestring(label).encode() for label in labels)
        return Fixed("<", "BH"[(meta & 0xFF) - 1], lambda x, j, f, at: [
            f"{x} = {name}[{f[0]}] if {f[0]} < {len(labels)} else b'%d' % {f[0]}"])
    if t == C.MYSQL_TYPE_SET and (meta & 0xFF) in (1, 2, 4, 8):
        code = {1: "B", 2: "H", 4: "I", 8: "Q"}[meta & 0xFF]
        if not col.set_values:
            return Fixed("<", code, None, True, True)
        name = f"S{col.index}"
        consts[name] = tuple(col.set_values)
        return Fixed("<", code, lambda x, j, f, at: [f"{x} = ESC(set_text({f[0]}, {name})).encode()"])
    if t == C.MYSQL_TYPE_BIT:
        nbytes = ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8
        if 1 <= nbytes <= 8:
            parts = _big_endian_parts(nbytes)
            return Fixed(">", "".join(c for c, _ in parts), lambda x, j, f, at: [
                f"{x} = {_combine(f, [w for _, w in parts])}"], True)
    return None


def _text_lines(col: Column, x: str, j: str) -> list[str]:
    """The JSON text of the raw string in ``s`` (as :mod:`.rows` decodes it), in ``x``."""
    if col.text is False or col.codec is None:
        return [f"{x} = " + _base64("s")]
    if col.codec == "utf-8":
        return ["try:", f"    {x} = ESC(s.decode()).encode()",
                "except UnicodeDecodeError:", f"    {x} = " + _base64("s")]
    return [f"{x} = text_value(s, {col.codec!r})",
            f"{x} = ESC({x}).encode() if type({x}) is str else {j}({x})"]


def variable_lines(col: Column, x: str, j: str) -> list[str]:
    """Statements reading one value at ``p`` of a column that is not :func:`fixed_column`,
    leaving its JSON text in ``x``; values the codec decodes with a function go through it."""
    t, meta = col.type, col.meta
    if col.hires_fsp:
        kind = {C.MYSQL_TYPE_TIMESTAMP: "timestamp", C.MYSQL_TYPE_DATETIME: "datetime",
                C.MYSQL_TYPE_TIME: "time"}[t]
        return [f"{x}, p = decode_mariadb_hires_{kind}(buf, p, {col.hires_fsp})", f"{x} = {j}({x})"]
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        return [f"{x}, p = decode_decimal(buf, p, {meta >> 8}, {meta & 0xFF})", f"{x} = {j}({x})"]
    if t == C.MYSQL_TYPE_DATETIME2:
        return [f"{x}, p = decode_datetime2(buf, p, {meta})", f"{x} = {j}({x})"]
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return [f"{x}, p = decode_timestamp2(buf, p, {meta})", f"{x} = {j}({x})"]
    if t == C.MYSQL_TYPE_TIME2:
        return [f"{x}, p = decode_time2(buf, p, {meta})", f"{x} = {j}({x})"]
    if t in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_DATETIME, C.MYSQL_TYPE_TIMESTAMP):
        kind = {C.MYSQL_TYPE_TIME: "time", C.MYSQL_TYPE_DATETIME: "datetime",
                C.MYSQL_TYPE_TIMESTAMP: "timestamp"}[t]
        return [f"{x}, p = decode_{kind}_v1(buf, p)", f"{x} = {j}({x})"]
    if t == C.MYSQL_TYPE_ENUM:
        size = meta & 0xFF
        lines = [f"{x} = {_LENGTHS[size]}", f"p += {size}"]
        if col.enum_values:
            labels = ("",) + tuple(col.enum_values)
            lines.append(f"{x} = ESC(({labels!r})[{x}]).encode() if {x} < {len(labels)} else b'%d' % {x}")
        return lines
    if t == C.MYSQL_TYPE_SET:
        size = meta & 0xFF
        lines = [f"{x} = int.from_bytes(buf[p:p + {size}], 'little')", f"p += {size}"]
        if col.set_values:
            lines.append(f"{x} = ESC(set_text({x}, {tuple(col.set_values)!r})).encode()")
        return lines
    if t == C.MYSQL_TYPE_BIT:
        nbytes = ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8
        return [f"{x} = int.from_bytes(buf[p:p + {nbytes}], 'big')", f"p += {nbytes}"]
    if t in (C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING, C.MYSQL_TYPE_STRING):
        width = 1 if meta < 256 else 2
        if t == C.MYSQL_TYPE_STRING and col.text is False:
            # BINARY(n) (and MariaDB INET6/INET4/UUID) are n bytes; the binlog strips trailing 0x00
            return [f"n = {_LENGTHS[width]}", f"s = buf[p + {width}:p + {width} + n]",
                    f"p += {width} + n", f"if n < {meta}: s += bytes({meta} - n)",
                    f"{x} = " + _base64("s")]
    elif t in C.BLOB_TYPES or t in (C.MYSQL_TYPE_GEOMETRY, C.MYSQL_TYPE_JSON, C.MYSQL_TYPE_VECTOR):
        width = meta if meta in _LENGTHS else 4
    elif t == C.MYSQL_TYPE_NULL:
        return [f"{x} = b'null'"]
    else:
        raise ValueError(f"no JSON renderer for column type {t}")
    read = [f"q = p + {width} + {_LENGTHS[width]}", f"s = buf[p + {width}:q]", "p = q"]
    if t == C.MYSQL_TYPE_JSON:
        return read + [f"{x} = {j}(json_value(s))"]
    if t == C.MYSQL_TYPE_VECTOR:
        return read + [f"{x} = {j}(vector(s))"]
    if t == C.MYSQL_TYPE_GEOMETRY:
        return read + [f"{x} = " + _base64("s")]
    if col.text is not False and col.codec == "utf-8":  # the common case, without ``s``
        return [f"q = p + {width} + {_LENGTHS[width]}",
                "try:", f"    {x} = ESC(buf[p + {width}:q].decode()).encode()",
                "except UnicodeDecodeError:", f"    {x} = " + _base64(f"buf[p + {width}:q]"),
                "p = q"]
    return read + _text_lines(col, x, j)


def variable_is_int(col: Column) -> bool:
    """Whether :func:`variable_lines` leaves an int (else bytes)."""
    return (col.type == C.MYSQL_TYPE_BIT or (col.type == C.MYSQL_TYPE_ENUM and not col.enum_values)
            or (col.type == C.MYSQL_TYPE_SET and not col.set_values)) and not col.hires_fsp
