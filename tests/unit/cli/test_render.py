"""JSON encodings of decoded values (the documented ``decode --format jsonl`` contract)."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column
from airflow_provider_binlog.cli.values_json import json_encoder


def enc(type_code, value, meta=0, **kw):
    return json_encoder(Column(index=0, name="c", type=type_code, meta=meta, **kw))(value)


def test_decimal_is_an_exact_plain_string_even_for_scaled_zero():
    assert enc(C.MYSQL_TYPE_NEWDECIMAL, Decimal("0E-30"), 65 << 8 | 30) == "0." + "0" * 30
    assert enc(C.MYSQL_TYPE_NEWDECIMAL, Decimal("-12.50"), 10 << 8 | 2) == "-12.50"


def test_temporal_values_follow_the_column_fsp():
    assert enc(C.MYSQL_TYPE_DATETIME2, dt.datetime(2024, 1, 2, 3, 4, 5, 120000), 2) == "2024-01-02 03:04:05.12"
    assert enc(C.MYSQL_TYPE_DATETIME2, dt.datetime(1, 1, 1), 0) == "0001-01-01 00:00:00"
    utc = dt.timezone.utc
    assert enc(C.MYSQL_TYPE_TIMESTAMP2, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc), 6) == "2024-01-02 03:04:05.000000"
    assert enc(C.MYSQL_TYPE_TIME2, -dt.timedelta(hours=838, minutes=59, seconds=59), 0) == "-838:59:59"
    assert enc(C.MYSQL_TYPE_TIME2, -dt.timedelta(microseconds=500000), 1) == "-00:00:00.5"
    assert enc(C.MYSQL_TYPE_DATE, dt.date(999, 1, 2)) == "0999-01-02"
    assert enc(C.MYSQL_TYPE_DATE, "0000-00-00") == "0000-00-00"


def test_binary_geometry_and_vector_encodings():
    assert enc(C.MYSQL_TYPE_BLOB, b"\x00\xff", 2) == "AP8="
    assert enc(C.MYSQL_TYPE_GEOMETRY, b"\x00\x00\x00\x00\x01", 4) == "AAAAAAE="
    assert enc(C.MYSQL_TYPE_VECTOR, (1.5, -2.0), 4) == [1.5, -2.0]
    assert enc(C.MYSQL_TYPE_LONGLONG, 18446744073709551615, unsigned=True) == 18446744073709551615


# ------------------------------------------------------------------------------------------
# The JSON lines of undecoded rows (JsonlRenderer.deferred_lines, what ``decode --format jsonl``
# prints) are, whatever the bytes, those of the codec's row decoders rendered one record at a
# time with RowRenderer and json.dumps, or the codec's error.

import json  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402

import pytest  # noqa: E402

from airflow_provider_binlog.codec.errors import CorruptEventError  # noqa: E402
from airflow_provider_binlog.codec.events import TableMap  # noqa: E402
from airflow_provider_binlog.cli.render import JsonlRenderer  # noqa: E402
from airflow_provider_binlog.cli.values_json import RowRenderer  # noqa: E402
from airflow_provider_binlog.codec.rows import (DECODE_ERRORS, DeferredRows, compile_rows_decoder,  # noqa: E402
                                                row_data_error, rows_end_mismatch)

HEAD = {"file": "mysql-bin.000042", "pos": 4711, "ts": 1700000000, "gtid": "0-1-2", "schema": "s",
        "table": "t", "op": "insert"}


_TABLES: dict = {}
_DECODERS: dict = {}


class _Renderer(JsonlRenderer):
    """Counts the events whose rows the generated code left to the codec's row decoders."""
    general = 0

    def _decode(self, rows, kind):
        self.general += 1
        return super()._decode(rows, kind)


_RENDERER = _Renderer()  # one for all tests: its generated renderers are reused per table map


