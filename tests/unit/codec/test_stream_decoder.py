"""The sans-IO stream decoder gives the same events whether bytes arrive whole, in chunks or
one at a time, and fails with a typed, positioned error on anything else."""
from __future__ import annotations

import random
import struct
import zlib

import pytest

from airflow_provider_binlog.codec import (BinlogError, BinlogStreamDecoder, EventDecoder,
                                           NotABinlogError, TruncatedEventError,
                                           UnknownEventError, UnsupportedBinlogVersionError,
                                           read_binlog_file)
from airflow_provider_binlog.codec.events import RawEvent, RowsEvent
from tests.corpus import CORPUS

if not CORPUS.exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

FILES = [
    "zalora__binlog-parser/data/fixtures/mysql-bin.01",                      # MySQL 5.6, CRC32
    "osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.checksum-none",
    "blackbeam__rust_mysql_common/test-data/binlogs/transaction_compression.000001",
    "blackbeam__rust_mysql_common/test-data/binlogs/mariadb-bin.000001",
    "rusuly__MySqlCdc/samples/MySqlCdc.Sample/mysql-bin.000001",
]


def _decode_in_chunks(data: bytes, sizes) -> list:
    stream = BinlogStreamDecoder("f")
    events, i = [], 0
    for size in sizes:
        if i >= len(data):
            break
        stream.feed(data[i:i + size])
        i += size
        events.extend(stream)
    stream.feed(data[i:])
    events.extend(stream)
    stream.close()
    return events


@pytest.mark.parametrize("name", FILES)
def test_whole_chunked_and_byte_by_byte_feeding_give_identical_events(name):
    data = (CORPUS / name).read_bytes()
    reference = list(read_binlog_file(CORPUS / name))
    assert any(isinstance(e, RowsEvent) for e in reference) or "compression" in name
    whole = _decode_in_chunks(data, [len(data)])
    one_by_one = _decode_in_chunks(data, [1] * len(data))
    rng = random.Random(len(data))
    random_chunks = _decode_in_chunks(data, [rng.randint(1, 300) for _ in range(len(data))])
    assert whole == reference
    assert one_by_one == reference
    assert random_chunks == reference


@pytest.mark.parametrize("garbage", [b"\x00", b"garbage", b"\xff" * 19, bytes(range(64)), b"\x01" * 500])
def test_trailing_garbage_yields_every_real_event_then_a_typed_error_at_its_offset(garbage):
    data = (CORPUS / FILES[0]).read_bytes()
    expected = list(read_binlog_file(CORPUS / FILES[0]))
    stream = BinlogStreamDecoder("mysql-bin.01")
    stream.feed(data + garbage)
    got = []
    with pytest.raises(BinlogError) as info:
        for event in stream:
            got.append(event)
        stream.close()
    assert got == expected
    assert info.value.offset == len(data)
    assert info.value.source == "mysql-bin.01"


def test_input_cut_inside_an_event_is_truncated_not_half_decoded():
    data = (CORPUS / FILES[0]).read_bytes()
    events = list(read_binlog_file(CORPUS / FILES[0]))
    rows_event = next(e for e in events if isinstance(e, RowsEvent))
    stream = BinlogStreamDecoder("cut")
    stream.feed(data[:rows_event.pos + 30])
    got = list(stream)
    assert got[-1].pos < rows_event.pos
    with pytest.raises(TruncatedEventError) as info:
        stream.close()
    assert info.value.offset == rows_event.pos
    assert "30 bytes into an event of" in str(info.value)


def test_bytes_that_are_not_a_binlog_are_refused_at_offset_zero():
    stream = BinlogStreamDecoder("notes.txt")
    stream.feed(b"hello world")
    with pytest.raises(NotABinlogError) as info:
        stream.next_event()
    assert info.value.offset == 0 and "bad magic" in str(info.value)


def test_v3_binlog_is_refused_as_unsupported_version():
    body = struct.pack("<H50sI", 3, b"4.0.20-log", 0)
    header = struct.pack("<IBIIIH", 0, 1, 1, 19 + len(body), 19 + len(body) + 4, 0)
    stream = BinlogStreamDecoder("old-bin.001")
    stream.feed(b"\xfebin" + header + body)
    with pytest.raises(UnsupportedBinlogVersionError) as info:
        stream.next_event()
    assert "version 3" in str(info.value) and info.value.offset == 4


def _append_event(data: bytes, type_code: int, flags: int, body: bytes, crc: bool) -> bytes:
    size = 19 + len(body) + (4 if crc else 0)
    header = struct.pack("<IBIIIH", 1, type_code, 1, size, len(data) + size, flags)
    event = header + body
    if crc:
        event += struct.pack("<I", zlib.crc32(event))
    return data + event


@pytest.mark.parametrize("crc", [True, False])
def test_unknown_event_is_skipped_only_when_flagged_ignorable(crc):
    name = FILES[0] if crc else FILES[1]
    data = (CORPUS / name).read_bytes()
    ignorable = _append_event(data, 99, 0x80, b"future", crc)
    last = list(read_binlog_file_bytes(ignorable))[-1]
    assert isinstance(last, RawEvent) and last.header.type_code == 99 and last.body == b"future"
    strict = _append_event(data, 99, 0, b"future", crc)
    with pytest.raises(UnknownEventError) as info:
        list(read_binlog_file_bytes(strict))
    assert info.value.offset == len(data) and "99" in str(info.value)


def read_binlog_file_bytes(data: bytes):
    stream = BinlogStreamDecoder("x")
    stream.feed(data)
    yield from stream
    stream.close()


def test_event_decoder_decodes_network_events_with_a_known_checksum():
    """A replication stream hands over one event per packet, starting with an artificial
    ROTATE sent before any FORMAT_DESCRIPTION: the checksum algorithm is known up front."""
    data = (CORPUS / FILES[0]).read_bytes()
    reference = list(read_binlog_file(CORPUS / FILES[0]))
    rotate_body = struct.pack("<Q", 4) + b"mysql-bin.01"
    rotate = struct.pack("<IBIIIH", 0, 4, 1, 19 + len(rotate_body) + 4, 0, 0x20) + rotate_body
    rotate += struct.pack("<I", zlib.crc32(rotate))
    decoder = EventDecoder("stream", checksum_alg=1, from_stream=True)
    first = decoder.decode(rotate, 0)
    assert first.next_file == "mysql-bin.01" and first.position == 4 and first.artificial
    got = [decoder.decode(data[e.pos:e.header.log_pos], e.pos) for e in reference]
    assert got == reference


def test_rows_event_with_no_logged_columns_but_row_bytes_is_corrupt_not_a_hang():
    from airflow_provider_binlog.codec import CorruptEventError
    data = (CORPUS / FILES[0]).read_bytes()
    events = list(read_binlog_file(CORPUS / FILES[0]))
    rows_event = next(e for e in events if isinstance(e, RowsEvent))
    decoder = EventDecoder("x")
    for event in events[:events.index(rows_event)]:
        decoder.decode(data[event.pos:event.header.log_pos], event.pos)
    raw = bytearray(data[rows_event.pos:rows_event.header.log_pos])
    # v2 rows event: 19 header + 6 table id + 2 flags + 2 extra length, then column count
    ncols_at = 19 + 10
    assert raw[ncols_at] == 3
    raw[ncols_at + 1] = 0  # columns-present bitmap: none
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    with pytest.raises(CorruptEventError) as info:
        decoder.decode(bytes(raw), rows_event.pos)
    assert "logs no columns" in str(info.value)
