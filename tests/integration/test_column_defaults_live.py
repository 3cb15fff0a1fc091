"""Tables whose columns have defaults, live: with whole row images their snapshot and their
changes take direct commits, so the iceberg-java engine merges them without Spark; an insert
whose MINIMAL image leaves a defaulted column out needs its default, which only Spark's MERGE
fills in: the engine without Spark refuses that batch before committing anything, and Spark
applies it with the defaults."""
from __future__ import annotations

from decimal import Decimal

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.capture.dump import run_dump  # noqa: E402
from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot  # noqa: E402
from airflow_provider_binlog.common.tables import TableFilter  # noqa: E402
from airflow_provider_binlog.merge.errors import SparkNeeded  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.spark.runtime import local_spark_conf  # noqa: E402
from tests.integration.test_dump_live import replica  # noqa: E402
from tests.integration.test_watermark_snapshot_live import replica_factory  # noqa: E402
from tests.merging import apply_manifests, java_lake, refresh  # noqa: E402

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]

DB = "col_defaults"
TABLES = TableFilter([f"{DB}.*"])


@pytest.fixture(scope="module")
def lake(spark, spark_warehouse):
    jvm = java_lake(local_spark_conf(spark_warehouse, "lake"))
    try:
        yield jvm
    finally:
        jvm.stop()


def _create(server) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, "
                   f"tier VARCHAR(10) NOT NULL DEFAULT 'bronze', balance DECIMAL(12,2) NOT NULL DEFAULT 0.00, "
                   f"note VARCHAR(20) DEFAULT 'none')")
    server.execute(f"INSERT INTO {DB}.customers (id, name, tier, balance) SELECT seq, CONCAT('c', seq), "
                   f"IF(seq % 2, 'gold', 'silver'), seq / 4 FROM {DB}.seq_1_to_200")


def _snapshot(server, tmp_path):
    return take_watermark_snapshot(lambda: server.connect(), replica_factory(server), staging_dir=tmp_path / "staging",
                                   tables=TABLES, flavor="mariadb", server={"server_id": server.server_id},
                                   reader="pymysql")


def _dump(server, tmp_path, start):
    rc = replica(server)
    try:
        # the schema history (as the hook's dump keeps it) knows each column's default
        return run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=TABLES,
                        seed_connect=lambda: server.connect()).manifest
    finally:
        rc.close()


def _changes(server) -> None:
    server.execute(f"INSERT INTO {DB}.customers (id, name) VALUES (1001, 'new one'), (1002, 'new two')")
    server.execute(f"UPDATE {DB}.customers SET balance = balance + 1 WHERE id <= 20")
    server.execute(f"DELETE FROM {DB}.customers WHERE id BETWEEN 50 AND 59")


def _same(spark, server, namespace: str, *, inserted: bool = True) -> None:
    name = f"lake.{namespace}.{DB}__customers"
    refresh(spark, name)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT id, name, tier, balance, note FROM {name}").collect())
    want = sorted(server.query(f"SELECT id, name, tier, balance, note FROM {DB}.customers"))
    assert got == want
    assert ((1001, "new one", "bronze", Decimal("0.00"), "none") in got) is inserted


def _head(spark, namespace: str):
    name = f"lake.{namespace}.{DB}__customers"
    refresh(spark, name)
    return spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").collect()


def _loaded_without_spark(server, spark, lake, tmp_path, namespace: str):
    """The source created and its snapshot merged into a new table of ``namespace`` by the
    engine without Spark (a plain creation, which the Java API makes too): the merge options and
    the snapshot."""
    _create(server)
    options = MergeOptions(namespace=namespace)
    snapshot = _snapshot(server, tmp_path)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{namespace}")
    spark.sql(f"DROP TABLE IF EXISTS lake.{namespace}.{DB}__customers")
    apply_manifests(lake, [snapshot], options)
    return options, snapshot


def test_tables_with_column_defaults_take_the_merge_without_spark_when_images_are_whole(
        mariadb_factory, spark, lake, tmp_path):
    server = mariadb_factory(binlog_row_image="FULL")
    namespace = "defaults_full"
    options, snapshot = _loaded_without_spark(server, spark, lake, tmp_path, namespace)
    _same(spark, server, namespace, inserted=False)
    _changes(server)
    result = apply_manifests(lake, [_dump(server, tmp_path, snapshot.end)], options)
    assert [t["status"] for t in result["batches"][0]["tables"]] == ["committed"]
    _same(spark, server, namespace)


def test_an_insert_whose_minimal_image_leaves_a_default_out_takes_spark_before_anything_is_committed(
        mariadb_factory, spark, lake, tmp_path):
    server = mariadb_factory(binlog_row_image="MINIMAL")
    namespace = "defaults_minimal"
    options, snapshot = _loaded_without_spark(server, spark, lake, tmp_path, namespace)
    server.execute(f"INSERT INTO {DB}.customers (id, name) VALUES (1001, 'new one'), (1002, 'new two')")
    changes = _dump(server, tmp_path, snapshot.end)
    before = _head(spark, namespace)
    with pytest.raises(SparkNeeded, match="need Spark.s MERGE"):
        apply_manifests(lake, [changes], options)
    assert _head(spark, namespace) == before
    apply_manifests(spark, [changes], options)
    _same(spark, server, namespace)