def _expected(tm, kind, buf, present, present_after):
    """The previous renderer's lines for the rows the codec decodes from ``buf``, or its error."""
    key = (tm.columns, present, present_after)
    if key not in _DECODERS:
        _DECODERS[key] = compile_rows_decoder(tm.columns, present, present_after)
    try:
        rows, p = _DECODERS[key](buf, 0, len(buf))
        if p != len(buf):
            raise CorruptEventError(rows_end_mismatch(tm, p, len(buf)))
    except (CorruptEventError, *DECODE_ERRORS) as exc:
        return "error", str(row_data_error(tm, "mysql", exc).at("mysql-bin.000042", 4711))
    renderer, lines = RowRenderer(), []
    for row in rows:
        before, after = (None, row) if kind == "insert" else (row, None) if kind == "delete" else row
        record = {**HEAD, "op": kind,
                  "before": None if before is None else renderer.as_json_dict(tm, before),
                  "after": None if after is None else renderer.as_json_dict(tm, after)}
        lines.append((json.dumps(record, ensure_ascii=False) + "\n").encode())
    return lines


def _rendered(tm, kind, buf, present, present_after, renderer):
    rows = DeferredRows(tm, buf, 0, len(buf), present, present_after, "mysql", "mysql-bin.000042", 4711, None)
    try:
        return renderer.deferred_lines({**HEAD, "op": kind}, kind, rows)
    except CorruptEventError as exc:
        return "error", str(exc)


def assert_renders_as_before(columns, rows: list, kind="insert", present=None, present_after=None,
                             generated=True):
    """``rows``: the raw row images (null bitmap first), one per row (two for an update). With
    ``generated``, rows the codec decodes must be rendered by the generated code alone."""
    tm = _TABLES.setdefault(tuple(columns), TableMap(1, "s", "t", tuple(columns)))
    present = (1 << len(columns)) - 1 if present is None else present
    if kind == "update" and present_after is None:
        present_after = present
    buf = b"".join(rows)
    expected = _expected(tm, kind, buf, present, present_after if kind == "update" else None)
    general = _RENDERER.general
    assert _rendered(tm, kind, buf, present, present_after, _RENDERER) == expected, (buf.hex(), columns)
    if generated and isinstance(expected, list):
        assert _RENDERER.general == general, ("left to the general path", buf.hex(), columns)


def _dec_bytes(rnd, precision, scale):
    """A DECIMAL(precision, scale) value as the binlog stores it: valid, negative or not."""
    intg, groups = precision - scale, []
    digits = "".join(rnd.choice("0000123456789") for _ in range(precision))
    whole, frac = digits[:intg], digits[intg:]
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    if intg % 9:
        groups.append((whole[:intg % 9], dig2bytes[intg % 9]))
    groups += [(whole[i:i + 9], 4) for i in range(intg % 9, intg, 9)]
    groups += [(frac[i:i + 9], 4) for i in range(0, scale - scale % 9, 9)]
    if scale % 9:
        groups.append((frac[scale - scale % 9:], dig2bytes[scale % 9]))
    out = bytearray(b"".join(int(g).to_bytes(n, "big") for g, n in groups))
    if rnd.random() < 0.4:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def _text(rnd):
    return rnd.choice(["", "plain", 'quote " backslash \\ tab \t nl \n', "ctl \x00\x01\x1f\x7f",
                       "Zürich façade", "東京 🚀", "\u2028\u2029", "x" * 300]).encode()


