"""Iceberg tables read without a JVM, by PyIceberg: an independent reader of what the merge
commits (it applies position deletes and refuses equality deletes, as Polars and Daft do).

A Hadoop-catalog warehouse is read through each table's newest metadata file (``StaticTable``),
an Iceberg JDBC catalog on PostgreSQL through PyIceberg's SQL catalog (the same tables,
``iceberg_tables`` and ``iceberg_namespace_properties``)."""
from __future__ import annotations

from pathlib import Path
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
        from pyiceberg.table import StaticTable

        metadata = Path(self.warehouse, *namespace.split("."), name, "metadata")
        hint = metadata / "version-hint.text"
        version = int(hint.read_text().strip())
        return StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json"))

    def rows(self, namespace: str, name: str, columns: Optional[list[str]] = None) -> list[dict]:
        """Every row of the table's current snapshot, deletes applied, as Python values."""
        table = self.table(namespace, name)
        scan = table.scan(selected_fields=tuple(columns)) if columns else table.scan()
        return scan.to_arrow().to_pylist()

    def equality_delete_files(self, namespace: str, name: str) -> int:
        """Equality-delete files live in the table's current snapshot."""
        table = self.table(namespace, name)
        if table.current_snapshot() is None:
            return 0
        files = table.inspect.delete_files()
        return sum(1 for content in files.column("content").to_pylist() if content == EQUALITY_DELETES)
