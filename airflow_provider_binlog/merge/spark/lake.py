"""The ``spark`` engine's lake: the Iceberg catalog inside a session's ``SparkCatalog``
(:func:`spark_lake`), so that the tables' state, plans and direct commits read and commit the
same catalog objects Spark's own statements do (Spark's caching catalog included)."""

from __future__ import annotations

from typing import Any

from py4j.protocol import Py4JError

from ..errors import MergeJobError
from ..lake.base import Lake


def spark_lake(session: Any, catalog: str) -> Lake:
    """The :class:`~..lake.base.Lake` of Spark catalog ``catalog`` of ``session``; a catalog
    that is not Iceberg's ``SparkCatalog`` (or ``SparkSessionCatalog``) is refused, naming it."""
    try:
        spark_catalog = session._jsparkSession.sessionState().catalogManager().catalog(catalog)
        iceberg = spark_catalog.icebergCatalog()
    except Py4JError as exc:
        raise MergeJobError(f"Spark catalog {catalog} is not an Iceberg catalog the merge can commit to: {exc}",
                            hint=f"set spark.sql.catalog.{catalog} to org.apache.iceberg.spark.SparkCatalog") from None
    caching = iceberg.getClass().getName() == "org.apache.iceberg.CachingCatalog"
    return Lake(catalog, iceberg, session.sparkContext._gateway, caching=caching, namespaces=spark_catalog)


__all__ = ["spark_lake"]
