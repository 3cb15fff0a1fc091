"""Table layout and maintenance cadence from the DAG factory, end to end with ``dag.test()``: the
snapshot creates the Iceberg tables with the partition spec (transforms included), sort order
and properties given per table and for all; an incremental run keeps them and Iceberg equals
MariaDB; maintenance runs once, then waits for its cadence. The snapshot is the watermark one."""
from __future__ import annotations

import datetime as dt
import importlib.util
import json

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.local.quickstart import run_results  # noqa: E402
from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.e2e.test_dags_e2e import dags_folder, run  # noqa: E402,F401
from tests.pyiceberg_reader import PyIcebergReader, assert_every_table_reads_as_in_spark  # noqa: E402
from airflow_provider_binlog.operators.settings import (  # noqa: E402
    LakeSettings, MergeSettings, SnapshotSettings, SparkSettings, WaitSettings)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long]

NAMESPACE = "layout_cdc"
LAYOUT = {"default": {"properties": {"write.metadata.previous-versions-max": "7"}},
          "tables": {"lay.events": {"partition_by": ["days(at)", "bucket(4, id)"], "sort_by": ["at DESC"],
                                    "properties": {"commit.retry.num-retries": "9"}}}}


def prop(spark, table, key):
    rows = spark.sql(f"SHOW TBLPROPERTIES {table} ('{key}')").collect()
    return rows[0][1] if rows else None


def test_layout_and_maintenance_cadence_from_the_factory(mariadb, dags_folder, spark, tmp_path,  # noqa: F811
                                                         spark_warehouse, monkeypatch):
    create_user(mariadb)
    mariadb.execute("DROP DATABASE IF EXISTS lay")
    mariadb.execute("CREATE DATABASE lay")
    mariadb.execute("CREATE TABLE lay.events (id INT PRIMARY KEY, kind VARCHAR(10), at DATETIME(6) NOT NULL)")
    mariadb.execute("CREATE TABLE lay.notes (id INT PRIMARY KEY, body TEXT)")
    for i in range(1, 41):
        mariadb.execute("INSERT INTO lay.events VALUES (%s, %s, %s)",
                        (i, "k" + str(i % 3), dt.datetime(2024, 5, 1 + i % 5, i % 24)))
    mariadb.execute("INSERT INTO lay.notes VALUES (1, 'a'), (2, 'b')")
    set_connection(monkeypatch, mariadb, conn_id="lay_db",
                   extra={"server_id": 7396, "checkpoint_store_uri": str(tmp_path / "store")})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LAY", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    kwargs = dict(binlog_conn_id="lay_db", tables=["lay.*"], staging=str(tmp_path / "staging"),
                  lake=LakeSettings(namespace=NAMESPACE, warehouse=spark_warehouse, table_layout=LAYOUT,
                                    table_properties={"write.parquet.compression-codec": "zstd"}),
                  spark=SparkSettings(conn_id="spark_lay"), wait=WaitSettings(poke_interval=1, timeout=4, mode="poke"),
                  merge=MergeSettings(maintenance=True, maintenance_every=dt.timedelta(hours=24), retain_last=3),
                  snapshot=SnapshotSettings(method="watermark"))  # the lock-free snapshot by key chunks
    path = dags_folder / "binlog_layout.py"
    path.write_text("import datetime\n"
                    "from airflow_provider_binlog.dags import (LakeSettings, MergeSettings, SnapshotSettings,\n"
                    "    SparkSettings, StagingRef, WaitSettings, make_cdc_dags)\n\n"
                    f"binlog_cdc, binlog_backfill = make_cdc_dags('lay', **{kwargs!r})\n")

    def load(name):
        spec = importlib.util.spec_from_file_location("binlog_layout_dags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    for table in ("lay__events", "lay__notes"):
        spark.sql(f"DROP TABLE IF EXISTS lake.{NAMESPACE}.{table}")
    try:
        _, state, states = run(load, "binlog_backfill", {"mode": "snapshot"})
        assert state == "success", states
        mariadb.execute("UPDATE lay.events SET kind = 'new', at = at + INTERVAL 1 DAY WHERE id <= 10")
        mariadb.execute("DELETE FROM lay.events WHERE id > 35")
        mariadb.execute("INSERT INTO lay.notes VALUES (3, 'c')")
        dag_run, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
        first = run_results(dag_run)["merge"]
        mariadb.execute("INSERT INTO lay.notes VALUES (4, 'd')")
        dag_run, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
        second = run_results(dag_run)["merge"]
    finally:
        path.unlink()
    events, notes = f"lake.{NAMESPACE}.lay__events", f"lake.{NAMESPACE}.lay__notes"
    # the partition spec with its transforms, the sort order and the properties of the table
    spec = spark.sql(f"SELECT * FROM {events}.partitions").schema["partition"].dataType.fieldNames()
    assert spec == ["at_day", "id_bucket"]
    assert prop(spark, events, "sort-order") == "at DESC NULLS LAST"
    assert prop(spark, events, "commit.retry.num-retries") == "9"
    assert prop(spark, events, "write.metadata.previous-versions-max") == "7"      # the default's
    assert prop(spark, events, "write.parquet.compression-codec") == "zstd"          # every table's
    # the other table: the default layout, sorted by its key, not partitioned
    assert spark.sql(f"SELECT * FROM {notes}.partitions").count() == 1
    assert prop(spark, notes, "sort-order") == "id ASC NULLS FIRST"
    # the data
    spark.sql(f"REFRESH TABLE {events}")
    got = {tuple(r) for r in spark.sql(f"SELECT id, kind, at FROM {events}").collect()}
    assert got == set(mariadb.query("SELECT id, kind, at FROM lay.events"))
    assert {tuple(r) for r in spark.sql(f"SELECT id, body FROM {notes}").collect()} == {
        (1, "a"), (2, "b"), (3, "c"), (4, "d")}
    # every table, partitioned or not, reads the same in PyIceberg, without a JVM
    assert assert_every_table_reads_as_in_spark(spark, PyIcebergReader(warehouse=spark_warehouse), "lake",
                                                NAMESPACE) == ["_binlog_batches", "lay__events", "lay__notes"]
    # maintenance ran with the first incremental merge, and waited for its cadence at the second
    assert {events, notes} <= set(first["maintained"]) and first["maintenance_skipped"] == []
    assert second["maintained"] == [] and notes in second["maintenance_skipped"]
    assert prop(spark, events, "binlog.maintained-at") is not None
