"""Rendering decoded values for people and for JSON: the encodings of the ``decode`` CLI.

JSON encoding of a column value: integers as numbers (exact, unsigned included), floats as
numbers, DECIMAL as an exact string, DATE ``YYYY-MM-DD``, DATETIME/TIMESTAMP
``YYYY-MM-DD HH:MM:SS[.fraction to the column's fsp]`` (TIMESTAMP in UTC), TIME
``[-]HH:MM:SS[.fraction]``, YEAR and BIT as numbers, ENUM/SET as MySQL prints them, text as
strings, binary as base64, JSON as the JSON value, GEOMETRY as base64 of the stored bytes,
VECTOR as a list of floats. Zero/invalid dates stay the strings MySQL prints.

:class:`JsonlRenderer` writes the JSON lines of ``decode --format jsonl`` with code generated
per table: the text ``json.dumps`` gives for the records :class:`RowRenderer` builds, written
straight from the row bytes of events read with ``EventDecoder(defer_rows=True)``.
"""
from __future__ import annotations

import base64
import datetime as dt
import struct
from binascii import b2a_base64 as _b2a_base64
from decimal import Decimal
from json.encoder import encode_basestring as _encode_basestring
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence, TypeVar, Union, cast

from ..codec import constants as C
from ..codec import values as V
from ..codec.charsets import decode_text as _charset_decode_text
from ..codec.events import ABSENT, Column, JsonDiffs, TableMap
from ..codec.values import format_datetime, format_time

if TYPE_CHECKING:
    from ..codec.rows import DeferredRows

_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")

#: One decoded value of a column (a row value) -> its JSON-compatible value.
JsonEncoder = Callable[[Any], object]
#: ``render(rows, head, append)`` of :func:`compile_jsonl_renderer`: decoded rows -> JSON lines.
ValuesRenderer = Callable[[Sequence[Any], str, Callable[[str], None]], None]
#: ``render(buf, p, end, head, append) -> p`` of :func:`compile_jsonl_rows_renderer`.
BytesRenderer = Callable[[bytes, int, int, bytes, Callable[[bytes], None]], int]
#: ``convert(x, j, fields, at)`` of :class:`_Fixed`: statements leaving a column's JSON text in ``x``.
_Convert = Callable[[str, str, list[str], str], list[str]]
#: Keys of :class:`JsonlRenderer`'s cache: (id of the table map, kind, what is cached, the bitmap of
#: the (before) image, the bitmap of the after image or None).
_CacheKey = tuple[int, str, str, int, Optional[int]]


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


