"""MySQL and MariaDB GTIDs: text forms, set algebra, binary encodings on real binlogs."""
from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest

from airflow_provider_binlog.codec.errors import CorruptEventError
from airflow_provider_binlog.codec.gtid import (
    MAX_GNO,
    MariadbGtid,
    MariadbGtidPosition,
    MysqlGtid,
    MysqlGtidSet,
    decode_gtid_list,
    decode_gtid_tagged_event_body,
)
from airflow_provider_binlog.codec.gtid_mysql import _read_varlen_int, _read_varlen_uint, _write_varlen_uint

from tests.corpus import CORPUS
RUST = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs"
KINGBUS = CORPUS / "flike__kingbus/tools/test_data"
MARIADB_POC = CORPUS / "mariadb-operator__mariadb-poc/mariadb-binlog/binlogs"

FORMAT_DESCRIPTION = 15
BINLOG_IN_USE = 0x1
PREVIOUS_GTIDS = 35
GTID_TAGGED = 42
XID = 16
MARIA_GTID_LIST = 163

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "3e11fa47-71ca-11e1-9e33-c80aa9429563"


def events(path: Path, *, crc: bool):
    """Yield (offset, type, event_size, body) of a v4 binlog file; with ``crc`` the
    4-byte CRC32 trailer is checked and removed from the body."""
    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    pos = 4
    while pos + 19 <= len(data):
        _ts, type_code, _server_id, size, _log_pos, _flags = struct.unpack_from("<IBIIIH", data, pos)
        raw = data[pos:pos + size]
        assert len(raw) == size, "truncated event in test file"
        if crc:
            (stored,) = struct.unpack_from("<I", raw, size - 4)
            signed = bytearray(raw[:-4])
            if type_code == FORMAT_DESCRIPTION:
                signed[17] &= ~BINLOG_IN_USE & 0xFF  # servers checksum the FDE with this flag clear
            assert zlib.crc32(signed) == stored
            raw = raw[:-4]
        yield pos, type_code, size, raw[19:]
        pos += size


def bodies(path: Path, type_code: int, *, crc: bool = True) -> list[bytes]:
    return [body for _, t, _, body in events(path, crc=crc) if t == type_code]


def needs(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"corpus file {path} not available")
    return path


# ---------------------------------------------------------------- MysqlGtid

def test_gtid_str_untagged_and_tagged():
    assert str(MysqlGtid(U1, None, 7)) == f"{U1}:7"
    assert str(MysqlGtid(U1, "Batch_1", 7)) == f"{U1}:batch_1:7"


def test_gtid_uuid_is_normalized_to_lowercase_dashed():
    assert MysqlGtid(U1.upper(), None, 1).uuid == U1
    assert MysqlGtid(U1.replace("-", ""), None, 1).uuid == U1


def test_gtid_parse_round_trips():
    assert MysqlGtid.parse(f"{U1}:42") == MysqlGtid(U1, None, 42)
    assert MysqlGtid.parse(f" {U1.upper()}:TAG:42 ") == MysqlGtid(U1, "tag", 42)


@pytest.mark.parametrize("bad", [f"{U1}", f"{U1}:0", f"{U1}:x", "not-a-uuid:1", f"{U1}:9tag:1",
                                 f"{U1}:{MAX_GNO + 1}", f"{U1}:a:b:1"])
def test_gtid_parse_rejects_malformed(bad):
    with pytest.raises(ValueError):
        MysqlGtid.parse(bad)


# ------------------------------------------------------------- text of sets

def test_set_parse_and_canonical_str_sorts_and_merges():
    s = MysqlGtidSet(f"{U2}:5, {U1}:9-10:1-3:4-5:7")
    assert str(s) == f"{U1}:1-5:7:9-10,{U2}:5"


def test_set_parse_accepts_server_output_with_newlines_and_uppercase():
    server_text = f"{U1.upper()}:1-5,\n{U2}:1-3:tag:2\n"
    s = MysqlGtidSet(server_text)
    assert str(s) == f"{U1}:1-5,{U2}:1-3:tag:2"
    assert s.to_string(",\n") == f"{U1}:1-5,\n{U2}:1-3:tag:2"


def test_set_tagged_intervals_follow_untagged_and_tags_are_sorted():
    s = MysqlGtidSet(f"{U1}:zeta:1:alpha:4-6:1-2,{U1}:10")
    assert str(s) == f"{U1}:10:alpha:1-2:4-6:zeta:1"


def test_set_same_uuid_in_two_items_is_merged():
    assert str(MysqlGtidSet(f"{U1}:1-3,{U1}:4-8")) == f"{U1}:1-8"


