"""``IcebergCatalogHook``: an Iceberg catalog described by an Airflow connection.

A connection of type ``iceberg_catalog`` holds in its extra ``type`` (``jdbc``, ``rest``,
``hive``, ``glue``, ``nessie``, ``hadoop``), ``uri``, ``warehouse``, ``properties`` (more
catalog properties, an object) and ``jars`` (a JDBC driver, ...). For a JDBC catalog the
connection's login and password are the database user's, and without a ``uri`` its host,
port and schema make ``jdbc:postgresql://host:port/schema``. For example::

    AIRFLOW_CONN_LAKEHOUSE='{"conn_type": "iceberg_catalog", "host": "pg.internal", "port": 5432,
        "schema": "iceberg", "login": "iceberg", "password": "...",
        "extra": {"type": "jdbc", "warehouse": "s3a://lake/warehouse"}}'
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from ..spark.catalogs import CatalogConfigError, IcebergCatalog, catalog_from_settings


class IcebergCatalogHook(BaseHook):
    """The Iceberg catalog of the connection ``catalog_conn_id`` (type ``iceberg_catalog``).

    :param catalog_conn_id: the Airflow connection (type ``iceberg_catalog``).
    """

    conn_name_attr = "catalog_conn_id"
    default_conn_name = "iceberg_catalog_default"
    conn_type = "iceberg_catalog"
    hook_name = "Apache Iceberg catalog"

    def __init__(self, catalog_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.catalog_conn_id = catalog_conn_id

    def get_catalog(self, name: str = "lake") -> IcebergCatalog:
        """The catalog, named ``name`` in Spark SQL."""
        conn = self.get_connection(self.catalog_conn_id)
        try:
            return catalog_from_settings(name, conn.extra_dejson, login=conn.login, password=conn.password,
                                         host=conn.host, port=conn.port, schema=conn.schema)
        except CatalogConfigError as exc:
            raise CatalogConfigError(f"connection {self.catalog_conn_id!r}: {exc}") from None

    def test_connection(self) -> tuple[bool, str]:
        """Checks the settings (not the catalog server)."""
        try:
            return True, f"settings of {self.get_catalog().describe()} are complete"
        except Exception as exc:
            return False, str(exc)


__all__ = ["IcebergCatalogHook"]
