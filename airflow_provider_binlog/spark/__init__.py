"""Spark + Iceberg runtime for the merge job.

Nothing here imports pyspark at import time: :func:`spark_conf_for` and
:func:`spark_submit_args` build configuration for ``spark-submit`` (e.g.
from an Airflow operator) without pyspark installed; the functions that
start or use a session import it when called.  Install the ``spark`` extra
(``pip install 'airflow-provider-binlog[spark]'``) for the embedded local
runtime.
"""
from airflow_provider_binlog.spark.runtime import (
    ICEBERG_EXTENSIONS,
    SparkRuntimeError,
    catalog_spark_conf,
    find_java17_home,
    iceberg_runtime_jars,
    local_spark_conf,
    local_spark_session,
    run_with_commit_properties,
    shaded_jackson_jar,
    snapshot_summary,
    spark_conf_for,
    spark_submit_args,
)

__all__ = [
    "ICEBERG_EXTENSIONS",
    "SparkRuntimeError",
    "catalog_spark_conf",
    "find_java17_home",
    "iceberg_runtime_jars",
    "local_spark_conf",
    "local_spark_session",
    "run_with_commit_properties",
    "shaded_jackson_jar",
    "snapshot_summary",
    "spark_conf_for",
    "spark_submit_args",
]