def test_set_constructor_copies_sets_and_rejects_other_types():
    s = MysqlGtidSet(f"{U1}:1-3")
    assert MysqlGtidSet(s) == s
    with pytest.raises(TypeError):
        MysqlGtidSet(42)  # type: ignore[arg-type]


def test_empty_text_is_empty_set():
    s = MysqlGtidSet("")
    assert s.is_empty() and len(s) == 0 and str(s) == "" and not s
    assert MysqlGtidSet("  \n ") == s


@pytest.mark.parametrize("bad", [
    U1,                      # no intervals
    f"{U1}:5-3",             # reversed range
    f"{U1}:0-3",             # gno 0
    f"{U1}:1-{MAX_GNO + 1}",
    f"{U1}:tag",             # tag without intervals
    f"{U1}:t1:t2:1",         # first tag without intervals
    f"{U1}:1::2",            # empty element
    "zzz:1-5",
    f"{U1}:1-5;{U2}:1",
])
def test_set_parse_rejects_malformed(bad):
    with pytest.raises(ValueError):
        MysqlGtidSet(bad)


def test_len_counts_transactions():
    assert len(MysqlGtidSet(f"{U1}:1-5:7,{U2}:t:10-19")) == 16


def test_ranges_yield_inclusive_tuples_in_canonical_order():
    s = MysqlGtidSet(f"{U2}:1,{U1}:1:t:3-4")
    assert list(s.ranges()) == [(U1, None, 1, 1), (U1, "t", 3, 4), (U2, None, 1, 1)]
    assert MysqlGtidSet.from_ranges(s.ranges()) == s
    assert s.uuids == (U1, U2)


# ------------------------------------------------------------------ algebra

def test_union_intersection_subtract():
    a = MysqlGtidSet(f"{U1}:1-10,{U2}:1-3")
    b = MysqlGtidSet(f"{U1}:5-15:t:1")
    assert str(a | b) == f"{U1}:1-15:t:1,{U2}:1-3"
    assert str(a & b) == f"{U1}:5-10"
    assert str(a - b) == f"{U1}:1-4,{U2}:1-3"
    assert str(b - a) == f"{U1}:11-15:t:1"


def test_subtract_punches_holes_inside_intervals():
    a = MysqlGtidSet(f"{U1}:1-100")
    assert str(a - MysqlGtidSet(f"{U1}:3:10-20:50-60:100")) == f"{U1}:1-2:4-9:21-49:61-99"


def test_intersection_of_disjoint_sets_is_empty():
    assert (MysqlGtidSet(f"{U1}:1-3") & MysqlGtidSet(f"{U1}:4-6")).is_empty()


def test_contains_gtid_and_subset():
    s = MysqlGtidSet(f"{U1}:1-5:7:t:2")
    assert MysqlGtid(U1, None, 7) in s
    assert MysqlGtid(U1, None, 6) not in s
    assert MysqlGtid(U1, "t", 2) in s
    assert MysqlGtid(U1, None, 2) in s and MysqlGtid(U1, "t", 3) not in s
    assert f"{U1}:2-4" in s
    assert f"{U1}:4-6" not in s
    assert s.contains(MysqlGtidSet(f"{U1}:t:2"))
    assert MysqlGtidSet(f"{U1}:1-3").issubset(s)
    assert not s.issubset(MysqlGtidSet(f"{U1}:1-7"))
    assert s.contains(MysqlGtidSet(""))
    assert 42 not in s


def test_add_returns_new_set_and_leaves_original():
    s = MysqlGtidSet(f"{U1}:1-5")
    t = s.add(MysqlGtid(U1, None, 6)).add(f"{U2}:t:1")
    assert str(s) == f"{U1}:1-5"
    assert str(t) == f"{U1}:1-6,{U2}:t:1"


def test_equal_sets_hash_equal_regardless_of_spelling():
    a = MysqlGtidSet(f"{U1.upper()}:3-4:1-2")
    b = MysqlGtidSet(f"{U1}:1-4")
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != MysqlGtidSet(f"{U1}:1-5")


# ------------------------------------------------------------------- binary

def test_encode_classic_layout_bytes():
    s = MysqlGtidSet(f"{U1}:1-5:7")
    expected = (struct.pack("<Q", 1) + bytes.fromhex(U1.replace("-", "")) + struct.pack("<Q", 2)
                + struct.pack("<QQ", 1, 6) + struct.pack("<QQ", 7, 8))
    assert s.encode() == expected
    assert MysqlGtidSet.decode(expected) == s


