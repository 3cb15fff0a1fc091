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
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings

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
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=dump.to_json(),
        lake=LakeSettings(namespace="op_ns", warehouse=spark_warehouse),
        spark=SparkSettings(conn_id=local_spark_connection),
        checkpoint_store_uri=str(tmp_path / "store"),
        checkpoint_key="op",
    )
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
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=str(manifest),
        lake=LakeSettings(namespace="x"),
        spark=SparkSettings(conn_id=local_spark_connection, application=str(slow)),
    )
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


def test_on_kill_stops_the_merge_without_spark_and_spark_submit_is_not_run(tmp_path, local_spark_connection,
                                                                          monkeypatch):
    from airflow_provider_binlog.operators import merge as merge_module

    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setattr(merge_module, "merge_application", lambda: str(slow))
    manifest = tmp_path / "m" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=str(manifest),
        lake=LakeSettings(namespace="x", warehouse=str(tmp_path / "wh")),
        spark=SparkSettings(conn_id=local_spark_connection),
    )
    errors = []

    def run():
        try:
            op.execute(context={})
        except Exception as exc:  # the killed job fails the task
            errors.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    while op._job is None or op._job.process is None:
        time.sleep(0.2)
        assert time.monotonic() - started < 60
    time.sleep(1)
    op.on_kill()
    thread.join(60)
    assert not thread.is_alive() and op._job.process.returncode != 0
    assert errors and "killed" in str(errors[0]) and op._hook is None


def _killable(tmp_path, monkeypatch, local_spark_connection):
    """An operator whose merge application sleeps, and the record of what it started."""
    from airflow_provider_binlog.operators import merge as merge_module

    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setattr(merge_module, "merge_application", lambda: str(slow))
    manifest = tmp_path / "m" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    return BinlogMergeOperator(
        task_id="merge",
        manifests=str(manifest),
        lake=LakeSettings(namespace="x", warehouse=str(tmp_path / "wh")),
        spark=SparkSettings(conn_id=local_spark_connection),
    )


def test_a_kill_before_the_merge_without_spark_started_its_process_ends_the_task_and_starts_nothing(
        tmp_path, local_spark_connection, monkeypatch):
    from airflow_provider_binlog.operators import merge_job

    op = _killable(tmp_path, monkeypatch, local_spark_connection)
    real = merge_job.driver_class_archive

    def killed_meanwhile(*args, **kwargs):  # the task is killed while the job is being prepared
        op.on_kill()
        return real(*args, **kwargs)

    monkeypatch.setattr(merge_job, "driver_class_archive", killed_meanwhile)
    started = time.monotonic()
    with pytest.raises(Exception, match="killed"):
        op.execute(context={})
    assert time.monotonic() - started < 30
    assert op._job.process is None or op._job.process.returncode != 0
    assert op._hook is None  # no spark-submit


def test_a_kill_while_the_merge_goes_from_the_java_engine_to_spark_submit_ends_the_task(
        tmp_path, local_spark_connection, monkeypatch):
    from airflow_provider_binlog.operators import merge as merge_module
    from airflow_provider_binlog.operators.merge_job import JobWithoutSpark

    op = _killable(tmp_path, monkeypatch, local_spark_connection)
    monkeypatch.setattr(JobWithoutSpark, "run", lambda self, *a, **k: (None, []))  # "Spark is needed"
    real = merge_module.driver_class_archive

    def killed_meanwhile(*args, **kwargs):  # the task is killed as spark-submit is being prepared
        op.on_kill()
        return real(*args, **kwargs)

    monkeypatch.setattr(merge_module, "driver_class_archive", killed_meanwhile)
    started = time.monotonic()
    with pytest.raises(Exception, match="killed"):
        op.execute(context={})
    assert time.monotonic() - started < 30  # the sleeping application was not left to run


def test_a_job_killed_while_writing_its_result_is_reported_by_its_exit_status(
        tmp_path, local_spark_connection, monkeypatch):
    from airflow_provider_binlog.operators import merge as merge_module

    torn = tmp_path / "torn.py"
    torn.write_text("import sys\nout = sys.argv[sys.argv.index('--output-json') + 1]\n"
                    "open(out, 'w').write('{\"batches\": [{\"batch_id\": \"a')\nsys.exit(137)\n")
    monkeypatch.setattr(merge_module, "merge_application", lambda: str(torn))
    manifest = tmp_path / "m" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=str(manifest),
        lake=LakeSettings(namespace="x", warehouse=str(tmp_path / "wh")),
        spark=SparkSettings(conn_id=local_spark_connection),
    )
    with pytest.raises(Exception, match="exit status 137") as info:
        op.execute(context={})
    assert "JSON" not in type(info.value).__name__


def _plain_changes(server, table, rng, n):
    """Inserts, updates of non-key columns and deletes: changes a direct commit takes."""
    for _ in range(n):
        key, op = rng.randint(1, 60), rng.random()
        if op < 0.5:
            server.execute(f"INSERT INTO dumpdb.{table} (id, name, qty) VALUES (%s, %s, 1) "
                           "ON DUPLICATE KEY UPDATE name = VALUES(name), qty = qty + 1",
                           (key, f"n{rng.randint(0, 99)}"))
        elif op < 0.8:
            server.execute(f"UPDATE dumpdb.{table} SET price = price + 1, flag = 'b' WHERE id = %s", (key,))
        else:
            server.execute(f"DELETE FROM dumpdb.{table} WHERE id = %s", (key,))


