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
``BINLOG_CATALOG_CONN_ID``  an ``iceberg_catalog`` connection (JDBC on PostgreSQL, REST, ...:
                        docs/catalogs.md) for the catalog ``lake``; when unset, the embedded
                        Hadoop catalog on ``BINLOG_WAREHOUSE``
``BINLOG_WAREHOUSE``    the warehouse of the embedded catalog
                        (``$AIRFLOW_HOME/binlog/warehouse``)
``BINLOG_SPARK_JARS``   comma-separated Iceberg runtime jars for Spark (default: those shipped
                        with the package)

The Spark connection ``spark_default`` runs the merge.

The Iceberg tables are ``lake.<source>_cdc.<schema>__<table>``.
"""
from __future__ import annotations

import os

from airflow_provider_binlog.dags import LakeSettings, SparkSettings, make_cdc_dags

AIRFLOW_HOME = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")

SOURCE_ID = os.environ.get("BINLOG_SOURCE_ID") or "shop"
TABLES = [p.strip() for p in (os.environ.get("BINLOG_TABLES") or "shop.*").split(",") if p.strip()]
CATALOG_CONN_ID = os.environ.get("BINLOG_CATALOG_CONN_ID") or None
WAREHOUSE = None if CATALOG_CONN_ID else (
    os.environ.get("BINLOG_WAREHOUSE") or os.path.join(AIRFLOW_HOME, "binlog", "warehouse"))
SPARK_JARS = [j for j in (os.environ.get("BINLOG_SPARK_JARS") or "").split(",") if j] or None

binlog_cdc, binlog_backfill = make_cdc_dags(
    SOURCE_ID,
    binlog_conn_id=os.environ.get("BINLOG_CONN_ID") or "mysql_binlog_default",
    tables=TABLES,
    staging=os.environ.get("BINLOG_STAGING_DIR") or os.path.join(AIRFLOW_HOME, "binlog", "staging"),
    lake=LakeSettings(
        namespace=f"{SOURCE_ID}_cdc",
        catalog="lake",
        warehouse=WAREHOUSE,
        catalog_conn_id=CATALOG_CONN_ID,
        # Or the catalog as settings: catalog_settings={"type": "rest", "uri": "http://..."}
        # Data-contract options (docs/data-contract.md), all opt-in, for example:
        # data_contract={"default": {"change_columns": True, "soft_delete": True},
        #                "tables": {"shop.orders": {"change_log": True}}},
        # table_layout={"tables": {"shop.orders": {"partition_by": ["days(created_at)"]}}},
    ),
    spark=SparkSettings(conn_id="spark_default", jars=SPARK_JARS),
    schedule="*/15 * * * *",
    # masking={"exclude": ["shop.customers.password_hash"], "hash": ["shop.customers.email"],
    #          "truncate": {"shop.customers.phone": 4}},
    # masking_secret_conn_id="binlog_masking_key",   # its password keys the hashes
)
