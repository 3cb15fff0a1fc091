"""Every file of the shared corpus of real binlogs decodes; event counts match its manifest;
negative samples fail with typed errors naming file and offset."""
from __future__ import annotations

import collections

import pytest

from airflow_provider_binlog.codec import (ColumnSchema, CorruptEventError, NotABinlogError, TableSchema,
                                           TruncatedEventError, read_binlog_file)
from airflow_provider_binlog.codec.events import TransactionPayloadEvent
from tests.corpus import CORPUS, manifest

if not (CORPUS / "manifest.json").exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

NEGATIVE = {
    "blackbeam__rust_mysql_common/test-data/binlogs/binlog_truncated_event.000001": (TruncatedEventError, 4),
    "blackbeam__rust_mysql_common/test-data/binlogs/binlog_truncated_prev_gtid_event.000001":
        (TruncatedEventError, 120),
    "blackbeam__rust_mysql_common/test-data/binlogs/corrupt-relay-bin.000624": (CorruptEventError, 91204),
    # Damaged in its source repository (its first bytes went through a text conversion: the
    # magic FE became the UTF-8 replacement character EF BF BD); MANIFEST.md lists it under a
    # path that does not exist ("dbsync/.../tsdb"), manifest.json not at all.
    "alibaba__canal/parse/src/test/resources/binlog/tsdb/mysql-bin.000001": (NotABinlogError, 0),
}
# Rebuilt from hexdumps in their source repository: one stray byte after the last event.
TRAILING_BYTE = {"Meituan-Dianping__MyFlash/testbinlog/haha.000005": 3283,
                 "Meituan-Dianping__MyFlash/testbinlog/haha.000007": 416}
# MariaDB 10.0 fractional TIMESTAMP(3): precision is only in the table definition.
# The file's own DDL: t timestamp(3), t1 timestamp, t2 timestamp(4), t3 like t1, t4 like t2,
# t5 timestamp(1), t6 timestamp(4).
_PINGCAP_FSP = {"t": 3, "t1": 0, "t2": 4, "t3": 0, "t4": 4, "t5": 1, "t6": 4}
SCHEMAS = {
    "pingcap__tiflow/mysql-bin.000001": {
        ("steven", name): TableSchema("steven", name, (
            ColumnSchema("id", "int", primary_key=True),
            ColumnSchema("d", "timestamp", datetime_precision=fsp)))
        for name, fsp in _PINGCAP_FSP.items()},
}
ENTRIES = [e for e in manifest() if e["file"] not in NEGATIVE]


def _path(entry):
    return CORPUS / (entry.get("source_gz") or entry["file"])


def _count(events, top, inner):
    for event in events:
        top[event.header.type_name] += 1
        if isinstance(event, TransactionPayloadEvent):
            for sub in event.events:
                inner[sub.header.type_name] += 1


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_corpus_file_decodes_with_the_manifest_event_counts(entry):
    top, inner = collections.Counter(), collections.Counter()
    events = read_binlog_file(_path(entry), schemas=SCHEMAS.get(entry["file"]))
    if entry["file"] in TRAILING_BYTE:
        with pytest.raises(TruncatedEventError) as info:
            _count(events, top, inner)
        assert info.value.offset == TRAILING_BYTE[entry["file"]]
        assert "1 bytes" in str(info.value)
    else:
        _count(events, top, inner)
    assert dict(top) == entry["events"]
    assert dict(inner) == entry["inner_events"]


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_negative_sample_fails_with_typed_error_naming_file_and_offset(name):
    path = CORPUS / name
    assert path.is_file(), f"negative sample {name} is missing from the corpus at {CORPUS}"
    error_type, offset = NEGATIVE[name]
    with pytest.raises(error_type) as info:
        for _ in read_binlog_file(path):
            pass
    assert type(info.value) is error_type, info.value
    assert info.value.source == path.name
    assert info.value.offset == offset
    assert path.name in str(info.value) and f"offset {offset}" in str(info.value)


def test_mariadb_pre_10_1_fractional_timestamp_without_schema_names_column_and_remedy():
    path = CORPUS / "pingcap__tiflow/mysql-bin.000001"
    with pytest.raises(CorruptEventError) as info:
        for _ in read_binlog_file(path):
            pass
    assert info.value.offset == 1819
    assert "steven.t" in str(info.value) and "datetime_precision" in str(info.value)


def test_mariadb_pre_10_1_fractional_timestamps_decode_with_supplied_precision():
    import datetime as dt
    rows = {}
    for event in read_binlog_file(CORPUS / "pingcap__tiflow/mysql-bin.000001",
                                  schemas=SCHEMAS["pingcap__tiflow/mysql-bin.000001"]):
        if event.type_name == "WRITE_ROWS_V1" and event.schema == "steven":
            assert event.table_map.column_names == ("id", "d")
            rows.setdefault(event.table, []).extend(event.rows)
    # first insert into t: the TIMESTAMP(3) value is the event's own second, .000
    utc = dt.timezone.utc
    assert rows["t"][0] == (1, dt.datetime(2022, 5, 16, 14, 53, 10, tzinfo=utc))
    assert all(isinstance(v[1], dt.datetime) and v[1].year == 2022 for r in rows.values() for v in r)


def test_checksum_mismatch_names_file_and_offset(tmp_path):
    from airflow_provider_binlog.codec import ChecksumMismatchError
    data = bytearray((CORPUS / "zalora__binlog-parser/data/fixtures/mysql-bin.01").read_bytes())
    data[300] ^= 0x01  # inside the WRITE_ROWS event at 258
    broken = tmp_path / "mysql-bin.000099"
    broken.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError) as info:
        for _ in read_binlog_file(broken):
            pass
    assert (info.value.source, info.value.offset) == ("mysql-bin.000099", 258)
    # the same damage is decoded (as the bytes say) when verification is off
    kinds = [e.type_name for e in read_binlog_file(broken, verify_checksum=False)]
    assert "WRITE_ROWS_V2" in kinds


def test_start_and_stop_position_select_whole_events():
    path = CORPUS / "zalora__binlog-parser/data/fixtures/mysql-bin.01"
    all_events = list(read_binlog_file(path))
    starts = [e.pos for e in all_events]
    # 428 is the BEGIN of the second transaction, 998 the BEGIN of the fourth
    chosen = list(read_binlog_file(path, start_position=428, stop_position=998))
    assert chosen[0].type_name == "FDE"
    assert [e.pos for e in chosen[1:]] == [p for p in starts if 428 <= p < 998]
    assert [e.type_name for e in chosen[1:]] == ["QUERY", "TABLE_MAP", "WRITE_ROWS_V2", "XID",
                                                "QUERY", "TABLE_MAP", "UPDATE_ROWS_V2", "XID"]