def test_merges_of_existing_tables_run_without_spark_and_a_batch_needing_spark_is_reported_whole(
        mariadb, spark, spark_warehouse, tmp_path, local_spark_connection, monkeypatch):
    from airflow_provider_binlog.checkpoints import FileCheckpointStore

    rng = random.Random(32)
    mariadb.execute("CREATE DATABASE IF NOT EXISTS dumpdb")
    mariadb.execute("DROP TABLE IF EXISTS dumpdb.nospark")
    mariadb.execute("CREATE TABLE dumpdb.nospark (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(9,2), "
                    "qty INT, flag ENUM('a','b','c'))")
    start = here(mariadb)
    FileCheckpointStore(tmp_path / "store").save("ns", start)

    def dump(since):
        rc = replica(mariadb)
        try:
            return run_dump(rc, staging_dir=tmp_path / "staging", start=since,
                            tables=TableFilter(["dumpdb.nospark"]))
        finally:
            rc.close()

    def merge(*dumps):
        op = BinlogMergeOperator(
            task_id="merge",
            manifests=[d.to_json() for d in dumps],
            lake=LakeSettings(namespace="op_nospark", warehouse=spark_warehouse),
            spark=SparkSettings(conn_id=local_spark_connection),
            checkpoint_store_uri=str(tmp_path / "store"),
            checkpoint_key="ns",
        )
        return op.execute(context={})

    def counted(*dumps):
        rows = [d.rows["dumpdb.nospark"] for d in dumps]
        return tuple(sum(r.get(k, 0) for r in rows) for k in ("insert", "update", "delete"))

    def table_equals_source():
        spark.sql("REFRESH TABLE lake.op_nospark.dumpdb__nospark")
        got = {r[0]: tuple(r) for r in spark.sql("SELECT id, name, price, qty, flag FROM "
                                                 "lake.op_nospark.dumpdb__nospark").collect()}
        return got == {r[0]: tuple(r) for r in mariadb.query("SELECT id, name, price, qty, flag FROM dumpdb.nospark")}

    _plain_changes(mariadb, "nospark", rng, 60)
    first = dump(start)
    assert merge(first)["engine"] == "iceberg-java+spark"  # the table is created: Spark's work
    _plain_changes(mariadb, "nospark", rng, 60)
    second = dump(first.end)
    summary = merge(second)
    assert summary["engine"] == "iceberg-java" and table_equals_source()
    t = summary["tables"]["dumpdb.nospark"]
    assert (t["inserted"], t["updated"], t["deleted"]) == counted(second) and t["status"] == "committed"
    # two batches, the second altering the table: the first is merged without Spark, the second
    # with it, and both are this task's
    _plain_changes(mariadb, "nospark", rng, 40)
    third = dump(second.end)
    mariadb.execute("ALTER TABLE dumpdb.nospark ADD COLUMN note VARCHAR(10)")
    _plain_changes(mariadb, "nospark", rng, 40)
    fourth = dump(third.end)
    summary = merge(third, fourth)
    assert summary["engine"] == "iceberg-java+spark"
    assert [list(b) for b in summary["batches"]] == [[third.manifest.dump_id, "applied"],
                                                     [fourth.manifest.dump_id, "applied"]]
    t = summary["tables"]["dumpdb.nospark"]
    assert (t["inserted"], t["updated"], t["deleted"]) == counted(third, fourth) and table_equals_source()
    # [binlog] merge_engine = spark: spark-submit only; another value is refused
    _plain_changes(mariadb, "nospark", rng, 20)
    fifth = dump(fourth.end)
    monkeypatch.setenv("AIRFLOW__BINLOG__MERGE_ENGINE", "spark")
    assert merge(fifth)["engine"] == "spark" and table_equals_source()
    monkeypatch.setenv("AIRFLOW__BINLOG__MERGE_ENGINE", "jvm")
    with pytest.raises(Exception, match="merge_engine is 'jvm'"):
        merge(fifth)


def test_no_process_the_merge_starts_has_the_checkpoint_stores_password_on_its_command_line(
        tmp_path, local_spark_connection, monkeypatch):
    """The store's URL travels to the job in its environment: neither the engine without Spark
    nor spark-submit shows the password in its argv (``ps``, Spark's UI)."""
    import subprocess

    from airflow_provider_binlog.operators import merge_job

    manifest = tmp_path / "m" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    started: list = []
    real_popen = subprocess.Popen

    class Recording(real_popen):  # records every process the merge starts, then lets it run
        def __init__(self, args, *a, **kw):
            started.append((list(args), dict(kw.get("env") or {})))
            super().__init__(["false"], *a[1:], **{k: v for k, v in kw.items() if k != "env"})

    monkeypatch.setattr(subprocess, "Popen", Recording)
    monkeypatch.setattr(merge_job.subprocess, "Popen", Recording)
    url = "postgresql://loader:s3cr3t-pw@127.0.0.1:1/binlog"
    for engine in ("iceberg-java", "spark"):
        started.clear()
        op = BinlogMergeOperator(
            task_id="merge",
            manifests=str(manifest),
            lake=LakeSettings(namespace="x", warehouse=str(tmp_path / "wh")),
            spark=SparkSettings(conn_id=local_spark_connection),
            checkpoint_store_uri=url,
            checkpoint_key="k",
            merge_engine=engine,
        )
        with pytest.raises(Exception):
            op.execute(context={})
        assert started, engine
        assert not [args for args, _ in started if any("s3cr3t-pw" in a for a in args)], engine
        assert any("s3cr3t-pw" in json.dumps(env) for _, env in started), engine  # it travels, off the argv
