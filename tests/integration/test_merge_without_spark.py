"""Merges without Spark (the iceberg-java engine, merge/lake/java.py): batches whose tables all take direct commits are
applied through Iceberg's Java API in a bare JVM, equal to what Spark's merge gives; a batch
that needs Spark is refused before anything of it is committed, and Spark then applies it."""
from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.merge.spark import job  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from tests.merging import applied_state, refresh  # noqa: E402
from airflow_provider_binlog.merge.errors import SparkNeeded  # noqa: E402
from airflow_provider_binlog.merge.lake.java_settings import catalog_properties, class_path  # noqa: E402
from tests.merging import java_lake  # noqa: E402
from airflow_provider_binlog.spark.runtime import local_spark_conf  # noqa: E402
from tests.integration.test_direct_commit import (  # noqa: E402
    PAIR,
    WIDE,
    expected_wide,
    pair_state,
    pyiceberg_wide,
    random_changes,
    wide_row,
    wide_state,
)
from tests.integration.test_merge_job import Binlog, col, head, table_map  # noqa: E402
from tests.pyiceberg_reader import PyIcebergReader  # noqa: E402

PAIR_WIDER = table_map("s", "pair", [
    col(0, "a", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
    col(1, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True, primary_key=True, nullable=False),
    col(2, "v", C.MYSQL_TYPE_LONG),
    col(3, "w", C.MYSQL_TYPE_LONG),
], table_id=2)


@pytest.fixture(scope="module")
def lake(spark, spark_warehouse):
    jvm = java_lake(local_spark_conf(spark_warehouse, "lake"))
    try:
        yield jvm
    finally:
        jvm.stop()


def _fresh(spark, *names):
    for name in names:
        refresh(spark, name)


def _loaded_then_changed(spark, tmp_path, namespace: str, seed: int):
    """A log whose first batch Spark applied into ``namespace`` (creating the tables), and a
    second batch of simple changes, published: ``(log, model of s.wide, of s.pair, manifest)``."""
    rng = random.Random(seed)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    apply_manifests(spark, [log.publish()], MergeOptions(namespace=namespace))
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    return log, wide, pairs, log.publish()


def test_batches_of_existing_tables_are_merged_without_spark_and_equal_the_source_and_pyiceberg(
        spark, spark_warehouse, lake, tmp_path):
    reader = PyIcebergReader(warehouse=spark_warehouse)
    rng = random.Random(21)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 40)
    first = log.publish()
    with pytest.raises(SparkNeeded, match="CREATE TABLE|namespace"):  # the tables do not exist yet
        apply_manifests(lake, [first], MergeOptions(namespace="nospark"))
    apply_manifests(spark, [first], MergeOptions(namespace="nospark"))
    manifests = [first]
    for _ in range(3):
        log.begin()
        random_changes(log, rng, wide, pairs, 60)
        manifests.append(log.publish())
        result = apply_manifests(lake, [manifests[-1]], MergeOptions(namespace="nospark"))
        assert [t["direct"] for t in result["batches"][0]["tables"]] == [True, True]
        assert result["batches"][0]["ledger"] == "committed"
        _fresh(spark, "lake.nospark.s__wide", "lake.nospark.s__pair", "lake.nospark._binlog_batches")
        assert wide_state(spark, "lake.nospark.s__wide") == expected_wide(wide)
        assert pair_state(spark, "lake.nospark.s__pair") == pairs
        assert pyiceberg_wide(reader, "nospark") == expected_wide(wide)
    assert applied_state(spark, "lake.nospark.s__wide").checkpoint == log.here()
    ledger = spark.sql("SELECT batch_id FROM lake.nospark._binlog_batches").collect()
    assert sorted(r[0] for r in ledger) == sorted(m.dump_id for m in manifests)
    again = apply_manifests(lake, manifests, MergeOptions(namespace="nospark"))
    assert [b["status"] for b in again["batches"]] == ["already-applied"] * 4


