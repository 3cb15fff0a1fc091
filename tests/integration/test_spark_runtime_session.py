"""The embedded Spark + Iceberg runtime in a running local session (the ``spark`` fixture):
the session's settings, MERGE INTO on a Hadoop catalog and snapshot properties set through
``CommitMetadata``. Java and jar discovery, the relocated Jackson and the shared
configuration, without a session: ``tests/unit/spark/test_spark_runtime.py``."""
from __future__ import annotations

import os
import threading

import pytest

from airflow_provider_binlog.spark.runtime import ICEBERG_EXTENSIONS, run_with_commit_properties, snapshot_summary


# --- a running session -------------------------------------------------------


def _rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def test_session_settings(spark, spark_warehouse) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert conf.get("spark.sql.extensions") == ICEBERG_EXTENSIONS
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.catalog.lake.warehouse") == spark_warehouse
    jvm_version = spark.sparkContext._jvm.java.lang.System.getProperty("java.specification.version")
    assert jvm_version == "17"


def test_create_insert_merge(spark, spark_warehouse) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.rt")
    spark.sql("DROP TABLE IF EXISTS lake.rt.merge_t")
    spark.sql(
        "CREATE TABLE lake.rt.merge_t (id BIGINT, name STRING, amount DECIMAL(10,2), ts TIMESTAMP) USING iceberg"
    )
    spark.sql(
        "INSERT INTO lake.rt.merge_t VALUES "
        "(1, 'a', 1.50, TIMESTAMP '2024-01-01 00:00:00'), "
        "(2, 'b', 2.00, TIMESTAMP '2024-01-02 00:00:00'), "
        "(3, 'c', 3.25, TIMESTAMP '2024-01-03 00:00:00')"
    )
    assert _rows(spark, "SELECT count(*) FROM lake.rt.merge_t") == [(3,)]
    spark.createDataFrame(
        [(1, "A", "10.00", "U"), (2, None, None, "D"), (4, "d", "4.00", "I"), (5, "e", "5.00", "D")],
        "id BIGINT, name STRING, amount STRING, op STRING",
    ).createOrReplaceTempView("merge_src")
    spark.sql(
        """
        MERGE INTO lake.rt.merge_t t
        USING merge_src s ON t.id = s.id
        WHEN MATCHED AND s.op = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.name = s.name, t.amount = CAST(s.amount AS DECIMAL(10,2))
        WHEN NOT MATCHED AND s.op <> 'D' THEN
            INSERT (id, name, amount, ts) VALUES (s.id, s.name, CAST(s.amount AS DECIMAL(10,2)), NULL)
        """
    )
    rows = _rows(spark, "SELECT id, name, CAST(amount AS STRING), CAST(ts AS STRING) FROM lake.rt.merge_t ORDER BY id")
    assert rows == [
        (1, "A", "10.00", "2024-01-01 00:00:00"),
        (3, "c", "3.25", "2024-01-03 00:00:00"),
        (4, "d", "4.00", None),
    ]
    assert os.path.isdir(os.path.join(spark_warehouse, "rt", "merge_t", "metadata"))
    ops = [r[0] for r in spark.sql("SELECT operation FROM lake.rt.merge_t.snapshots ORDER BY committed_at").collect()]
    assert ops == ["append", "overwrite"]


def _fresh_table(spark, name: str) -> str:
    table = f"lake.rt.{name}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.rt")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    return table


def _merge(spark, table: str, rows: list[tuple]) -> None:
    spark.createDataFrame(rows, "id BIGINT, v STRING, op STRING").createOrReplaceTempView("cp_src")
    spark.sql(
        f"""
        MERGE INTO {table} t USING cp_src s ON t.id = s.id
        WHEN MATCHED AND s.op = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.v = s.v
        WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, v) VALUES (s.id, s.v)
        """
    )


def test_merge_with_commit_properties(spark) -> None:
    table = _fresh_table(spark, "props_t")
    props = {"binlog.checkpoint": '{"file": "mysql-bin.000003", "pos": 1234}', "binlog.batch_id": "42"}

    def merge() -> str:
        _merge(spark, table, [(1, "A", "U"), (2, None, "D"), (3, "c", "I")])
        return "merged"

    assert run_with_commit_properties(spark, props, merge) == "merged"
    assert _rows(spark, f"SELECT id, v FROM {table} ORDER BY id") == [(1, "A"), (3, "c")]
    summary = snapshot_summary(spark, table)
    assert summary["binlog.checkpoint"] == props["binlog.checkpoint"]
    assert summary["binlog.batch_id"] == "42"
    # Read back the plain way too.
    rows = spark.sql(f"SELECT operation, summary FROM {table}.snapshots ORDER BY committed_at").collect()
    assert [r.operation for r in rows] == ["append", "overwrite"]
    assert rows[-1].summary["binlog.batch_id"] == "42"
    assert "binlog.batch_id" not in rows[0].summary

    # The properties do not outlive the call.
    _merge(spark, table, [(3, "C", "U")])
    assert "binlog.batch_id" not in snapshot_summary(spark, table)
    first = rows[-1]
    snapshot_id = spark.sql(
        f"SELECT snapshot_id FROM {table}.snapshots WHERE summary['binlog.batch_id'] = '42'"
    ).collect()[0][0]
    assert snapshot_summary(spark, table, snapshot_id)["binlog.checkpoint"] == first.summary["binlog.checkpoint"]


def test_commit_properties_from_another_thread(spark) -> None:
    table = _fresh_table(spark, "props_thread_t")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            run_with_commit_properties(spark, {"binlog.batch_id": "7"}, lambda: _merge(spark, table, [(2, "B", "U")]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(120)
    assert not t.is_alive() and not errors
    assert snapshot_summary(spark, table)["binlog.batch_id"] == "7"
    assert _rows(spark, f"SELECT v FROM {table} WHERE id = 2") == [("B",)]


def test_commit_properties_error_propagates(spark) -> None:
    table = _fresh_table(spark, "props_err_t")
    before = spark.sql(f"SELECT count(*) FROM {table}.snapshots").collect()[0][0]

    class Boom(Exception):
        pass

    def fail() -> None:
        raise Boom("no merge")

    with pytest.raises(Boom, match="no merge"):
        run_with_commit_properties(spark, {"binlog.batch_id": "9"}, fail)
    assert spark.sql(f"SELECT count(*) FROM {table}.snapshots").collect()[0][0] == before

    # A failing statement inside surfaces as pyspark's own error.
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException):
        run_with_commit_properties(spark, {"binlog.batch_id": "9"}, lambda: spark.sql("SELECT * FROM lake.rt.no_such"))
    _merge(spark, table, [(1, "x", "U")])
    assert "binlog.batch_id" not in snapshot_summary(spark, table)


def test_snapshot_summary_of_an_empty_table(spark) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.rt")
    spark.sql("DROP TABLE IF EXISTS lake.rt.empty_t")
    spark.sql("CREATE TABLE lake.rt.empty_t (id BIGINT) USING iceberg")
    assert snapshot_summary(spark, "lake.rt.empty_t") == {}
