"""Direct commits of snapshot batches (merge.spark.direct_snapshot): the staged rows written as
Iceberg data files by pyarrow and committed as one overwrite, without a Spark job; compared
with the Spark path of the same batch, with a model of the source and with PyIceberg; a failed
commit leaves nothing and a rerun applies once; tables it does not write go through Spark."""
from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.checkpoints import FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.merge.layout import TableLayouts  # noqa: E402
from airflow_provider_binlog.merge.lake import direct_snapshot  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from tests.merging import iceberg_table  # noqa: E402
from tests.integration.test_direct_commit import (  # noqa: E402
    PAIR,
    WIDE,
    WIDE_COLS,
    expected_wide,
    pair_state,
    pyiceberg_wide,
    wide_row,
    wide_state,
)
from tests.integration.test_merge_job import Binlog  # noqa: E402
from tests.pyiceberg_reader import PyIcebergReader  # noqa: E402
from tests.s3_server import s3_env, s3_server  # noqa: E402,F401

UTC = dt.timezone.utc


class Snapshot(Binlog):
    """A snapshot batch: rows read (``chunk``) and binlog changes between them, as a watermark
    snapshot stages them."""

    def chunk(self, tm, rows: list) -> None:
        self.index = getattr(self, "index", {})
        first = self.index.get(tm.table, 0)
        self.index[tm.table] = first + self.writer.add_snapshot_rows(
            tm, rows, binlog_file=self.file, position=self.pos, gtid=None,
            taken_at=dt.datetime(2026, 1, 1, tzinfo=UTC), first_index=first)
        self.pos += 100

    def publish(self):
        end = self.here()
        manifest = self.writer.publish(
            dump_id=f"snapshot-{self.start.file}.{self.start.position}-{end.file}.{end.position}",
            start=self.start.to_json(), end=end.to_json(), server={"flavor": "mysql"}, extra={"mode": "snapshot"})
        self.writer = None
        return manifest


def snapshot_with_changes(root: Path, rng: random.Random, *, keys: int = 300, index: int = 1, staging=None):
    """A snapshot of ``s.wide`` and ``s.pair`` in chunks, with changes (updates, deletes,
    inserts, key changes) to rows already read between them; the model of the end state."""
    log = Snapshot(root, index=index, staging=staging).begin()
    wide = {k: wide_row(rng, k) for k in range(1, keys + 1)}
    pairs = {(a, b): a for a in range(1, 6) for b in ("x", "y")}
    read: list[int] = []
    for at in range(1, keys + 1, 50):
        chunk = [k for k in range(at, min(at + 50, keys + 1)) if k in wide]
        log.chunk(WIDE, [wide[k] for k in chunk])
        read += chunk
        for _ in range(10):  # changes to rows already read
            key = rng.choice(read)
            if key not in wide:
                continue
            r = rng.random()
            if r < 0.5:
                new = wide_row(rng, key)
                log.rows(WIDE, "update", [(wide[key], new)])
                wide[key] = new
            elif r < 0.7:
                log.rows(WIDE, "delete", [wide.pop(key)])
            elif r < 0.85:
                moved = 10_000 + len(wide) + rng.randint(0, 10**6)
                new = wide_row(rng, moved)
                log.rows(WIDE, "update", [(wide.pop(key), new)])
                wide[moved] = new
                read.append(moved)
            else:
                new_key = 100_000 + rng.randint(0, 10**6)
                wide[new_key] = wide_row(rng, new_key)
                log.rows(WIDE, "insert", [wide[new_key]])
                read.append(new_key)
    log.chunk(PAIR, [(a, b, v) for (a, b), v in sorted(pairs.items())])
    log.rows(PAIR, "update", [((1, "x", 1), (1, "x", 11))])
    pairs[(1, "x")] = 11
    return log.publish(), wide, pairs


