"""The schema of every table of the captured schemas at one binlog position.

A :class:`SchemaHistory` is seeded from ``information_schema`` at a consistent point (the
snapshot, or the first dump of a source) and then follows the DDL in the binlog (see
:mod:`.apply`). It travels with the checkpoint: the merge saves it next to the checkpoint it
advances to, in the same compare-and-set, so a dump that starts there decodes with the schemas
valid *at that position*, whatever the server's schema is now.

It is also the codec's ``schemas`` source (binlogs written with ``binlog_row_metadata=MINIMAL``
carry no column names): calling it with ``(schema, table)`` gives the codec's
:class:`~airflow_provider_binlog.codec.schema.TableSchema`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from ..codec.schema import ColumnSchema, TableSchema
from ..codec.gtid import Flavor

FORMAT = 1

#: How a column's default is given: no DEFAULT clause, ``DEFAULT NULL``, a literal
#: (``default`` holds its text), or an expression the server evaluates (``CURRENT_TIMESTAMP``,
#: ``(a + 1)``: ``default`` holds its SQL text and no value can be derived from it).
DEFAULT_KINDS = ("none", "null", "literal", "expression")

_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext",
                         "enum", "set", "json"})
_NUMBER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "decimal",
                           "float", "double", "bit", "year"})
_STRING_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext",
                           "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


@dataclass(frozen=True)
class ColumnDef:
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str                      # DATA_TYPE, lower case: "int", "varchar", "enum", ...
    unsigned: bool = False
    nullable: bool = True
    charset: Optional[str] = None       # text columns only (None for numbers and binary strings)
    collation: Optional[str] = None
    length: Optional[int] = None        # CHAR/VARCHAR/BINARY/VARBINARY length, BIT width
    precision: Optional[int] = None     # DECIMAL
    scale: Optional[int] = None         # DECIMAL
    fsp: Optional[int] = None           # fractional seconds of TIME/DATETIME/TIMESTAMP
    enum_values: Optional[tuple] = None
    set_values: Optional[tuple] = None
    default_kind: str = "none"
    default: Optional[str] = None
    generated: bool = False
    auto_increment: bool = False

    @property
    def is_text(self) -> bool:
        return self.charset is not None and self.data_type in _TEXT_TYPES

    def value_for_existing_rows(self) -> Optional[str]:
        """The value the server gives the rows that exist when this column is added (no row
        event carries it), as text; None when that is NULL or an expression's value, which
        cannot be known here.

        A literal DEFAULT gives its value; a NOT NULL column without one gets its type's
        implicit default: 0 for numbers, '' for strings, the first label of an ENUM."""
        if self.generated or self.auto_increment:
            return None
        if self.default_kind == "literal":
            return self.default
        if self.default_kind != "none" or self.nullable:
            return None
        if self.data_type in _NUMBER_TYPES:
            return "0"
        if self.data_type in _STRING_TYPES or self.data_type == "set":
            return ""
        if self.data_type == "enum" and self.enum_values:
            return self.enum_values[0]
        return None  # dates get the zero date, which lands as NULL

    def value_for_omitted(self) -> Optional[str]:
        """The value an INSERT that leaves the column out gives it (MINIMAL row images log only
        the columns the statement set): a literal DEFAULT, else NULL (a NOT NULL column
        without a default cannot be left out in strict mode). None for NULL or an
        expression."""
        if self.generated or self.auto_increment:
            return None
        return self.default if self.default_kind == "literal" else None

    def to_codec(self, primary_key: bool) -> ColumnSchema:
        return ColumnSchema(
            name=self.name, data_type=self.data_type, unsigned=self.unsigned,
            charset=self.charset if self.data_type not in ("binary", "varbinary") else None,
            enum_values=self.enum_values, set_values=self.set_values, primary_key=primary_key,
            nullable=self.nullable, datetime_precision=self.fsp)

    def to_json(self) -> dict:
        out = {"name": self.name, "data_type": self.data_type}
        for f in dataclasses.fields(self)[2:]:
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ColumnDef":
        kwargs = dict(data)
        for key in ("enum_values", "set_values"):
            if kwargs.get(key) is not None:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


@dataclass(frozen=True)
class TableDef:
    """A table: its columns in order, its primary key, its default character set, and the
    table it was created ``LIKE`` (what online schema change tools do with their shadow
    tables)."""

    schema: str
    name: str
    columns: tuple = ()
    primary_key: tuple = ()
    charset: Optional[str] = None
    collation: Optional[str] = None
    like: Optional[tuple] = None

    @property
    def column_names(self) -> tuple:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Optional[ColumnDef]:
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    def index_of(self, name: str) -> int:
        lowered = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == lowered:
                return i
        return -1

    def to_codec(self) -> TableSchema:
        keys = {k.lower() for k in self.primary_key}
        return TableSchema(self.schema, self.name,
                           tuple(c.to_codec(c.name.lower() in keys) for c in self.columns))

    def to_json(self) -> dict:
        out: dict = {"schema": self.schema, "name": self.name,
                     "columns": [c.to_json() for c in self.columns],
                     "primary_key": list(self.primary_key)}
        if self.charset:
            out["charset"] = self.charset
        if self.collation:
            out["collation"] = self.collation
        if self.like:
            out["like"] = list(self.like)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TableDef":
        return cls(schema=data["schema"], name=data["name"],
                   columns=tuple(ColumnDef.from_json(c) for c in data["columns"]),
                   primary_key=tuple(data.get("primary_key") or ()), charset=data.get("charset"),
                   collation=data.get("collation"),
                   like=tuple(data["like"]) if data.get("like") else None)


@dataclass
class SchemaHistory:
    """The tables and databases of the captured schemas at one binlog position.

    ``exact_from`` is None when the history is exact (seeded inside the snapshot's consistent
    read, or followed since); otherwise it is the server position (``{"file", "pos"}``) at
    which ``information_schema`` was read, and the history is only known to be right from
    there on (see :class:`~.apply.HistoryFollower`).
    """

    flavor: str = Flavor.MARIADB
    server_charset: str = "utf8mb4"
    lower_case_table_names: int = 0
    databases: dict = field(default_factory=dict)     # schema -> (charset, collation)
    tables: dict = field(default_factory=dict)        # (schema, table) -> TableDef
    exact_from: Optional[dict] = None
    _codec: dict = field(default_factory=dict, repr=False, compare=False)

    # -- names ---------------------------------------------------------------
    def key(self, schema: str, table: str) -> tuple:
        if self.lower_case_table_names:
            return schema.lower(), table.lower()
        return schema, table

    def db_key(self, schema: str) -> str:
        return schema.lower() if self.lower_case_table_names else schema

    # -- reading -------------------------------------------------------------
    def get(self, schema: str, table: str) -> Optional[TableDef]:
        return self.tables.get(self.key(schema, table))

    def __call__(self, schema: str, table: str) -> Optional[TableSchema]:
        """The codec's ``schemas`` source (one TABLE_MAP event per transaction and table asks:
        the codec's view of a table is made once per table definition)."""
        found = self.get(schema, table)
        if found is None:
            return None
        cached = self._codec.get(id(found))
        if cached is None or cached[0] is not found:
            if len(self._codec) > 4 * len(self.tables) + 64:
                self._codec.clear()
            cached = self._codec[id(found)] = (found, found.to_codec())
        return cached[1]

    def database_charset(self, schema: str) -> tuple:
        return self.databases.get(self.db_key(schema)) or (self.server_charset, None)

    # -- writing -------------------------------------------------------------
    def put(self, table: TableDef) -> None:
        self.tables[self.key(table.schema, table.name)] = table

    def remove(self, schema: str, table: str) -> Optional[TableDef]:
        return self.tables.pop(self.key(schema, table), None)

    def copy(self) -> "SchemaHistory":
        return SchemaHistory(self.flavor, self.server_charset, self.lower_case_table_names,
                             dict(self.databases), dict(self.tables),
                             dict(self.exact_from) if self.exact_from else None)

    def restrict(self, keep) -> "SchemaHistory":
        """A copy holding only the tables of the databases ``keep(schema)`` accepts."""
        out = self.copy()
        out.tables = {k: v for k, v in self.tables.items() if keep(v.schema)}
        out.databases = {k: v for k, v in self.databases.items() if keep(k)}
        return out

    # -- JSON ----------------------------------------------------------------
    def to_json(self) -> dict:
        return {"format": FORMAT, "flavor": self.flavor, "server_charset": self.server_charset,
                "lower_case_table_names": self.lower_case_table_names,
                "databases": {k: list(v) for k, v in sorted(self.databases.items())},
                "tables": [t.to_json() for _, t in sorted(self.tables.items())],
                "exact_from": self.exact_from}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SchemaHistory":
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError(f"not a format-{FORMAT} schema history")
        history = cls(flavor=data.get("flavor") or Flavor.MARIADB,
                      server_charset=data.get("server_charset") or "utf8mb4",
                      lower_case_table_names=int(data.get("lower_case_table_names") or 0),
                      databases={k: tuple(v) for k, v in (data.get("databases") or {}).items()},
                      exact_from=data.get("exact_from"))
        for t in data.get("tables") or ():
            history.put(TableDef.from_json(t))
        return history

    @classmethod
    def of(cls, tables: Iterable[TableDef], **kwargs) -> "SchemaHistory":
        history = cls(**kwargs)
        for t in tables:
            history.put(t)
        return history


__all__ = ["ColumnDef", "DEFAULT_KINDS", "SchemaHistory", "TableDef"]
