"""A sealed staging writer whose process dies is resumed by another: the rows sealed are kept,
those staged after the seal are dropped, a live writer's work is never taken, a changed layout
is refused, and the published batch holds each sealed row once."""
from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column, TableMap
from airflow_provider_binlog.staging import StagingWriter
from airflow_provider_binlog.staging.manifest import ManifestError, load_manifest
from airflow_provider_binlog.staging.writer import remove_stale_work_dirs
from airflow_provider_binlog.capture.watermark.resume import decode_key, encode_key

TM = TableMap(0, "s", "t", (Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True),
                            Column(1, "v", C.MYSQL_TYPE_LONG, 0)), primary_key=(0,))
NOW = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def stage(writer, rows, first):
    writer.add_snapshot_rows(TM, rows, binlog_file="b.000001", position=100, gtid=None, taken_at=NOW,
                             first_index=first)


def die(writer):
    """The process is gone: its lock is released, nothing else happens."""
    os.close(writer._lock_fd)
    writer._lock_fd = None


def test_a_resumed_writer_keeps_the_sealed_rows_and_drops_the_rest(tmp_path):
    writer = StagingWriter(tmp_path)
    stage(writer, [(1, 1), (2, 2)], 0)
    writer.seal({"resume_key": "k", "done": 2})
    stage(writer, [(3, 3)], 2)
    writer.seal({"resume_key": "k", "done": 3})
    stage(writer, [(4, 4)], 3)        # staged after the last seal: lost with the process
    writer._local.open[("s", "t")].flush()
    die(writer)
    # a live writer's work is not taken, nor another key's; a sealed one survives cleanup
    assert StagingWriter.resume(tmp_path, "other", {("s", "t"): TM}) is None
    assert remove_stale_work_dirs(tmp_path) == []
    resumed, progress = StagingWriter.resume(tmp_path, "k", {("s", "t"): TM})
    assert progress == {"resume_key": "k", "done": 3}
    assert StagingWriter.resume(tmp_path, "k", {("s", "t"): TM}) is None  # held by the one resumed
    stage(resumed, [(4, 40)], 3)
    manifest = resumed.publish(dump_id="d", start={}, end={}, server={})
    entry = manifest.tables[0]
    assert entry["rows"] == {"insert": 4, "update": 0, "delete": 0}
    rows = [r for path in load_manifest(manifest.directory).files(entry) for r in read_parquet(path).to_pylist()]
    assert sorted((r["_row"], r["_after"]["v"]) for r in rows) == [(0, 1), (1, 2), (2, 3), (3, 40)]
    assert not (manifest.directory / "progress.json").exists()
    assert not list(tmp_path.glob(".incomplete-*"))


def test_a_table_whose_columns_changed_is_refused(tmp_path):
    writer = StagingWriter(tmp_path)
    stage(writer, [(1, 1)], 0)
    writer.seal({"resume_key": "k"})
    die(writer)
    changed = TableMap(0, "s", "t", TM.columns + (Column(2, "w", C.MYSQL_TYPE_LONG, 0),), primary_key=(0,))
    with pytest.raises(ManifestError, match="s.t: its columns changed since the work to resume"):
        StagingWriter.resume(tmp_path, "k", {("s", "t"): changed})


def test_chunk_keys_round_trip_through_json():
    key = (7, Decimal("1.50"), dt.date(2024, 2, 29), dt.datetime(2024, 1, 1, 12, 0, 0, 5), dt.timedelta(hours=-3),
           b"\x00\xff", "text")
    assert decode_key(encode_key(key)) == key
    assert decode_key(encode_key(None)) is None


@pytest.mark.parametrize("path", ["/etc/passwd", "tables/../../../outside/part-00000.parquet", "notes/x.parquet"])
def test_sealed_work_whose_record_names_a_file_outside_tables_is_refused(tmp_path, path):
    """A staging directory on a shared mount is written by others too: the record of sealed
    work is checked before the work is adopted."""
    import json

    from airflow_provider_binlog.staging.confine import UntrustedObjectError

    writer = StagingWriter(tmp_path)
    stage(writer, [(1, 1)], 0)
    writer.seal({"resume_key": "k"})
    die(writer)
    record = writer.work_dir / "progress.json"
    state = json.loads(record.read_text())
    state["files"]["s\x00t"][0][1]["path"] = path
    record.write_text(json.dumps(state))
    with pytest.raises(UntrustedObjectError, match=f"progress.json: sealed file '{path}'") as caught:
        StagingWriter.resume(tmp_path, "k", {("s", "t"): TM})
    assert "delete" in caught.value.hint
