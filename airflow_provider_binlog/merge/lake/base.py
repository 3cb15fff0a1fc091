"""An Iceberg catalog's tables through Iceberg's Java API (:class:`Lake`).

A merge reads and commits its tables through one ``org.apache.iceberg.catalog.Catalog`` object
held in a JVM it reaches through py4j: a bare JVM's (the ``iceberg-java`` engine,
:class:`.java.JavaLake`) or Spark's (the ``spark`` engine: the Iceberg catalog inside the
session's ``SparkCatalog``). Both see the same tables the same way, so everything the merge
does without Spark (the tables' state, plans, direct commits, the ledger) is written once,
against this class.
"""
from __future__ import annotations

import getpass
import json
import logging
from typing import Any, Mapping, Optional, Sequence

from ..column_types import iceberg_schema_json
from ..errors import MergeJobError

log = logging.getLogger(__name__)


def java_array(gateway: Any, java_type: Any, values: Sequence[Any]) -> Any:
    """``values`` as a Java array of ``java_type`` (py4j turns no Python list into one)."""
    array = gateway.new_array(java_type, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


class Lake:
    """The Iceberg catalog ``name`` (the ``catalog`` object of a JVM reached through
    ``gateway``). ``caching``: the catalog may hand out a table as it was loaded earlier (Spark's
    caching catalog), so a table is refreshed when loaded. ``namespaces``: what answers the
    namespace questions when the catalog object does not (Spark's ``SparkCatalog``, whose
    caching catalog is no ``SupportsNamespaces``): its ``namespaceExists(String[])`` and
    ``createNamespace(String[], Map)``."""

    def __init__(self, name: str, catalog: Any, gateway: Any, *, caching: bool = False,
                 namespaces: Optional[Any] = None) -> None:
        self.name = name
        self.catalog = catalog
        self.gateway = gateway
        self.jvm = gateway.jvm
        self.caching = caching
        self.namespaces = namespaces
        self._classes: dict[str, Any] = {}
        self._identifiers: dict[str, Any] = {}

    def java_class(self, name: str) -> Any:
        """The Java class ``name`` (``org.apache.iceberg.SchemaParser``), looked up once: each
        step of a lookup through py4j is a round trip, and each package step a class search of
        the JVM's whole class path."""
        found = self._classes.get(name)
        if found is None:
            found = self.jvm
            for part in name.split("."):
                found = getattr(found, part)
            self._classes[name] = found
        return found

    # --- names ----------------------------------------------------------------------------

    def identifier(self, table: str) -> Any:
        """The ``TableIdentifier`` of ``catalog.namespace.table`` (its catalog must be this one),
        made once per table."""
        made = self._identifiers.get(table)
        if made is not None:
            return made
        catalog, *namespace, name = table.split(".")
        if catalog != self.name or not namespace:
            raise MergeJobError(f"{table} is not a table of catalog {self.name}")
        # the levels hold no dot (split on them above): parsed, they are the same identifier
        # as TableIdentifier.of(Namespace.of(levels), name), in one call
        made = self._identifiers[table] = self.java_class("org.apache.iceberg.catalog.TableIdentifier").parse(
            ".".join([*namespace, name]))
        return made

    def namespace(self, parts: Sequence[str]) -> Any:
        return self.java_class("org.apache.iceberg.catalog.Namespace").of(
            java_array(self.gateway, self.java_class("java.lang.String"), list(parts)))

    # --- tables ---------------------------------------------------------------------------

    def load_table(self, table: str) -> Optional[Any]:
        """The ``org.apache.iceberg.Table`` ``table`` as last committed; None when there is none."""
        from py4j.protocol import Py4JError

        identifier = self.identifier(table)
        try:  # one call: a table that exists is loaded once, not looked up first
            loaded = self.catalog.loadTable(identifier)
        except Py4JError:  # (through Spark's gateway, pyspark's handler may mask the Java class)
            if not self.catalog.tableExists(identifier):
                return None
            raise
        if self.caching:
            loaded.refresh()
        return loaded

    def table_exists(self, table: str) -> bool:
        return bool(self.catalog.tableExists(self.identifier(table)))

    def refresh(self, table: str) -> None:
        """Drop what the catalog caches of ``table``: the next load reads it as last committed."""
        self.catalog.invalidateTable(self.identifier(table))

    def properties(self, table: str, loaded: Optional[Any] = None) -> dict[str, str]:
        """The properties stored in the table's metadata ({} when there is no table); of
        ``loaded``, the table as loaded already, when given."""
        loaded = self.load_table(table) if loaded is None else loaded
        if loaded is None:
            return {}
        mapper = self.java_class("org.apache.iceberg.util.JsonUtil").mapper()
        return json.loads(mapper.writeValueAsString(loaded.properties()))

    def fields(self, loaded: Any) -> list[dict]:
        """The fields of a loaded table's current schema (its JSON form, read in one call)."""
        return json.loads(self.java_class("org.apache.iceberg.SchemaParser").toJson(loaded.schema()))["fields"]

    def columns(self, table: str, loaded: Optional[Any] = None) -> list[tuple[str, Any]]:
        """The table's columns and their Arrow types; MergeJobError for a type the merge does
        not write. Of ``loaded``, the table as loaded already, when given."""
        from ..iceberg_arrow import arrow_type

        loaded = self.load_table(table) if loaded is None else loaded
        if loaded is None:
            raise MergeJobError(f"{table} is not a table of catalog {self.name}")
        out = []
        for field in self.fields(loaded):
            column_type = arrow_type(field["type"])
            if column_type is None:
                raise MergeJobError(f"{table}: column {field['name']!r} has type {field['type']}, which the merge "
                                    f"does not write", hint="give the column a type of docs/types.md")
            out.append((field["name"], _plain(column_type)))
        return out

    # --- creating -------------------------------------------------------------------------

    def create_namespace(self, namespace: str) -> None:
        """``CREATE NAMESPACE IF NOT EXISTS`` (also when another run creates it at the same time)."""
        try:
            if self.namespaces is not None:
                names = java_array(self.gateway, self.jvm.java.lang.String, namespace.split("."))
                if not self.namespaces.namespaceExists(names):
                    self.namespaces.createNamespace(names, self.jvm.java.util.HashMap())
                return
            parts = self.namespace(namespace.split("."))
            if self.catalog.namespaceExists(parts):
                return
            self.catalog.createNamespace(parts)
        except Exception as exc:  # noqa: BLE001 - created meanwhile, or a catalog without namespaces
            if "AlreadyExists" in type(exc).__name__ or "already exists" in str(exc).lower():
                return
            raise MergeJobError(f"catalog {self.name} cannot create the namespace {namespace}: {exc}") from None

    def create_table(self, table: str, columns: Sequence[tuple[str, Any]], properties: Mapping[str, str],
                     order: Sequence[str] = ()) -> Any:
        """The table ``table`` of ``columns`` (Arrow types) as Spark's ``CREATE TABLE ... USING
        iceberg TBLPROPERTIES (...)`` then ``ALTER TABLE ... WRITE ORDERED BY order`` make it, in
        one commit: unpartitioned, the columns optional, the properties with the ``owner`` Spark
        adds, and with a write order the range distribution ``WRITE ORDERED BY`` sets."""
        schema = self.jvm.org.apache.iceberg.SchemaParser.fromJson(json.dumps(iceberg_schema_json(columns)))
        props = {**properties, "owner": getpass.getuser()}
        builder = self.catalog.buildTable(self.identifier(table), schema)
        if order:
            sort = self.jvm.org.apache.iceberg.SortOrder.builderFor(schema)
            for column in order:
                sort = sort.asc(column)
            builder = builder.withSortOrder(sort.build())
            props["write.distribution-mode"] = "range"
        java_props = self.jvm.java.util.HashMap()
        for key, value in props.items():
            java_props.put(key, str(value))
        created = builder.withProperties(java_props).create()
        log.info("%s created through Iceberg's Java API", table)
        return created


def _plain(column_type: Any) -> Any:
    """An Arrow type without the field ids and names Iceberg's reading gives list elements."""
    import pyarrow as pa

    if pa.types.is_list(column_type):
        return pa.list_(_plain(column_type.value_type))
    return column_type


__all__ = ["Lake", "java_array"]
