"""The layout of the Iceberg tables the merge creates: partition spec, sort order and table
properties, for every table or per source table (``schema.table``, ``*`` patterns).

A partition field is a column or an Iceberg transform of one: ``bucket(16, id)``,
``truncate(4, code)``, ``years(ts)``, ``months(ts)``, ``days(ts)``, ``hours(ts)``. A sort field
is a column with an optional ``ASC``/``DESC`` and ``NULLS FIRST``/``NULLS LAST``. A merged
table is sorted by its primary key unless a sort order is given. The layout applies when the
job creates a table (a first load or a snapshot of a new table, a table rename).

Written as JSON for the merge option ``table_layout`` (:class:`~.options.MergeOptions`)::

    {"default": {"properties": {"write.target-file-size-bytes": "134217728"}},
     "tables": {"shop.orders": {"partition_by": ["days(created_at)", "bucket(8, customer_id)"],
                                "sort_by": ["customer_id", "created_at DESC"]}}}
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..common.options_json import known_keys_object
from .errors import MergeJobError
from .per_table import matching_key, parse_per_table


class LayoutError(MergeJobError, ValueError):
    """A table layout that cannot be used: a bad partition or sort field, an unknown key."""


_IDENT = r"`[^`]+`|[A-Za-z_][A-Za-z0-9_]*"
_PARTITION = re.compile(rf"^\s*(?:(?P<ident>{_IDENT})|(?P<fn>bucket|truncate)\s*\(\s*(?P<n>\d+)\s*,\s*"
                        rf"(?P<col_n>{_IDENT})\s*\)|(?P<time>years|months|days|hours)\s*\(\s*"
                        rf"(?P<col_t>{_IDENT})\s*\))\s*$", re.IGNORECASE)
_SORT = re.compile(rf"^\s*(?P<col>{_IDENT})(?:\s+(?P<dir>ASC|DESC))?(?:\s+NULLS\s+(?P<nulls>FIRST|LAST))?\s*$",
                   re.IGNORECASE)
_KEYS = frozenset({"partition_by", "sort_by", "properties"})


def _quoted(name: str) -> str:
    name = name[1:-1] if name.startswith("`") else name
    return "`" + name.replace("`", "``") + "`"


def _bare(name: str) -> str:
    return name[1:-1] if name.startswith("`") else name


def partition_field(text: str) -> tuple[str, str]:
    """``(Spark SQL of the field, its column)``; raises :class:`LayoutError`."""
    m = _PARTITION.match(text if isinstance(text, str) else "")
    if not m:
        raise LayoutError(f"partition field {text!r} is not a column or bucket(N, col), truncate(N, col), "
                          "years(col), months(col), days(col), hours(col)")
    if m.group("ident"):
        return _quoted(m.group("ident")), _bare(m.group("ident"))
    if m.group("fn"):
        n = int(m.group("n"))
        if n < 1:
            raise LayoutError(f"partition field {text!r}: the width must be at least 1")
        return f"{m.group('fn').lower()}({n}, {_quoted(m.group('col_n'))})", _bare(m.group("col_n"))
    return f"{m.group('time').lower()}({_quoted(m.group('col_t'))})", _bare(m.group("col_t"))


def sort_field(text: str) -> tuple[str, str]:
    """``(Spark SQL of the sort field, its column)``; raises :class:`LayoutError`."""
    m = _SORT.match(text if isinstance(text, str) else "")
    if not m:
        raise LayoutError(f"sort field {text!r} is not a column with optional ASC|DESC and NULLS FIRST|LAST")
    sql = _quoted(m.group("col"))
    if m.group("dir"):
        sql += " " + m.group("dir").upper()
    if m.group("nulls"):
        sql += " NULLS " + m.group("nulls").upper()
    return sql, _bare(m.group("col"))


@dataclass(frozen=True)
class TableLayout:
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any, where: str = "layout") -> "TableLayout":
        if value is None:
            return cls()
        value = known_keys_object(value, _KEYS, where, LayoutError,
                                  expected="an object with partition_by, sort_by, properties")
        parts = value.get("partition_by") or ()
        sort = value.get("sort_by") or ()
        parts = [parts] if isinstance(parts, str) else list(parts)
        sort = [sort] if isinstance(sort, str) else list(sort)
        for text in parts:
            partition_field(text)
        for text in sort:
            sort_field(text)
        props = value.get("properties") or {}
        if not isinstance(props, Mapping):
            raise LayoutError(f"{where}: properties must be an object")
        return cls(tuple(parts), tuple(sort), {str(k): str(v) for k, v in props.items()})

    def partition_sql(self, columns: set[str], table: str) -> list[str]:
        """The PARTITIONED BY fields, each checked to name a column of the table."""
        out = []
        for text in self.partition_by:
            sql, column = partition_field(text)
            if column.lower() not in {c.lower() for c in columns}:  # Spark resolves names so
                raise LayoutError(f"{table}: partition field {text!r} names no column of the table "
                                  f"(columns: {', '.join(sorted(columns))})")
            out.append(sql)
        return out

    def sort_sql(self, columns: set[str], table: str) -> list[str]:
        out = []
        for text in self.sort_by:
            sql, column = sort_field(text)
            if column.lower() not in {c.lower() for c in columns}:
                raise LayoutError(f"{table}: sort field {text!r} names no column of the table")
            out.append(sql)
        return out


@dataclass(frozen=True)
class TableLayouts:
    """The layout of every table, and per-table ones (``schema.table`` or a ``*`` pattern; the
    first pattern that matches, exact names before patterns) that override it key by key."""

    default: TableLayout = field(default_factory=TableLayout)
    tables: Mapping[str, TableLayout] = field(default_factory=dict)
    #: keys given per table, so an unset key falls back to the default
    given: Mapping[str, frozenset] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any) -> "TableLayouts":
        return parse_per_table(cls, value, "table layout", "layouts", LayoutError, TableLayout.parse)

    def with_properties(self, properties: Optional[Mapping[str, str]]) -> "TableLayouts":
        """These layouts with ``properties`` under the default's (the merge option ``table_properties``)."""
        if not properties:
            return self
        default = TableLayout(self.default.partition_by, self.default.sort_by,
                              {**properties, **self.default.properties})
        return TableLayouts(default, self.tables, self.given)

    def for_table(self, schema: str, table: str) -> TableLayout:
        match = matching_key(self.tables, schema, table)
        if match is None:
            return self.default
        own, given = self.tables[match], self.given.get(match, frozenset())
        return TableLayout(own.partition_by if "partition_by" in given else self.default.partition_by,
                           own.sort_by if "sort_by" in given else self.default.sort_by,
                           {**self.default.properties, **own.properties})

    def to_json(self) -> dict:
        def one(layout: TableLayout, keys=_KEYS) -> dict:
            full = {"partition_by": list(layout.partition_by), "sort_by": list(layout.sort_by),
                    "properties": dict(layout.properties)}
            return {k: v for k, v in full.items() if k in keys}
        return {"default": one(self.default),
                "tables": {n: one(t, self.given.get(n, _KEYS)) for n, t in self.tables.items()}}


__all__ = ["LayoutError", "TableLayout", "TableLayouts", "partition_field", "sort_field"]
