"""One table reloaded by a watermark snapshot (the backfill DAG, mode snapshot, some tables) while
the incremental DAG keeps loading the source and a writer keeps writing: no pause, no checkpoint
conflict, and afterwards every Iceberg table equals MariaDB."""
from __future__ import annotations

import importlib.util
import json
import random
import threading
import time

import pytest

pytest.importorskip("airflow")

from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.e2e.test_dags_e2e import dags_folder, run  # noqa: E402,F401
from tests.pyiceberg_reader import PyIcebergReader, assert_every_table_reads_as_in_spark  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings, SnapshotSettings, SparkSettings, WaitSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NAMESPACE = "alongside_cdc"


def write(server, stop: threading.Event, rng: random.Random) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                table, k = rng.choice("ab"), rng.randint(1, 400)
                op = rng.random()
                if op < 0.4:
                    cur.execute(f"INSERT INTO alo.{table} VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                                (k, k))
                elif op < 0.7:
                    cur.execute(f"UPDATE alo.{table} SET v = v + 7 WHERE id BETWEEN %s AND %s", (k, k + 5))
                elif op < 0.85:
                    cur.execute(f"DELETE FROM alo.{table} WHERE id = %s", (k,))
                else:
                    cur.execute(f"UPDATE IGNORE alo.{table} SET id = %s WHERE id = %s", (rng.randint(1, 400), k))
                time.sleep(0.003)
    finally:
        conn.close()


def assert_snapshot_progress_published(dag_run) -> None:
    """The snapshot task published its rows read and estimated rows per table (XCom
    ``snapshot_progress``), which the Binlog CDC view reads for a running snapshot task."""
    from types import SimpleNamespace

    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select, update

    from airflow_provider_binlog.plugins.task_runs import running_snapshots, snapshot_progress
    from tests.ui_history import in_process_api

    where = (XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id,
             XComModel.task_id == "snapshot", XComModel.key == "snapshot_progress")
    with create_session() as session:
        value = XComModel.deserialize_value(SimpleNamespace(value=session.scalar(select(XComModel.value)
                                                                                 .where(*where))))
    assert value["conn_id"] == "alo_db" and value["method"] == "watermark" and value["finished"] is True
    assert {t: e["rows_read"] for t, e in value["tables"].items()} == {"alo.a": 300, "alo.b": 300}
    assert all(isinstance(e["estimated_rows"], int) for e in value["tables"].values()), value
    api = in_process_api()  # the view reads them through Airflow's REST API
    assert running_snapshots(api) == []  # the task is done
    ti = (TI.dag_id == dag_run.dag_id, TI.run_id == dag_run.run_id, TI.task_id == "snapshot")
    with create_session() as session:  # as the view sees the task while it runs
        session.execute(update(TI).where(*ti).values(state="running"))
    try:
        (shown,) = snapshot_progress("alo_db", running_snapshots(api))
    finally:
        api.close()
        with create_session() as session:
            session.execute(update(TI).where(*ti).values(state="success"))
    assert shown["dag_id"] == dag_run.dag_id and shown["method"] == "watermark"
    assert [(t["table"], t["rows_read"]) for t in shown["tables"]] == [("alo.a", 300), ("alo.b", 300)]


def test_a_table_reloaded_while_the_incremental_dag_goes_on(mariadb, dags_folder, spark, tmp_path,  # noqa: F811
                                                            spark_warehouse, monkeypatch):
    create_user(mariadb)
    mariadb.execute("DROP DATABASE IF EXISTS alo")
    mariadb.execute("CREATE DATABASE alo")
    for table in ("a", "b"):
        mariadb.execute(f"CREATE TABLE alo.{table} (id INT PRIMARY KEY, v INT)")
        mariadb.execute(f"INSERT INTO alo.{table} SELECT seq, seq FROM alo.seq_1_to_300")
    set_connection(monkeypatch, mariadb, conn_id="alo_db",
                   extra={"server_id": 7398, "checkpoint_store_uri": str(tmp_path / "store")})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_ALO", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    kwargs = dict(binlog_conn_id="alo_db", tables=["alo.*"], staging=str(tmp_path / "staging"),
                  lake=LakeSettings(namespace=NAMESPACE, warehouse=spark_warehouse),
                  spark=SparkSettings(conn_id="spark_alo"), wait=WaitSettings(poke_interval=1, timeout=4, mode="poke"),
                  snapshot=SnapshotSettings(method="watermark", chunk_rows=40))
    path = dags_folder / "binlog_alongside.py"
    path.write_text("from airflow_provider_binlog.dags import (LakeSettings, MergeSettings, SnapshotSettings,\n"
                    "    SparkSettings, StagingRef, WaitSettings, make_cdc_dags)\n\n"
                    f"binlog_cdc, binlog_backfill = make_cdc_dags('alo', **{kwargs!r})\n")

    def load(name):
        spec = importlib.util.spec_from_file_location("binlog_alongside_dags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    for table in ("alo__a", "alo__b"):
        spark.sql(f"DROP TABLE IF EXISTS lake.{NAMESPACE}.{table}")
    stop = threading.Event()
    writer = threading.Thread(target=write, args=(mariadb, stop, random.Random(5)))
    try:
        dag_run, state, states = run(load, "binlog_backfill", {"mode": "snapshot"})
        assert state == "success", states
        assert_snapshot_progress_published(dag_run)
        writer.start()
        time.sleep(0.5)
        _, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
        # the reload of one table, writers writing; then the incremental load goes on
        _, state, states = run(load, "binlog_backfill", {"mode": "snapshot", "tables": ["alo.a"]})
        assert state == "success" and states["merge"] == "success", states
        _, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
        stop.set()
        writer.join()
        _, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        path.unlink()
    for table in ("a", "b"):
        name = f"lake.{NAMESPACE}.alo__{table}"
        spark.sql(f"REFRESH TABLE {name}")
        got = {tuple(r) for r in spark.sql(f"SELECT id, v FROM {name}").collect()}
        assert got == set(mariadb.query(f"SELECT id, v FROM alo.{table}")), table
    # the reload went through its own ledger stream; the incremental one kept the checkpoint store
    streams = {r[0] for r in spark.sql(f"SELECT stream FROM lake.{NAMESPACE}._binlog_batches").collect()}
    assert streams == {"alo", "alo.partial"}
    # every table, the ledger too, reads the same in PyIceberg, without a JVM
    assert assert_every_table_reads_as_in_spark(spark, PyIcebergReader(warehouse=spark_warehouse), "lake",
                                                NAMESPACE) == ["_binlog_batches", "alo__a", "alo__b"]
