"""Example DAGs: the binlog CDC load of one MySQL/MariaDB source into Apache Iceberg.

Defines ``binlog_cdc__<source>`` (every 15 minutes: wait for new binlog data, dump it, merge
it into Iceberg) and ``binlog_backfill__<source>`` (triggered by hand: the initial snapshot,
or a replay from a binlog position), made by
:func:`airflow_provider_binlog.dags.make_cdc_dags`. Trigger the backfill in mode
``snapshot`` once before the first incremental run.

Configured from the environment:

``BINLOG_SOURCE_ID``    the source's name in the DAG ids and the checkpoint key (``shop``)
``BINLOG_CONN_ID``      the ``mysql_binlog`` connection (``mysql_binlog_default``); its extra
                        ``checkpoint_store_uri`` says where the checkpoint is kept
``BINLOG_TABLES``       comma-separated ``schema.table`` patterns (``shop.*``); explicit names
                        give one Airflow asset per Iceberg table, wildcards one for the source
``BINLOG_STAGING_DIR``  where dumps are staged (``$AIRFLOW_HOME/binlog/staging``)
``BINLOG_WAREHOUSE``    the Iceberg warehouse of the embedded Hadoop catalog ``lake``
                        (``$AIRFLOW_HOME/binlog/warehouse``); the Spark connection
                        ``spark_default`` runs the merge. Set it empty to use a catalog
                        configured in Spark instead (edit ``spark_conf`` below).

The Iceberg tables are ``lake.<source>_cdc.<schema>__<table>``.
"""
from __future__ import annotations

import os

from airflow_provider_binlog.dags import make_cdc_dags

AIRFLOW_HOME = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")

SOURCE_ID = os.environ.get("BINLOG_SOURCE_ID") or "shop"
TABLES = [p.strip() for p in (os.environ.get("BINLOG_TABLES") or "shop.*").split(",") if p.strip()]
WAREHOUSE = os.environ.get("BINLOG_WAREHOUSE", os.path.join(AIRFLOW_HOME, "binlog", "warehouse"))

binlog_cdc, binlog_backfill = make_cdc_dags(
    SOURCE_ID,
    binlog_conn_id=os.environ.get("BINLOG_CONN_ID") or "mysql_binlog_default",
    tables=TABLES,
    staging_dir=os.environ.get("BINLOG_STAGING_DIR") or os.path.join(AIRFLOW_HOME, "binlog", "staging"),
    namespace=f"{SOURCE_ID}_cdc",
    catalog="lake",
    spark_conn_id="spark_default",
    warehouse=WAREHOUSE or None,
    # With no warehouse: the catalog of the cluster, e.g.
    # spark_conf={"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    #             "spark.sql.catalog.lake.type": "rest", "spark.sql.catalog.lake.uri": "http://..."},
    # spark_packages="org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0",
    schedule="*/15 * * * *",
)
