"""Two merges of the same batch that overlap (a retry beside a stuck attempt, two DAGs sharing
a namespace), without a checkpoint store to lock: the second to commit finds the first's
commit and fails; every key is in Iceberg once and the ledger has one row for the batch, on
every path (direct commits, the merge without Spark, Spark's MERGE and append), for a batch
of changes and for an initial load."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.merge.lake import batch as batch_module  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from tests.merging import refresh  # noqa: E402
from tests.merging import java_lake  # noqa: E402
from airflow_provider_binlog.spark.runtime import local_spark_conf  # noqa: E402
from tests.integration.test_direct_commit import random_changes  # noqa: E402
from tests.integration.test_direct_snapshot import snapshot_with_changes, touched_snapshot  # noqa: E402
from tests.integration.test_merge_job import Binlog  # noqa: E402

PATHS = ["direct", "spark", "without-spark"]


@pytest.fixture(scope="module")
def lake(spark, spark_warehouse):
    jvm = java_lake(local_spark_conf(spark_warehouse, "lake"))
    try:
        yield jvm
    finally:
        jvm.stop()


def _engine(path: str, spark, lake):
    return lake if path == "without-spark" else spark


def _options(namespace: str, path: str) -> MergeOptions:
    return MergeOptions(namespace=namespace, direct_max_bytes=0 if path == "spark" else 32 << 20)


def _overlapped(monkeypatch, spark, engine, manifest, options: MergeOptions):
    """Apply ``manifest`` with ``engine``; once its tables are planned, and before any is
    committed, another run applies the same batch through ``spark``'s engine of the same path.
    Returns the first run's error (None when it succeeded)."""
    real = batch_module.plan_tables

    def plan_then_let_the_other_run_commit(*args, **kwargs):
        out = real(*args, **kwargs)
        monkeypatch.setattr(batch_module, "plan_tables", real)
        apply_manifests(engine, [manifest], options)
        return out

    monkeypatch.setattr(batch_module, "plan_tables", plan_then_let_the_other_run_commit)
    try:
        apply_manifests(engine, [manifest], options)
    except Exception as exc:  # noqa: BLE001 - what the run reports is asserted by the caller
        return exc
    finally:
        monkeypatch.setattr(batch_module, "plan_tables", real)
    return None


def _keys_twice(spark, table: str, key: str) -> list:
    refresh(spark, table)
    return spark.sql(f"SELECT {key}, count(*) AS n FROM {table} GROUP BY {key} HAVING n > 1").collect()


def _ledger(spark, namespace: str) -> list[str]:
    refresh(spark, f"lake.{namespace}._binlog_batches")
    return [r[0] for r in spark.sql(f"SELECT batch_id FROM lake.{namespace}._binlog_batches").collect()]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("table", ["new", "loaded"])
def test_two_overlapping_merges_of_a_batch_land_it_once(spark, lake, tmp_path, monkeypatch, path, table):
    if (path, table) == ("without-spark", "new"):
        pytest.skip("the merge without Spark creates tables for initial loads only")
    namespace = f"overlap_cdc_{path.replace('-', '_')}_{table}"
    rng = random.Random(7)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    if table == "loaded":
        log.begin()
        random_changes(log, rng, wide, pairs, 30)
        apply_manifests(spark, [log.publish()], _options(namespace, "spark"))
    log.begin()
    random_changes(log, rng, wide, pairs, 60)
    manifest = log.publish()
    error = _overlapped(monkeypatch, spark, _engine(path, spark, lake), manifest, _options(namespace, path))
    assert error is not None and "another merge" in str(error)
    assert _keys_twice(spark, f"lake.{namespace}.s__wide", "id") == []
    assert _keys_twice(spark, f"lake.{namespace}.s__pair", "a, b") == []
    assert _ledger(spark, namespace).count(manifest.dump_id) == 1
    again = apply_manifests(_engine(path, spark, lake), [manifest], _options(namespace, path))
    assert again["batches"][0]["status"] == "already-applied"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("load", ["chunks", "row files"])