def test_a_snapshot_with_changes_is_committed_directly_and_equals_the_spark_path_the_model_and_pyiceberg(
        spark, spark_warehouse, tmp_path):
    manifest, wide, pairs = snapshot_with_changes(tmp_path, random.Random(5))
    direct = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap"))["batches"][0]["tables"]
    assert {(t["source"], t.get("direct"), t["status"]) for t in direct} == {
        ("s.wide", True, "committed"), ("s.pair", True, "committed")}
    by_spark = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_spark", direct_max_bytes=0))
    by_spark = by_spark["batches"][0]["tables"]
    assert not any(t.get("direct") for t in by_spark)
    assert wide_state(spark, "lake.dsnap.s__wide") == expected_wide(wide) \
        == wide_state(spark, "lake.dsnap_spark.s__wide")
    assert pair_state(spark, "lake.dsnap.s__pair") == {(a, b): v for (a, b), v in pairs.items()}
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "dsnap") == expected_wide(wide)
    # one overwrite commit carrying the batch end, each key once
    rows = spark.sql("SELECT id, count(*) AS n FROM lake.dsnap.s__wide GROUP BY id HAVING n > 1").collect()
    assert rows == []
    commits = spark.sql("SELECT operation, summary['binlog.checkpoint'] FROM lake.dsnap.s__wide.snapshots").collect()
    assert [c[0] for c in commits] == ["overwrite"] and json.loads(commits[0][1]) == manifest.end.to_json()
    assert len(WIDE_COLS) == len(spark.table("lake.dsnap.s__wide").columns)


def test_a_reload_replaces_the_content_and_a_failed_commit_leaves_nothing_then_a_rerun_applies_once(
        spark, tmp_path, monkeypatch):
    store = FileCheckpointStore(tmp_path / "store")
    first, _, _ = snapshot_with_changes(tmp_path / "a", random.Random(1), keys=120)
    apply_manifests(spark, [first], MergeOptions(namespace="dsnap_re", checkpoint_store=store.root,
                                                 checkpoint_key="re"))
    reload, wide, _ = snapshot_with_changes(tmp_path / "b", random.Random(2), keys=80, index=2)
    name = "lake.dsnap_re.s__wide"
    before = wide_state(spark, name)
    location = iceberg_table(spark, name).location().removeprefix("file:")
    files_before = set(Path(location).rglob("*.parquet"))
    real = direct_snapshot.commits.commit_update

    def crash(update, props):
        raise RuntimeError("killed at the commit")

    with monkeypatch.context() as m:
        m.setattr(direct_snapshot.commits, "commit_update", crash)
        with pytest.raises(RuntimeError, match="killed at the commit"):
            apply_manifests(spark, [reload], MergeOptions(namespace="dsnap_re", checkpoint_store=store.root,
                                                          checkpoint_key="re"))
    assert wide_state(spark, name) == before and store.load("re").file == "mysql-bin.000001"
    assert set(Path(location).rglob("*.parquet")) == files_before  # the files written are deleted again
    assert direct_snapshot.commits.commit_update is real
    result = apply_manifests(spark, [reload], MergeOptions(namespace="dsnap_re", checkpoint_store=store.root,
                                                           checkpoint_key="re"))
    assert all(t.get("direct") for t in result["batches"][0]["tables"])
    assert wide_state(spark, name) == expected_wide(wide)  # rows of the first snapshot only are gone
    again = apply_manifests(spark, [reload], MergeOptions(namespace="dsnap_re", checkpoint_store=store.root,
                                                          checkpoint_key="re"))
    assert again["batches"][0]["status"] == "already-applied"
    assert wide_state(spark, name) == expected_wide(wide)


