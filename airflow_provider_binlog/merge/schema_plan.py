"""Schema evolution, engine-neutral: the Iceberg columns after a batch's staged layouts
(:func:`plan_schema`), the Spark SQL statements leading there (:func:`schema_statements`,
:func:`create_table_statements`) and, for a plain table, what Iceberg's Java API creates
instead (:class:`TableCreation`). Column types are Arrow types (:mod:`.column_types`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional, Sequence

from .column_types import can_widen, fits, iceberg_arrow_type, sql_type
from .errors import SchemaEvolutionError
from .iceberg_contract import (DEFAULT_TABLE_PROPERTIES, MODE_CHANGELOG, MODE_MERGE, PROP_MODE, PROP_PRIMARY_KEY,
                               PROP_SOURCE)
from .layout import TableLayout
from .sql import literal as _lit
from .sql import quote as _q

Columns = list[tuple[str, Any]]


def changelog_envelope() -> Columns:
    """The envelope columns of a change-log table (a table without a primary key), before its image."""
    import pyarrow as pa

    return [("_op", pa.string()), ("_binlog_file", pa.string()), ("_binlog_seq", pa.int64()),
            ("_binlog_pos", pa.int64()), ("_row", pa.int32()), ("_gtid", pa.string()),
            ("_commit_ts", pa.timestamp("us", tz="UTC")), ("_txn", pa.string()), ("_batch_id", pa.string()),
            ("_absent", pa.list_(pa.string()))]


#: The names of the change-log envelope's columns.
CHANGELOG_ENVELOPE_NAMES = ("_op", "_binlog_file", "_binlog_seq", "_binlog_pos", "_row", "_gtid", "_commit_ts",
                            "_txn", "_batch_id", "_absent")


@dataclasses.dataclass
class SchemaPlan:
    """The target columns after a batch, and the ALTERs leading there.

    ``valid_from[name]`` is the index of the first staged part whose values of ``name`` belong
    to the final column (a column dropped and added again starts over)."""

    columns: Columns
    operations: list[tuple]
    valid_from: dict[str, int]

    def type_of(self, name: str) -> Any:
        return dict(self.columns)[name]


# long: one walk over the staged layouts, each column's add, drop and promotion in order
def plan_schema(current: Optional[Sequence[tuple[str, Any]]], layouts: Sequence[Sequence[tuple[str, Any]]], *,
                table: str = "", drop_columns: bool = True) -> SchemaPlan:
    """Follow the staged layouts (in staging order; their columns' staged Arrow types) from
    the ``current`` Iceberg columns (None: no table yet). Operations: ``("create", columns)``,
    ``("add", name, type, after)`` (``after`` None: first), ``("drop", name)``,
    ``("type", name, type)``."""
    ops: list[tuple] = []
    valid_from: dict[str, int] = {}
    cols: Optional[Columns] = list(current) if current is not None else None
    for i, layout in enumerate(layouts):
        staged = [(n, iceberg_arrow_type(t)) for n, t in layout]
        if cols is None:
            cols = list(staged)
            ops.append(("create", list(cols)))
            continue
        names = {n for n, _ in staged}
        if drop_columns:
            for name, _ in list(cols):
                if name not in names:
                    ops.append(("drop", name))
                    cols = [c for c in cols if c[0] != name]
        prev = None
        for name, typ in staged:
            index = next((j for j, c in enumerate(cols) if c[0] == name), None)
            if index is None:
                ops.append(("add", name, typ, prev))
                at = 0 if prev is None else next(j for j, c in enumerate(cols) if c[0] == prev) + 1
                cols.insert(at, (name, typ))
                valid_from[name] = i
            else:
                current_type = cols[index][1]
                if not fits(typ, current_type):
                    if not can_widen(current_type, typ):
                        raise SchemaEvolutionError(
                            f"{table}: column {name!r} changed from {sql_type(current_type)} to "
                            f"{sql_type(typ)} in the staged data, which Iceberg cannot express "
                            f"(only int->bigint, float->double and decimal precision increases); "
                            f"nothing of this batch was committed. Recreate the table (or add a "
                            f"new column) and reload it from a snapshot")
                    ops.append(("type", name, typ))
                    cols[index] = (name, typ)
            prev = name
    return SchemaPlan(cols or [], ops, valid_from)


def schema_statements(table: str, operations: Sequence[tuple], properties: Mapping[str, str]) -> list[str]:
    """The Spark SQL statements of :func:`plan_schema` operations on Iceberg ``table``."""
    out = []
    for op in operations:
        if op[0] == "create":
            cols = ", ".join(f"{_q(n)} {sql_type(t)}" for n, t in op[1])
            props = ", ".join(f"{_lit(k)}={_lit(v)}" for k, v in properties.items())
            partitions = op[2] if len(op) > 2 else ()
            out.append(f"CREATE TABLE {table} ({cols}) USING iceberg"
                       + (f" PARTITIONED BY ({', '.join(partitions)})" if partitions else "")
                       + (f" TBLPROPERTIES ({props})" if props else ""))
        elif op[0] == "add":
            where = " FIRST" if op[3] is None else f" AFTER {_q(op[3])}"
            out.append(f"ALTER TABLE {table} ADD COLUMN {_q(op[1])} {sql_type(op[2])}{where}")
        elif op[0] == "drop":
            out.append(f"ALTER TABLE {table} DROP COLUMN {_q(op[1])}")
        elif op[0] == "type":
            out.append(f"ALTER TABLE {table} ALTER COLUMN {_q(op[1])} TYPE {sql_type(op[2])}")
        elif op[0] == "order":
            out.append(f"ALTER TABLE {table} WRITE ORDERED BY {', '.join(_q(c) for c in op[1])}")
        elif op[0] == "properties":
            props = ", ".join(f"{_lit(k)}={_lit(v)}" for k, v in op[1].items())
            out.append(f"ALTER TABLE {table} SET TBLPROPERTIES ({props})")
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown schema operation {op!r}")
    return out


def table_properties(source: Sequence[str], mode: str, primary_key: Sequence[str],
                     layout: Optional[TableLayout] = None) -> dict:
    """The properties of a table the merge creates for source table ``source``."""
    layout = layout or TableLayout()
    return {**DEFAULT_TABLE_PROPERTIES, **layout.properties, PROP_SOURCE: json.dumps(list(source)),
            PROP_MODE: mode, PROP_PRIMARY_KEY: json.dumps(list(primary_key))}


def create_table_statements(name: str, source: Sequence[str], columns: Sequence[tuple[str, Any]],
                            mode: str, primary_key: Sequence[str],
                            layout: Optional[TableLayout] = None) -> list[str]:
    """The statements creating the Iceberg table ``name`` of source table ``source``
    (``(schema, table)``) with ``columns`` (the image columns; a change log gets its envelope
    columns first): the ``binlog.*`` properties, :data:`DEFAULT_TABLE_PROPERTIES` overridden
    by the layout's properties, its partition spec, and its sort order, else for a merged
    table the write order of its primary key, so the files it writes hold sorted runs of keys."""
    layout = layout or TableLayout()
    props = table_properties(source, mode, primary_key, layout)
    if mode == MODE_CHANGELOG:
        columns = [*changelog_envelope(), *columns]
    names = {c[0] for c in columns}
    where = ".".join(source)
    partitions = layout.partition_sql(names, where)
    sort = layout.sort_sql(names, where)
    statements = schema_statements(name, [("create", list(columns), partitions)], props)
    if sort:
        statements.append(f"ALTER TABLE {name} WRITE ORDERED BY {', '.join(sort)}")
    elif mode == MODE_MERGE:
        statements += schema_statements(name, [("order", list(primary_key))], {})
    return statements


@dataclasses.dataclass(frozen=True)
class TableCreation:
    """What :func:`create_table_statements` says, for a catalog's own API: an unpartitioned
    table of ``columns`` (Arrow types) with ``properties``, written in the order of ``order``."""

    columns: tuple
    properties: dict
    order: tuple


def plain_creation(source: Sequence[str], columns: Sequence[tuple[str, Any]], mode: str,
                   primary_key: Sequence[str], layout: Optional[TableLayout] = None) -> Optional[TableCreation]:
    """The :class:`TableCreation` of a merged table without partitions or a sort order of its
    layout (whose statements :func:`create_table_statements` gives); None for other tables."""
    layout = layout or TableLayout()
    if mode != MODE_MERGE or layout.partition_by or layout.sort_by:
        return None
    return TableCreation(tuple(columns), table_properties(source, mode, primary_key, layout), tuple(primary_key))


__all__ = ["CHANGELOG_ENVELOPE_NAMES", "Columns", "SchemaPlan", "TableCreation", "changelog_envelope",
           "create_table_statements", "plain_creation", "plan_schema", "schema_statements", "table_properties"]
