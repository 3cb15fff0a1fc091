"""The compiled row decoders decode DECIMAL, DATETIME2 and TIMESTAMP2 inline; whatever the
bytes (valid, out of range, truncated), they give exactly what the functions in
``codec.values`` give: the same value (same type, digits and exponent) and offset, or the
same error. The column decoders give the same values in their numeric form (unscaled
integers, days and microseconds since the epoch) where the value is valid, and the same
value as the row decoders where it is not."""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec import values as V
from airflow_provider_binlog.codec.binary_decimal import decimal_binary_size
from airflow_provider_binlog.codec.events import Column
from airflow_provider_binlog.codec.rows import (compile_columns_decoder, compile_image_decoder,
                                                compile_rows_decoder)

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _outcome(fn, *args):
    try:
        value, p = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return "error", type(exc).__name__, str(exc)
    return type(value).__name__, repr(value), p


_EPOCH_NAIVE = dt.datetime(1970, 1, 1)


def numeric_form(col: Column, value):
    """What the column decoders give for a value the row decoders give as ``value``."""
    if isinstance(value, Decimal) and 1 <= col.meta >> 8 <= 18:
        return int(value.scaleb(col.meta & 0xFF))
    if isinstance(value, dt.datetime):
        epoch = V.EPOCH if value.tzinfo else _EPOCH_NAIVE
        return (value - epoch) // dt.timedelta(microseconds=1)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def _checker(col: Column, reference):
    """A function checking one column value ``raw``: the row holds only it, after a one-byte
    null bitmap."""
    image = compile_image_decoder((col,), 1)
    rows = compile_rows_decoder((col,), 1)
    columns = compile_columns_decoder((col,), 1)

    def from_columns(buf, p):
        values: list = []
        n, p = columns(buf, p, len(buf), [values], None)
        assert n == len(values) == 1
        return values[0], p

    def from_image(buf, p):
        values, p = image(buf, p)
        return values[0], p

    def from_rows(buf, p):
        decoded, p = rows(buf, p, len(buf))
        return decoded[0][0], p

    def check(raw: bytes) -> None:
        buf = b"\x00" + raw
        expected = _outcome(reference, buf, 1)
        assert _outcome(from_image, buf, 0) == expected, (raw.hex(), col)
        assert _outcome(from_rows, buf, 0) == expected, (raw.hex(), col)
        if expected[0] == "error":
            assert _outcome(from_columns, buf, 0) == expected, (raw.hex(), col)
        else:
            value, p = reference(buf, 1)
            # bytes cut short are left to the fallback function: its value, as it is
            numeric = numeric_form(col, value) if p <= len(buf) else value
            assert _outcome(from_columns, buf, 0) == (type(numeric).__name__, repr(numeric), p), \
                (raw.hex(), col)

    return check


def encode_datetime2(value: dt.datetime) -> bytes:
    packed = ((value.year * 13 + value.month) << 5 | value.day) << 17
    packed |= value.hour << 12 | value.minute << 6 | value.second
    return (packed + 0x8000000000).to_bytes(5, "big") + value.microsecond.to_bytes(3, "big")


