"""Tests for MySQL binary JSON decoding, rendering and partial-update diffs.

Real values come from binlogs in the shared corpus (written by MySQL 5.7,
8.0 and 9.0 servers); a minimal binlog walker below extracts the raw column
bytes so these tests do not depend on the full row decoder.
"""
from __future__ import annotations

import datetime
import json
import random
import re
import struct
import zlib
from decimal import Decimal

import pytest

from airflow_provider_binlog.codec.binary_decimal import decimal_binary_size, decode_binary_decimal
from airflow_provider_binlog.codec.errors import CorruptEventError
from airflow_provider_binlog.codec.json_binary import JsonOpaque, decode_json_binary
from airflow_provider_binlog.codec.json_diff import JsonDiff, apply_json_diffs, parse_json_diffs
from airflow_provider_binlog.codec.json_text import to_json_compatible, to_mysql_json_text

from tests.corpus import CORPUS  # noqa: E402
JSON_OPAQUE = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/json-opaque.binlog"
JSON_PARTIAL = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/json.binlog.000001"
MYSQLCDC = CORPUS / "rusuly__MySqlCdc/samples/MySqlCdc.Sample/mysql-bin.000001"
APECLOUD = CORPUS / "apecloud__mysql-binlog-connector-rust/tests/parse_file_tests/mysql-bin.000057"
GO_DECIMAL = CORPUS / "go-mysql-org__go-mysql/replication/t/tcb-eval002c-bin.003320"
GO_DECIMAL_REFERENCE = (CORPUS / "_reference_decodes/go-mysql-org__go-mysql/replication/t/"
                        "tcb-eval002c-bin.003320.mariadb-binlog-vv.txt")

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="binlog corpus not available")


# ---------------------------------------------------------------------------
# Minimal binlog walker (test helper only)
# ---------------------------------------------------------------------------

TABLE_MAP, WRITE_ROWS, UPDATE_ROWS, PARTIAL_UPDATE_ROWS, TRANSACTION_PAYLOAD = 19, 30, 31, 39, 40


def _packed_int(buf, pos):
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(buf[pos + 1:pos + 1 + size], "little"), pos + 1 + size


def _binlog_events(path):
    """Yield (type, body) of each event; bodies exclude header and CRC32."""
    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    pos, crc = 4, 0
    while pos + 19 <= len(data):
        event_type = data[pos + 4]
        size = struct.unpack_from("<I", data, pos + 9)[0]
        event = data[pos:pos + size]
        if event_type == 15:  # format description: checksum algorithm before the CRC
            crc = 4 if event[-5] == 1 else 0
        if crc:
            checked = bytearray(event[:-4])
            if event_type == 15:
                checked[17] &= 0xFE  # the "binlog in use" flag is set after the CRC is computed
            assert zlib.crc32(checked) == struct.unpack("<I", event[-4:])[0]
        body = event[19:len(event) - crc]
        if event_type == TRANSACTION_PAYLOAD:
            yield from _payload_events(body)
        else:
            yield event_type, body
        pos += size


def _payload_events(body):
    import zstandard

    fields, pos = {}, 0
    while True:
        field, pos = _packed_int(body, pos)
        if field == 0:
            break
        length, pos = _packed_int(body, pos)
        fields[field] = _packed_int(body, pos)[0]
        pos += length
    assert fields[2] == 0  # zstd
    inner = zstandard.ZstdDecompressor().decompress(body[pos:], max_output_size=fields[3])
    pos = 0
    while pos < len(inner):
        size = struct.unpack_from("<I", inner, pos + 9)[0]
        yield inner[pos + 4], inner[pos + 19:pos + size]
        pos += size


_META_BYTES = {4: 1, 5: 1, 15: 2, 16: 2, 17: 1, 18: 1, 19: 1, 245: 1, 246: 2, 247: 2, 248: 2,
               252: 1, 253: 2, 254: 2, 255: 1}


def _table_map(body):
    table_id = int.from_bytes(body[:6], "little")
    pos = 8
    pos += 1 + body[pos] + 1  # schema
    pos += 1 + body[pos] + 1  # table
    ncols, pos = _packed_int(body, pos)
    types = list(body[pos:pos + ncols])
    pos += ncols
    _, pos = _packed_int(body, pos)
    metas = []
    for t in types:
        n = _META_BYTES.get(t, 0)
        metas.append(bytes(body[pos:pos + n]))
        pos += n
    return table_id, types, metas


def _column_size(t, meta, buf, pos):
    fixed = {1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 8: 8, 9: 3, 10: 3, 13: 1}
    if t in fixed:
        return fixed[t]
    if t == 16:  # BIT: meta = (bits % 8, whole bytes)
        return meta[1] + (1 if meta[0] else 0)
    if t in (18, 19):  # DATETIME2 / TIME2 with fractional seconds
        return (5 if t == 18 else 3) + (meta[0] + 1) // 2
    if t == 15:
        return (1 if int.from_bytes(meta, "little") < 256 else 2) + (
            buf[pos] if int.from_bytes(meta, "little") < 256 else struct.unpack_from("<H", buf, pos)[0])
    if t in (245, 252):
        return meta[0] + int.from_bytes(buf[pos:pos + meta[0]], "little")
    if t == 246:
        return decimal_binary_size(meta[0], meta[1])
    if t == 17:
        return 4 + (meta[0] + 1) // 2
    if t == 254:
        real_type = meta[0]
        if real_type in (247, 248):  # ENUM / SET
            return meta[1]
        max_len = (((real_type & 0x30) ^ 0x30) << 4) | meta[1]
        return 1 + buf[pos] if max_len < 256 else 2 + struct.unpack_from("<H", buf, pos)[0]
    raise AssertionError(f"test walker does not handle column type {t}")