def _samples(col, rnd):
    """Raw values of ``col``: valid, out of range, random."""
    t, meta = col.type, col.meta

    def random_bytes(n):
        return bytes(rnd.getrandbits(8) for _ in range(n))

    if t in (C.MYSQL_TYPE_TINY, C.MYSQL_TYPE_YEAR, C.MYSQL_TYPE_SHORT, C.MYSQL_TYPE_INT24,
             C.MYSQL_TYPE_LONG, C.MYSQL_TYPE_LONGLONG):
        size = {C.MYSQL_TYPE_TINY: 1, C.MYSQL_TYPE_YEAR: 1, C.MYSQL_TYPE_SHORT: 2, C.MYSQL_TYPE_INT24: 3,
                C.MYSQL_TYPE_LONG: 4, C.MYSQL_TYPE_LONGLONG: 8}[t]
        return [random_bytes(size), b"\xff" * size, b"\x00" * size, b"\x7f" + b"\xff" * (size - 1)]
    if t in (C.MYSQL_TYPE_FLOAT, C.MYSQL_TYPE_DOUBLE):
        fmt = "<f" if t == C.MYSQL_TYPE_FLOAT else "<d"
        return [struct.pack(fmt, v) for v in (rnd.uniform(-1e6, 1e6), float("nan"), float("inf"),
                                              float("-inf"), -0.0, 1e16, 1e-7, 0.1)]
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        good = [_dec_bytes(rnd, precision, scale) for _ in range(6)]
        return good + [random_bytes(len(good[0])), b"\x7f" + b"\xff" * (len(good[0]) - 1),
                       b"\x80" + b"\x00" * (len(good[0]) - 1)]
    if t == C.MYSQL_TYPE_DATE:
        return [(rnd.randint(0, 9999) << 9 | rnd.randint(0, 13) << 5 | rnd.randint(0, 31)).to_bytes(3, "little"),
                bytes(3), (2024 << 9 | 2 << 5 | 30).to_bytes(3, "little"),
                (999 << 9 | 1 << 5 | 2).to_bytes(3, "little")]
    frac = (0, 1, 1, 2, 2, 3, 3, 3)[min(meta, 7)]
    if t == C.MYSQL_TYPE_DATETIME2:
        def dt2(y, m, d, hh, mi, ss, fraction):
            packed = (((y * 13 + m) << 5 | d) << 17 | hh << 12 | mi << 6 | ss) + 0x8000000000
            return packed.to_bytes(5, "big") + fraction.to_bytes(frac, "big")
        return [dt2(rnd.randint(1, 9999), rnd.randint(1, 12), rnd.randint(1, 28), rnd.randint(0, 23),
                    rnd.randint(0, 59), rnd.randint(0, 59), rnd.getrandbits(8 * frac)),
                dt2(2024, 2, 30, 1, 2, 3, 0), dt2(0, 0, 0, 0, 0, 0, 0), dt2(2024, 1, 1, 24, 60, 60, 0),
                dt2(1, 1, 1, 0, 0, 0, 0), dt2(9999, 12, 31, 23, 59, 59, (1 << 8 * frac) - 1),
                b"\x00" * (5 + frac), random_bytes(5 + frac)]
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return [random_bytes(4 + frac), bytes(4 + frac), bytes(4) + b"\x01" * frac, b"\xff" * (4 + frac),
                (1700000000).to_bytes(4, "big") + bytes(frac)]
    if t == C.MYSQL_TYPE_TIME2:
        return [random_bytes(3 + frac), b"\x80" + bytes(2 + frac), b"\x7f" + b"\xff" * (2 + frac)]
    if t in (C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_BLOB):
        width = (1 if meta < 256 else 2) if t != C.MYSQL_TYPE_BLOB else meta
        values = [_text(rnd)[:255 if width == 1 else None], b"\xff\xfe invalid", random_bytes(rnd.randint(0, 20)),
                  b"bin\x00"]
        return [len(v).to_bytes(width, "little") + v for v in values]
    if t == C.MYSQL_TYPE_ENUM:
        return [bytes([i]) + bytes((meta & 0xFF) - 1) for i in (0, 1, 2, 3, 200)]
    if t == C.MYSQL_TYPE_SET:
        return [random_bytes(meta & 0xFF), bytes(meta & 0xFF), b"\xff" * (meta & 0xFF)]
    if t == C.MYSQL_TYPE_BIT:
        nbytes = ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8
        return [random_bytes(nbytes), b"\xff" * nbytes]
    if t == C.MYSQL_TYPE_GEOMETRY:
        return [(5).to_bytes(4, "little") + b"\x00\x00\x00\x00\x01"]
    if t == C.MYSQL_TYPE_VECTOR:
        data = struct.pack("<3f", 1.5, float("nan"), -2.0)
        return [len(data).to_bytes(4, "little") + data]
    if t == C.MYSQL_TYPE_NULL:
        return [b""]
    raise AssertionError(t)


def _col(index, type_code, meta=0, **kw):
    return Column(index=index, name=f"c{index}", type=type_code, meta=meta, **kw)


