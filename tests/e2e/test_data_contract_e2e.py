"""Data-contract options from the DAG factory, end to end with ``dag.test()`` against MariaDB:
change columns and soft deletes on merged tables, the change log of a keyed table, and columns
excluded, hashed and truncated in the dump and the snapshot, whose raw values are found neither
in the staged files nor in the Iceberg files."""
from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
from pathlib import Path

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

pytest.importorskip("airflow")

from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.e2e.test_dags_e2e import dags_folder, run  # noqa: E402,F401
from tests.pyiceberg_reader import PyIcebergReader, assert_every_table_reads_as_in_spark  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings, WaitSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NAMESPACE = "contract_cdc"
KEY = "e2e-masking-key"
CONTRACT = {"default": {"change_columns": True, "soft_delete": True},
            "tables": {"dc.orders": {"change_log": True}}}
MASKING = {"exclude": ["dc.customers.password"], "hash": ["dc.customers.*email"],
           "truncate": {"dc.customers.phone": 3}}
RAW = ("ann@example.org", "bob@example.org", "bob2@example.org", "cy@example.org", "none@example.org",
       "pw-ann-1", "pw-bob-1", "pw-cy-1", "5550001", "5550002", "5550003")


def digest(text: str) -> str:
    return hmac.new(KEY.encode(), text.encode(), hashlib.sha256).hexdigest()


def values_in_parquet(paths) -> str:
    return repr([read_parquet(p).to_pylist() for p in paths])