def _read_image(body, pos, present, types, metas, json_partial_capable):
    """Read one row image; return (columns dict index -> bytes|None, partial set, pos)."""
    partial = set()
    if json_partial_capable:
        value_options, pos = _packed_int(body, pos)
        if value_options & 1:
            json_cols = [i for i, t in enumerate(types) if t == 245]
            bits = int.from_bytes(body[pos:pos + (len(json_cols) + 7) // 8], "little")
            pos += (len(json_cols) + 7) // 8
            partial = {c for n, c in enumerate(json_cols) if bits >> n & 1}
    cols = [i for i in range(len(types)) if present >> i & 1]
    nulls = int.from_bytes(body[pos:pos + (len(cols) + 7) // 8], "little")
    pos += (len(cols) + 7) // 8
    values = {}
    for n, col in enumerate(cols):
        if nulls >> n & 1:
            values[col] = None
            continue
        size = _column_size(types[col], metas[col], body, pos)
        values[col] = bytes(body[pos:pos + size])
        pos += size
    return values, partial, pos


def _rows(path):
    """Yield (event_type, before, after, after_partial) for every row of every rows event."""
    tables = {}
    for event_type, body in _binlog_events(path):
        if event_type == TABLE_MAP:
            table_id, types, metas = _table_map(body)
            tables[table_id] = (types, metas)
        elif event_type in (WRITE_ROWS, UPDATE_ROWS, PARTIAL_UPDATE_ROWS):
            types, metas = tables[int.from_bytes(body[:6], "little")]
            extra = struct.unpack_from("<H", body, 8)[0]
            ncols, pos = _packed_int(body, 8 + extra)
            width = (ncols + 7) // 8
            before_cols = int.from_bytes(body[pos:pos + width], "little")
            pos += width
            after_cols = before_cols
            if event_type != WRITE_ROWS:
                after_cols = int.from_bytes(body[pos:pos + width], "little")
                pos += width
            while pos < len(body):
                before = None
                if event_type != WRITE_ROWS:
                    before, _, pos = _read_image(body, pos, before_cols, types, metas, False)
                after, partial, pos = _read_image(body, pos, after_cols, types, metas,
                                                  event_type == PARTIAL_UPDATE_ROWS)
                yield event_type, before, after, partial


def _json_column(raw):
    """Strip the 4-byte length a JSON column value carries in a row image."""
    assert int.from_bytes(raw[:4], "little") == len(raw) - 4
    return raw[4:]


def _int_column(raw):
    return struct.unpack("<i", raw)[0]


def _varchar_column(raw):
    prefix = 2 if int.from_bytes(raw[:2], "little") == len(raw) - 2 else 1
    return raw[prefix:].decode()


# ---------------------------------------------------------------------------
# Real data from the corpus
# ---------------------------------------------------------------------------

@needs_corpus
def test_mysql_9_json_opaque_values_decode_to_the_values_mysql_test_suite_asserts():
    docs = [decode_json_binary(_json_column(after[0])) for _, _, after, _ in _rows(JSON_OPAQUE)]
    assert docs == [
        {"a": JsonOpaque(15, b"U")},
        {"b": datetime.date(2012, 3, 18)},
        {"c": datetime.datetime(2012, 3, 18, 11, 30, 45)},
        {"c": datetime.timedelta(hours=87, minutes=31, seconds=46, microseconds=654321)},
        {"d": Decimal("123.456")},
        {"e": Decimal("9.00")},
        {"e": [0, 1, True, False]},
        {"e": None},
    ]
    assert str(docs[5]["e"]) == "9.00"  # scale kept


@needs_corpus
def test_mysql_9_json_opaque_values_render_as_mysql_json_text():
    texts = [to_mysql_json_text(decode_json_binary(_json_column(after[0])))
             for _, _, after, _ in _rows(JSON_OPAQUE)]
    assert texts == [
        '{"a": "base64:type15:VQ=="}',
        '{"b": "2012-03-18"}',
        '{"c": "2012-03-18 11:30:45.000000"}',
        '{"c": "87:31:46.654321"}',
        '{"d": 123.456}',
        '{"e": 9.00}',
        '{"e": [0, 1, true, false]}',
        '{"e": null}',
    ]


@needs_corpus
def test_mysql_9_json_opaque_values_convert_to_json_compatible_python():
    values = [to_json_compatible(decode_json_binary(_json_column(after[0])))
              for _, _, after, _ in _rows(JSON_OPAQUE)]
    assert values == [
        {"a": "base64:type15:VQ=="},
        {"b": "2012-03-18"},
        {"c": "2012-03-18 11:30:45.000000"},
        {"c": "87:31:46.654321"},
        {"d": "123.456"},
        {"e": 9},
        {"e": [0, 1, True, False]},
        {"e": None},
    ]
    assert json.dumps(values)  # plain JSON-serialisable


@needs_corpus
def test_mysql_8_json_documents_agree_with_their_generated_columns():
    # CREATE TABLE t(id INT, json_col JSON, name VARCHAR(100) AS (json_col->>'$.name'),
    #                age INT AS (json_col->'$.age'))
    seen = []
    for event_type, _, after, _ in _rows(JSON_PARTIAL):
        if event_type != WRITE_ROWS:
            continue
        doc = decode_json_binary(_json_column(after[1]))
        assert doc["name"] == _varchar_column(after[2])
        assert doc["age"] == _int_column(after[3])
        assert list(doc) == ["age", "data", "name"]  # MySQL's stored key order
        seen.append((_int_column(after[0]), doc))
    assert seen == [
        (1, {"age": 24, "data": "x" * 10, "name": "Joe"}),
        (2, {"age": 32, "data": "y" * 10, "name": "Sue"}),
        (3, {"age": 40, "data": "z" * 10, "name": "Pete"}),
        (4, {"age": 24, "data": "x" * 10, "name": "Joe"}),
        (5, {"age": 32, "data": "y" * 10, "name": "Sue"}),
        (6, {"age": 40, "data": "z" * 10, "name": "Pete"}),
    ]


@needs_corpus
def test_mysql_8_partial_update_event_carries_replace_diffs_matching_generated_age():
    partial_rows = [(before, after, partial) for event_type, before, after, partial in _rows(JSON_PARTIAL)
                    if event_type == PARTIAL_UPDATE_ROWS]
    assert len(partial_rows) == 6
    for before, after, partial in partial_rows:
        assert partial == {1}  # the JSON column is sent as a diff
        diffs = parse_json_diffs(_json_column(after[1]))
        assert diffs == [JsonDiff("replace", "$.age", _int_column(after[3]))]
        assert _varchar_column(after[2]) in ("Joe", "Sue", "Pete")
    ages = [parse_json_diffs(_json_column(after[1]))[0].value for _, after, _ in partial_rows]
    assert ages == [26, 34, 42, 26, 34, 42]


@needs_corpus
def test_mysql_8_partial_update_diffs_applied_to_previous_image_give_the_new_document():
    previous = {}
    for event_type, before, after, _ in _rows(JSON_PARTIAL):
        if event_type == UPDATE_ROWS:
            previous[_int_column(after[0])] = decode_json_binary(_json_column(after[1]))
    assert previous[1] == {"age": 25, "data": "x" * 10, "name": "Joe"}
    results = {}
    for event_type, before, after, _ in _rows(JSON_PARTIAL):
        if event_type == PARTIAL_UPDATE_ROWS:
            row_id = _int_column(before[0])
            old = previous[row_id]
            new = apply_json_diffs(old, parse_json_diffs(_json_column(after[1])))
            assert new["age"] == _int_column(after[3])
            assert old["age"] == new["age"] - 1  # input left untouched
            results[row_id] = new
    assert results[1] == {"age": 26, "data": "x" * 10, "name": "Joe"}
    assert results[6] == {"age": 42, "data": "z" * 10, "name": "Pete"}
    assert to_mysql_json_text(results[2]) == '{"age": 34, "data": "yyyyyyyyyy", "name": "Sue"}'


@needs_corpus
def test_mysql_5_7_json_column_and_decimal_65_10_match_the_inserted_sql_values():
    # Scripts.sql: DecimalColumn decimal(65,10) =
    #   1234567890112233445566778899001112223334445556667778889.9900011112,
    #   JsonColumn = '{"id": 1, "name": "John"}'
    rows = list(_rows(MYSQLCDC))
    assert len(rows) == 3
    for _, _, after, _ in rows:
        assert decode_json_binary(_json_column(after[12])) == {"id": 1, "name": "John"}
        assert to_mysql_json_text(decode_json_binary(_json_column(after[12]))) == '{"id": 1, "name": "John"}'
        value, end = decode_binary_decimal(after[8], 0, 65, 10)
        assert value == Decimal("1234567890112233445566778899001112223334445556667778889.9900011112")
        assert str(value) == "1234567890112233445566778899001112223334445556667778889.9900011112"
        assert end == len(after[8]) == 30


@needs_corpus
def test_mysql_8_json_inside_compressed_transaction_payload_decodes():
    # ROWS_QUERY: insert into test_table_3 values(6666, ..., '{"c": 1}', ...)
    docs = []
    for event_type, before, after, _ in _rows(APECLOUD):
        if 9 in after:
            docs.append(decode_json_binary(_json_column(after[9])))
            if before is not None:
                docs.append(decode_json_binary(_json_column(before[9])))
    assert docs == [{"c": 1}] * 3
    assert to_mysql_json_text(docs[0]) == '{"c": 1}'


def _reference_decimal_rows():
    rows, current = [], None
    for line in GO_DECIMAL_REFERENCE.read_text().splitlines():
        if line.startswith("### INSERT INTO"):
            current = []
            rows.append(current)
        match = re.match(r"###   @(\d+)=(\S+) /\* DECIMAL\((\d+),(\d+)\)", line)
        if match and current is not None:
            current.append((int(match[1]) - 1, match[2], int(match[3]), int(match[4])))
    return rows


@needs_corpus
def test_binary_decimal_matches_reference_decode_for_every_real_decimal_column():
    expected_rows = _reference_decimal_rows()
    rows = [after for _, _, after, _ in _rows(GO_DECIMAL)]
    assert len(rows) == len(expected_rows) == 17
    checked = negatives = 0
    for after, expected in zip(rows, expected_rows):
        for col, text, precision, scale in expected:
            value, end = decode_binary_decimal(after[col], 0, precision, scale)
            assert end == len(after[col])
            assert format(value, "f") == text, (col, text)
            checked += 1
            negatives += value < 0
    assert checked == 17 * 11
    assert negatives > 20


# ---------------------------------------------------------------------------
# Hand-built binary JSON
# ---------------------------------------------------------------------------

def _var_length(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(text):
    raw = text.encode()
    return _var_length(len(raw)) + raw


def _container(items, large=False, is_object=False):
    """Encode a container body (without its type byte).

    ``items`` are (type, payload, inline) triples, or (key, type, payload, inline)
    for objects; inline payloads go into the value entry itself.
    """
    off_fmt = "<I" if large else "<H"
    off_size = 4 if large else 2
    count = len(items)
    header = 2 * off_size + count * ((off_size + 2) if is_object else 0) + count * (1 + off_size)
    keys = b""
    key_entries = b""
    if is_object:
        pos = header
        for key, *_ in items:
            raw = key.encode()
            key_entries += struct.pack(off_fmt, pos) + struct.pack("<H", len(raw))
            keys += raw
            pos += len(raw)
        items = [item[1:] for item in items]
    pos = header + len(keys)
    value_entries = b""
    values = b""
    for t, payload, inline in items:
        if inline:
            value_entries += bytes([t]) + payload.ljust(off_size, b"\0")
        else:
            value_entries += bytes([t]) + struct.pack(off_fmt, pos)
            values += payload
            pos += len(payload)
    size = pos
    fmt = "<II" if large else "<HH"
    return struct.pack(fmt, count, size) + key_entries + value_entries + keys + values


@pytest.mark.parametrize("raw, expected", [
    (b"\x04\x00", None),
    (b"\x04\x01", True),
    (b"\x04\x02", False),
    (b"\x05" + struct.pack("<h", -32768), -32768),
    (b"\x06" + struct.pack("<H", 65535), 65535),
    (b"\x07" + struct.pack("<i", -2147483648), -2147483648),
    (b"\x08" + struct.pack("<I", 4294967295), 4294967295),
    (b"\x09" + struct.pack("<q", -9223372036854775808), -9223372036854775808),
    (b"\x09" + struct.pack("<q", 9223372036854775807), 9223372036854775807),
    (b"\x0a" + struct.pack("<Q", 18446744073709551615), 18446744073709551615),
    (b"\x0b" + struct.pack("<d", -2.5), -2.5),
    (b"\x0c\x00", ""),
    (b"\x0c" + _string("héllo wörld"), "héllo wörld"),
])
def test_top_level_scalars_decode_for_every_scalar_type_code(raw, expected):
    value = decode_json_binary(raw)
    assert value == expected
    assert type(value) is type(expected)


def test_zero_length_value_decodes_to_none():
    assert decode_json_binary(b"") is None
    assert decode_json_binary(memoryview(b"")) is None


def test_memoryview_and_bytearray_inputs_decode_like_bytes():
    raw = b"\x02" + _container([(0x05, struct.pack("<h", -7), True), (0x0c, _string("x"), False)])
    assert decode_json_binary(memoryview(raw)) == [-7, "x"]
    assert decode_json_binary(bytearray(raw)) == [-7, "x"]
    assert decode_json_binary(memoryview(b"zz" + raw)[2:]) == [-7, "x"]


def test_unicode_strings_keep_four_byte_characters_and_multi_byte_lengths():
    text = "日本語 😀 " * 30  # > 127 bytes: two-byte length prefix
    raw = b"\x0c" + _string(text)
    assert raw[1] & 0x80
    assert decode_json_binary(raw) == text
    long_text = "é" * 9000  # 18000 bytes: three-byte length prefix
    assert decode_json_binary(b"\x0c" + _string(long_text)) == long_text


def test_small_object_decodes_inlined_literals_and_16_bit_integers():
    body = _container([
        ("a", 0x04, b"\x01", True),
        ("b", 0x04, b"\x00", True),
        ("c", 0x05, struct.pack("<h", -2), True),
        ("d", 0x06, struct.pack("<H", 40000), True),
        ("e", 0x04, b"\x02", True),
        ("f", 0x07, struct.pack("<i", -100000), False),  # int32 is not inlined in small containers
    ], is_object=True)
    assert decode_json_binary(b"\x00" + body) == {"a": True, "b": None, "c": -2, "d": 40000, "e": False,
                                                  "f": -100000}


def test_large_object_and_array_decode_inlined_32_bit_integers():
    arr = _container([
        (0x07, struct.pack("<i", -2147483648), True),
        (0x08, struct.pack("<I", 4294967295), True),
        (0x05, struct.pack("<h", -1), True),
        (0x04, b"\x01", True),
        (0x09, struct.pack("<q", -5), False),
        (0x0c, _string("deep"), False),
    ], large=True)
    obj = _container([("k", 0x03, arr, False), ("n", 0x08, struct.pack("<I", 7), True)],
                     large=True, is_object=True)
    assert decode_json_binary(b"\x01" + obj) == {"k": [-2147483648, 4294967295, -1, True, -5, "deep"], "n": 7}


def test_nested_containers_decode_with_offsets_relative_to_each_container():
    inner_obj = _container([("x", 0x0c, _string("y"), False), ("yy", 0x0b, struct.pack("<d", 0.5), False)],
                           is_object=True)
    inner_arr = _container([(0x00, inner_obj, False), (0x02, _container([]), False),
                            (0x00, _container([], is_object=True), False)])
    outer = _container([("list", 0x02, inner_arr, False), ("uint64", 0x0a, struct.pack("<Q", 2**64 - 1), False)],
                       is_object=True)
    assert decode_json_binary(b"\x00" + outer) == {"list": [{"x": "y", "yy": 0.5}, [], {}],
                                                   "uint64": 18446744073709551615}


def test_object_keys_keep_the_stored_order():
    body = _container([("b", 0x04, b"\x00", True), ("aa", 0x04, b"\x00", True), ("a", 0x04, b"\x00", True)],
                      is_object=True)
    assert list(decode_json_binary(b"\x00" + body)) == ["b", "aa", "a"]


def test_object_keys_may_be_unicode():
    body = _container([("ключ", 0x0c, _string("значение"), False)], is_object=True)
    assert decode_json_binary(b"\x00" + body) == {"ключ": "значение"}


def _opaque(type_code, payload):
    return b"\x0f" + bytes([type_code]) + _var_length(len(payload)) + payload


def _datetime_packed(y, mo, d, h=0, mi=0, s=0, us=0):
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return struct.pack("<q", ((ymd << 17 | hms) << 24) + us)


def _time_packed(h, mi, s, us=0, negative=False):
    value = (((h << 12) | (mi << 6) | s) << 24) + us
    return struct.pack("<q", -value if negative else value)


@pytest.mark.parametrize("type_code, payload, expected", [
    (10, _datetime_packed(2024, 2, 29), datetime.date(2024, 2, 29)),
    (12, _datetime_packed(9999, 12, 31, 23, 59, 59, 999999), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    (7, _datetime_packed(1970, 1, 1, 0, 0, 1, 500), datetime.datetime(1970, 1, 1, 0, 0, 1, 500)),
    (11, _time_packed(838, 59, 59), datetime.timedelta(hours=838, minutes=59, seconds=59)),
    (11, _time_packed(1, 2, 3, 500000, negative=True), -datetime.timedelta(hours=1, minutes=2, seconds=3.5)),
    (11, _time_packed(0, 0, 0), datetime.timedelta(0)),
    (10, _datetime_packed(0, 0, 0), "0000-00-00"),
    (10, _datetime_packed(2020, 2, 30), "2020-02-30"),
    (12, _datetime_packed(0, 0, 0), "0000-00-00 00:00:00.000000"),
    (12, _datetime_packed(2020, 0, 5, 1, 2, 3, 4), "2020-00-05 01:02:03.000004"),
])
def test_temporal_opaques_decode_packed_values(type_code, payload, expected):
    assert decode_json_binary(_opaque(type_code, payload)) == expected


def test_negative_time_renders_with_sign_and_hours_beyond_a_day():
    assert to_mysql_json_text(decode_json_binary(_opaque(11, _time_packed(1, 2, 3, 500000, negative=True)))) \
        == '"-01:02:03.500000"'
    assert to_mysql_json_text(decode_json_binary(_opaque(11, _time_packed(838, 59, 59)))) == '"838:59:59.000000"'
    assert to_json_compatible(-datetime.timedelta(microseconds=1)) == "-00:00:00.000001"


def test_other_opaque_types_decode_to_json_opaque():
    value = decode_json_binary(_opaque(252, b"\x00\xffblob"))
    assert value == JsonOpaque(252, b"\x00\xffblob")
    assert to_mysql_json_text(value) == '"base64:type252:AP9ibG9i"'
    assert to_json_compatible(value) == "base64:type252:AP9ibG9i"


def test_long_opaque_base64_breaks_lines_every_76_characters_like_mysql():
    value = JsonOpaque(15, bytes(range(60)))  # 80 base64 characters
    text = to_json_compatible(value)
    encoded = text.split(":", 2)[2]
    assert encoded.split("\n")[0] == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4"
    assert encoded.split("\n")[1] == "OTo7"
    assert to_mysql_json_text(value).endswith('Njc4\\nOTo7"')


def test_var_string_opaque_renders_as_plain_string():
    assert to_mysql_json_text(JsonOpaque(253, "naïve".encode())) == '"naïve"'


# ---------------------------------------------------------------------------
# Binary DECIMAL
# ---------------------------------------------------------------------------

def _encode_decimal(value: Decimal, precision, scale):
    """Reference encoder written from the documented format (decimal2bin)."""
    dig2bytes = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
    negative = value < 0
    assert value.as_tuple().exponent == -scale
    int_digits, _, frac_digits = format(value.copy_abs(), "f").partition(".")
    intg = precision - scale
    int_digits = int_digits.lstrip("0").rjust(intg, "0")
    assert len(int_digits) == intg
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(int_digits[:lead]).to_bytes(dig2bytes[lead], "big")
    for i in range(lead, intg, 9):
        out += int(int_digits[i:i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac_digits[i:i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac_digits[scale - scale % 9:]).to_bytes(dig2bytes[scale % 9], "big")
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def test_binary_decimal_decodes_worked_example_and_its_negation():
    # 1234567890.1234 as DECIMAL(14,4): integer part = 1 digit in 1 byte (0x01, top bit
    # inverted -> 0x81) + 234567890 in 4 bytes; fraction 1234 in 2 bytes.  Negative:
    # every byte inverted.
    assert decode_binary_decimal(bytes.fromhex("810DFB38D204D2"), 0, 14, 4) == (Decimal("1234567890.1234"), 7)
    assert decode_binary_decimal(bytes.fromhex("7EF204C72DFB2D"), 0, 14, 4) == (Decimal("-1234567890.1234"), 7)


def test_binary_decimal_handles_extremes_of_decimal_65_30():
    largest = Decimal("9" * 35 + "." + "9" * 30)
    for value in (largest, largest.copy_negate(), Decimal("0E-30"), Decimal("-0." + "0" * 29 + "1")):
        raw = _encode_decimal(value, 65, 30)
        assert len(raw) == decimal_binary_size(65, 30) == 30
        decoded, end = decode_binary_decimal(b"pad" + raw + b"tail", 3, 65, 30)
        assert decoded == value and end == 33
        assert format(decoded, "f") == format(value, "f")
        assert to_mysql_json_text(decoded) == format(value, "f")
    assert to_mysql_json_text(largest.copy_negate()) == "-" + "9" * 35 + "." + "9" * 30


def test_binary_decimal_round_trips_random_values_for_many_precisions():
    rng = random.Random(20240611)
    for precision in range(1, 66):
        for scale in sorted({0, min(precision, 30), min(precision // 2, 30), min(precision - 1, 30)}):
            intg = precision - scale
            for _ in range(6):
                int_part = rng.randrange(10 ** intg) if intg else 0
                frac_part = rng.randrange(10 ** scale) if scale else 0
                text = f"{int_part}.{frac_part:0{scale}d}" if scale else str(int_part)
                value = Decimal(("-" if rng.random() < 0.5 else "") + text)
                raw = _encode_decimal(value, precision, scale)
                decoded, end = decode_binary_decimal(raw, 0, precision, scale)
                assert decoded == value, (precision, scale, value)
                assert end == len(raw)
                assert decoded.as_tuple().exponent == -scale


def test_binary_decimal_negative_zero_decodes_as_zero():
    positive_zero = _encode_decimal(Decimal("0.00"), 5, 2)
    negative_zero = bytes(b ^ 0xFF for b in positive_zero)  # sign bit clear, digits inverted
    value, _ = decode_binary_decimal(negative_zero, 0, 5, 2)
    assert value == 0 and not value.is_signed() and str(value) == "0.00"


def test_decimal_opaque_in_json_decodes_negative_values():
    payload = bytes([10, 4]) + _encode_decimal(Decimal("-123456.7890"), 10, 4)
    assert decode_json_binary(_opaque(246, payload)) == Decimal("-123456.7890")
    assert to_mysql_json_text(decode_json_binary(_opaque(246, payload))) == "-123456.7890"


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

def test_mysql_text_uses_comma_space_and_colon_space_separators():
    assert to_mysql_json_text({"a": 1, "b": [1, 2.5, None, True]}) == '{"a": 1, "b": [1, 2.5, null, true]}'
    assert to_mysql_json_text({}) == "{}"
    assert to_mysql_json_text([]) == "[]"
    assert to_mysql_json_text([{"x": []}, False]) == '[{"x": []}, false]'


def test_mysql_text_escapes_only_quotes_backslashes_and_control_characters():
    text = 'q"b\\n\nt\tr\rf\fb\x08c\x01\x1f del\x7f é 😀 /'
    assert to_mysql_json_text(text) == '"q\\"b\\\\n\\nt\\tr\\rf\\fb\\bc\\u0001\\u001f del\x7f é 😀 /"'
    assert to_mysql_json_text({"k\n": "v"}) == '{"k\\n": "v"}'


@pytest.mark.parametrize("value, text", [
    (2.5, "2.5"),
    (3.0, "3.0"),
    (-3.0, "-3.0"),
    (0.0, "0.0"),
    (1e100, "1e100"),
    (-1e100, "-1e100"),
    (1e15, "1e15"),
    (1e14, "100000000000000.0"),
    (123456789012345.6, "123456789012345.6"),
    (1234567890123456.8, "1234567890123456.8"),
    (0.1, "0.1"),
    (1 / 3, "0.3333333333333333"),
    (1e-5, "0.00001"),
    (1e-15, "0.000000000000001"),
    (1.5e-16, "1.5e-16"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e308"),
    (12345678901234567890.0, "1.2345678901234567e19"),
])
def test_doubles_render_in_mysql_notation(value, text):
    assert to_mysql_json_text(value) == text


def test_integers_and_decimals_render_exactly():
    assert to_mysql_json_text(18446744073709551615) == "18446744073709551615"
    assert to_mysql_json_text(-9223372036854775808) == "-9223372036854775808"
    assert to_mysql_json_text(Decimal("0.0001234500")) == "0.0001234500"
    assert to_mysql_json_text(Decimal("-10.55")) == "-10.55"


def test_temporal_values_render_as_quoted_mysql_strings():
    assert to_mysql_json_text([datetime.date(2012, 3, 18), datetime.datetime(2012, 3, 18, 11, 30, 45, 7)]) \
        == '["2012-03-18", "2012-03-18 11:30:45.000007"]'


def test_json_compatible_decimals_become_exact_ints_or_digit_strings():
    assert to_json_compatible(Decimal("9.00")) == 9
    assert type(to_json_compatible(Decimal("9.00"))) is int
    big = Decimal("9" * 35 + "." + "0" * 30)
    assert to_json_compatible(big) == int("9" * 35)
    assert to_json_compatible(Decimal("-0.5")) == "-0.5"
    assert to_json_compatible(Decimal("0.0000001")) == "0.0000001"


def test_json_compatible_returns_a_new_serialisable_tree():
    doc = {"a": [Decimal("1.5"), datetime.date(2000, 1, 2)], "b": {"c": JsonOpaque(15, b"U")}}
    converted = to_json_compatible(doc)
    assert converted == {"a": ["1.5", "2000-01-02"], "b": {"c": "base64:type15:VQ=="}}
    assert json.loads(json.dumps(converted)) == converted
    assert doc["a"][0] == Decimal("1.5")


def test_rendering_rejects_values_json_cannot_hold():
    with pytest.raises(ValueError):
        to_mysql_json_text(float("nan"))
    with pytest.raises(TypeError):
        to_mysql_json_text(object())
    with pytest.raises(TypeError):
        to_json_compatible({1, 2})


# ---------------------------------------------------------------------------
# Malformed binary JSON
# ---------------------------------------------------------------------------

def _small_object_one_string():
    return b"\x00" + _container([("k", 0x0c, _string("value"), False)], is_object=True)


@pytest.mark.parametrize("raw, message", [
    (b"\x0d", "unknown value type 0x0d"),
    (b"\x0e\x00", "unknown value type 0x0e"),
    (b"\xff", "unknown value type 0xff"),
    (b"\x10", "unknown value type 0x10"),
    (b"\x04", "literal"),
    (b"\x04\x03", "unknown literal 0x03"),
    (b"\x05\x01", "int16"),
    (b"\x06", "uint16"),
    (b"\x07\x00\x00\x00", "int32"),
    (b"\x08\x00", "uint32"),
    (b"\x09" + b"\x00" * 7, "int64"),
    (b"\x0a" + b"\x00" * 7, "uint64"),
    (b"\x0b" + b"\x00" * 7, "double"),
    (b"\x0b" + struct.pack("<d", float("inf")), "not finite"),
    (b"\x0b" + struct.pack("<d", float("nan")), "not finite"),
    (b"\x0c", "cut off"),
    (b"\x0c\x05abcd", "runs past the end"),
    (b"\x0c\x80\x80", "cut off"),
    (b"\x0c\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
    (b"\x0c\xff\xff\xff\xff\x7f", "exceeds 32 bits"),
    (b"\x0c\x02\xc3\x28", "not valid UTF-8"),
    (b"\x00\x01\x00", "header"),
    (b"\x01\x01\x00\x00\x00\x20\x00", "header"),
    (b"\x02\x01\x00\x40\x00\x04\x00\x00", "claims 64 bytes"),
    (b"\x02\x05\x00\x07\x00\x04\x00\x00", "needs a 19-byte header"),
    (b"\x0f", "cut off"),
    (b"\x0f\xfc", "cut off"),
    (b"\x0f\xfc\x05abc", "runs past the end"),
])
def test_malformed_scalars_and_headers_raise_corrupt_event_error(raw, message):
    with pytest.raises(CorruptEventError, match=message):
        decode_json_binary(raw)


def test_value_offset_past_container_end_raises():
    raw = bytearray(b"\x02" + _container([(0x0c, _string("abc"), False)]))
    raw[6] = 0x40  # value offset 64 > size
    with pytest.raises(CorruptEventError, match="value offset 64"):
        decode_json_binary(bytes(raw))


def test_value_offset_pointing_into_header_raises():
    raw = bytearray(b"\x02" + _container([(0x0c, _string("abc"), False)]))
    raw[6] = 0x02
    with pytest.raises(CorruptEventError, match="value offset 2"):
        decode_json_binary(bytes(raw))


def test_value_entry_with_unknown_type_raises():
    raw = bytearray(b"\x02" + _container([(0x0c, _string("abc"), False)]))
    raw[5] = 0x0e
    with pytest.raises(CorruptEventError, match="unknown value type 0x0e"):
        decode_json_binary(bytes(raw))


def test_inlined_literal_with_unknown_code_raises():
    raw = b"\x02" + _container([(0x04, b"\x07", True)])
    with pytest.raises(CorruptEventError, match="unknown literal 0x07"):
        decode_json_binary(raw)


def test_key_outside_object_raises():
    raw = bytearray(_small_object_one_string())
    raw[5] = 0x7F  # key offset
    with pytest.raises(CorruptEventError, match="key at offset 127"):
        decode_json_binary(bytes(raw))
    raw = bytearray(_small_object_one_string())
    raw[7] = 0x50  # key length
    with pytest.raises(CorruptEventError, match=r"length 80"):
        decode_json_binary(bytes(raw))


def test_key_with_invalid_utf8_raises():
    raw = _small_object_one_string().replace(b"k", b"\xff", 1)
    with pytest.raises(CorruptEventError, match="key .* not valid UTF-8"):
        decode_json_binary(raw)


def test_duplicate_keys_raise():
    raw = b"\x00" + _container([("k", 0x04, b"\x00", True), ("k", 0x04, b"\x01", True)], is_object=True)
    with pytest.raises(CorruptEventError, match="repeats a key"):
        decode_json_binary(raw)


def test_truncated_buffer_raises_instead_of_returning_partial_document():
    raw = _small_object_one_string()
    for cut in range(1, len(raw)):
        with pytest.raises(CorruptEventError):
            decode_json_binary(raw[:cut])


def test_nesting_deeper_than_the_limit_raises():
    raw = b"\x02\x00\x00\x04\x00"  # empty small array
    for _ in range(200):
        raw = b"\x02" + _container([(0x02, raw[1:], False)])
    with pytest.raises(CorruptEventError, match="nested deeper"):
        decode_json_binary(raw)


def test_nesting_of_one_hundred_levels_decodes():
    raw = b"\x02\x00\x00\x04\x00"
    for _ in range(99):
        raw = b"\x02" + _container([(0x02, raw[1:], False)])
    value = decode_json_binary(raw)
    depth = 0
    while value:
        value = value[0]
        depth += 1
    assert depth == 99


@pytest.mark.parametrize("payload, message", [
    (b"\x05", "too short"),
    (bytes([0, 0]), "impossible decimal"),
    (bytes([66, 0]) + b"\x00" * 30, "impossible decimal"),
    (bytes([4, 5]) + b"\x80\x00\x00", "impossible decimal"),
    (bytes([10, 40]), "impossible decimal"),
    (bytes([4, 2]) + b"\x80", "payload bytes"),
    (bytes([4, 2]) + b"\x80\x00\x00", "payload bytes"),
    (bytes([4, 2]) + b"\xe4\x00", "leading digit group"),
    (bytes([11, 2]) + b"\xbb\x9a\xca\x00\x00", "invalid digit group"),
    (bytes([4, 2]) + b"\x80\x64", "trailing digit group"),
])
def test_malformed_decimal_opaques_raise(payload, message):
    with pytest.raises(CorruptEventError, match=message):
        decode_json_binary(_opaque(246, payload))


@pytest.mark.parametrize("type_code, payload, message", [
    (12, b"\x00" * 7, "expected 8"),
    (11, b"\x00" * 9, "expected 8"),
    (12, struct.pack("<q", -1), "negative"),
    (12, _datetime_packed(2020, 1, 1, 24, 0, 0), "out of range"),
    (10, _datetime_packed(2020, 1, 1, 0, 0, 0, 1000000), "out of range"),
    (11, _time_packed(1, 60, 0), "out of range"),
    (11, _time_packed(1, 0, 0, 1000000), "out of range"),
])
def test_malformed_temporal_opaques_raise(type_code, payload, message):
    with pytest.raises(CorruptEventError, match=message):
        decode_json_binary(_opaque(type_code, payload))


def test_decode_binary_decimal_rejects_short_buffers_and_impossible_shapes():
    with pytest.raises(CorruptEventError, match="needs 30 bytes"):
        decode_binary_decimal(b"\x80" * 29, 0, 65, 30)
    with pytest.raises(CorruptEventError, match="needs 2 bytes at offset 2"):
        decode_binary_decimal(b"\x80\x00\x80", 2, 4, 2)
    with pytest.raises(CorruptEventError, match="impossible decimal"):
        decode_binary_decimal(b"\x80" * 40, 0, 66, 0)
    with pytest.raises(CorruptEventError, match="impossible decimal"):
        decode_binary_decimal(b"\x80" * 40, 0, 40, 31)


def test_corrupt_errors_accept_position_from_the_caller():
    with pytest.raises(CorruptEventError) as info:
        decode_json_binary(b"\x0d")
    err = info.value.at("binlog.000001", 1234)
    assert err.offset == 1234 and "binlog.000001 at offset 1234" in str(err)


# ---------------------------------------------------------------------------
# JSON diffs
# ---------------------------------------------------------------------------

def _diff(op, path, value=None):
    raw = path.encode()
    if len(raw) < 251:
        out = bytes([op, len(raw)]) + raw
    else:
        out = bytes([op, 252]) + struct.pack("<H", len(raw)) + raw
    if value is not None:
        out += bytes([len(value)]) + value
    return out


def test_parse_json_diffs_reads_every_operation_in_order():
    data = (_diff(0, "$.a", b"\x05\x07\x00")
            + _diff(1, '$.b[2]."x y"', b"\x0c" + _string("new"))
            + _diff(2, "$.c[last]"))
    assert parse_json_diffs(data) == [
        JsonDiff("replace", "$.a", 7),
        JsonDiff("insert", '$.b[2]."x y"', "new"),
        JsonDiff("remove", "$.c[last]", None),
    ]
    assert parse_json_diffs(memoryview(data)) == parse_json_diffs(data)
    assert parse_json_diffs(b"") == []


def test_parse_json_diffs_reads_two_byte_packed_path_length():
    key = "k" * 300
    diffs = parse_json_diffs(_diff(1, "$." + key, b"\x02" + _container([(0x04, b"\x01", True)])))
    assert diffs == [JsonDiff("insert", "$." + key, [True])]


@pytest.mark.parametrize("data, message", [
    (b"\x03\x01$", "unknown operation 3"),
    (b"\x00", "path length is missing"),
    (b"\x00\xfb", "invalid byte 0xfb"),
    (b"\x00\xff", "invalid byte 0xff"),
    (b"\x00\xfc\x01", "cut off"),
    (b"\x00\x05$.a", "runs past the end"),
    (b"\x02\x02\xff\xfe", "not valid UTF-8"),
    (b"\x02\x02.a", "does not start with"),
    (b"\x00\x03$.a", "value length is missing"),
    (b"\x00\x03$.a\x00", "empty value"),
    (b"\x00\x03$.a\x05\x05\x00", "runs past the end"),
    (b"\x00\x03$.a\x02\x05\x00", "int16"),
    (b"\x00\x03$.a\x01\x0d", "unknown value type"),
])
def test_malformed_json_diffs_raise(data, message):
    with pytest.raises(CorruptEventError, match=message):
        parse_json_diffs(data)


def test_apply_replace_insert_and_remove_on_objects_and_arrays():
    doc = {"a": 1, "arr": [10, 20, 30], "obj": {"x y": "old", 'q"k': 0}}
    diffs = [
        JsonDiff("replace", "$.a", {"n": [1]}),
        JsonDiff("replace", '$.obj."x y"', "new"),
        JsonDiff("replace", '$.obj."q\\"k"', 5),
        JsonDiff("insert", "$.arr[1]", 15),
        JsonDiff("insert", "$.arr[99]", 40),
        JsonDiff("remove", "$.arr[0]", None),
        JsonDiff("replace", "$.arr[last-1]", 31),
        JsonDiff("insert", "$.b", True),
        JsonDiff("replace", "$.a.n[0]", 2),
    ]
    result = apply_json_diffs(doc, diffs)
    assert result == {"a": {"n": [2]}, "b": True, "arr": [15, 20, 31, 40],
                      "obj": {"x y": "new", 'q"k': 5}}
    assert doc == {"a": 1, "arr": [10, 20, 30], "obj": {"x y": "old", 'q"k': 0}}


def test_apply_insert_places_new_member_in_mysql_key_order():
    doc = {"b": 1, "aa": 2, "zzz": 3}
    result = apply_json_diffs(doc, [JsonDiff("insert", "$.cc", 4), JsonDiff("insert", "$.a", 0)])
    assert list(result) == ["a", "b", "aa", "cc", "zzz"]
    assert to_mysql_json_text(result) == '{"a": 0, "b": 1, "aa": 2, "cc": 4, "zzz": 3}'


def test_apply_insert_with_last_inserts_before_the_last_element_like_mysql():
    assert apply_json_diffs([1, 2, 3], [JsonDiff("insert", "$[last]", 9)]) == [1, 2, 9, 3]
    assert apply_json_diffs([], [JsonDiff("insert", "$[last]", 9)]) == [9]


def test_apply_does_not_share_mutable_values_with_the_diff():
    value = {"deep": [1]}
    result = apply_json_diffs({}, [JsonDiff("insert", "$.x", value)])
    result["x"]["deep"].append(2)
    assert value == {"deep": [1]}


def test_apply_accepts_blanks_between_path_tokens():
    assert apply_json_diffs({"a": [0, {"b": 1}]}, [JsonDiff("replace", " $ . a [ 1 ] . b ", 2)]) == {"a": [0, {"b": 2}]}


@pytest.mark.parametrize("doc, diff, message", [
    ({"a": 1}, JsonDiff("replace", "$", 2), "document root"),
    ({"a": 1}, JsonDiff("replace", "$.b", 2), "does not exist"),
    ({"a": 1}, JsonDiff("replace", "$[0]", 2), "does not exist"),
    ([1], JsonDiff("replace", "$[1]", 2), "does not exist"),
    ({"a": 1}, JsonDiff("insert", "$.a", 2), "already exists"),
    ({"a": 1}, JsonDiff("insert", "$[0]", 2), "not an array"),
    ([1], JsonDiff("insert", "$.a", 2), "not an object"),
    ({"a": 1}, JsonDiff("insert", "$.x.y", 2), "does not exist"),
    ({"a": 1}, JsonDiff("remove", "$.b", None), "does not exist"),
    ([1], JsonDiff("remove", "$[3]", None), "does not exist"),
    ([1], JsonDiff("remove", "$.a", None), "does not exist"),
    ({"a": 5}, JsonDiff("remove", "$.a[0]", None), "does not exist"),
    ({"a": 1}, JsonDiff("replace", "$.*", 2), "wildcards"),
    ([1], JsonDiff("replace", "$[*]", 2), "wildcards"),
    ([1], JsonDiff("replace", "$[0 to 1]", 2), "ranges"),
    ({"a": 1}, JsonDiff("replace", "$**.a", 2), "unexpected"),
    ({"a": 1}, JsonDiff("replace", "a", 2), "does not start"),
    ({"a": 1}, JsonDiff("replace", '$."a', 2), "unterminated"),
    ({"a": 1}, JsonDiff("replace", "$[1", 2), "missing"),
    ({"a": 1}, JsonDiff("move", "$.a", 2), "unknown operation"),
    (None, JsonDiff("replace", "$.a", 2), "NULL"),
])
def test_apply_rejects_diffs_mysql_would_reject(doc, diff, message):
    with pytest.raises(CorruptEventError, match=message):
        apply_json_diffs(doc, [diff])


def test_doubles_round_trip_and_switch_to_exponent_notation_where_mysql_does():
    rng = random.Random(7)
    for _ in range(3000):
        value = rng.uniform(1, 10) * 10.0 ** rng.randint(-40, 40) * rng.choice((1, -1))
        text = to_mysql_json_text(value)
        assert float(text) == value
        _, digits, exponent = Decimal(repr(value)).as_tuple()
        decpt = len(digits) + exponent
        significant = len("".join(map(str, digits)).rstrip("0"))
        fixed = -14 <= decpt <= 15 or (decpt == 16 and significant > 16)
        assert ("e" not in text) == fixed, (value, text)
        assert "+" not in text
        if fixed:
            assert "." in text


def test_apply_remove_deletes_object_members_and_array_elements():
    doc = {"keep": 1, "drop": {"x": [1, 2, 3]}, "list": ["a", "b", "c"]}
    result = apply_json_diffs(doc, [JsonDiff("remove", "$.drop.x[last]", None),
                                    JsonDiff("remove", "$.list[1]", None),
                                    JsonDiff("remove", '$."keep"', None)])
    assert result == {"drop": {"x": [1, 2]}, "list": ["a", "c"]}
    assert apply_json_diffs(result, [JsonDiff("remove", "$.drop", None)]) == {"list": ["a", "c"]}
    assert doc["drop"]["x"] == [1, 2, 3]


def test_apply_insert_into_object_not_in_mysql_key_order_appends_the_member():
    result = apply_json_diffs({"zz": 1, "a": 2}, [JsonDiff("insert", "$.b", 3)])
    assert list(result) == ["zz", "a", "b"]


@pytest.mark.parametrize("path, message", [
    ('$."a\\x"', "invalid quoted member name"),
    ("$[last-]", "missing number after 'last-'"),
    ("$[x]", "invalid array index"),
    ("$.", "missing member name"),
])
def test_apply_rejects_unparseable_paths(path, message):
    with pytest.raises(CorruptEventError, match=re.escape(message)):
        apply_json_diffs({"a": [1]}, [JsonDiff("replace", path, 1)])


@pytest.mark.parametrize("prefix", [b"\xfd\x03\x00\x00", b"\xfe\x03\x00\x00\x00\x00\x00\x00\x00"])
def test_parse_json_diffs_accepts_three_and_eight_byte_packed_lengths(prefix):
    assert parse_json_diffs(b"\x02" + prefix + b"$.a") == [JsonDiff("remove", "$.a", None)]


def test_decimal_with_invalid_fraction_word_raises():
    raw = bytearray(_encode_decimal(Decimal("1.5000000000"), 20, 10))
    raw[5:9] = (1000000000).to_bytes(4, "big")  # the full 9-digit fraction word
    with pytest.raises(CorruptEventError, match="invalid digit group"):
        decode_binary_decimal(bytes(raw), 0, 20, 10)


def test_var_string_opaque_with_binary_data_renders_as_base64():
    assert to_json_compatible(JsonOpaque(253, b"\xff\x00")) == "base64:type253:/wA="


def test_rendering_accepts_subclasses_of_the_plain_types():
    import collections
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    class Text(str):
        pass

    value = collections.OrderedDict([("t", (Text("x"), Level.HIGH, 1.5))])
    assert to_mysql_json_text(value) == '{"t": ["x", 3, 1.5]}'
    assert to_json_compatible(value) == {"t": ["x", Level.HIGH, 1.5]}
    assert json.dumps(to_json_compatible(value)) == '{"t": ["x", 3, 1.5]}'


def test_rendering_rejects_non_finite_decimals():
    with pytest.raises(ValueError):
        to_mysql_json_text(Decimal("NaN"))
    with pytest.raises(ValueError):
        to_json_compatible(Decimal("Infinity"))


def test_long_and_unicode_strings_inside_containers_decode():
    long_text = "ü" * 100  # 200 bytes: two-byte length inside the container
    raw = b"\x02" + _container([(0x0c, _string(long_text), False), (0x0c, _string("ok"), False)])
    assert decode_json_binary(raw) == [long_text, "ok"]


@pytest.mark.parametrize("entry_type, payload", [
    (0x0c, _string("abc")),
    (0x02, _container([])),
    (0x07, struct.pack("<i", 5)),
])
def test_any_value_offset_outside_its_container_raises(entry_type, payload):
    raw = bytearray(b"\x02" + _container([(entry_type, payload, False)]))
    raw[6] = 0x50
    with pytest.raises(CorruptEventError, match="value offset 80 of entry 0"):
        decode_json_binary(bytes(raw))


def test_string_inside_container_running_past_the_container_raises():
    raw = bytearray(b"\x02" + _container([(0x0c, _string("abc"), False)]))
    raw[-4] = 0x09  # string length 9, container holds 3 bytes
    with pytest.raises(CorruptEventError, match="string of 9 bytes"):
        decode_json_binary(bytes(raw))


def test_invalid_utf8_string_inside_container_raises():
    raw = b"\x02" + _container([(0x0c, b"\x02\xe2\x28", False)])
    with pytest.raises(CorruptEventError, match="not valid UTF-8"):
        decode_json_binary(raw)
