"""BinlogMergeOperator submits the merge job through SparkSubmitHook and returns what it loaded."""
from __future__ import annotations

import json
import random
import threading
import time

import pytest

from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.operators.merge import BinlogMergeOperator, manifest_paths
from airflow_provider_binlog.common.tables import TableFilter
from tests.integration.test_dump_live import COLUMNS, here, replica, source_rows, workload

pytestmark = pytest.mark.spark


@pytest.fixture()
def local_spark_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return "spark_local"


def test_manifest_paths_accept_dump_results_paths_and_lists():
    assert manifest_paths({"manifest": "/s/a/manifest.json", "rows": {}}) == ["/s/a/manifest.json"]
    assert manifest_paths(["/s/a", {"manifest": "/s/b/manifest.json"}]) == ["/s/a", "/s/b/manifest.json"]
    assert manifest_paths('{"manifest": "/s/c/manifest.json"}') == ["/s/c/manifest.json"]
    with pytest.raises(ValueError):
        manifest_paths({"rows": 1})


def test_operator_merges_a_live_dump_and_reports_counts(mariadb, spark, spark_warehouse, tmp_path,
                                                        local_spark_connection):
    mariadb.execute("CREATE DATABASE IF NOT EXISTS dumpdb")
    mariadb.execute("DROP TABLE IF EXISTS dumpdb.operated")
    mariadb.execute("CREATE TABLE dumpdb.operated (id INT PRIMARY KEY, name VARCHAR(40), "
                    "price DECIMAL(9,2), qty INT UNSIGNED, seen DATETIME(6), flag ENUM('a','b','c'), "
                    "doc JSON, big BIGINT UNSIGNED) DEFAULT CHARSET=utf8mb4")
    start = here(mariadb)
    workload(mariadb, "operated", random.Random(31), 120)
    rc = replica(mariadb)
    dump = run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=TableFilter(["dumpdb.operated"]))
    rc.close()
    op = BinlogMergeOperator(task_id="merge", manifests=dump.to_json(), namespace="op_ns",
                             warehouse=spark_warehouse, conn_id=local_spark_connection,
                             checkpoint_store_uri=str(tmp_path / "store"), checkpoint_key="op")
    from airflow_provider_binlog.checkpoints import FileCheckpointStore
    FileCheckpointStore(tmp_path / "store").save("op", start)
    summary = op.execute(context={})
    rows = dump.rows["dumpdb.operated"]
    table = summary["tables"]["dumpdb.operated"]
    assert (table["inserted"], table["updated"], table["deleted"]) == (rows["insert"], rows["update"], rows["delete"])
    assert table["iceberg_table"] == "lake.op_ns.dumpdb__operated" and table["snapshot_id"]
    assert summary["end_checkpoint"]["pos"] == dump.end.position
    spark.sql("REFRESH TABLE lake.op_ns.dumpdb__operated")
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT {', '.join(COLUMNS)} FROM lake.op_ns.dumpdb__operated").collect()}
    assert got == source_rows(mariadb, "operated")
    again = op.execute(context={})                  # rerun: nothing new
    assert again["batches"] == [[dump.manifest.dump_id, "already-applied"]] or \
        again["batches"] == [(dump.manifest.dump_id, "already-applied")]


def test_on_kill_stops_the_spark_job(tmp_path, local_spark_connection):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(120)\n")
    manifest = tmp_path / "m" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    op = BinlogMergeOperator(task_id="merge", manifests=str(manifest), namespace="x",
                             conn_id=local_spark_connection, application=str(slow))
    errors = []

    def run():
        try:
            op.execute(context={})
        except Exception as exc:  # the killed job fails the task
            errors.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    while op._hook is None or getattr(op._hook, "_submit_sp", None) is None:
        time.sleep(0.2)
        assert time.monotonic() - started < 60
    time.sleep(2)
    op.on_kill()
    thread.join(60)
    assert not thread.is_alive()
    assert errors and time.monotonic() - started < 60