def test_partitioned_and_otherwise_sorted_tables_go_through_spark_after_their_create(spark, tmp_path, caplog):
    import logging

    layouts = TableLayouts.parse('{"tables": {"s.wide": {"partition_by": ["bucket(4, id)"]}, '
                                 '"s.pair": {"sort_by": ["v"]}}}')
    manifest, wide, pairs = snapshot_with_changes(tmp_path, random.Random(3), keys=100)
    with caplog.at_level(logging.INFO, logger="airflow_provider_binlog"):
        result = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_layout", table_layout=layouts))
    tables = {t["source"]: t for t in result["batches"][0]["tables"]}
    assert not any(t.get("direct") for t in tables.values())
    assert all(t["status"] == "committed" and t["schema_changes"][0].startswith("CREATE TABLE")
               for t in tables.values())
    assert "s__wide: the snapshot goes through Spark (partitioned" in caplog.text
    assert "s__pair: the snapshot goes through Spark (sorted by other than its primary key)" in caplog.text
    assert wide_state(spark, "lake.dsnap_layout.s__wide") == expected_wide(wide)
    assert pair_state(spark, "lake.dsnap_layout.s__pair") == {(a, b): v for (a, b), v in pairs.items()}


def test_through_spark_only_the_rows_of_keys_a_change_touches_are_collapsed_the_rest_go_out_as_read(
        spark, tmp_path, monkeypatch):
    from airflow_provider_binlog.merge.spark import collapse

    collapsed, real = [], collapse.collapse_with_chains
    monkeypatch.setattr(collapse, "collapse_with_chains",
                        lambda s, flat, *a, **k: collapsed.append(flat.count()) or real(s, flat, *a, **k))
    layouts = TableLayouts.parse('{"tables": {"s.wide": {"partition_by": ["bucket(4, id)"]}}}')
    manifest, wide, pairs = snapshot_with_changes(tmp_path, random.Random(4), keys=300)
    result = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_alone", table_layout=layouts))
    tables = {t["source"]: t for t in result["batches"][0]["tables"]}
    assert not tables["s.wide"].get("direct") and tables["s.pair"].get("direct")
    # 300 rows read and 60 changes: the collapse sees the changes and the reads of their keys only
    assert len(collapsed) == 1 and 0 < collapsed[0] <= 2 * 60
    assert wide_state(spark, "lake.dsnap_alone.s__wide") == expected_wide(wide)
    assert spark.sql("SELECT count(*) FROM lake.dsnap_alone.s__wide").collect()[0][0] == len(wide)


def test_a_snapshot_that_gave_a_key_twice_is_collapsed_whole_through_spark(spark, tmp_path):
    log = Snapshot(tmp_path).begin()
    rng = random.Random(8)
    first = {k: wide_row(rng, k) for k in range(1, 21)}
    again = {5: wide_row(rng, 5)}  # read twice, no change touches it: the later read wins
    log.chunk(WIDE, [first[k] for k in range(1, 21)])
    log.chunk(WIDE, [again[5]])
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dsnap_twice"))
    assert not result["batches"][0]["tables"][0].get("direct")
    assert wide_state(spark, "lake.dsnap_twice.s__wide") == expected_wide({**first, **again})
    assert spark.sql("SELECT count(*) FROM lake.dsnap_twice.s__wide").collect()[0][0] == 20  # key 5 once