@pytest.mark.parametrize("change", ["new column", "key change"])
def test_a_batch_that_needs_spark_is_refused_before_any_table_is_committed_then_spark_applies_it(
        spark, lake, tmp_path, change):
    namespace = "nospark_" + change.replace(" ", "_")
    rng = random.Random(22)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    apply_manifests(spark, [log.publish()], MergeOptions(namespace=namespace))
    names = [f"lake.{namespace}.s__wide", f"lake.{namespace}.s__pair"]
    before = [head(spark, n) for n in names]
    log.begin()
    key = sorted(wide)[0]
    new = wide_row(rng, key)
    log.rows(WIDE, "update", [(wide[key], new)])  # a direct change of the other table
    wide[key] = new
    (a, b), v = sorted(pairs.items())[0]
    if change == "new column":
        log.rows(PAIR_WIDER, "insert", [(9, "new", 1, 2)])
        pairs[(9, "new")] = 1
    else:
        log.rows(PAIR, "update", [((a, b, v), (a + 100, b, v))])
        pairs[(a + 100, b)] = pairs.pop((a, b))
    manifest = log.publish()
    with pytest.raises(SparkNeeded, match="ALTER TABLE" if change == "new column" else "MERGE"):
        apply_manifests(lake, [manifest], MergeOptions(namespace=namespace))
    _fresh(spark, *names)
    assert [head(spark, n) for n in names] == before  # nothing of the batch was committed
    apply_manifests(spark, [manifest], MergeOptions(namespace=namespace))
    assert wide_state(spark, names[0]) == expected_wide(wide)
    assert pair_state(spark, names[1]) == pairs


def test_the_job_without_spark_exits_with_spark_needed_and_the_batches_it_applied(
        spark, spark_warehouse, tmp_path):
    log, _, _, direct = _loaded_then_changed(spark, tmp_path, "nospark_job", 23)
    log.begin()
    log.rows(PAIR_WIDER, "insert", [(9, "new", 1, 2)])
    altered = log.publish()
    options = MergeOptions(namespace="nospark_job", warehouse=spark_warehouse).to_json_text()
    out = tmp_path / "result.json"
    code = job.main(["--engine", "iceberg", "--manifest", str(direct.path), "--manifest", str(altered.path),
                     "--options", options, "--output-json", str(out)])
    assert code == job.EXIT_SPARK_NEEDED
    result = json.loads(out.read_text())
    assert "ALTER TABLE" in result["spark_needed"]
    assert [(b["batch_id"], b["status"]) for b in result["applied"]] == [(direct.dump_id, "applied")]
    code = job.main(["--engine", "iceberg", "--manifest", str(direct.path), "--options", options,
                     "--output-json", str(out)])
    assert code == 0 and json.loads(out.read_text())["engine"] == "iceberg-java"
    assert json.loads(out.read_text())["batches"][0]["status"] == "already-applied"


