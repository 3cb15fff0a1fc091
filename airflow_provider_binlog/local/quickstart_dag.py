"""The binlog CDC DAGs of the quickstart (:func:`airflow_provider_binlog.dags.make_cdc_dags`).

``python -m airflow_provider_binlog quickstart`` copies this file into the dags folder of its
private Airflow when the source checkout's ``dags/binlog_cdc.py`` is not there (an installed
wheel), and sets the ``BINLOG_*`` environment variables it reads.  It is a DAG file, not a
module to import elsewhere: without those variables it fails.
"""
import os

from airflow_provider_binlog.dags import LakeSettings, SparkSettings, make_cdc_dags

SOURCE_ID = os.environ["BINLOG_SOURCE_ID"]
binlog_cdc, binlog_backfill = make_cdc_dags(
    SOURCE_ID,
    binlog_conn_id=os.environ["BINLOG_CONN_ID"],
    tables=os.environ["BINLOG_TABLES"].split(","),
    staging=os.environ["BINLOG_STAGING_DIR"],
    lake=LakeSettings(namespace=f"{SOURCE_ID}_cdc", catalog="lake", warehouse=os.environ["BINLOG_WAREHOUSE"]),
    spark=SparkSettings(conn_id="spark_default"),
)