def test_large_snapshots_roll_data_files_at_the_tables_target_size(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(direct_snapshot, "ROW_GROUP_ROWS", 100)
    log = Snapshot(tmp_path).begin()
    rng = random.Random(9)
    wide = {k: wide_row(rng, k) for k in range(1, 2001)}
    for at in range(1, 2001, 500):
        log.chunk(WIDE, [wide[k] for k in range(at, at + 500)])
    layouts = TableLayouts.parse('{"tables": {"s.wide": {"properties": {"write.target-file-size-bytes": "20000"}}}}')
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dsnap_roll", table_layout=layouts))
    assert result["batches"][0]["tables"][0]["direct"] is True
    files = spark.sql("SELECT file_size_in_bytes, record_count FROM lake.dsnap_roll.s__wide.files").collect()
    assert len(files) >= 3 and sum(f[1] for f in files) == 2000
    assert wide_state(spark, "lake.dsnap_roll.s__wide") == expected_wide(wide)
    bounds = spark.sql("SELECT lower_bounds, upper_bounds FROM lake.dsnap_roll.s__wide.files").collect()
    assert all(b[0] and b[1] for b in bounds)  # metrics from the footers


def test_a_snapshot_committed_directly_reads_no_staged_facts(spark, tmp_path, monkeypatch):
    from airflow_provider_binlog.merge.lake import table_work

    read, real = [], table_work.staged_facts
    monkeypatch.setattr(table_work, "staged_facts", lambda *a, **k: read.append(a[0]) or real(*a, **k))
    manifest, wide, _ = snapshot_with_changes(tmp_path, random.Random(6), keys=100)
    tables = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_facts"))["batches"][0]["tables"]
    assert all(t.get("direct") for t in tables) and read == []
    assert wide_state(spark, "lake.dsnap_facts.s__wide") == expected_wide(wide)


def test_a_row_group_that_fails_in_the_writing_thread_fails_the_batch_and_leaves_no_file(spark, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setattr(direct_snapshot, "ROW_GROUP_ROWS", 100)
    manifest, _, _ = snapshot_with_changes(tmp_path, random.Random(5), keys=1500)
    real, groups = direct_snapshot._DataFiles._write_groups, []

    def fails_second(self, rows):  # of s.wide's writes (s.pair is written beside it)
        if str(self.table.name()).endswith("s__wide"):
            groups.append(rows.num_rows)
            if len(groups) == 2:
                raise OSError("disk full")
        real(self, rows)

    monkeypatch.setattr(direct_snapshot._DataFiles, "_write_groups", fails_second)
    with pytest.raises(OSError, match="disk full"):
        apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_thread"))
    assert len(groups) == 2 and groups[0] > 100  # the first wrote row groups into a file
    location = iceberg_table(spark, "lake.dsnap_thread.s__wide").location().removeprefix("file:")
    assert list(Path(location).rglob("*.parquet")) == []  # the files of the groups written are deleted
    assert spark.sql("SELECT count(*) FROM lake.dsnap_thread.s__wide").collect()[0][0] == 0


def test_a_snapshot_staged_on_s3_is_committed_directly_and_read_back_by_pyiceberg(spark, spark_warehouse, tmp_path,
                                                                                 s3_env):  # noqa: F811
    manifest, wide, pairs = snapshot_with_changes(tmp_path, random.Random(8), keys=150, staging=f"s3://{s3_env}/stage")
    assert manifest.ref.startswith(f"s3://{s3_env}/stage/")
    tables = apply_manifests(spark, [manifest.ref], MergeOptions(namespace="dsnap_s3"))["batches"][0]["tables"]
    assert {(t["source"], t.get("direct")) for t in tables} == {("s.wide", True), ("s.pair", True)}
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "dsnap_s3") == expected_wide(wide)
    assert pair_state(spark, "lake.dsnap_s3.s__pair") == {(a, b): v for (a, b), v in pairs.items()}


class ArrowSnapshot(Snapshot):
    """A snapshot whose chunks were read into Arrow: staged in row files."""

    def chunk(self, tm, rows: list) -> None:
        import pyarrow as pa

        from airflow_provider_binlog.staging.contract import arrow_type_for

        self.index = getattr(self, "index", {})
        first = self.index.get(tm.table, 0)
        columns = [pa.array([r[c.index] for r in rows], arrow_type_for(c)) for c in tm.columns]
        self.index[tm.table] = first + self.writer.add_snapshot_arrays(
            tm, columns, binlog_file=self.file, position=self.pos, gtid=None,
            taken_at=dt.datetime(2026, 1, 1, tzinfo=UTC), first_index=first)
        self.pos += 100


def staged_row_files(manifest) -> list[Path]:
    entry = next(e for e in manifest.tables if e["table"] == "wide")
    return [Path(p) for p in manifest.files(entry) if Path(p).name.startswith("rows-")]


def sha256(path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_row_files_are_committed_as_they_are_and_stay_readable_after_the_staging_is_deleted(
        spark, spark_warehouse, tmp_path):
    import shutil

    log = ArrowSnapshot(tmp_path).begin()
    rng = random.Random(11)
    wide = {k: wide_row(rng, k) for k in range(1, 301)}
    for at in range(1, 301, 50):
        log.chunk(WIDE, [wide[k] for k in range(at, at + 50)])
    manifest = log.publish()
    (staged,) = staged_row_files(manifest)
    result = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_rows"))
    (table,) = result["batches"][0]["tables"]
    assert table["direct"] is True and table["rows_adopted"] == 300 and table["rows_written"] == 300
    (data_file,) = [r[0] for r in spark.sql("SELECT file_path FROM lake.dsnap_rows.s__wide.files").collect()]
    assert sha256(data_file.removeprefix("file:")) == sha256(staged)  # the staged bytes, not rows written again
    shutil.rmtree(tmp_path / "staging")  # the staging's retention: the table does not refer to it
    assert wide_state(spark, "lake.dsnap_rows.s__wide") == expected_wide(wide)
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "dsnap_rows") == expected_wide(wide)
    bounds = spark.sql("SELECT record_count, lower_bounds, upper_bounds FROM lake.dsnap_rows.s__wide.files").collect()
    assert bounds[0][0] == 300 and bounds[0][1] and bounds[0][2]  # metrics from the footer


def touched_snapshot(root: Path, rng: random.Random, index: int = 1):
    """300 rows read in two row files, then changes to rows of the first (3 updates, 1 delete)."""
    log = ArrowSnapshot(root, index=index).begin()
    wide = {k: wide_row(rng, k) for k in range(1, 301)}
    for at in range(1, 301, 50):
        log.chunk(WIDE, [wide[k] for k in range(at, at + 50)])
    for key in (3, 77, 140):  # changes to rows of the first file, after it was read
        new = wide_row(rng, key)
        log.rows(WIDE, "update", [(wide[key], new)])
        wide[key] = new
    log.rows(WIDE, "delete", [wide.pop(9)])
    manifest = log.publish()
    assert len(staged_row_files(manifest)) == 2
    return manifest, wide


def test_into_a_new_table_a_row_file_a_change_touches_is_taken_with_position_deletes_and_spark_agrees(
        spark, spark_warehouse, tmp_path, monkeypatch):
    from airflow_provider_binlog.staging import parts

    monkeypatch.setattr(parts, "ROWS_FILE_ROWS", 150)
    manifest, wide = touched_snapshot(tmp_path, random.Random(12))
    direct = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_rows_touched"))
    (table,) = direct["batches"][0]["tables"]
    # 4 rows of the first file replaced: 296 rows taken as they are, 3 updated rows written
    assert table["direct"] is True and table["rows_adopted"] == 296 and table["rows_written"] == 299
    deletes = spark.sql("SELECT content, record_count FROM lake.dsnap_rows_touched.s__wide.delete_files").collect()
    assert [(d[0], d[1]) for d in deletes] == [(1, 4)]  # one position delete file of 4 rows
    commits = spark.sql("SELECT operation FROM lake.dsnap_rows_touched.s__wide.snapshots").collect()
    assert [c[0] for c in commits] == ["overwrite"]  # one commit
    by_spark = apply_manifests(spark, [manifest], MergeOptions(namespace="dsnap_rows_spark", direct_max_bytes=0))
    assert not by_spark["batches"][0]["tables"][0].get("direct")  # Spark reads the row files through pyarrow
    assert wide_state(spark, "lake.dsnap_rows_touched.s__wide") == expected_wide(wide) \
        == wide_state(spark, "lake.dsnap_rows_spark.s__wide")
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "dsnap_rows_touched") == expected_wide(wide)