COLUMN_KINDS = [
    dict(type_code=C.MYSQL_TYPE_TINY), dict(type_code=C.MYSQL_TYPE_TINY, unsigned=True),
    dict(type_code=C.MYSQL_TYPE_SHORT), dict(type_code=C.MYSQL_TYPE_SHORT, unsigned=True),
    dict(type_code=C.MYSQL_TYPE_INT24), dict(type_code=C.MYSQL_TYPE_INT24, unsigned=True),
    dict(type_code=C.MYSQL_TYPE_LONG), dict(type_code=C.MYSQL_TYPE_LONG, unsigned=True),
    dict(type_code=C.MYSQL_TYPE_LONGLONG), dict(type_code=C.MYSQL_TYPE_LONGLONG, unsigned=True),
    dict(type_code=C.MYSQL_TYPE_YEAR), dict(type_code=C.MYSQL_TYPE_FLOAT, meta=4),
    dict(type_code=C.MYSQL_TYPE_DOUBLE, meta=8), dict(type_code=C.MYSQL_TYPE_DATE),
    *[dict(type_code=C.MYSQL_TYPE_NEWDECIMAL, meta=p << 8 | s)
      for p, s in ((1, 0), (2, 2), (5, 2), (9, 0), (10, 0), (12, 2), (14, 7), (18, 0), (18, 9), (18, 18),
                   (19, 4), (65, 30))],
    *[dict(type_code=C.MYSQL_TYPE_DATETIME2, meta=fsp) for fsp in range(8)],
    *[dict(type_code=C.MYSQL_TYPE_TIMESTAMP2, meta=fsp) for fsp in range(8)],
    *[dict(type_code=C.MYSQL_TYPE_TIME2, meta=fsp) for fsp in (0, 3, 6)],
    dict(type_code=C.MYSQL_TYPE_VARCHAR, meta=255, codec="utf-8", text=True),
    dict(type_code=C.MYSQL_TYPE_VARCHAR, meta=1000, codec="utf-8", text=True),
    dict(type_code=C.MYSQL_TYPE_VARCHAR, meta=255, codec="cp1252", text=True),
    dict(type_code=C.MYSQL_TYPE_VARCHAR, meta=255, codec="utf-16-be", text=True),
    dict(type_code=C.MYSQL_TYPE_VARCHAR, meta=255, codec=None, text=False),
    dict(type_code=C.MYSQL_TYPE_STRING, meta=16, codec=None, text=False),
    dict(type_code=C.MYSQL_TYPE_STRING, meta=16, codec="utf-8", text=True),
    dict(type_code=C.MYSQL_TYPE_BLOB, meta=2, codec="utf-8", text=True),
    dict(type_code=C.MYSQL_TYPE_BLOB, meta=3, codec=None, text=False),
    dict(type_code=C.MYSQL_TYPE_ENUM, meta=1, enum_values=("a", 'q"uote')),
    dict(type_code=C.MYSQL_TYPE_ENUM, meta=2, enum_values=("x", "y", "z")),
    dict(type_code=C.MYSQL_TYPE_ENUM, meta=1),
    dict(type_code=C.MYSQL_TYPE_SET, meta=1, set_values=("a", "b", "c")),
    dict(type_code=C.MYSQL_TYPE_SET, meta=3, set_values=tuple("abcdefghijklmnopqrstuvwx")),
    dict(type_code=C.MYSQL_TYPE_SET, meta=2),
    dict(type_code=C.MYSQL_TYPE_BIT, meta=1), dict(type_code=C.MYSQL_TYPE_BIT, meta=2 << 8 | 3),
    dict(type_code=C.MYSQL_TYPE_BIT, meta=8 << 8), dict(type_code=C.MYSQL_TYPE_BIT, meta=3 << 8),
    dict(type_code=C.MYSQL_TYPE_GEOMETRY, meta=4), dict(type_code=C.MYSQL_TYPE_VECTOR, meta=4),
    dict(type_code=C.MYSQL_TYPE_NULL),
]


