"""The merge as the tests drive it: ``apply_manifests(engine, ...)`` with a SparkSession (the
``spark`` engine, on the session's lake) or a :class:`JavaLake` (the ``iceberg-java`` engine),
and the table state read through a session's lake."""
from __future__ import annotations

from typing import Any, Optional

from airflow_provider_binlog.merge.lake import state
from airflow_provider_binlog.merge.lake.base import Lake
from airflow_provider_binlog.merge.lake.batch import apply_manifests as _apply


def lake_of(engine: Any, catalog: str = "lake") -> Lake:
    """The lake of a SparkSession's catalog ``catalog``, or the JavaLake itself."""
    if isinstance(engine, Lake):
        return engine
    from airflow_provider_binlog.merge.spark.lake import spark_lake

    return spark_lake(engine, catalog)


def apply_manifests(engine: Any, manifests: Any, options: Any, *, store: Any = None) -> dict:
    """The merge of ``manifests`` by ``engine``: a JavaLake alone, or a SparkSession's lake with Spark."""
    if isinstance(engine, Lake):
        return _apply(engine, manifests, options, store=store)
    from airflow_provider_binlog.merge.spark.engine import SparkEngine

    return _apply(lake_of(engine, options.catalog), manifests, options, store=store, spark=SparkEngine(engine))


def java_lake(conf: dict, catalog: str = "lake") -> Any:
    """A JavaLake of Spark settings ``conf`` on this host's Java 17 and Spark jars."""
    from airflow_provider_binlog.merge.lake.java import JavaLake
    from airflow_provider_binlog.spark.runtime import find_java17_home, spark_jars_dirs

    return JavaLake(conf, catalog, find_java17_home(), spark_jars_dirs())


def _catalog(table: str) -> str:
    return table.split(".", 1)[0]


def applied_state(engine: Any, table: str, stream: Optional[str] = None) -> state.AppliedState:
    return state.applied_state(lake_of(engine, _catalog(table)), table, stream)


def committed_batch(engine: Any, table: str, batch_id: str) -> bool:
    return state.committed_batch(lake_of(engine, _catalog(table)), table, batch_id)


def head_snapshot(engine: Any, table: str) -> Optional[int]:
    return state.head_snapshot(lake_of(engine, _catalog(table)), table)


def iceberg_table(engine: Any, table: str) -> Any:
    return lake_of(engine, _catalog(table)).load_table(table)


def refresh(engine: Any, table: str) -> None:
    lake = lake_of(engine, _catalog(table))
    if lake.table_exists(table):
        lake.refresh(table)


def read_table_properties(engine: Any, table: str) -> dict:
    """The properties Spark shows for the table (``SHOW TBLPROPERTIES``: the stored ones and
    the reserved ``format-version``, ``provider``, ...); a JavaLake's stored ones."""
    if isinstance(engine, Lake):
        return engine.properties(table)
    return {r[0]: r[1] for r in engine.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def stored_properties(engine: Any, table: str) -> dict:
    """The properties stored in the table's metadata."""
    return lake_of(engine, _catalog(table)).properties(table)


def table_exists(engine: Any, table: str) -> bool:
    return lake_of(engine, _catalog(table)).table_exists(table)
