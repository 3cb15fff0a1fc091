"""An initial snapshot merged as an overwrite, then incremental dumps from its coordinates:
the Iceberg table equals the MariaDB table; re-applying the snapshot is a no-op."""
from __future__ import annotations

import json
import random

from airflow_provider_binlog.checkpoints import FileCheckpointStore
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.merge.options import MergeOptions
from airflow_provider_binlog.capture.snapshot import take_snapshot
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.merge.spark import job as merge_job
from tests.integration.test_dump_live import COLUMNS, replica, source_rows, workload


def test_snapshot_overwrites_then_dumps_continue(mariadb, spark, spark_warehouse, tmp_path):
    mariadb.execute("CREATE DATABASE IF NOT EXISTS dumpdb")
    mariadb.execute("DROP TABLE IF EXISTS dumpdb.snapped")
    mariadb.execute("CREATE TABLE dumpdb.snapped (id INT PRIMARY KEY, name VARCHAR(40), "
                    "price DECIMAL(9,2), qty INT UNSIGNED, seen DATETIME(6), flag ENUM('a','b','c'), "
                    "doc JSON, big BIGINT UNSIGNED) DEFAULT CHARSET=utf8mb4")
    rng = random.Random(21)
    workload(mariadb, "snapped", rng, 150)
    tables = TableFilter(["dumpdb.snapped"])
    staging = tmp_path / "staging"
    snap = take_snapshot(lambda: mariadb.connect(), staging_dir=staging, tables=tables,
                         flavor="mariadb", server={"server_id": mariadb.server_id})
    store_dir = tmp_path / "store"
    options = MergeOptions(namespace="snap_ns", warehouse=spark_warehouse, checkpoint_store=str(store_dir),
                           checkpoint_key="snap")
    argv = ["--options", options.to_json_text(), "--output-json", str(tmp_path / "out.json")]
    assert merge_job.main(argv + ["--manifest", str(snap.path)]) == 0
    out = json.loads((tmp_path / "out.json").read_text())  # what the task's link and the benchmark read
    assert out["spark_application_id"] == spark.sparkContext.applicationId and out["driver_peak_rss_mib"] > 50
    target = "lake.snap_ns.dumpdb__snapped"
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT {', '.join(COLUMNS)} FROM {target}").collect()}
    assert got and len(got) == len(mariadb.query("SELECT id FROM dumpdb.snapped"))
    store = FileCheckpointStore(store_dir)
    assert store.load("snap") == snap.end
    workload(mariadb, "snapped", rng, 120)
    rc = replica(mariadb)
    inc = run_dump(rc, staging_dir=staging, start=store.load("snap"), tables=tables)
    rc.close()
    assert merge_job.main(argv + ["--manifest", str(inc.manifest.path)]) == 0
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT {', '.join(COLUMNS)} FROM {target}").collect()}
    assert got == source_rows(mariadb, "snapped")
    head = spark.sql(f"SELECT snapshot_id FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    # an older snapshot would rewind the table: refused, nothing changes
    assert merge_job.main(argv + ["--manifest", str(snap.path)]) != 0
    assert "older than" in json.loads((tmp_path / "out.json").read_text())["error"]
    assert store.load("snap") == inc.end
    # re-applying the already-applied incremental batch changes nothing
    assert merge_job.main(argv + ["--manifest", str(inc.manifest.path)]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["batches"][0]["status"] == "already-applied"
    again = spark.sql(f"SELECT snapshot_id FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    assert again == head
    # a newer snapshot (e.g. after binlogs were purged) replaces the content: deleted rows go
    mariadb.execute("DELETE FROM dumpdb.snapped WHERE id % 2 = 0")
    workload(mariadb, "snapped", rng, 30)
    snap2 = take_snapshot(lambda: mariadb.connect(), staging_dir=staging, tables=tables,
                          flavor="mariadb", server={"server_id": mariadb.server_id})
    assert merge_job.main(argv + ["--manifest", str(snap2.path)]) == 0
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT {', '.join(COLUMNS)} FROM {target}").collect()}
    assert got == source_rows(mariadb, "snapped")
    assert store.load("snap") == snap2.end