def test_a_reload_rewrites_a_row_file_a_change_touches_and_takes_the_others_as_they_are(
        spark, spark_warehouse, tmp_path, monkeypatch):
    from airflow_provider_binlog.staging import parts

    monkeypatch.setattr(parts, "ROWS_FILE_ROWS", 150)
    first, _ = touched_snapshot(tmp_path / "a", random.Random(15))
    apply_manifests(spark, [first], MergeOptions(namespace="dsnap_rows_reload"))
    reload, wide = touched_snapshot(tmp_path / "b", random.Random(16), index=2)
    (table,) = apply_manifests(spark, [reload], MergeOptions(namespace="dsnap_rows_reload"))["batches"][0]["tables"]
    assert table["direct"] is True and table["rows_adopted"] == 150 and table["rows_written"] == 299
    current = spark.sql("SELECT count(*) FROM lake.dsnap_rows_reload.s__wide.delete_files").collect()[0][0]
    assert current == 0  # the overwrite replaced the first load's files and deletes
    assert wide_state(spark, "lake.dsnap_rows_reload.s__wide") == expected_wide(wide)
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "dsnap_rows_reload") == expected_wide(wide)


def test_row_files_staged_on_s3_are_copied_into_the_table_and_read_back_by_pyiceberg(
        spark, spark_warehouse, tmp_path, s3_env):  # noqa: F811
    log = ArrowSnapshot(tmp_path, staging=f"s3://{s3_env}/stage-rows").begin()
    rng = random.Random(13)
    wide = {k: wide_row(rng, k) for k in range(1, 121)}
    for at in range(1, 121, 40):
        log.chunk(WIDE, [wide[k] for k in range(at, at + 40)])
    manifest = log.publish()
    (table,) = apply_manifests(spark, [manifest.ref], MergeOptions(namespace="dsnap_rows_s3"))["batches"][0]["tables"]
    assert table["direct"] is True and table["rows_adopted"] == 120
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "dsnap_rows_s3") == expected_wide(wide)


