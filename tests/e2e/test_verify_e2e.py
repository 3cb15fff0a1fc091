"""The verify DAG end to end with ``dag.test()``: a source loaded by the factory's backfill and
incremental DAGs (masking and the data contract on), Iceberg changed behind the load's back,
then the verify DAG reports exactly the key ranges changed (in XCom, in the report the Binlog
CDC view shows), fails on a difference when told to, and in mode repair reloads the differing
table through the watermark snapshot and verifies it equal."""
from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

pytest.importorskip("airflow")
pytest.importorskip("pyiceberg")

from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.e2e.test_dags_e2e import dags_folder, run  # noqa: E402,F401
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NAMESPACE = "verify_cdc"
MASKING = {"hash": ["ver.a.email"], "truncate": {"ver.a.note": 3}}
CONTRACT = {"default": {"change_columns": True, "soft_delete": True}}


def _xcom(dag_run, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    where = (XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id, XComModel.task_id == task_id,
             XComModel.key == key)
    with create_session() as session:
        value = session.scalar(select(XComModel.value).where(*where))
    return None if value is None else XComModel.deserialize_value(SimpleNamespace(value=value))


def test_the_verify_dag_names_the_differences_and_its_repair_mode_makes_the_table_equal(
        mariadb, dags_folder, spark, tmp_path, spark_warehouse, monkeypatch):  # noqa: F811
    create_user(mariadb)
    mariadb.execute("DROP DATABASE IF EXISTS ver")
    mariadb.execute("CREATE DATABASE ver")
    mariadb.execute("CREATE TABLE ver.a (id INT PRIMARY KEY, v INT, email VARCHAR(60), note VARCHAR(40), "
                    "at DATETIME(6), f FLOAT) DEFAULT CHARSET=utf8mb4")
    mariadb.execute("INSERT INTO ver.a SELECT seq, seq, CONCAT('u', seq, '@example.com'), CONCAT('note ', seq), "
                    "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq MINUTE, seq / 3 FROM ver.seq_1_to_3000")
    mariadb.execute("CREATE TABLE ver.b (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO ver.b SELECT seq, seq FROM ver.seq_1_to_500")
    mariadb.execute("CREATE TABLE ver.events (kind VARCHAR(10), at DATETIME)")  # no key: a change log
    mariadb.execute("INSERT INTO ver.events VALUES ('x', NOW())")
    set_connection(monkeypatch, mariadb, conn_id="ver_db",
                   extra={"server_id": 7399, "checkpoint_store_uri": str(tmp_path / "store")})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_VER", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_VER_MASK", json.dumps({"conn_type": "generic", "password": "the-key"}))
    source = dict(binlog_conn_id="ver_db", tables=["ver.*"], staging=str(tmp_path / "staging"),
                  lake=LakeSettings(namespace=NAMESPACE, warehouse=spark_warehouse, data_contract=CONTRACT),
                  spark=SparkSettings(conn_id="spark_ver"), masking=MASKING, masking_secret_conn_id="ver_mask")
    path = dags_folder / "binlog_verify_dags.py"
    path.write_text("from airflow_provider_binlog.dags import (LakeSettings, MergeSettings, SnapshotSettings,\n"
                    "    SparkSettings, StagingRef, WaitSettings, make_cdc_dags)\n"
                    "from airflow_provider_binlog.operators.verify_dag import make_verify_dag\n\n"
                    f"source = {source!r}\n"
                    "binlog_cdc, binlog_backfill = make_cdc_dags('ver', wait=WaitSettings(poke_interval=1, timeout=4, "
                    "mode='poke'), snapshot=SnapshotSettings(chunk_rows=500), **source)\n"
                    "binlog_verify = make_verify_dag('ver', chunk_rows=400, tries=1, on_difference='fail', **source)\n"
                    "binlog_verify_report = make_verify_dag('ver_report', chunk_rows=400, tries=1, "
                    "on_difference='report', checkpoint_key='ver', **source)\n")

    def load(name):
        spec = importlib.util.spec_from_file_location("binlog_verify_dags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    for table in ("ver__a", "ver__b", "ver__events"):
        spark.sql(f"DROP TABLE IF EXISTS lake.{NAMESPACE}.{table}")
    try:
        _, state, states = run(load, "binlog_backfill", {"mode": "snapshot"})
        assert state == "success", states
        mariadb.execute("UPDATE ver.a SET v = -v WHERE id BETWEEN 10 AND 12")
        mariadb.execute("DELETE FROM ver.a WHERE id = 20")  # soft-deleted in Iceberg: not a source row
        _, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
        # equal as loaded
        dag_run, state, states = run(load, "binlog_verify_report")
        assert state == "success", states
        report = _xcom(dag_run, "verify")
        assert report["equal"] is False  # the keyless table is not verifiable, only that
        assert {t: r["status"] for t, r in report["tables"].items()} == {
            "ver.a": "equal", "ver.b": "equal", "ver.events": "not verifiable"}
        assert report["tables"]["ver.a"]["left_out"] == {}
        assert states["snapshot"] == "skipped"  # mode verify: nothing to repair
        # behind the load's back
        spark.sql(f"DELETE FROM lake.{NAMESPACE}.ver__a WHERE id BETWEEN 1000 AND 1004")
        spark.sql(f"UPDATE lake.{NAMESPACE}.ver__a SET note = 'xyz' WHERE id = 2500")
        dag_run, state, states = run(load, "binlog_verify_report")
        assert state == "success", states  # on_difference="report"
        a = _xcom(dag_run, "verify")["tables"]["ver.a"]
        assert [(r["first"], r["last"], r["how"]) for r in a["differing"]] == [
            ([1000], [1004], "missing in Iceberg"), ([2500], [2500], "values differ")]
        assert a["chunks"] == 8 and a["equal"] == 6 and a["rows_per_second"] > 0
        kept = json.loads((tmp_path / "staging" / "_verify" / "ver.json").read_text())
        assert kept["tables"]["ver.a"]["status"] == "differs" and kept["tables"]["ver.b"]["status"] == "equal"
        from airflow_provider_binlog.plugins.verified import verified_card

        card = verified_card({"verified": kept})
        assert "ver.b: verified equal as of" in card and "keys [1000] .. [1004] missing in Iceberg" in card
        dag_run, state, states = run(load, "binlog_verify")
        assert state == "failed" and states["verify"] == "failed", states  # on_difference="fail"
        assert _xcom(dag_run, "verify", "verify_report")["tables"]["ver.a"]["status"] == "differs"
        # the repair: the differing table reloaded, verified again
        dag_run, state, states = run(load, "binlog_verify", {"mode": "repair"})
        assert state == "success", states
        assert states["snapshot"] == states["merge"] == states["verify_after"] == "success", states
        assert _xcom(dag_run, "plan_repair") == ["ver.a"]
        after = _xcom(dag_run, "verify_after")
        assert list(after["tables"]) == ["ver.a"] and after["tables"]["ver.a"]["status"] == "equal"
        _, state, states = run(load, "binlog_cdc")
        assert state == "success", states
        dag_run, state, states = run(load, "binlog_verify_report")
        assert {t: r["status"] for t, r in _xcom(dag_run, "verify")["tables"].items()} == {
            "ver.a": "equal", "ver.b": "equal", "ver.events": "not verifiable"}
    finally:
        path.unlink()
