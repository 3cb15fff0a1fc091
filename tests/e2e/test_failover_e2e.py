"""Failover with the factory's DAGs, live: a MariaDB primary and a GTID replica
(``log_slave_updates``, other offsets); the initial snapshot and incremental runs load from the
primary while a writer writes; the primary is killed, the replica promoted and the Airflow
connection's host and port switched to it; the next incremental runs resume by GTID on the
promoted server while the writer goes on there. Nothing is lost or applied twice: Iceberg
equals the promoted server, and the stored checkpoint is the promoted server's."""
from __future__ import annotations

import importlib.util
import json
import random
import threading
import time

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import FileCheckpointStore  # noqa: E402
from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.e2e.test_dags_e2e import dags_folder, run  # noqa: E402,F401
from tests.pyiceberg_reader import PyIcebergReader, assert_every_table_reads_as_in_spark  # noqa: E402
from tests.integration.test_failover_live import caught_up, pair, promote  # noqa: E402,F401
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings, WaitSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long, pytest.mark.mariadb]

NAMESPACE = "failover_cdc"


class Writer:
    """Inserts, updates and deletes on ``fo.items`` from a thread, on the server it is given."""

    def __init__(self, server, seed: int) -> None:
        self.server, self.rng = server, random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list = []
        self.statements = 0

    def start(self, server) -> None:
        self.server = server
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        assert not self.errors, self.errors

    def _run(self) -> None:
        conn = self.server.connect()
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    key, pick = self.rng.randint(1, 400), self.rng.random()
                    if pick < 0.6:
                        cur.execute("INSERT INTO fo.items VALUES (%s, %s, 1) ON DUPLICATE KEY UPDATE "
                                    "qty = qty + 1", (key, f"item {key}"))
                    elif pick < 0.85:
                        cur.execute("UPDATE fo.items SET label = CONCAT(label, '+') WHERE id = %s", (key,))
                    else:
                        cur.execute("DELETE FROM fo.items WHERE id = %s", (key,))
                    self.statements += 1
                    time.sleep(0.01)
        except Exception as exc:
            self.errors.append(repr(exc))
        finally:
            conn.close()


def iceberg_rows(spark) -> set:
    spark.sql(f"REFRESH TABLE lake.{NAMESPACE}.fo__items")
    return {tuple(r) for r in spark.sql(f"SELECT id, label, qty FROM lake.{NAMESPACE}.fo__items").collect()}


def source_rows(server) -> set:
    return set(server.query("SELECT id, label, qty FROM fo.items"))


def test_after_a_failover_the_dags_go_on_from_the_promoted_server(pair, dags_folder, spark, spark_warehouse,  # noqa: F811
                                                                 tmp_path, monkeypatch):
    primary, replica = pair
    for server in (primary, replica):
        create_user(server)
    primary.execute("CREATE DATABASE fo")
    primary.execute("CREATE TABLE fo.items (id INT PRIMARY KEY, label VARCHAR(200), qty INT)")
    caught_up(replica, primary)
    store_dir = tmp_path / "store"
    extra = {"server_id": 7395, "flavor": "mariadb", "checkpoint_store_uri": str(store_dir)}
    set_connection(monkeypatch, primary, conn_id="fo_db", extra=extra)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_FO", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    kwargs = dict(binlog_conn_id="fo_db", tables=["fo.*"], staging=str(tmp_path / "staging"),
                  lake=LakeSettings(namespace=NAMESPACE, warehouse=spark_warehouse),
                  spark=SparkSettings(conn_id="spark_fo"), wait=WaitSettings(poke_interval=1, timeout=4, mode="poke"))
    path = dags_folder / "binlog_failover.py"
    path.write_text("from airflow_provider_binlog.dags import (LakeSettings, MergeSettings, SnapshotSettings,\n"
                    "    SparkSettings, StagingRef, WaitSettings, make_cdc_dags)\n\n"
                    f"binlog_cdc, binlog_backfill = make_cdc_dags('fo', **{kwargs!r})\n")

    def load(name):
        spec = importlib.util.spec_from_file_location("binlog_failover_dags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    store = FileCheckpointStore(store_dir)
    spark.sql(f"DROP TABLE IF EXISTS lake.{NAMESPACE}.fo__items")
    writer = Writer(primary, seed=7)
    try:
        writer.start(primary)
        time.sleep(1)
        _, state, states = run(load, "binlog_backfill", {"mode": "snapshot"})
        assert state == "success", states
        for _ in range(2):                                # incremental runs while the writer writes
            _, state, states = run(load, "binlog_cdc")
            assert state == "success" and states["merge"] == "success", states
        writer.stop()
        assert store.load("fo").server_id == primary.server_id
        caught_up(replica, primary)
        primary.halt(crash=True)                          # the primary dies with unloaded changes
        promote(replica)
        set_connection(monkeypatch, replica, conn_id="fo_db", extra=extra)   # switched to the replica
        writer.start(replica)
        time.sleep(1)
        _, state, states = run(load, "binlog_cdc")        # resumes by GTID on the promoted server
        assert state == "success" and states["merge"] == "success", states
        assert store.load("fo").server_id == replica.server_id
        writer.stop()
        _, state, states = run(load, "binlog_cdc")        # then by its coordinates
        assert state == "success" and states["merge"] == "success", states
    finally:
        if writer._thread is not None and writer._thread.is_alive():
            writer._stop.set()
        path.unlink()
    assert writer.statements > 100
    end = store.load("fo")
    assert (end.file, end.position) == replica.master_status() and end.server_id == replica.server_id
    assert iceberg_rows(spark) == source_rows(replica)
    # every table reads the same in PyIceberg, without a JVM
    assert assert_every_table_reads_as_in_spark(spark, PyIcebergReader(warehouse=spark_warehouse), "lake",
                                                NAMESPACE) == ["_binlog_batches", "fo__items"]