def test_two_overlapping_initial_loads_land_each_key_once(spark, lake, tmp_path, monkeypatch, path, load):
    namespace = f"overlap_load_{path.replace('-', '_')}_{load.replace(' ', '_')}"
    if load == "row files":
        from airflow_provider_binlog.staging import parts

        monkeypatch.setattr(parts, "ROWS_FILE_ROWS", 150)
        manifest, _wide = touched_snapshot(tmp_path, random.Random(12))
    else:
        manifest, _wide, _pairs = snapshot_with_changes(tmp_path, random.Random(5))
    error = _overlapped(monkeypatch, spark, _engine(path, spark, lake), manifest, _options(namespace, path))
    assert error is not None and "another merge" in str(error)
    assert _keys_twice(spark, f"lake.{namespace}.s__wide", "id") == []
    assert _ledger(spark, namespace).count(manifest.dump_id) == 1


@pytest.mark.parametrize("path", PATHS)
def test_a_run_planned_after_the_others_table_commits_leaves_one_ledger_row(spark, lake, tmp_path, monkeypatch, path):
    namespace = f"overlap_ledger_{path.replace('-', '_')}"
    rng = random.Random(8)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    apply_manifests(spark, [log.publish()], _options(namespace, "spark"))
    log.begin()
    random_changes(log, rng, wide, pairs, 40)
    manifest = log.publish()
    engine, options = _engine(path, spark, lake), _options(namespace, path)
    real = batch_module.append_rows

    def let_the_other_run_apply_first(*args, **kwargs):  # this run's tables are committed
        monkeypatch.setattr(batch_module, "append_rows", real)
        other = apply_manifests(engine, [manifest], options)  # finds them applied, writes the ledger
        assert {t["status"] for t in other["batches"][0]["tables"]} == {"already-applied"}
        return real(*args, **kwargs)

    monkeypatch.setattr(batch_module, "append_rows", let_the_other_run_apply_first)
    with pytest.raises(Exception, match=r"another merge committed to lake\.\w+\._binlog_batches"):
        apply_manifests(engine, [manifest], options)
    assert _ledger(spark, namespace).count(manifest.dump_id) == 1
    assert _keys_twice(spark, f"lake.{namespace}.s__wide", "id") == []


def test_the_maintenance_of_a_merge_runs_under_its_run_lock(spark, tmp_path, monkeypatch):
    from airflow_provider_binlog.checkpoints import CheckpointLockedError, FileCheckpointStore

    store_dir = tmp_path / "store"
    options = MergeOptions(namespace="overlap_maint", maintenance=True, checkpoint_store=str(store_dir),
                           checkpoint_key="maint")
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, random.Random(9), wide, pairs, 20)
    manifest = log.publish()
    from airflow_provider_binlog.merge.spark import engine as engine_module

    real, seen = engine_module.run_maintenance, []

    def another_run_tries_meanwhile(*args, **kwargs):
        try:
            with FileCheckpointStore(store_dir).exclusive("maint"):
                seen.append("taken")
        except CheckpointLockedError:
            seen.append("refused")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_module, "run_maintenance", another_run_tries_meanwhile)
    apply_manifests(spark, [manifest], options)
    assert seen == ["refused"]


def test_maintenance_removes_the_staging_branches_a_killed_merge_left_and_keeps_younger_ones(spark, tmp_path):
    from airflow_provider_binlog.merge.spark.maintenance import run_maintenance
    from tests.merging import lake_of

    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, random.Random(10), wide, pairs, 10)
    apply_manifests(spark, [log.publish()], _options("overlap_branches", "spark"))
    name = "lake.overlap_branches.s__wide"
    table = lake_of(spark).load_table(name)
    table.manageSnapshots().createBranch("binlog_stage_killed", table.currentSnapshot().snapshotId()).commit()
    (kept,) = run_maintenance(spark, lake_of(spark), "lake", "overlap_branches", [name])
    assert kept["stale_branches_removed"] == []
    assert "binlog_stage_killed" in dict(lake_of(spark).load_table(name).refs())
    (done,) = run_maintenance(spark, lake_of(spark), "lake", "overlap_branches", [name], stale_branch_seconds=0)
    assert done["stale_branches_removed"] == ["binlog_stage_killed"]
    assert set(dict(lake_of(spark).load_table(name).refs())) == {"main"}
