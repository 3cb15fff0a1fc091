"""The generated code of the ``decode`` CLI's JSON lines: one renderer per table map and row-image shape.

:func:`compile_jsonl_renderer` renders decoded rows; :func:`compile_jsonl_rows_renderer` decodes
the row bytes of events read with ``EventDecoder(defer_rows=True)`` straight into JSON text (its
column readers are in :mod:`.jsonl_column_readers`).
"""
from __future__ import annotations

import datetime as dt
import struct
from binascii import b2a_base64 as _b2a_base64
from decimal import Decimal
from json.encoder import encode_basestring as _encode_basestring
from typing import Any, Callable, Iterable, Optional, Sequence, cast

from ..codec import constants as C
from ..codec.events import ABSENT, Column, TableMap
from ..codec.rows import null_bitmap_lines
from .jsonl_column_readers import (Convert, Fixed, Template, fixed_column, fused_globals, variable_is_int,
                                   variable_lines)
from .values_json import column_fsp, json_encoder

#: ``render(rows, head, append)`` of :func:`compile_jsonl_renderer`: decoded rows -> JSON lines.
ValuesRenderer = Callable[[Sequence[Any], str, Callable[[str], None]], None]
#: ``render(buf, p, end, head, append) -> p`` of :func:`compile_jsonl_rows_renderer`.
BytesRenderer = Callable[[bytes, int, int, bytes, Callable[[bytes], None]], int]

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


def absent_mask(values: Iterable[object]) -> int:
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


def _run_lines(run: list[tuple[Column, Fixed]], prefix: str, consts: dict[str, Any]) -> list[str]:
    """Statements reading consecutive fixed-width columns ``run`` ([(column, Fixed)]) at ``p``
    with one struct call per byte order, leaving their JSON texts in ``<prefix><index>``."""
    lines: list[str]
    segment: list[tuple[Column, Fixed, int]]  # (column, how to read it, offset from p)
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
                lines.extend(cast(Convert, fx.convert)(f"{prefix}{col.index}", f"J{col.index}", fields,
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
                 emit: Callable[[Template], str]) -> list[str]:
    """Statements decoding one row image at ``p`` (null bitmap and column order as :mod:`.rows`
    reads them) and ending with ``emit(template)``: the statement that takes the image's JSON
    object, ``template`` (a :class:`Template`) writing it."""
    lines = null_bitmap_lines(present)
    columns = []
    for col in tm.columns:
        if (present >> col.index) & 1:
            fx = fixed_column(col, consts)
            columns.append((col, fx, fx.is_int if fx is not None else variable_is_int(col)))

    def one(col: Column, fx: Optional[Fixed]) -> list[str]:
        if fx is None:
            return variable_lines(col, f"{prefix}{col.index}", f"J{col.index}")
        return _run_lines([(col, fx)], prefix, consts)

    def null_checked(bit: int, col: Column, fx: Optional[Fixed], is_int: bool) -> list[str]:
        x = f"{prefix}{col.index}"
        body = one(col, fx) + ([f"{x} = b'%d' % {x}"] if is_int else [])
        return [f"if nb & {1 << bit}:", f"    {x} = b'null'", "else:"] + ["    " + s for s in body]

    def template(ints: set[int]) -> Template:
        t = Template().text(b"{")
        for i, (col, _, _) in enumerate(columns):
            t.text((", " if i else "").encode() + _encode_basestring(col.name).encode() + b": ")
            t.value("%d" if col.index in ints else "%b", f"{prefix}{col.index}")
        return t.text(b"}")

    checked: list[str]
    unchecked: list[str]
    run: list[tuple[Column, Fixed]]
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

    def record(lead: Template, tail: bytes) -> Callable[[Template], str]:
        """The statement appending a record: ``lead``, the image, ``tail``."""
        return lambda image: f"append({Template().extend(lead).extend(image).text(tail).source()})"

    head = Template().value("%b", "head")
    if kind == "update":
        body = _fused_image(tm, present, "b", consts, lambda image: f"before = {image.source()}")
        body += _fused_image(tm, cast(int, present_after), "a", consts,
                             record(Template().extend(head).value("%b", "before").text(b', "after": '), b"}\n"))
    elif kind == "insert":
        body = _fused_image(tm, present, "v", consts, record(Template().extend(head).text(b'null, "after": '), b"}\n"))
    else:
        body = _fused_image(tm, present, "v", consts, record(head, b', "after": null}\n'))
    lines = ["def render(buf, p, end, head, append):", "    while p < end:"]
    lines += ["        " + line for line in body]
    lines.append("    return p")
    source = "\n".join(lines)
    namespace = dict(fused_globals())
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