def test_row_files_are_rewritten_for_a_table_with_another_parquet_codec(spark, tmp_path):
    log = ArrowSnapshot(tmp_path).begin()
    rng = random.Random(14)
    wide = {k: wide_row(rng, k) for k in range(1, 101)}
    log.chunk(WIDE, list(wide.values()))
    layouts = TableLayouts.parse(
        '{"tables": {"s.wide": {"properties": {"write.parquet.compression-codec": "snappy"}}}}')
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dsnap_rows_snappy", table_layout=layouts))
    (table,) = result["batches"][0]["tables"]
    assert table["direct"] is True and table["rows_adopted"] == 0 and table["rows_written"] == 100
    assert wide_state(spark, "lake.dsnap_rows_snappy.s__wide") == expected_wide(wide)


def test_a_failed_commit_of_row_files_leaves_no_copy_or_delete_file_then_a_rerun_applies_once(
        spark, tmp_path, monkeypatch):
    from airflow_provider_binlog.staging import parts

    monkeypatch.setattr(parts, "ROWS_FILE_ROWS", 150)
    store = FileCheckpointStore(tmp_path / "store")
    manifest, wide = touched_snapshot(tmp_path, random.Random(17))
    options = MergeOptions(namespace="dsnap_rows_crash", checkpoint_store=store.root, checkpoint_key="rows")
    copied = []
    real_copy, real_commit = direct_snapshot._DataFiles.copy, direct_snapshot.commits.commit_update
    monkeypatch.setattr(direct_snapshot._DataFiles, "copy",
                        lambda self, staged: copied.append(real_copy(self, staged)) or copied[-1])

    def crash(update, props):
        raise RuntimeError("killed at the commit")

    with monkeypatch.context() as m:
        m.setattr(direct_snapshot.commits, "commit_update", crash)
        with pytest.raises(RuntimeError, match="killed at the commit"):
            apply_manifests(spark, [manifest], options)
    location = iceberg_table(spark, "lake.dsnap_rows_crash.s__wide").location().removeprefix("file:")
    assert len(copied) == 2 and list(Path(location).rglob("*.parquet")) == []  # copies and deletes removed
    assert store.load("rows") is None and direct_snapshot.commits.commit_update is real_commit
    result = apply_manifests(spark, [manifest], options)
    assert result["batches"][0]["tables"][0]["rows_adopted"] == 296
    assert wide_state(spark, "lake.dsnap_rows_crash.s__wide") == expected_wide(wide)
    again = apply_manifests(spark, [manifest], options)
    assert again["batches"][0]["status"] == "already-applied"
    assert wide_state(spark, "lake.dsnap_rows_crash.s__wide") == expected_wide(wide)