def test_encode_empty_set_is_eight_zero_bytes():
    assert MysqlGtidSet().encode() == b"\0" * 8
    assert MysqlGtidSet.decode(b"\0" * 8).is_empty()


def test_encode_picks_tagged_format_only_when_a_tag_is_present():
    plain = MysqlGtidSet(f"{U1}:1-3")
    tagged = MysqlGtidSet(f"{U1}:1-3:blue:4")
    assert plain.encode()[7] == 0
    head = struct.unpack_from("<Q", tagged.encode())[0]
    assert head == (1 << 56) | (2 << 8) | 1
    assert MysqlGtidSet.decode(tagged.encode()) == tagged
    forced = plain.encode(tagged=True)
    assert forced[0] == 1 and forced[7] == 1 and MysqlGtidSet.decode(forced) == plain
    with pytest.raises(ValueError):
        tagged.encode(tagged=False)


def test_decode_prefix_reports_end_offset():
    enc = MysqlGtidSet(f"{U1}:1-3").encode()
    s, end = MysqlGtidSet.decode_prefix(b"XX" + enc + b"tail", 2)
    assert str(s) == f"{U1}:1-3" and end == 2 + len(enc)


@pytest.mark.parametrize("buf", [
    b"\x01\0\0",                                                  # short header
    struct.pack("<Q", 1) + b"\0" * 10,                            # ends inside the uuid
    struct.pack("<Q", 5) + b"\0" * 24,                            # declares too many uuids
    struct.pack("<Q", 1) + b"\1" * 16 + struct.pack("<QQQ", 1, 0, 3),   # interval start 0
    struct.pack("<Q", 1) + b"\1" * 16 + struct.pack("<QQQ", 1, 5, 5),   # empty interval
    struct.pack("<Q", 1) + b"\1" * 16 + struct.pack("<Q", 2) + struct.pack("<QQ", 1, 2),  # missing interval
    struct.pack("<Q", 7 << 56),                                   # unknown format
    struct.pack("<Q", (1 << 56) | (1 << 8) | 1) + b"\1" * 16 + b"\x0a" + b"BAD!?",  # invalid tag
    MysqlGtidSet(f"{U1}:1").encode() + b"\0",                     # trailing byte
])
def test_decode_rejects_malformed_encodings(buf):
    with pytest.raises(CorruptEventError):
        MysqlGtidSet.decode(buf)


def test_real_untagged_previous_gtids_mysql_8_0_40():
    [body] = bodies(RUST / "binlog_transaction_previous_GTID_no_tag.000001", PREVIOUS_GTIDS)
    s = MysqlGtidSet.decode(body)
    # the source project asserts one sid b9b88c66-... with interval [1, 3)
    assert list(s.ranges()) == [("b9b88c66-0755-11f1-9899-4a9da94c4d71", None, 1, 2)]
    assert s.encode() == body


def test_real_tagged_previous_gtids_mysql_9_6_0():
    [body] = bodies(RUST / "binlog_transaction_with_GTID_TAG.000001", PREVIOUS_GTIDS)
    s = MysqlGtidSet.decode(body)
    uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
    # expected: [1, 14) untagged and [1, 3) tagged "mytag"
    assert list(s.ranges()) == [(uuid, None, 1, 13), (uuid, "mytag", 1, 2)]
    assert str(s) == f"{uuid}:1-13:mytag:1-2"
    assert s.encode() == body


@pytest.mark.parametrize("binlog, listing", [
    ("binlog/mysql_bin.000011", "binlog/11.txt"),
    ("binlog/mysql_bin.000012", "binlog/12.txt"),
    ("binlog/mysql_bin.000013", "binlog/13.txt"),
    ("relaylog/flikedev1-c8pyy-relay-bin.000284", "relaylog/284.txt"),
    ("relaylog/flikedev1-c8pyy-relay-bin.000286", "relaylog/286.txt"),
    ("relaylog/flikedev1-c8pyy-relay-bin.000288", "relaylog/288.txt"),
])
def test_real_previous_gtids_match_mysqlbinlog_output(binlog, listing):
    text = needs(KINGBUS / listing).read_text()
    printed = re.search(r"Previous-GTIDs\n# (\S+)\n", text).group(1)
    [body] = bodies(needs(KINGBUS / binlog), PREVIOUS_GTIDS)
    s = MysqlGtidSet.decode(body)
    assert str(s) == printed
    assert s.encode() == body


# --------------------------------------------------- tagged GTID event body