def sql_literal(value: Any, col: Column) -> str:
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
        from ..codec.json_text import to_mysql_json_text
        return "'" + to_mysql_json_text(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    encoded = json_encoder(col)(value)
    if isinstance(encoded, list):
        return "[" + ", ".join(repr(x) for x in encoded) + "]"
    text = str(encoded)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# --------------------------------------------------------------------------------------------
# JSON lines of the ``decode`` CLI: one generated renderer per table map and row-image shape.
#
# A record is the text ``json.dumps(record, ensure_ascii=False)`` gives for
# ``{"file", "pos", "ts", "gtid", "schema", "table", "op", "before", "after"}`` with the images
# encoded by :func:`json_encoder`, character for character. The generated code writes the
# common values itself (integers, finite floats, text, DECIMAL, DATE, DATETIME/TIMESTAMP, binary
# as base64) and hands every other value (NULL, zero dates kept as text, TIME, JSON, GEOMETRY,
# VECTOR, undecodable text, ...) to ``json.dumps`` of the column's :func:`json_encoder`.

_INT_TYPES = frozenset({C.MYSQL_TYPE_TINY, C.MYSQL_TYPE_SHORT, C.MYSQL_TYPE_INT24, C.MYSQL_TYPE_LONG,
                        C.MYSQL_TYPE_LONGLONG, C.MYSQL_TYPE_YEAR, C.MYSQL_TYPE_BIT})
_TEXT_TYPES = frozenset({C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING, C.MYSQL_TYPE_STRING}) | C.BLOB_TYPES
_DATETIME_TYPES = frozenset({C.MYSQL_TYPE_DATETIME2, C.MYSQL_TYPE_TIMESTAMP2, C.MYSQL_TYPE_DATETIME,
                             C.MYSQL_TYPE_TIMESTAMP})
_DATE_TYPES = frozenset({C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE})


class _Unrenderable(Exception):
    """A row the generated renderer cannot write (an image of another shape)."""


def _fstring_literal(text: str) -> str:
    """``text`` as the literal part of a single-quoted f-string in generated source."""
    out = []
    for ch in text:
        if ch in "{}":
            out.append(ch * 2)
        elif ch in "\\'" or not (" " <= ch <= "~"):
            out.append("\\U%08x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def _value_statements(col: Column, x: str, fallback: str) -> list[str]:
    """Statements turning the decoded value in ``x`` into its JSON text, in ``x``."""
    t = col.type
    slow = f"{x} = {fallback}({x})"
    if t in _INT_TYPES or (t == C.MYSQL_TYPE_ENUM and not col.enum_values) or (
            t == C.MYSQL_TYPE_SET and not col.set_values):
        return [f"if type({x}) is not int: {slow}"]  # an int formats as json.dumps writes it
    if t in (C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET) or (t in _TEXT_TYPES and col.codec is not None
                                                       and col.text is not False):
        return [f"{x} = ESC({x}) if type({x}) is str else {fallback}({x})"]
    if t in _TEXT_TYPES:  # binary strings
        return [f"if type({x}) is bytes: {x} = '\"' + B64({x}, newline=False).decode() + '\"'",
                f"else: {slow}"]
    if t in (C.MYSQL_TYPE_FLOAT, C.MYSQL_TYPE_DOUBLE):
        # float.__repr__ is what json.dumps writes for a finite float (NaN/Infinity: fallback)
        return [f"{x} = FLOAT_REPR({x}) if type({x}) is float and {x} - {x} == 0.0 else {fallback}({x})"]
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        return [f"{x} = '\"' + format({x}, 'f') + '\"' if type({x}) is Decimal else {fallback}({x})"]
    if t in _DATE_TYPES:
        return [f"{x} = '\"' + {x}.isoformat() + '\"' if type({x}) is date else {fallback}({x})"]
    if t in _DATETIME_TYPES:
        fsp = min(column_fsp(col), 6)
        width = 20 + fsp if fsp > 0 else 19
        # the fields of a UTC datetime are those format_datetime prints
        return [f"if type({x}) is datetime and ({x}.tzinfo is None or {x}.tzinfo is UTC):",
                f"    {x} = '\"' + {x}.isoformat(' ', 'microseconds')[:{width}] + '\"'",
                f"else: {slow}"]
    return [slow]


def _absent_mask(values: Iterable[object]) -> int:
    mask = 0
    for i, v in enumerate(values):
        if v is ABSENT:
            mask |= 1 << i
    return mask


def compile_jsonl_renderer(tm: TableMap, kind: str, absent: int, absent_after: int = 0) -> ValuesRenderer:
    """Build ``render(rows, head, append)`` for the rows of one rows event of ``tm``.

    ``head`` is the record's text up to and including ``"before": ``; ``append`` receives one
    line (with its newline) per row. ``absent`` / ``absent_after`` are the bitmaps of the columns
    missing from the (before) image / the after image. Raises :class:`_Unrenderable` for a row
    with a missing column outside of them.
    """
    import json

    consts: dict[str, Any] = {"ESC": _encode_basestring, "B64": _b2a_base64, "FLOAT_REPR": float.__repr__,
                              "Decimal": Decimal, "date": dt.date, "datetime": dt.datetime, "UTC": dt.timezone.utc}
    dumps = json.dumps

    def image(prefix: str, mask: int) -> tuple[list[str], str, str]:
        """(statements, unpacking target, f-string literal of the JSON object)"""
        statements: list[str]
        targets: list[str]
        parts: list[str]
        statements, targets, parts = [], [], []
        for col in tm.columns:
            if mask >> col.index & 1:
                targets.append("_")
                continue
            x = f"{prefix}{col.index}"
            targets.append(x)
            name = f"J{prefix}{col.index}"
            consts[name] = _fallback_text(col, dumps)
            statements += _value_statements(col, x, name)
            parts.append(_fstring_literal(dumps(col.name, ensure_ascii=False) + ": ") + "{" + x + "}")
        target = "(" + ", ".join(targets) + ("," if len(targets) == 1 else "") + ")"
        return statements, target, "{{" + ", ".join(parts) + "}}"

    lines = ["def render(rows, head, append):"]
    if kind == "update":
        b_statements, b_target, b_text = image("b", absent)
        a_statements, a_target, a_text = image("a", absent_after)
        lines.append(f"    for {b_target}, {a_target} in rows:")
        body = b_statements + a_statements
        record = f"{b_text}, \"after\": {a_text}"
    else:
        statements, target, text = image("v", absent)
        lines.append(f"    for {target} in rows:")
        body = statements
        record = f"null, \"after\": {text}" if kind == "insert" else f"{text}, \"after\": null"
    lines += ["        " + s for s in body]
    lines.append("        append(f'{head}" + record + "}}\\n')")
    source = "\n".join(lines)
    namespace = dict(consts)
    exec(compile(source, f"<jsonl renderer {tm.qualified_name}>", "exec"), namespace)
    fn = namespace["render"]
    fn.source = source  # kept for debugging
    return cast(ValuesRenderer, fn)



# Rows events read with ``EventDecoder(defer_rows=True)`` keep their row bytes: the renderer
# generated below decodes them straight into JSON text, without the Python values of the
# codec's row decoders for the common types (no ``Decimal``, ``datetime`` or ``date``
# objects). It reads the bytes as :mod:`.rows` does, column by column, and writes for each
# value the text the value path writes for the value :mod:`.rows` decodes: where the codec's
# row decoders leave a value to their fallback (zero or invalid dates, DECIMAL wider than 18
# digits, TIME, JSON, ...), so does it, and renders that value as the value path does. Runs of
# NOT NULL fixed-width columns are read with one struct call. Lines are UTF-8 bytes made with
# bytes templates (a str line would take the width of its widest character, and be encoded
# again to be written). Anything else (bytes that do not decode, an image that does not end
# where the event does) makes the whole event go the value path, which renders it or raises
# the codec's error.

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


def _remember(cache: dict[_K, _V], key: _K, value: _V, limit: int = 100_000) -> _V:
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
    return _remember(_DATETIME_DAYS, key, text)


def _epoch_day(days: int) -> bytes:
    return _remember(_EPOCH_DAYS, days, dt.date.fromordinal(_EPOCH_ORDINAL + days).isoformat().encode())


def _set_text(mask: int, labels: tuple[str, ...]) -> str:
    return ",".join(label for i, label in enumerate(labels) if mask >> i & 1)


def _vector(data: bytes) -> tuple[float, ...]:
    return struct.unpack("<%df" % (len(data) // 4), data[: len(data) // 4 * 4])


def _text_value(data: bytes, codec: str) -> Union[str, bytes]:
    try:
        return _charset_decode_text(data, codec)
    except LookupError:
        return data


def _json_value(data: bytes) -> object:
    from ..codec.json_binary import decode_json_binary
    return decode_json_binary(data)


_FUSED_GLOBALS: dict[str, Any] = {}


def _fused_globals() -> dict[str, Any]:
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
            "datetime_day": _datetime_day, "epoch_day": _epoch_day, "remember": _remember,
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


class _Template:
    """A bytes %-format expression: literal text and formatted values."""

    fmt: bytes
    args: list[str]

    def __init__(self) -> None:
        self.fmt, self.args = b"", []

    def text(self, data: bytes) -> "_Template":
        self.fmt += data.replace(b"%", b"%%")
        return self

    def value(self, directive: str, expr: str) -> "_Template":
        self.fmt += directive.encode()
        self.args.append(expr)
        return self

    def extend(self, other: "_Template") -> "_Template":
        self.fmt += other.fmt
        self.args += other.args
        return self

    def digits(self, expr: str, digits: int) -> "_Template":
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


class _Fixed:
    """A column read at a fixed offset from ``p`` as struct fields (``order``: '<' or '>');
    ``convert`` leaves the JSON text in bytes, or an int where ``is_int``."""

    def __init__(self, order: str, codes: str, convert: Optional[_Convert], is_int: bool = False,
                 identity: bool = False) -> None:
        self.order, self.codes, self.convert, self.is_int = order, codes, convert, is_int
        self.identity = identity  # one field, which is the value (an int)
        self.size = struct.calcsize("<" + codes)


def _decimal_fixed(precision: int, scale: int) -> Optional[_Fixed]:
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
            t = _Template().text(b'"' + sign).value("%d", whole)
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
    return _Fixed(">", codes, convert)


def _fraction(fsp: int) -> tuple[int, str]:
    """(bytes, expression of the microseconds in the low bytes of ``x``) of a fraction."""
    if fsp <= 0:
        return 0, "0"
    if fsp <= 2:
        return 1, "(x & 255) * 10000"
    if fsp <= 4:
        return 2, "(x & 65535) * 100"
    return 3, "x & 16777215"


def _fraction_text(t: _Template, fsp: int) -> _Template:
    """The microseconds in ``us`` as format_fraction(us, fsp) prints them."""
    if fsp <= 0:
        return t
    return t.text(b".").digits("us" if fsp == 6 else f"us // {10 ** (6 - fsp)}", fsp)


def _datetime2_fixed(fsp: int) -> Optional[_Fixed]:
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
                f"    {x} = " + _fraction_text(_Template().text(b'"').value("%b", "day").text(b" ").value(
                    "%b", "hh").text(b":").value("%b", "ms"), fsp).text(b'"').source(),
                "else:",
                f"    {x} = {j}(decode_datetime2(buf, {at}, {fsp})[0])"]
    return _Fixed(">", "".join(c for c, _ in parts), convert)


def _timestamp2_fixed(fsp: int) -> Optional[_Fixed]:
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
                f"    {x} = " + _fraction_text(_Template().text(b'"').value("%b", "day").text(b" ").value(
                    "%b", "D2[hh]").text(b":").value("%b", "CLOCK_MINUTES[ms]"), fsp).text(b'"').source(),
                "else:",
                f"    {x} = {j}(decode_timestamp2(buf, {at}, {fsp})[0])"]
    return _Fixed(">", codes, convert)


def _fixed_column(col: Column, consts: dict[str, Any]) -> Optional[_Fixed]:
    """How to read a fixed-width column of ``col``'s type from struct fields, or None."""
    t, meta = col.type, col.meta
    if col.hires_fsp:
        return None
    simple = {C.MYSQL_TYPE_TINY: "Bb", C.MYSQL_TYPE_SHORT: "Hh", C.MYSQL_TYPE_LONG: "Ii",
              C.MYSQL_TYPE_LONGLONG: "Qq"}
    if t in simple:  # an int formats as json.dumps writes it
        return _Fixed("<", simple[t][0 if col.unsigned else 1], None, True, True)
    if t in (C.MYSQL_TYPE_FLOAT, C.MYSQL_TYPE_DOUBLE):
        # float.__repr__ is what json.dumps writes for a finite float (NaN, Infinity: fallback)
        return _Fixed("<", "f" if t == C.MYSQL_TYPE_FLOAT else "d", lambda x, j, f, at: [
            f"{x} = FLOAT_REPR({f[0]}).encode() if {f[0]} - {f[0]} == 0.0 else {j}({f[0]})"])
    if t == C.MYSQL_TYPE_INT24:
        if col.unsigned:
            return _Fixed("<", "BH", lambda x, j, f, at: [f"{x} = {f[0]} | {f[1]} << 8"], True)
        return _Fixed("<", "Bh", lambda x, j, f, at: [f"{x} = {f[0]} | {f[1]} << 8"], True)
    if t == C.MYSQL_TYPE_YEAR:
        return _Fixed("<", "B", lambda x, j, f, at: [f"{x} = {f[0]} + 1900 if {f[0]} else 0"], True)
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        return _decimal_fixed(meta >> 8, meta & 0xFF)
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        return _Fixed("<", "BH", lambda x, j, f, at: [
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
            return _Fixed("<", "BH"[(meta & 0xFF) - 1], None, True, True)
        labels = ("",) + tuple(col.enum_values)
        name = f"E{col.index}"
        consts[name] = tuple(_encode_basestring(label).encode() for label in labels)
        return _Fixed("<", "BH"[(meta & 0xFF) - 1], lambda x, j, f, at: [
            f"{x} = {name}[{f[0]}] if {f[0]} < {len(labels)} else b'%d' % {f[0]}"])
    if t == C.MYSQL_TYPE_SET and (meta & 0xFF) in (1, 2, 4, 8):
        code = {1: "B", 2: "H", 4: "I", 8: "Q"}[meta & 0xFF]
        if not col.set_values:
            return _Fixed("<", code, None, True, True)
        name = f"S{col.index}"
        consts[name] = tuple(col.set_values)
        return _Fixed("<", code, lambda x, j, f, at: [f"{x} = ESC(set_text({f[0]}, {name})).encode()"])
    if t == C.MYSQL_TYPE_BIT:
        nbytes = ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8
        if 1 <= nbytes <= 8:
            parts = _big_endian_parts(nbytes)
            return _Fixed(">", "".join(c for c, _ in parts), lambda x, j, f, at: [
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


def _variable_lines(col: Column, x: str, j: str) -> list[str]:
    """Statements reading one value at ``p`` of a column that is not :func:`_fixed_column`,
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


def _variable_is_int(col: Column) -> bool:
    """Whether :func:`_variable_lines` leaves an int (else bytes)."""
    return (col.type == C.MYSQL_TYPE_BIT or (col.type == C.MYSQL_TYPE_ENUM and not col.enum_values)
            or (col.type == C.MYSQL_TYPE_SET and not col.set_values)) and not col.hires_fsp


def _run_lines(run: list[tuple[Column, _Fixed]], prefix: str, consts: dict[str, Any]) -> list[str]:
    """Statements reading consecutive fixed-width columns ``run`` ([(column, _Fixed)]) at ``p``
    with one struct call per byte order, leaving their JSON texts in ``<prefix><index>``."""
    lines: list[str]
    segment: list[tuple[Column, _Fixed, int]]  # (column, how to read it, offset from p)
    lines, k, offset, segment = [], 0, 0, []

    def flush() -> None:
        nonlocal k
        if not segment:
            return
        codes = "".join(fx.codes for _, fx, _ in segment)
        name = f"R{segment[0][1].order == '<' and 'L' or 'B'}_{codes}"
        start = segment[0][2]
        names = []
        for col, fx, at in segment:
            if fx.identity:  # the field is the value: read it straight into its variable
                fields = [f"{prefix}{col.index}"]
            else:
                fields = [f"f{k + i}" for i in range(len(fx.codes))]
                k += len(fx.codes)
            names.append((col, fx, at, fields))
        all_fields = [f for *_, fields in names for f in fields]
        if codes in ("B", "b"):  # one byte: no struct call
            lines.append(f"{all_fields[0]} = buf[p{f' + {start}' if start else ''}]")
            if codes == "b":
                lines.append(f"if {all_fields[0]} > 127: {all_fields[0]} -= 256")
        else:
            consts[name] = struct.Struct(segment[0][1].order + codes).unpack_from
            lines.append(f"{', '.join(all_fields)}{',' if len(all_fields) == 1 else ''} = "
                         f"{name}(buf, p{f' + {start}' if start else ''})")
        for col, fx, at, fields in names:
            if not fx.identity:
                lines.extend(cast(_Convert, fx.convert)(f"{prefix}{col.index}", f"J{col.index}", fields,
                                                        f"p + {at}" if at else "p"))
        segment.clear()

    for col, fx in run:
        if segment and segment[-1][1].order != fx.order:
            flush()
        segment.append((col, fx, offset))
        offset += fx.size
    flush()
    lines.append(f"p += {offset}")
    return lines


def _fused_image(tm: TableMap, present: int, prefix: str, consts: dict[str, Any],
                 emit: Callable[[_Template], str]) -> list[str]:
    """Statements decoding one row image at ``p`` (null bitmap and column order as :mod:`.rows`
    reads them) and ending with ``emit(template)``: the statement that takes the image's JSON
    object, ``template`` (a :class:`_Template`) writing it."""
    n_present = bin(present).count("1")
    nb_bytes = (n_present + 7) // 8
    lines = []
    if nb_bytes == 1:
        lines += ["nb = buf[p]", "p += 1"]
    elif nb_bytes:
        lines += [f"nb = int.from_bytes(buf[p:p + {nb_bytes}], 'little')", f"p += {nb_bytes}"]
    columns = []
    for col in tm.columns:
        if (present >> col.index) & 1:
            fx = _fixed_column(col, consts)
            columns.append((col, fx, fx.is_int if fx is not None else _variable_is_int(col)))

    def one(col: Column, fx: Optional[_Fixed]) -> list[str]:
        if fx is None:
            return _variable_lines(col, f"{prefix}{col.index}", f"J{col.index}")
        return _run_lines([(col, fx)], prefix, consts)

    def null_checked(bit: int, col: Column, fx: Optional[_Fixed], is_int: bool) -> list[str]:
        x = f"{prefix}{col.index}"
        body = one(col, fx) + ([f"{x} = b'%d' % {x}"] if is_int else [])
        return [f"if nb & {1 << bit}:", f"    {x} = b'null'", "else:"] + ["    " + s for s in body]

    def template(ints: set[int]) -> _Template:
        t = _Template().text(b"{")
        for i, (col, _, _) in enumerate(columns):
            t.text((", " if i else "").encode() + _encode_basestring(col.name).encode() + b": ")
            t.value("%d" if col.index in ints else "%b", f"{prefix}{col.index}")
        return t.text(b"}")

    checked: list[str]
    unchecked: list[str]
    run: list[tuple[Column, _Fixed]]
    ints: set[int]
    checked, unchecked, run = [], [], []
    not_null, ints = 0, set()
    for bit, (col, fx, is_int) in enumerate(columns):
        checked += null_checked(bit, col, fx, is_int)
        if not col.nullable:
            not_null |= 1 << bit
            if is_int:
                ints.add(col.index)
            if fx is not None:
                run.append((col, fx))
                continue
        if run:
            unchecked += _run_lines(run, prefix, consts)
            run = []
        unchecked += one(col, fx) if not col.nullable else null_checked(bit, col, fx, is_int)
    if run:
        unchecked += _run_lines(run, prefix, consts)
    if not_null:
        # The null bits of NOT NULL columns are clear: test them at once, not one by one (the
        # general code still decodes an image where one is set).
        lines.append(f"if not nb & {not_null}:")
        lines += ["    " + line for line in unchecked + [emit(template(ints))]]
        lines.append("else:")
        lines += ["    " + line for line in checked + [emit(template(set()))]]
    else:
        lines += checked + [emit(template(set()))]
    return lines


def compile_jsonl_rows_renderer(tm: TableMap, kind: str, present: int,
                                present_after: int | None = None) -> BytesRenderer:
    """Build ``render(buf, p, end, head, append) -> p`` for the undecoded rows of one rows
    event of ``tm`` (see :class:`.rows.DeferredRows`): it decodes the row images from ``p``
    while ``p < end`` and passes one JSON line per row to ``append``, as
    :func:`compile_jsonl_renderer` writes it for the rows :mod:`.rows` decodes."""
    import json

    consts: dict[str, Any] = {}
    for col in tm.columns:
        consts[f"J{col.index}"] = _fallback_bytes(col, json.dumps)

    def record(lead: _Template, tail: bytes) -> Callable[[_Template], str]:
        """The statement appending a record: ``lead``, the image, ``tail``."""
        return lambda image: f"append({_Template().extend(lead).extend(image).text(tail).source()})"

    head = _Template().value("%b", "head")
    if kind == "update":
        body = _fused_image(tm, present, "b", consts, lambda image: f"before = {image.source()}")
        body += _fused_image(tm, cast(int, present_after), "a", consts,
                             record(_Template().extend(head).value("%b", "before").text(b', "after": '), b"}\n"))
    elif kind == "insert":
        body = _fused_image(tm, present, "v", consts, record(_Template().extend(head).text(b'null, "after": '), b"}\n"))
    else:
        body = _fused_image(tm, present, "v", consts, record(head, b', "after": null}\n'))
    lines = ["def render(buf, p, end, head, append):", "    while p < end:"]
    lines += ["        " + line for line in body]
    lines.append("    return p")
    source = "\n".join(lines)
    namespace = dict(_fused_globals())
    namespace.update(consts)
    exec(compile(source, f"<jsonl rows renderer {tm.qualified_name}>", "exec"), namespace)
    fn = namespace["render"]
    fn.source = source  # kept for debugging
    return cast(BytesRenderer, fn)


def _fallback_text(col: Column, dumps: Callable[..., str]) -> Callable[[Any], str]:
    """The JSON text of any decoded value of ``col``, as json.dumps writes its encoding."""
    encode = json_encoder(col)

    def text(v: Any) -> str:
        if v is None:
            return "null"
        if v is ABSENT:
            raise _Unrenderable
        return dumps(encode(v), ensure_ascii=False)
    return text


def _fallback_bytes(col: Column, dumps: Callable[..., str]) -> Callable[[Any], bytes]:
    """:func:`_fallback_text` in UTF-8."""
    text = _fallback_text(col, dumps)
    return lambda v: text(v).encode()


_MISSING = object()


class JsonlRenderer:
    """The JSON lines of rows events, one generated renderer per table map and image shape.

    A line is ``json.dumps(record, ensure_ascii=False)`` of the record ``{"file", "pos",
    "ts", "gtid", "schema", "table", "op", "before", "after"}`` whose images
    :meth:`RowRenderer.as_json_dict` builds, and a newline, in UTF-8. :meth:`lines` renders
    the decoded rows of an event, :meth:`deferred_lines` the undecoded rows of an event read
    with ``EventDecoder(defer_rows=True)``, decoding them straight into JSON text.
    """

    def __init__(self) -> None:
        # (table map, what was built): a generated renderer or None ("values", "bytes" keys), a
        # row decoder ("decoder" keys)
        self._cache: dict[_CacheKey, tuple[TableMap, Any]] = {}
        # the same by the table map's content: another decoder's equal map (a part of the file
        # decoded by another decoder, see parallel_decode) finds what was built for it
        self._by_content: dict[tuple[Any, ...], Any] = {}
        self._rows = RowRenderer()

    def _cached(self, key: _CacheKey, tm: TableMap, build: Callable[[], _T]) -> _T:
        hit: Optional[tuple[TableMap, _T]] = self._cache.get(key)
        if hit is None or hit[0] is not tm:
            content = (tm, *key[1:])
            built = self._by_content.get(content, _MISSING)
            if built is _MISSING:
                built = _remember(self._by_content, content, build(), limit=10_000)
            hit = self._cache[key] = (tm, built)
        return hit[1]

    def _renderer(self, key: _CacheKey, tm: TableMap, build: Callable[[], _T]) -> Optional[_T]:
        """A generated renderer, or None where the general path writes the lines."""
        def guarded() -> Optional[_T]:
            if len(set(tm.column_names)) != len(tm.columns):  # keys repeat: json.dumps keeps the last
                return None
            try:
                return build()
            except (ValueError, KeyError):  # a type the generated code does not read
                return None
        return self._cached(key, tm, guarded)

    @staticmethod
    def _head_text(head: dict[str, object]) -> str:
        import json

        text = json.dumps(head, ensure_ascii=False)
        return text[:-1] + (", " if head else "") + '"before": '

    def lines(self, head: dict[str, object], kind: str, tm: TableMap, rows: Sequence[Any]) -> list[bytes]:
        """The lines (UTF-8, newline included) of the decoded rows of one rows event; ``head``
        holds the record's keys before ``before``."""
        out: list[str] = []
        if not rows:
            return []
        first = rows[0]
        if kind == "update":
            absent, absent_after = _absent_mask(first[0]), _absent_mask(first[1])
        else:
            absent, absent_after = _absent_mask(first), 0
        fn = self._renderer((id(tm), kind, "values", absent, absent_after), tm,
                          lambda: compile_jsonl_renderer(tm, kind, absent, absent_after))
        if fn is not None:
            try:
                fn(rows, self._head_text(head), out.append)
                return [line.encode() for line in out]
            except _Unrenderable:
                out.clear()
        return [line.encode() for line in self._general_lines(head, kind, tm, rows)]

    def deferred_lines(self, head: dict[str, object], kind: str, rows: DeferredRows) -> list[bytes]:
        """The lines of the undecoded rows of one rows event (a :class:`.rows.DeferredRows`).
        Raises the codec's error for rows that do not decode."""
        tm = rows.table_map
        after = rows.present_after if kind == "update" else None
        fn = self._renderer((id(tm), kind, "bytes", rows.present, after), tm,
                          lambda: compile_jsonl_rows_renderer(tm, kind, rows.present, after))
        out: list[bytes] = []
        if fn is not None:
            try:
                if fn(rows.data, rows.start, rows.end, self._head_text(head).encode(), out.append) == rows.end:
                    return out
            except Exception:  # noqa: BLE001 - the value path decides: same text or the codec's error
                pass
            out.clear()
        return self.lines(head, kind, tm, self._decode(rows, kind))

    def _decode(self, rows: DeferredRows, kind: str) -> list[Any]:
        """The decoded rows of deferred rows, as the codec's row decoders give them."""
        from ..codec.errors import CorruptEventError
        from ..codec.rows import DECODE_ERRORS, compile_rows_decoder, row_data_error, rows_end_mismatch

        tm = rows.table_map
        after = rows.present_after if kind == "update" else None
        decode = self._cached((id(tm), kind, "decoder", rows.present, after), tm,
                              lambda: compile_rows_decoder(tm.columns, rows.present, after))
        values: list[Any]
        try:
            values, p = decode(rows.data, rows.start, rows.end)
            if p != rows.end:
                raise CorruptEventError(rows_end_mismatch(tm, p, rows.end))
        except (CorruptEventError, *DECODE_ERRORS) as exc:
            raise row_data_error(tm, rows.flavor, exc).at(rows.source, rows.pos) from None
        return values

    def _general_lines(self, head: dict[str, object], kind: str, tm: TableMap, rows: Iterable[Any]) -> list[str]:
        import json

        out = []
        for row in rows:
            record = dict(head)
            if kind == "insert":
                record["before"], record["after"] = None, self._rows.as_json_dict(tm, row)
            elif kind == "delete":
                record["before"], record["after"] = self._rows.as_json_dict(tm, row), None
            else:
                record["before"] = self._rows.as_json_dict(tm, row[0])
                record["after"] = self._rows.as_json_dict(tm, row[1])
            out.append(json.dumps(record, ensure_ascii=False) + "\n")
        return out