def test_jars_left_to_spark_submit_need_spark():
    with pytest.raises(SparkNeeded, match="packages"):
        class_path({"spark.jars.packages": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.6.1"}, ["/x"], {})
    with pytest.raises(SparkNeeded, match="only Spark fetches"):
        class_path({"spark.jars": "https://repo/iceberg.jar"}, ["/x"], {})
    assert class_path({"spark.jars": "/a.jar,file:///b.jar"}, ["/spark/jars"], {}) == \
        ["/a.jar", "/b.jar", "/spark/jars/*"]


def test_the_jvm_reads_hadoop_and_hive_settings_from_where_spark_submit_puts_them():
    environ = {"SPARK_CONF_DIR": "/etc/spark", "HADOOP_CONF_DIR": "/etc/hadoop", "SPARK_DIST_CLASSPATH": "/h/a:/h/b",
               "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}
    assert class_path({"spark.jars": "/a.jar"}, ["/spark/jars"], environ) == \
        ["/etc/spark", "/a.jar", "/spark/jars/*", "/etc/hadoop", "/h/a", "/h/b"]
    conf = {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog", "spark.sql.catalog.lake.type": "hive",
            "spark.sql.catalog.lake.uri": "thrift://hms:9083", "spark.sql.catalog.lake.hadoop.fs.defaultFS": "hdfs://nn",
            "spark.hadoop.fs.s3a.endpoint": "http://s3", "spark.hive.metastore.client.socket.timeout": "60",
            "spark.sql.warehouse.dir": "hdfs://nn/warehouse"}
    props, hadoop = catalog_properties(conf, "lake", environ)
    assert props == {"type": "hive", "uri": "thrift://hms:9083"}
    assert hadoop == {"fs.defaultFS": "hdfs://nn", "fs.s3a.endpoint": "http://s3",
                      "hive.metastore.client.socket.timeout": "60", "hive.metastore.warehouse.dir": "hdfs://nn/warehouse",
                      "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK"}
    with pytest.raises(SparkNeeded, match="not org.apache.iceberg.spark.SparkCatalog"):
        catalog_properties({"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkSessionCatalog"}, "lake", {})


def _metadata(spark, name) -> dict:
    from tests.merging import iceberg_table

    table = iceberg_table(spark, name)
    parser = spark.sparkContext._jvm.org.apache.iceberg
    meta = json.loads(parser.TableMetadataParser.toJson(table.operations().current()))
    # the default sort order (Spark's create, then WRITE ORDERED BY, keeps the unsorted one before it)
    sort = [o for o in meta["sort-orders"] if o["order-id"] == meta["default-sort-order-id"]]
    return {"schema": meta["schemas"][-1]["fields"], "sort": sort, "spec": meta["partition-specs"],
            "properties": meta["properties"], "format-version": meta["format-version"]}


def test_an_initial_snapshot_creates_the_namespace_tables_and_ledger_without_spark_as_spark_does(
        spark, spark_warehouse, lake, tmp_path, monkeypatch):
    from airflow_provider_binlog.checkpoints import FileCheckpointStore
    from airflow_provider_binlog.merge.lake import direct_snapshot
    from tests.integration.test_direct_snapshot import snapshot_with_changes

    manifest, wide, pairs = snapshot_with_changes(tmp_path, random.Random(24), keys=150)
    store = FileCheckpointStore(tmp_path / "store")
    options = MergeOptions(namespace="nospark_snap", checkpoint_store=store.root, checkpoint_key="snap")

    def crash(update, props):
        raise RuntimeError("killed at the commit")

    with monkeypatch.context() as m:  # killed at the first commit: nothing lands, a rerun applies once
        m.setattr(direct_snapshot.commits, "commit_update", crash)
        with pytest.raises(RuntimeError, match="killed"):
            apply_manifests(lake, [manifest], options)
    assert store.load("snap") is None
    result = apply_manifests(lake, [manifest], options)
    assert {(t["source"], t.get("direct"), t["status"]) for t in result["batches"][0]["tables"]} == {
        ("s.wide", True, "committed"), ("s.pair", True, "committed")}
    assert store.load("snap") == manifest.end
    _fresh(spark, "lake.nospark_snap.s__wide", "lake.nospark_snap.s__pair")
    assert wide_state(spark, "lake.nospark_snap.s__wide") == expected_wide(wide)
    assert pair_state(spark, "lake.nospark_snap.s__pair") == pairs
    assert pyiceberg_wide(PyIcebergReader(warehouse=spark_warehouse), "nospark_snap") == expected_wide(wide)
    again = apply_manifests(lake, [manifest], options)
    assert again["batches"][0]["status"] == "already-applied"
    # the same tables as Spark's CREATE TABLE and WRITE ORDERED BY make
    apply_manifests(spark, [manifest], MergeOptions(namespace="nospark_snap_spark"))
    for table in ("s__wide", "s__pair", "_binlog_batches"):
        assert _metadata(spark, f"lake.nospark_snap.{table}") == _metadata(spark, f"lake.nospark_snap_spark.{table}")


def test_a_snapshot_into_a_partitioned_layout_needs_spark_before_anything_is_created(spark, lake, tmp_path):
    from airflow_provider_binlog.merge.layout import TableLayouts
    from tests.merging import table_exists
    from tests.integration.test_direct_snapshot import snapshot_with_changes

    manifest, _, _ = snapshot_with_changes(tmp_path, random.Random(25), keys=60)
    layouts = TableLayouts.parse('{"tables": {"s.wide": {"partition_by": ["bucket(4, id)"]}}}')
    with pytest.raises(SparkNeeded, match="CREATE TABLE"):
        apply_manifests(lake, [manifest], MergeOptions(namespace="nospark_part", table_layout=layouts))
    assert not table_exists(spark, "lake.nospark_part.s__pair")


def test_maintenance_that_is_due_sends_the_merge_to_spark_before_any_batch_and_spark_maintains_every_table(
        spark, lake, tmp_path):
    from airflow_provider_binlog.merge.iceberg_contract import PROP_MAINTAINED_AT
    from tests.merging import stored_properties

    rng = random.Random(26)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    options = MergeOptions(namespace="nospark_maint", maintenance=True, maintenance_every_hours=24)
    apply_manifests(spark, [log.publish()], options)  # creates and maintains the tables
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    second = log.publish()
    result = apply_manifests(lake, [second], options)  # maintained less than 24 h ago: no Spark
    assert [t["direct"] for t in result["batches"][0]["tables"]] == [True, True]
    assert all("skipped" in m for m in result["maintenance"])
    log.begin()
    random_changes(log, rng, wide, pairs, 30)
    third = log.publish()
    names = ["lake.nospark_maint.s__wide", "lake.nospark_maint.s__pair"]
    _fresh(spark, *names)
    before = [head(spark, n) for n in names]
    every_run = MergeOptions(namespace="nospark_maint", maintenance=True)
    with pytest.raises(SparkNeeded, match="maintenance of .* is due") as refused:
        apply_manifests(lake, [third], every_run)
    _fresh(spark, *names)
    assert [head(spark, n) for n in names] == before and refused.value.applied == []
    stamps = [stored_properties(spark, n)[PROP_MAINTAINED_AT] for n in names]
    result = apply_manifests(spark, [second, third], every_run)  # the second was applied already
    assert [b["status"] for b in result["batches"]] == ["already-applied", "applied"]
    assert sorted(m["table"] for m in result["maintenance"]) == sorted([*names, "lake.nospark_maint._binlog_batches"])
    assert [stored_properties(spark, n)[PROP_MAINTAINED_AT] for n in names] != stamps
    assert wide_state(spark, names[0]) == expected_wide(wide)


def test_a_direct_commit_refused_after_the_check_hands_the_batch_to_spark_with_the_tables_committed(
        spark, lake, tmp_path, monkeypatch):
    from airflow_provider_binlog.merge.lake import batch as batch_module

    _, wide, pairs, manifest = _loaded_then_changed(spark, tmp_path, "nospark_late", 27)
    real = batch_module.apply_direct
    monkeypatch.setattr(batch_module, "apply_direct", lambda spark_, w, *a, **k: None if w.table == "pair"
                        else real(spark_, w, *a, **k))
    with pytest.raises(SparkNeeded, match="s__pair was refused") as refused:
        apply_manifests(lake, [manifest], MergeOptions(namespace="nospark_late", parallel_tables=1))
    (partial,) = refused.value.applied
    assert {t["table"]: t["status"] for t in partial["tables"]} == {
        "lake.nospark_late.s__pair": "spark-needed", "lake.nospark_late.s__wide": "committed"}
    monkeypatch.setattr(batch_module, "apply_direct", real)
    result = apply_manifests(spark, [manifest], MergeOptions(namespace="nospark_late"))
    assert {t["table"]: t["status"] for t in result["batches"][0]["tables"]} == {
        "lake.nospark_late.s__pair": "committed", "lake.nospark_late.s__wide": "already-applied"}
    assert wide_state(spark, "lake.nospark_late.s__wide") == expected_wide(wide)
    assert pair_state(spark, "lake.nospark_late.s__pair") == pairs


def test_tables_created_without_spark_are_maintained_by_the_spark_run_that_finds_their_batch_applied(
        spark, lake, tmp_path):
    from airflow_provider_binlog.merge.iceberg_contract import PROP_MAINTAINED_AT
    from tests.merging import stored_properties
    from tests.integration.test_direct_snapshot import snapshot_with_changes

    manifest, _, _ = snapshot_with_changes(tmp_path, random.Random(28), keys=60)
    options = MergeOptions(namespace="nospark_newmaint", maintenance=True, maintenance_every_hours=24)
    with pytest.raises(SparkNeeded) as refused:  # the new tables are due once created
        apply_manifests(lake, [manifest], options)
    assert [b["status"] for b in refused.value.applied] == ["applied"]
    result = apply_manifests(spark, [manifest], options)
    assert [b["status"] for b in result["batches"]] == ["already-applied"]
    names = ["lake.nospark_newmaint.s__wide", "lake.nospark_newmaint.s__pair"]
    ledger = "lake.nospark_newmaint._binlog_batches"
    assert sorted(m["table"] for m in result["maintenance"]) == sorted([*names, ledger])
    assert all(PROP_MAINTAINED_AT in stored_properties(spark, n) for n in names)


def test_a_batch_within_the_direct_bytes_is_folded_once_before_the_commits_and_its_facts_are_not_read(
        spark, lake, tmp_path, monkeypatch):
    from airflow_provider_binlog.merge.lake import direct_commit, table_work

    log, wide, pairs, manifest = _loaded_then_changed(spark, tmp_path, "nospark_once", 24)
    folds, facts = [], []
    real_fold, real_facts = direct_commit.collapse_staged, table_work.staged_facts
    monkeypatch.setattr(direct_commit, "collapse_staged", lambda files, *a, **k: folds.append(len(files))
                        or real_fold(files, *a, **k))
    monkeypatch.setattr(table_work, "staged_facts", lambda *a, **k: facts.append(1) or real_facts(*a, **k))
    result = apply_manifests(lake, [manifest], MergeOptions(namespace="nospark_once"))
    assert [t["direct"] for t in result["batches"][0]["tables"]] == [True, True]
    assert len(folds) == 2 and facts == []  # one fold per table, which also told they are simple
    _fresh(spark, "lake.nospark_once.s__wide", "lake.nospark_once.s__pair")
    assert wide_state(spark, "lake.nospark_once.s__wide") == expected_wide(wide)
    assert pair_state(spark, "lake.nospark_once.s__pair") == pairs


def test_the_metrics_of_the_files_a_direct_commit_writes_are_those_iceberg_reads_from_their_footers(
        spark, spark_warehouse, lake, tmp_path):
    import glob

    from airflow_provider_binlog.merge.lake.direct_commit import IcebergJava

    _log, _wide, _pairs, manifest = _loaded_then_changed(spark, tmp_path, "nospark_metrics", 25)
    apply_manifests(lake, [manifest], MergeOptions(namespace="nospark_metrics"))
    java = IcebergJava.of(lake)
    to_bytes = lake.jvm.org.apache.iceberg.util.ByteBuffers.toByteArray

    def plain(metrics):
        def entries(values):
            return None if values is None else {int(k): bytes(to_bytes(v)) if hasattr(v, "remaining") else v
                                                for k, v in dict(values).items()}
        return (metrics.recordCount(), *(entries(m) for m in (
            metrics.columnSizes(), metrics.valueCounts(), metrics.nullValueCounts(), metrics.nanValueCounts(),
            metrics.lowerBounds(), metrics.upperBounds())))

    checked = 0
    for name in ("s__wide", "s__pair"):
        table = lake.load_table(f"lake.nospark_metrics.{name}")
        files = glob.glob(f"{spark_warehouse}/nospark_metrics/{name}/data/*.parquet")
        assert any("binlog-data-" in f for f in files) and any("binlog-pos-deletes-" in f for f in files)
        for path in files:
            for config in (java.metrics_config.forTable(table), java.position_delete_metrics(table)):
                assert plain(java.metrics(table, path, config)) == plain(
                    java.file_metrics(table.io().newInputFile(path), config)), path
                checked += 1
    assert checked >= 8


def test_the_java_engine_runs_on_the_jars_of_the_spark_at_spark_home_as_spark_submit_does(
        spark_warehouse, tmp_path, monkeypatch):
    """An Iceberg runtime kept in ``$SPARK_HOME/jars`` (no ``spark.jars``) is on the class path."""
    import glob
    import os

    from airflow_provider_binlog.spark.runtime import iceberg_runtime_jars, spark_jars_dirs

    pyspark_jars = spark_jars_dirs()[0]
    home = tmp_path / "spark-home"
    (home / "jars").mkdir(parents=True)
    for jar in glob.glob(os.path.join(pyspark_jars, "*.jar")) + list(iceberg_runtime_jars()):
        os.symlink(jar, home / "jars" / os.path.basename(jar))
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert spark_jars_dirs()[0] == str(home / "jars")
    conf = {k: v for k, v in local_spark_conf(spark_warehouse, "lake").items() if k != "spark.jars"}
    jvm = java_lake(conf)
    try:
        assert jvm.table_exists("lake.nospark_home.t") is False  # the catalog opened
    finally:
        jvm.stop()
