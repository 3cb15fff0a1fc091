"""Rows staged straight from undecoded rows events (``EventDecoder(defer_rows=True)``,
column by column, numeric forms) give exactly the Parquet tables that rows decoded to Python
tuples give, for every file of the binlog corpus (every column type of MySQL 5.6-9.x and
MariaDB, MINIMAL images, partial JSON updates, compressed events)."""
from __future__ import annotations

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.codec import TruncatedEventError, read_binlog_file
from airflow_provider_binlog.codec.decoder import EventDecoder
from airflow_provider_binlog.codec.events import RowsEvent, TransactionPayloadEvent
from airflow_provider_binlog.staging import StagingWriter
from airflow_provider_binlog.staging.convert import StagingValueError
from airflow_provider_binlog.staging.manifest import load_manifest
from tests.corpus import CORPUS
from tests.unit.codec.test_codec_corpus import ENTRIES, SCHEMAS, TRAILING_BYTE, _path

if not (CORPUS / "manifest.json").exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

#: Files whose rows cannot be staged, with the reason both paths give: a partial JSON update
#: (MySQL binlog_row_value_options=PARTIAL_JSON) whose before image lacks the document.
REFUSED = {
    "blackbeam__rust_mysql_common/test-data/binlogs/json.binlog.000001":
        "column @2: a partial JSON update cannot be applied because the before image lacks the document",
}


def _rows_events(events):
    for event in events:
        if isinstance(event, TransactionPayloadEvent):
            yield from (e for e in event.events if isinstance(e, RowsEvent))
        elif isinstance(event, RowsEvent):
            yield event


def _stage(entry, directory, *, defer: bool) -> dict:
    decoder = EventDecoder(entry["file"], schemas=SCHEMAS.get(entry["file"]), defer_rows=defer)
    writer = StagingWriter(directory, row_group_rows=500)
    deferred = 0
    events = _rows_events(read_binlog_file(_path(entry), decoder=decoder))
    if entry["file"] in TRAILING_BYTE:
        # a stray byte after the last event (see test_codec_corpus): every event before it stages
        with pytest.raises(TruncatedEventError) as info:
            for event in events:
                deferred += event.deferred is not None
                writer.add_rows(event, binlog_file="mysql-bin.000001", gtid=None, txn="t")
        assert info.value.offset == TRAILING_BYTE[entry["file"]]
    else:
        for event in events:
            deferred += event.deferred is not None
            writer.add_rows(event, binlog_file="mysql-bin.000001", gtid=None, txn="t")
    manifest = writer.publish(dump_id="d", start={}, end={}, server={})
    tables = {}
    for table in manifest.tables:
        files = [read_parquet(path) for path in load_manifest(manifest.directory).files(table)]
        tables[(table["schema"], table["table"])] = (table["rows"], files)
    return tables, deferred, manifest.data["invalid_temporals"], manifest.data["replaced_text"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_deferred_rows_stage_the_same_tables_as_decoded_rows(entry, tmp_path):
    if entry["file"] in REFUSED:
        for defer in (False, True):
            with pytest.raises(StagingValueError) as info:
                _stage(entry, tmp_path / f"defer-{defer}", defer=defer)
            assert str(info.value).startswith(REFUSED[entry["file"]]), (defer, str(info.value))
        return
    eager, none_deferred, *eager_counters = _stage(entry, tmp_path / "eager", defer=False)
    columnar, deferred, *columnar_counters = _stage(entry, tmp_path / "columns", defer=True)
    assert none_deferred == 0
    assert columnar.keys() == eager.keys()
    if any(rows for rows, _ in eager.values()):
        assert deferred, "no rows event was deferred"
    for key, (counts, files) in eager.items():
        assert columnar[key][0] == counts, key
        assert len(columnar[key][1]) == len(files), key
        for got, expected in zip(columnar[key][1], files):
            assert got.schema == expected.schema, key
            assert got.to_pylist() == expected.to_pylist(), key
    assert columnar_counters == eager_counters
