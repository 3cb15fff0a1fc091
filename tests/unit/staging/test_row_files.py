"""Row files (staging.row_files): the chunks a snapshot reads into Arrow, staged as the table's
columns alone with Iceberg's field ids, read back as the part file of the same chunks would be,
by every reader the merge uses; they roll at ROWS_FILE_ROWS; an unreadable envelope says what
to do."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column, TableMap
from airflow_provider_binlog.staging import StagingWriter, parts
from airflow_provider_binlog.staging.convert import Counters
from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.masking import Masking
from airflow_provider_binlog.staging.parts import Stager
from airflow_provider_binlog.staging.row_files import ROWS_KEY, StagedRowsFile
from airflow_provider_binlog.staging.storage import open_parquet, read_parquet, read_parquet_schema

TM = TableMap(1, "db", "t", (Column(0, "id", C.MYSQL_TYPE_LONGLONG, 0, primary_key=True),
                             Column(1, "v", C.MYSQL_TYPE_VARCHAR, 40, text=True),
                             Column(2, "secret", C.MYSQL_TYPE_VARCHAR, 40, text=True)), primary_key=(0,))
TAKEN = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
#: chunks: (first key, last key + 1, binlog position of the high watermark)
CHUNKS = [(0, 4, 100), (4, 9, 200), (9, 10, 200), (10, 17, 350)]


def arrays(lo: int, hi: int) -> list:
    return [pa.array(range(lo, hi), pa.int64()),
            pa.array([f"v{i}" if i % 3 else None for i in range(lo, hi)], pa.string()),
            pa.array([f"s{i}" for i in range(lo, hi)])]


@pytest.fixture(autouse=True)
def small_row_groups(monkeypatch):
    monkeypatch.setattr(parts, "ROWS_GROUP_ROWS", 3)


def both_layouts(tmp_path: Path, masking=None) -> tuple[Path, Path]:
    """The same chunks staged in a row file and, the way they were staged before, in a part file."""
    stager = Stager(tmp_path, Counters(), row_group_rows=3, row_group_bytes=1 << 20, masking=masking)
    for lo, hi, pos in CHUNKS:
        for part in (stager.rows_part(TM, 0), stager.part(TM, 0)):
            part.append_arrow_inserts("bin.000002", 2, pos, None, TAKEN, f"snapshot:bin.000002:{pos}",
                                      arrays(lo, hi), -(2 ** 31) + lo)
    closed = stager.close()[("db", "t")]
    rows, envelope = (tmp_path / d["path"] for _, d in closed)
    assert rows.name.startswith("rows-") and envelope.name.startswith("part-")
    return rows, envelope


def test_a_row_file_holds_the_tables_columns_alone_with_field_ids_in_order(tmp_path):
    rows, envelope = both_layouts(tmp_path)
    schema = pq.read_schema(rows)
    assert schema.names == ["id", "v", "secret"]
    assert [f.metadata[b"PARQUET:field_id"] for f in schema] == [b"1", b"2", b"3"]
    assert ROWS_KEY in pq.ParquetFile(rows).metadata.metadata
    assert pq.read_table(rows).column("id").to_pylist() == list(range(17))
    assert rows.stat().st_size < envelope.stat().st_size


def test_a_row_file_reads_as_the_part_file_of_the_same_chunks_by_every_reader(tmp_path):
    rows, envelope = both_layouts(tmp_path)
    assert read_parquet_schema(str(rows)) == read_parquet_schema(str(envelope))
    assert read_parquet(rows).equals(read_parquet(envelope))
    view, part = open_parquet(rows), open_parquet(envelope)
    assert isinstance(view, StagedRowsFile) and not isinstance(part, StagedRowsFile)
    assert view.schema_arrow == part.schema_arrow and view.num_row_groups == 3
    for columns in (None, ["_txn"], ["_row", "_binlog_pos", "_after"], ["_before.id", "_after.id"],
                    ["_op", "_after.v", "_commit_ts", "_gtid", "_binlog_file", "_binlog_seq", "_after_absent"]):
        assert view.read(columns=columns).equals(part.read(columns=columns)), columns
        whole, at = part.read(columns=columns), 0
        for group in range(view.num_row_groups):
            mine = view.read_row_group(group, columns=columns)
            assert mine.equals(whole.slice(at, mine.num_rows)), (columns, group)
            at += mine.num_rows
        assert at == 17
        for size in (2, 5, 64):  # batches across the chunks' bounds
            mine = pa.Table.from_batches(list(view.iter_batches(batch_size=size, columns=columns)))
            theirs = pa.Table.from_batches(list(part.iter_batches(batch_size=size, columns=columns)))
            assert mine.equals(theirs), (columns, size)
    staged = read_parquet(rows).to_pylist()
    assert [(r["_binlog_pos"], r["_row"] + 2 ** 31, r["_txn"]) for r in staged][3:5] == [
        (100, 3, "snapshot:bin.000002:100"), (200, 4, "snapshot:bin.000002:200")]


def test_a_row_file_holds_the_masked_values_and_not_the_excluded_column(tmp_path):
    masking = Masking.parse({"exclude": ["db.t.secret"], "truncate": {"db.t.v": 1}}, "k3y")
    rows, envelope = both_layouts(tmp_path, masking)
    assert pq.read_schema(rows).names == ["id", "v"]
    assert read_parquet(rows).equals(read_parquet(envelope))
    assert {r["_after"]["v"] for r in read_parquet(rows).to_pylist()} == {"v", None}


def test_a_snapshots_arrow_chunks_are_published_in_row_files_that_roll_at_their_size(tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "ROWS_FILE_ROWS", 8)
    writer = StagingWriter(tmp_path / "staging")
    for lo, hi, pos in CHUNKS:
        writer.add_snapshot_arrays(TM, arrays(lo, hi), binlog_file="bin.000002", position=pos, gtid=None,
                                   taken_at=TAKEN, first_index=-(2 ** 31) + lo)
    manifest = writer.publish(dump_id="d", start={}, end={}, server={})
    assert manifest.data["version"] == 2  # an older release, which reads version 1, refuses the batch
    files = list(load_manifest(manifest.directory).files(manifest.tables[0]))
    assert [Path(f).name for f in files] == ["rows-00000.parquet", "rows-00000-r00001.parquet"]
    assert [pq.ParquetFile(f).metadata.num_rows for f in files] == [9, 8]  # a file ends after the chunk that fills it
    assert [pq.ParquetFile(f).num_row_groups for f in files] == [2, 1]  # a group ends after the chunk that fills it
    staged = [r for f in files for r in read_parquet(f).to_pylist()]
    assert [r["_after"]["id"] for r in staged] == list(range(17)) and {r["_op"] for r in staged} == {"insert"}


def test_a_row_file_whose_envelope_cannot_be_read_says_to_stage_the_batch_again(tmp_path):
    rows, _ = both_layouts(tmp_path)
    table = pq.read_table(rows)
    broken = tmp_path / "broken.parquet"
    pq.write_table(table.replace_schema_metadata({ROWS_KEY: b'{"version": 99}'}), broken)
    with pytest.raises(ValueError, match="broken.parquet: the row file's envelope cannot be read .*version 99.*"
                                         "stage the batch again"):
        read_parquet(broken)