def test_real_gtid_tagged_event_fields():
    path = RUST / "binlog_transaction_with_GTID_TAG.000001"
    evs = list(events(path, crc=True))
    [(gtid_offset, _, _, body)] = [e for e in evs if e[1] == GTID_TAGGED]
    [(xid_offset, _, xid_size, _)] = [e for e in evs if e[1] == XID]
    header_ts = struct.unpack_from("<I", path.read_bytes(), gtid_offset)[0]

    fields = decode_gtid_tagged_event_body(body)

    assert fields["gtid"] == MysqlGtid("55778904-0299-11f1-b1b8-4ef0c4956feb", "mytag", 3)
    assert (fields["uuid"], fields["tag"], fields["gno"]) == (
        "55778904-0299-11f1-b1b8-4ef0c4956feb", "mytag", 3)
    assert fields["flags"] == 0
    assert (fields["last_committed"], fields["sequence_number"]) == (0, 1)
    # the transaction spans from this event to the end of its XID event
    assert fields["transaction_length"] == xid_offset + xid_size - gtid_offset == 296
    assert fields["immediate_server_version"] == fields["original_server_version"] == 90600
    assert fields["immediate_commit_timestamp"] == fields["original_commit_timestamp"]
    assert fields["immediate_commit_timestamp"] // 1_000_000 == header_ts
    assert fields["commit_group_ticket"] == 0


def test_gtid_tagged_event_rejects_truncation_and_unknown_mandatory_fields():
    [body] = bodies(RUST / "binlog_transaction_with_GTID_TAG.000001", GTID_TAGGED)
    with pytest.raises(CorruptEventError):
        decode_gtid_tagged_event_body(body[:30])
    with pytest.raises(CorruptEventError):
        decode_gtid_tagged_event_body(b"")
    # version 2, size 6, last non-ignorable field 40, then field 40 = 0
    with pytest.raises(CorruptEventError, match="unknown mandatory field 40"):
        decode_gtid_tagged_event_body(bytes([2, 6 << 1, 40 << 1, 40 << 1, 0, 0]))


def test_gtid_tagged_event_stops_at_unknown_ignorable_fields():
    uuid = bytes.fromhex(U1.replace("-", ""))
    fields = b"".join([_write_varlen_uint(1), *(_write_varlen_uint(b) for b in uuid),
                       _write_varlen_uint(2), _write_varlen_uint(9 << 1),   # gno 9, zigzag
                       _write_varlen_uint(3), _write_varlen_uint(1), b"x",
                       _write_varlen_uint(50), b"\x99\x99"])                # future field
    size = 1 + 1 + 1 + len(fields)
    fields_dict = decode_gtid_tagged_event_body(bytes([2, size << 1, 0]) + fields)
    assert fields_dict["gtid"] == MysqlGtid(U1, "x", 9)
    assert fields_dict["immediate_server_version"] == 999999


# ------------------------------------------------------------------ varints

@pytest.mark.parametrize("value", [0, 1, 127, 128, 16383, 16384, 65535, (1 << 56) - 1, 1 << 56, (1 << 64) - 1])
def test_varlen_uint_round_trip(value):
    enc = _write_varlen_uint(value)
    assert _read_varlen_uint(enc, 0, len(enc)) == (value, len(enc))


def test_varlen_matches_documented_examples():
    # mysql serialization readme: 65535 unsigned is 3 bytes, "..11111011" low byte
    assert _write_varlen_uint(65535) == bytes([0xFB, 0xFF, 0x07])
    assert _read_varlen_int(bytes([0xF3, 0xFF, 0x0F]), 0, 3) == (65535, 3)
    assert _read_varlen_int(bytes([0xEB, 0xFF, 0x0F]), 0, 3) == (-65535, 3)
    assert _read_varlen_int(bytes([0xFB, 0xFF, 0x0F]), 0, 3) == (-65536, 3)
    assert len(_write_varlen_uint((1 << 64) - 1)) == 9


# ------------------------------------------------------------------ MariaDB

def test_mariadb_gtid_parse_and_str():
    g = MariadbGtid.parse(" 0-1-100 ")
    assert g == MariadbGtid(0, 1, 100) and str(g) == "0-1-100"


@pytest.mark.parametrize("bad", ["0-1", "a-b-c", "0-1-2-3", "-1-1-1", "0-4294967296-1"])
def test_mariadb_gtid_parse_rejects_malformed(bad):
    with pytest.raises(ValueError):
        MariadbGtid.parse(bad)


def test_mariadb_position_parse_sorts_by_domain():
    pos = MariadbGtidPosition.parse("1-2-5, 0-1-100\n")
    assert str(pos) == "0-1-100,1-2-5"
    assert pos.domains == (0, 1) and len(pos) == 2
    assert pos.get(1) == MariadbGtid(1, 2, 5) and pos.get(7) is None


