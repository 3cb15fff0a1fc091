"""FLOAT and DOUBLE keys: -0 and +0 are one key in MySQL and MariaDB, but two in Arrow's
hashing and sorting. A binlog may name a row by -0 that a snapshot or an earlier batch stored
as +0 (MySQL keeps the sign it was given); the direct commits and the merge without Spark
leave such tables to Spark's MERGE, which compares them as equal, so the row is replaced and
never doubled."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from tests.merging import refresh  # noqa: E402
from airflow_provider_binlog.merge.errors import SparkNeeded  # noqa: E402
from tests.merging import java_lake  # noqa: E402
from airflow_provider_binlog.spark.runtime import local_spark_conf  # noqa: E402
from tests.integration.test_merge_job import Binlog, col, table_map  # noqa: E402

pytestmark = pytest.mark.spark

KEYED = {name: table_map("s", f"by_{name}", [col(0, "k", t, 8 if name == "double" else 4, primary_key=True,
                                                 nullable=False), col(1, "v", C.MYSQL_TYPE_LONG)], table_id=i)
         for i, (name, t) in enumerate([("double", C.MYSQL_TYPE_DOUBLE), ("float", C.MYSQL_TYPE_FLOAT)], 30)}


@pytest.fixture(scope="module")
def lake(spark, spark_warehouse):
    jvm = java_lake(local_spark_conf(spark_warehouse, "lake"))
    try:
        yield jvm
    finally:
        jvm.stop()


def _rows(spark, name: str) -> list[tuple]:
    refresh(spark, name)
    return sorted((r[0], r[1]) for r in spark.sql(f"SELECT k, v FROM {name}").collect())


@pytest.mark.parametrize("key", sorted(KEYED))
def test_a_change_naming_a_row_by_negative_zero_replaces_the_row_stored_as_positive_zero(spark, lake, tmp_path, key):
    tm = KEYED[key]
    namespace = f"floatkeys_{key}"
    name = f"lake.{namespace}.s__by_{key}"
    log = Binlog(tmp_path)
    log.begin()
    log.rows(tm, "insert", [(0.0, 1), (1.5, 2), (-2.5, 3)])
    apply_manifests(spark, [log.publish()], MergeOptions(namespace=namespace))
    log.begin()
    log.rows(tm, "update", [((-0.0, 1), (-0.0, 10))])  # the same row, by the key's other zero
    log.rows(tm, "delete", [(1.5, 2)])
    changes = log.publish()
    with pytest.raises(SparkNeeded, match="FLOAT or DOUBLE key"):
        apply_manifests(lake, [changes], MergeOptions(namespace=namespace))
    result = apply_manifests(spark, [changes], MergeOptions(namespace=namespace))
    assert [t.get("direct") for t in result["batches"][0]["tables"]] == [None]
    assert _rows(spark, name) == [(-2.5, 3), (0.0, 10)]