def test_change_columns_soft_deletes_change_log_and_masking_from_the_factory(
        mariadb, dags_folder, spark, tmp_path, spark_warehouse, monkeypatch):  # noqa: F811
    create_user(mariadb)
    mariadb.execute("DROP DATABASE IF EXISTS dc")
    mariadb.execute("CREATE DATABASE dc")
    mariadb.execute("CREATE TABLE dc.customers (id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(80), "
                    "password VARCHAR(80), phone VARCHAR(20))")
    mariadb.execute("CREATE TABLE dc.orders (id INT PRIMARY KEY, customer_id INT, amount INT)")
    mariadb.execute("INSERT INTO dc.customers VALUES (1, 'ann', 'ann@example.org', 'pw-ann-1', '5550001'), "
                    "(2, 'bob', 'bob@example.org', 'pw-bob-1', '5550002')")
    mariadb.execute("INSERT INTO dc.orders VALUES (10, 1, 100), (11, 2, 200)")
    staging = tmp_path / "staging"
    set_connection(monkeypatch, mariadb, conn_id="dc_db",
                   extra={"server_id": 7397, "checkpoint_store_uri": str(tmp_path / "store")})
    monkeypatch.setenv("AIRFLOW_CONN_DC_MASK", json.dumps({"conn_type": "generic", "password": KEY}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DC", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    kwargs = dict(binlog_conn_id="dc_db", tables=["dc.*"], staging=str(staging),
                  lake=LakeSettings(namespace=NAMESPACE, warehouse=spark_warehouse, data_contract=CONTRACT),
                  spark=SparkSettings(conn_id="spark_dc"), wait=WaitSettings(poke_interval=1, timeout=4, mode="poke"),
                  masking=MASKING, masking_secret_conn_id="dc_mask")
    path = dags_folder / "binlog_contract.py"
    path.write_text("from airflow_provider_binlog.dags import (LakeSettings, MergeSettings, SnapshotSettings,\n"
                    "    SparkSettings, StagingRef, WaitSettings, make_cdc_dags)\n\n"
                    f"binlog_cdc, binlog_backfill = make_cdc_dags('dc', **{kwargs!r})\n")

    def load(name):
        spec = importlib.util.spec_from_file_location("binlog_contract_dags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    for table in ("dc__customers", "dc__orders", "dc__orders__changes"):
        spark.sql(f"DROP TABLE IF EXISTS lake.{NAMESPACE}.{table}")
    try:
        _, state, states = run(load, "binlog_backfill", {"mode": "snapshot"})
        assert state == "success", states
        mariadb.execute("UPDATE dc.customers SET email = 'bob2@example.org', password = 'x' WHERE id = 2")
        mariadb.execute("INSERT INTO dc.customers VALUES (3, 'cy', 'cy@example.org', 'pw-cy-1', '5550003')")
        mariadb.execute("DELETE FROM dc.customers WHERE id = 1")
        mariadb.execute("ALTER TABLE dc.customers ADD COLUMN backup_email VARCHAR(80) DEFAULT 'none@example.org'")
        mariadb.execute("INSERT INTO dc.orders VALUES (12, 3, 300)")
        mariadb.execute("UPDATE dc.orders SET amount = 201 WHERE id = 11")
        mariadb.execute("DELETE FROM dc.orders WHERE id = 10")
        _, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
        mariadb.execute("INSERT INTO dc.customers (id, name, email, password, phone) "
                        "VALUES (1, 'ann', 'ann@example.org', 'pw-ann-1', '5550001')")   # revived
        _, state, states = run(load, "binlog_cdc")
        assert state == "success" and states["merge"] == "success", states
    finally:
        path.unlink()

    customers, orders = f"lake.{NAMESPACE}.dc__customers", f"lake.{NAMESPACE}.dc__orders"
    spark.sql(f"REFRESH TABLE {customers}")
    got = {r["id"]: r.asDict() for r in spark.table(customers).collect()}
    assert "password" not in spark.table(customers).columns
    assert {k: (r["name"], r["email"], r["phone"], r["backup_email"], r["_cdc_deleted"], r["_cdc_op"])
            for k, r in got.items()} == {
        1: ("ann", digest("ann@example.org"), "555", digest("none@example.org"), False, "insert"),
        2: ("bob", digest("bob2@example.org"), "555", digest("none@example.org"), False, "update"),
        3: ("cy", digest("cy@example.org"), "555", digest("none@example.org"), False, "insert")}
    assert all(r["_cdc_commit_ts"] is not None and r["_cdc_binlog_pos"] > 0 for r in got.values())

    got_orders = {r["id"]: r.asDict() for r in spark.table(orders).collect()}
    assert {k: (r["amount"], r["_cdc_deleted"], r["_cdc_op"]) for k, r in got_orders.items()} == {
        10: (100, True, "delete"), 11: (201, False, "update"), 12: (300, False, "insert")}
    assert got_orders[10]["_cdc_deleted_at"] is not None
    changes = spark.sql(f"SELECT _op, id, amount FROM {orders}__changes "
                        f"ORDER BY _binlog_seq, _binlog_pos, _row").collect()
    # the snapshot's rows (after the reset it implies), then every change in binlog order
    assert [tuple(r) for r in changes] == [("truncate", None, None), ("insert", 10, 100), ("insert", 11, 200),
                                           ("insert", 12, 300), ("update", 11, 201), ("delete", 10, 100)]

    # no raw value of a masked column in the staged rows or in Iceberg (a column's DEFAULT text
    # stays schema metadata: the DDL statements and the schema history in manifest.json)
    staged = sorted(Path(staging).rglob("*.parquet"))
    assert staged
    staged_text = values_in_parquet(staged)
    iceberg_files = [r[0].removeprefix("file:")
                     for r in spark.sql(f"SELECT file_path FROM {customers}.files").collect()]
    iceberg_text = values_in_parquet(iceberg_files)
    for raw in RAW:
        assert raw not in staged_text, raw
        assert raw not in iceberg_text, raw
    assert digest("ann@example.org") in iceberg_text  # the check reads the values themselves
    # every table, the change log too, reads the same in PyIceberg, without a JVM
    assert "dc__orders__changes" in assert_every_table_reads_as_in_spark(
        spark, PyIcebergReader(warehouse=spark_warehouse), "lake", NAMESPACE)
