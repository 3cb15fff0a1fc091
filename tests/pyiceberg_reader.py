"""Iceberg tables read without a JVM, by PyIceberg: an independent reader of what the merge
commits (it applies position deletes and refuses equality deletes), and by Polars, which scans
the table PyIceberg loaded with its own reader.

A Hadoop-catalog warehouse is read through each table's newest metadata file (``StaticTable``),
an Iceberg JDBC catalog on PostgreSQL through PyIceberg's SQL catalog (the same tables,
``iceberg_tables`` and ``iceberg_namespace_properties``)."""
from __future__ import annotations

from typing import Any, Optional

#: content of a delete file in Iceberg's metadata: 1 position deletes, 2 equality deletes
EQUALITY_DELETES = 2


class PyIcebergReader:
    """Tables of one catalog: ``warehouse`` (a Hadoop catalog's directory) or ``sql_uri`` (an
    SQLAlchemy URL of the JDBC catalog's database) with the catalog's name ``catalog_name``."""

    def __init__(self, *, warehouse: Optional[str] = None, sql_uri: Optional[str] = None,
                 catalog_name: str = "lake") -> None:
        assert (warehouse is None) != (sql_uri is None)
        self.warehouse = warehouse
        self.catalog = None
        if sql_uri is not None:
            from pyiceberg.catalog.sql import SqlCatalog

            self.catalog = SqlCatalog(catalog_name, uri=sql_uri)

    def table(self, namespace: str, name: str) -> Any:
        if self.catalog is not None:
            return self.catalog.load_table((namespace, name))
        from airflow_provider_binlog.local.pyiceberg_check import static_table

        return static_table(self.warehouse, namespace, name)

    def rows(self, namespace: str, name: str, columns: Optional[list[str]] = None) -> list[dict]:
        """Every row of the table's current snapshot, deletes applied, as Python values."""
        table = self.table(namespace, name)
        scan = table.scan(selected_fields=tuple(columns)) if columns else table.scan()
        return scan.to_arrow().to_pylist()

    def polars_rows(self, namespace: str, name: str) -> list[dict]:
        """Every row of the table's current snapshot as Polars scans it (``pl.scan_iceberg``,
        deletes applied), as Python values. Polars plans the scan with PyIceberg (it says so in
        a warning, silenced here) and reads the data and delete files with its own reader."""
        import warnings

        import polars as pl

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Iceberg scan planning with the polars_iceberg plugin")
            return pl.scan_iceberg(self.table(namespace, name)).collect().to_dicts()

    def equality_delete_files(self, namespace: str, name: str) -> int:
        """Equality-delete files live in the table's current snapshot."""
        table = self.table(namespace, name)
        if table.current_snapshot() is None:
            return 0
        files = table.inspect.delete_files()
        return sum(1 for content in files.column("content").to_pylist() if content == EQUALITY_DELETES)


def plain(value: Any) -> Any:
    """A value as PyIceberg gives it, as the Spark session of the tests gives it (UTC):
    timestamps with a time zone as UTC wall time."""
    import datetime as dt

    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, plain(v)) for k, v in value.items()))
    return value


def assert_polars_reads_as_pyiceberg(reader: PyIcebergReader, namespace: str, name: str) -> int:
    """Polars reads the table row for row and value for value as PyIceberg does; the rows."""
    from collections import Counter

    def counted(rows: list[dict]) -> Counter:
        return Counter(tuple(sorted((k, plain(v)) for k, v in row.items())) for row in rows)

    pyiceberg = reader.rows(namespace, name)
    assert counted(reader.polars_rows(namespace, name)) == counted(pyiceberg), \
        f"Polars reads {namespace}.{name} otherwise than PyIceberg"
    return len(pyiceberg)


def assert_every_table_reads_as_in_spark(spark: Any, reader: PyIcebergReader, catalog: str, namespace: str) -> list:
    """Every table of ``catalog.namespace`` reads in PyIceberg, row for row and value for value
    as Spark reads it, and in Polars as in PyIceberg, and holds no equality-delete file; the
    tables' names."""
    from collections import Counter

    names = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {catalog}.{namespace}").collect())
    assert names, f"no table in {catalog}.{namespace}"
    for name in names:
        spark.sql(f"REFRESH TABLE {catalog}.{namespace}.{name}")
        frame = spark.table(f"{catalog}.{namespace}.{name}")
        columns = frame.columns
        seen = Counter(tuple(plain(v) for v in r) for r in frame.collect())
        got = Counter(tuple(plain(r[c]) for c in columns) for r in reader.rows(namespace, name))
        assert got == seen, f"PyIceberg reads {namespace}.{name} otherwise than Spark"
        assert_polars_reads_as_pyiceberg(reader, namespace, name)
        assert reader.equality_delete_files(namespace, name) == 0, f"{namespace}.{name} holds equality deletes"
    return names
