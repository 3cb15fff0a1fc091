"""A reload (a snapshot taken again to repair Iceberg tables) is applied even when the source is
idle, so that its end is the position the load already stands at: rows lost from Iceberg
behind the load's back come back, for the whole source and for one table."""
from __future__ import annotations

import random

import pytest

from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.capture.snapshot import take_snapshot
from airflow_provider_binlog.checkpoints import FileCheckpointStore
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.merge.options import MergeOptions
from tests.merging import apply_manifests
from tests.merging import refresh
from tests.integration.test_dump_live import COLUMNS, replica, source_rows, workload

pytest.importorskip("pyspark")
pytestmark = pytest.mark.mariadb

TABLES = ("first", "second")


def _iceberg(spark, name: str) -> dict:
    refresh(spark, name)
    return {r[0]: tuple(r) for r in spark.sql(f"SELECT {', '.join(COLUMNS)} FROM {name}").collect()}


def test_a_reload_on_an_idle_source_repairs_rows_removed_from_iceberg(mariadb, spark, tmp_path):
    mariadb.execute("CREATE DATABASE IF NOT EXISTS reloaddb")
    for t in TABLES:
        mariadb.execute(f"DROP TABLE IF EXISTS reloaddb.{t}")
        mariadb.execute(f"CREATE TABLE reloaddb.{t} (id INT PRIMARY KEY, name VARCHAR(40), "
                        "price DECIMAL(9,2), qty INT UNSIGNED, seen DATETIME(6), flag ENUM('a','b','c'), "
                        "doc JSON, big BIGINT UNSIGNED) DEFAULT CHARSET=utf8mb4")
    rng = random.Random(42)
    for t in TABLES:
        _workload(mariadb, t, rng, 80)
    staging, store = tmp_path / "staging", FileCheckpointStore(tmp_path / "store")
    options = MergeOptions(namespace="reload_ns", checkpoint_store=str(tmp_path / "store"), checkpoint_key="k")
    every = TableFilter([f"reloaddb.{t}" for t in TABLES])
    names = {t: f"lake.reload_ns.reloaddb__{t}" for t in TABLES}

    def snapshot(tables: TableFilter):
        return take_snapshot(lambda: mariadb.connect(), staging_dir=staging, tables=tables, flavor="mariadb",
                             server={"server_id": mariadb.server_id})

    def lose_rows(t: str) -> None:
        spark.sql(f"DELETE FROM {names[t]} WHERE id % 3 = 0")
        assert _iceberg(spark, names[t]) != _source(mariadb, t)

    def assert_equal() -> None:
        for t in TABLES:
            assert _iceberg(spark, names[t]) == _source(mariadb, t)

    apply_manifests(spark, [snapshot(every)], options)  # the initial load
    assert_equal()
    # 1. right after the initial load, the whole source reloaded while nothing is written
    lose_rows("first")
    result = apply_manifests(spark, [snapshot(every)], options)
    assert result["batches"][0]["status"] == "applied"
    assert_equal()
    # 2. after an incremental run
    _workload(mariadb, "second", rng, 40)
    rc = replica(mariadb)
    inc = run_dump(rc, staging_dir=staging, start=store.load("k"), tables=every)
    rc.close()
    apply_manifests(spark, [inc.manifest], options)
    assert_equal()
    lose_rows("second")
    apply_manifests(spark, [snapshot(every)], options)
    assert_equal()
    # 3. one table reloaded twice at the same position: the second reload is applied too
    lose_rows("first")
    apply_manifests(spark, [snapshot(TableFilter(["reloaddb.first"]))], options)
    assert_equal()
    lose_rows("first")
    again = snapshot(TableFilter(["reloaddb.first"]))
    assert apply_manifests(spark, [again], options)["batches"][0]["status"] == "applied"
    assert_equal()
    # the same reload given again is applied once
    lose_rows("first")
    assert apply_manifests(spark, [again], options)["batches"][0]["status"] == "already-applied"


def _workload(server, table: str, rng: random.Random, n: int) -> None:
    """``workload`` of the dump tests, on ``reloaddb``."""
    workload(server, table, rng, n, database="reloaddb")


def _source(server, table: str) -> dict:
    return source_rows(server, table, database="reloaddb")