def test_mariadb_position_rejects_two_gtids_in_one_domain():
    with pytest.raises(ValueError, match="domain 0"):
        MariadbGtidPosition.parse("0-1-100,0-2-101")


def test_mariadb_empty_position():
    pos = MariadbGtidPosition("")
    assert pos.is_empty() and str(pos) == "" and not pos and pos == MariadbGtidPosition()


def test_mariadb_add_replaces_the_domain_entry():
    pos = MariadbGtidPosition("0-1-100,1-2-5")
    after = pos.add(MariadbGtid(1, 3, 6)).add("2-1-1")
    assert str(after) == "0-1-100,1-3-6,2-1-1"
    assert str(pos) == "0-1-100,1-2-5"


def test_mariadb_union_keeps_highest_seq_per_domain():
    a = MariadbGtidPosition("0-1-100,1-2-5")
    b = MariadbGtidPosition("0-2-90,1-2-7,3-1-1")
    assert str(a | b) == str(a.union(b)) == "0-1-100,1-2-7,3-1-1"


def test_mariadb_contains_compares_every_domain():
    pos = MariadbGtidPosition("0-1-100,1-2-5")
    assert pos.contains(MariadbGtidPosition("0-1-100"))
    assert pos.contains(MariadbGtidPosition("0-1-99,1-2-5"))
    assert not pos.contains(MariadbGtidPosition("1-2-6"))
    assert not pos.contains(MariadbGtidPosition("2-1-1"))
    assert pos.contains(MariadbGtid(0, 9, 50)) and not pos.contains(MariadbGtid(2, 1, 1))


def test_mariadb_position_equality_and_hash():
    a = MariadbGtidPosition("1-2-5,0-1-100")
    b = MariadbGtidPosition([MariadbGtid(0, 1, 100), MariadbGtid(1, 2, 5)])
    assert a == b and hash(a) == hash(b)
    assert a != MariadbGtidPosition("0-1-100")


def test_decode_gtid_list_synthetic_with_flags():
    body = struct.pack("<I", (2 << 28) | 2) + struct.pack("<IIQ", 1, 2, 5) + struct.pack("<IIQ", 0, 1, 2**40)
    lst = decode_gtid_list(body)
    assert lst.flags == 2
    assert lst.gtids == (MariadbGtid(1, 2, 5), MariadbGtid(0, 1, 2**40))
    assert str(lst.to_position()) == f"0-1-{2**40},1-2-5"


def test_decode_gtid_list_position_takes_last_listed_per_domain():
    body = struct.pack("<I", 2) + struct.pack("<IIQ", 0, 1, 10) + struct.pack("<IIQ", 0, 2, 12)
    assert str(decode_gtid_list(body).to_position()) == "0-2-12"


@pytest.mark.parametrize("body", [b"\x01\0", struct.pack("<I", 2) + b"\0" * 16])
def test_decode_gtid_list_rejects_truncation(body):
    with pytest.raises(CorruptEventError):
        decode_gtid_list(body)


@pytest.mark.parametrize("path, crc, expected", [
    (MARIADB_POC / "domain_id_0/mariadb-repl-bin.000004", True, "0-10-262175"),
    (MARIADB_POC / "domain_id_0/mariadb-repl-bin.000005", True, "0-10-262580"),
    (CORPUS / "zalora__binlog-parser/data/fixtures/mysql-bin.07", False, "0-3704-2814"),
    (RUST / "mariadb-bin.000001", True, ""),  # empty list, body padded to 6 bytes
])
def test_real_gtid_list_events(path, crc, expected):
    [body] = bodies(needs(path), MARIA_GTID_LIST, crc=crc)
    lst = decode_gtid_list(body)
    assert lst.flags == 0
    assert str(lst.to_position()) == expected


def test_one_parser_reads_either_flavors_state_and_an_unknown_flavor_is_refused_by_name():
    from airflow_provider_binlog.codec.gtid import Flavor, empty_gtid_state, parse_gtid_state

    assert parse_gtid_state("mariadb", "0-1-100,1-2-5") == MariadbGtidPosition("0-1-100,1-2-5")
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert parse_gtid_state(Flavor.MYSQL, f"{uuid}:1-5") == MysqlGtidSet(f"{uuid}:1-5")
    assert empty_gtid_state("mariadb") == MariadbGtidPosition() and empty_gtid_state("mysql") == MysqlGtidSet()
    assert Flavor.MARIADB == "mariadb" and str(Flavor.MYSQL) == "mysql"
    with pytest.raises(ValueError, match="flavor must be one of mysql, mariadb, not 'oracle'"):
        parse_gtid_state("oracle", "1")