@pytest.mark.parametrize("kind", COLUMN_KINDS, ids=lambda k: "-".join(f"{v}" for v in k.values())[:60])
def test_one_column_renders_as_before_whatever_the_bytes(kind):
    rnd = random.Random(repr(kind))
    for nullable in (False, True):
        col = _col(0, nullable=nullable, **kind)
        samples = [s for _ in range(6) for s in _samples(col, rnd)]
        for raw in samples:
            assert_renders_as_before([col], [b"\x00" + raw])
            for cut in {0, 1, len(raw) // 2, len(raw) - 1} - {len(raw)}:  # the event ends inside the value
                assert_renders_as_before([col], [b"\x00" + raw[:cut]])
        assert_renders_as_before([col], [b"\x01"])  # NULL (a NOT NULL column too)
        assert_renders_as_before([col], [b"\x00" + raw for raw in samples])  # many rows


def test_tables_of_every_type_render_as_before_for_every_kind_of_row_event():
    rnd = random.Random(7)
    columns = [_col(i, nullable=rnd.random() < 0.5, **kind) for i, kind in enumerate(COLUMN_KINDS)]
    samples = [_samples(c, rnd) for c in columns]
    nb_bytes = (len(columns) + 7) // 8

    def image():
        nulls = 0
        values = []
        for i, col in enumerate(columns):
            if rnd.random() < 0.15:
                nulls |= 1 << i
            else:
                values.append(rnd.choice(samples[i][:-1] if col.type == C.MYSQL_TYPE_NEWDECIMAL else samples[i]))
        return nulls.to_bytes(nb_bytes, "little") + b"".join(values)

    for _ in range(30):
        assert_renders_as_before(columns, [image() for _ in range(5)], "insert")
        assert_renders_as_before(columns, [image() for _ in range(5)], "delete")
        assert_renders_as_before(columns, [image() + image() for _ in range(5)], "update")
    # images without some columns (MINIMAL / NOBLOB row images)
    few = columns[:6]
    assert_renders_as_before(few, [b"\x00" + b"\x01\x02\x00\x03\x00" for _ in range(3)], "insert",
                             present=0b101101)
    assert_renders_as_before(few, [b"\x00\x05" + b"\x00\x07" for _ in range(3)], "update",
                             present=0b000001, present_after=0b000100)
    assert_renders_as_before(few, [b""], "update", present=0, present_after=0)


def test_repeated_column_names_and_corrupt_rows_take_the_general_path():
    twice = [Column(0, "a", C.MYSQL_TYPE_LONG, 0), Column(1, "a", C.MYSQL_TYPE_TINY, 0)]
    assert_renders_as_before(twice, [b"\x00\x01\x00\x00\x00\x02"], generated=False)
    col = _col(0, C.MYSQL_TYPE_LONG, nullable=False)
    assert_renders_as_before([col], [b"\x00\x01\x00\x00\x00\x09"])  # a byte too many
    assert_renders_as_before([col], [b"\x00\x01\x00"])  # cut short
    assert _rendered(TableMap(1, "s", "t", (col,)), "insert", b"\x00\x01\x00", 1, None, JsonlRenderer())[0] == "error"


@pytest.mark.parametrize("meta", [255, 1000])
def test_utf8_text_renders_as_json_dumps_whatever_it_holds_to_escape(meta):
    """The generated code writes UTF-8 text without control characters as its own bytes with
    \\ and " escaped; every other text goes through json's escaping: the lines are the same."""
    col = _col(0, C.MYSQL_TYPE_VARCHAR, meta=meta, codec="utf-8", text=True)
    width = 1 if meta < 256 else 2
    values = [b"", b"plain", b'quote " inside', b"back\\slash", b'both \\" and "\\', "é \" ü\\".encode(),
              "日本語".encode(), b"tab\there", b"new\nline", b"\x00nul", b"\x1f", b"del\x7f",
              "\u2028 line separator".encode(), b"\xff\xfe not utf-8", b"\xed\xa0\x80 surrogate",
              "emoji \U0001F600 \"q\"".encode(), b'"', b"\\"]
    for v in values:
        assert_renders_as_before([col], [b"\x00" + len(v).to_bytes(width, "little") + v])
    assert_renders_as_before([col], [b"\x00" + len(v).to_bytes(width, "little") + v for v in values])