def encode_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    sign, digits, exponent = value.as_tuple()
    text = "".join(map(str, digits)).rjust(scale + 1, "0")
    int_text, frac_text = text[:len(text) + exponent], text[len(text) + exponent:]
    intg = precision - scale
    int_text = int_text.rjust(intg, "0")[-intg:] if intg else ""
    frac_text = frac_text.ljust(scale, "0")
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(int_text[:lead]).to_bytes(_DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(int_text[i:i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac_text[i:i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac_text[scale - scale % 9:]).to_bytes(_DIG2BYTES[scale % 9], "big")
    if sign:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def _random_decimal(rnd: random.Random, precision: int, scale: int) -> Decimal:
    digits = rnd.choice([0, 1, rnd.randint(0, precision), precision])
    unscaled = rnd.randint(0, 10 ** digits - 1) if digits else 0
    sign = "-" if rnd.random() < 0.5 else ""
    return Decimal(f"{sign}{unscaled}e-{scale}")


SHAPES = [(p, s) for p in range(1, 21) for s in range(0, p + 1)] + [(65, 30), (0, 0), (5, 7)]


@pytest.mark.parametrize("precision,scale", SHAPES, ids=lambda v: str(v))
def test_decimal_matches_decode_decimal(precision, scale):
    col = Column(0, "d", C.MYSQL_TYPE_NEWDECIMAL, precision << 8 | scale, unsigned=False)
    rnd = random.Random(precision * 100 + scale)
    size = decimal_binary_size(precision, scale) if 1 <= precision <= 65 and scale <= precision else 4

    def reference(buf, p):
        return V.decode_decimal(buf, p, precision, scale)

    samples = []
    if 1 <= precision <= 65 and 0 <= scale <= precision:
        for _ in range(60):
            value = _random_decimal(rnd, precision, scale)
            raw = encode_decimal(value, precision, scale)
            assert reference(b"\x00" + raw, 1) == (value, size + 1)
            samples.append(raw)
    samples += [bytes(rnd.getrandbits(8) for _ in range(size)) for _ in range(60)]
    samples += [b"\x80" + bytes(size - 1), b"\x7f" + b"\xff" * (size - 1), b"\xff" * size,
                b"\x00" * size]
    samples += [raw[:cut] for raw in samples[:8] for cut in range(size)]  # truncated
    check = _checker(col, reference)
    for raw in samples:
        check(raw)


@pytest.mark.parametrize("fsp", range(8))
def test_datetime2_matches_decode_datetime2(fsp):
    col = Column(0, "t", C.MYSQL_TYPE_DATETIME2, fsp)
    rnd = random.Random(fsp)
    frac = (0, 1, 1, 2, 2, 3, 3, 3)[fsp]

    def reference(buf, p):
        return V.decode_datetime2(buf, p, fsp)

    samples = []
    for _ in range(200):
        y, m, d = rnd.randint(0, 9999), rnd.randint(0, 12), rnd.randint(0, 31)
        hh, mi, ss = rnd.randint(0, 23), rnd.randint(0, 59), rnd.randint(0, 59)
        packed = (((y * 13 + m) << 5 | d) << 17 | hh << 12 | mi << 6 | ss) + 0x8000000000
        micro = rnd.randint(0, 999999)
        fraction = {0: 0, 1: micro // 10000, 2: micro // 100, 3: micro}[frac]
        samples.append(packed.to_bytes(5, "big") + fraction.to_bytes(frac, "big"))
    samples += [bytes(rnd.getrandbits(8) for _ in range(5 + frac)) for _ in range(100)]
    samples += [b"\x80" + bytes(4 + frac), b"\x7f" + b"\xff" * (4 + frac), b"\xff" * (5 + frac)]
    samples += [raw[:cut] for raw in samples[:4] for cut in range(5 + frac)]
    check = _checker(col, reference)
    for raw in samples:
        check(raw)


@pytest.mark.parametrize("fsp", range(8))
def test_timestamp2_matches_decode_timestamp2(fsp):
    col = Column(0, "t", C.MYSQL_TYPE_TIMESTAMP2, fsp)
    rnd = random.Random(100 + fsp)
    frac = (0, 1, 1, 2, 2, 3, 3, 3)[fsp]

    def reference(buf, p):
        return V.decode_timestamp2(buf, p, fsp)

    samples = [bytes(rnd.getrandbits(8) for _ in range(4 + frac)) for _ in range(200)]
    samples += [bytes(4 + frac), b"\x00" * 4 + b"\x01" * frac, b"\xff" * (4 + frac)]
    samples += [raw[:cut] for raw in samples[:4] for cut in range(4 + frac)]
    check = _checker(col, reference)
    for raw in samples:
        check(raw)


def test_date_matches_decode_date():
    col = Column(0, "d", C.MYSQL_TYPE_DATE, 0)
    rnd = random.Random(3)
    samples = [(rnd.randint(0, 9999) << 9 | rnd.randint(0, 15) << 5 | rnd.randint(0, 31)).to_bytes(3, "little")
               for _ in range(300)]
    samples += [bytes(3), b"\xff" * 3, (1970 << 9 | 1 << 5 | 1).to_bytes(3, "little"),
                (2024 << 9 | 2 << 5 | 30).to_bytes(3, "little"), b"\x01", b""]
    check = _checker(col, V.decode_date)
    for raw in samples:
        check(raw)


def test_null_values_and_update_pairs():
    cols = (Column(0, "a", C.MYSQL_TYPE_NEWDECIMAL, 12 << 8 | 2),
            Column(1, "b", C.MYSQL_TYPE_DATETIME2, 6),
            Column(2, "c", C.MYSQL_TYPE_TIMESTAMP2, 3))
    row1 = (b"\x00" + encode_decimal(Decimal("-12.34"), 12, 2)
            + encode_datetime2(dt.datetime(2020, 1, 2, 3, 4, 5, 123456))
            + bytes.fromhex("5f5e100003e7"))
    row2 = b"\x05" + encode_datetime2(dt.datetime(2020, 1, 2, 3, 4, 5))
    decode = compile_rows_decoder(cols, 0b111, 0b111)
    rows, p = decode(row1 + row2, 0, len(row1 + row2))
    assert p == len(row1 + row2)
    [(before, after)] = rows
    assert before == (Decimal("-12.34"), dt.datetime(2020, 1, 2, 3, 4, 5, 123456),
                      dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
                      + dt.timedelta(seconds=0x5F5E1000, microseconds=999 * 100))
    assert after == (None, dt.datetime(2020, 1, 2, 3, 4, 5), None)
    assert str(before[0]) == "-12.34"
    columns_before, columns_after = [[], [], []], [[], [], []]
    n, p = compile_columns_decoder(cols, 0b111, 0b111)(row1 + row2, 0, len(row1 + row2),
                                                       columns_before, columns_after)
    assert (n, p) == (1, len(row1 + row2))
    assert columns_before == [[-1234], [1577934245123456], [0x5F5E1000 * 1_000_000 + 99900]]
    assert columns_after == [[None], [1577934245000000], [None]]


def test_column_decoders_fill_only_the_columns_present():
    cols = (Column(0, "id", C.MYSQL_TYPE_LONG, 0), Column(1, "v", C.MYSQL_TYPE_LONG, 0),
            Column(2, "w", C.MYSQL_TYPE_LONG, 0))
    # a MINIMAL update: the key in the before image, the changed column in the after image
    rows = b"\x00" + (7).to_bytes(4, "little") + b"\x00" + (9).to_bytes(4, "little")
    rows += b"\x00" + (8).to_bytes(4, "little") + b"\x01"
    before, after = [[], [], []], [[], [], []]
    n, p = compile_columns_decoder(cols, 0b001, 0b100)(rows, 0, len(rows), before, after)
    assert (n, p) == (2, len(rows))
    assert before == [[7, 8], [], []]
    assert after == [[], [], [9, None]]


def test_valid_values_do_not_need_the_fallback_functions(monkeypatch):
    from airflow_provider_binlog.codec import rows as R

    def fail(*args):
        raise AssertionError("fallback used")

    for name in ("decode_decimal", "decode_datetime2", "decode_timestamp2"):
        monkeypatch.setitem(R._GLOBALS, name, fail)
    rnd = random.Random(7)
    for precision, scale in [(p, s) for p in range(1, 19) for s in range(0, p + 1)]:
        col = Column(0, "d", C.MYSQL_TYPE_NEWDECIMAL, precision << 8 | scale)
        decode = compile_rows_decoder((col,), 1)
        for _ in range(20):
            value = _random_decimal(rnd, precision, scale)
            raw = b"\x00" + encode_decimal(value, precision, scale)
            [(got,)], _ = decode(raw, 0, len(raw))
            assert got.as_tuple() == (value if value else abs(value)).as_tuple()
    for fsp in range(7):
        decode = compile_rows_decoder((Column(0, "t", C.MYSQL_TYPE_DATETIME2, fsp),), 1)
        micro = 123456 // 10 ** (6 - fsp) * 10 ** (6 - fsp)
        value = dt.datetime(2024, 2, 29, 23, 59, 58, micro)
        frac_bytes = (fsp + 1) // 2
        fraction = (micro // (1, 10000, 100, 1)[frac_bytes]).to_bytes(frac_bytes, "big")
        raw = b"\x00" + encode_datetime2(value)[:5] + fraction
        assert decode(raw, 0, len(raw))[0] == [(value,)]
        decode = compile_rows_decoder((Column(0, "t", C.MYSQL_TYPE_TIMESTAMP2, fsp),), 1)
        raw = b"\x00" + (1_700_000_000).to_bytes(4, "big") + fraction
        assert decode(raw, 0, len(raw))[0] == [(V.EPOCH + dt.timedelta(0, 1_700_000_000, micro),)]


def test_not_null_columns_with_a_null_bit_set_decode_as_null():
    def table(nullable: bool) -> tuple:
        return (Column(0, "a", C.MYSQL_TYPE_LONG, 0, nullable=nullable),
                Column(1, "b", C.MYSQL_TYPE_LONGLONG, 0, nullable=nullable),
                Column(2, "c", C.MYSQL_TYPE_LONG, 0, nullable=True))
    rows = b"".join([b"\x00" + bytes(16), b"\x04" + bytes(12), b"\x01" + bytes(12),
                     b"\x07"])
    expected = [(0, 0, 0), (0, 0, None), (None, 0, 0), (None, None, None)]
    for nullable in (True, False):
        decoded, p = compile_rows_decoder(table(nullable), 0b111)(rows, 0, len(rows))
        assert (decoded, p) == (expected, len(rows))
    assert "if not nb & 3:" in compile_rows_decoder(table(False), 0b111).source
