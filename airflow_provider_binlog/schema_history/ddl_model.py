"""What a schema statement says, as parsed by :mod:`.ddl`: a table reference, a column
definition as written, and one dataclass per statement or ALTER TABLE action."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .errors import DdlSyntaxError


@dataclass(frozen=True)
class TableRef:
    schema: Optional[str]
    name: str

    def resolve(self, default_schema: Optional[str]) -> tuple:
        schema = self.schema if self.schema is not None else default_schema
        if not schema:
            raise DdlSyntaxError(f"table {self.name!r} is named without a database and the "
                                 "statement has no default database")
        return schema, self.name


@dataclass
class ColumnSpec:
    """A column definition as written (the character set is resolved when applied)."""

    name: str
    data_type: str
    unsigned: bool = False
    length: Optional[int] = None
    precision: Optional[int] = None
    scale: Optional[int] = None
    fsp: Optional[int] = None
    labels: Optional[tuple] = None       # ENUM/SET labels
    charset: Optional[str] = None
    collation: Optional[str] = None
    binary: bool = False                 # the BINARY attribute of a text type (binary collation)
    nullable: Optional[bool] = None      # None: not said (NULL unless part of the primary key)
    default_kind: str = "none"
    default: Optional[str] = None
    generated: bool = False
    auto_increment: bool = False
    primary_key: bool = False


@dataclass
class CreateTable:
    table: TableRef
    columns: list = field(default_factory=list)
    primary_key: Optional[list] = None
    charset: Optional[str] = None
    collation: Optional[str] = None
    like: Optional[TableRef] = None
    replace: bool = False
    if_not_exists: bool = False
    select: bool = False


@dataclass
class AddColumn:
    column: ColumnSpec
    position: Optional[tuple] = None     # ("first",) or ("after", name)
    if_not_exists: bool = False


@dataclass
class DropColumn:
    name: str
    if_exists: bool = False


@dataclass
class ChangeColumn:
    old_name: str                        # MODIFY: the column's own name
    column: ColumnSpec
    position: Optional[tuple] = None
    if_exists: bool = False


@dataclass
class RenameColumn:
    old_name: str
    new_name: str


@dataclass
class SetDefault:
    name: str
    default_kind: str                    # "none" for DROP DEFAULT
    default: Optional[str] = None


@dataclass
class SetPrimaryKey:
    columns: Optional[list]              # None: DROP PRIMARY KEY


@dataclass
class RenameTo:
    table: TableRef


@dataclass
class ConvertCharset:
    charset: Optional[str]
    collation: Optional[str]


@dataclass
class TableCharset:
    charset: Optional[str]
    collation: Optional[str]


@dataclass
class AlterTable:
    table: TableRef
    actions: list = field(default_factory=list)


@dataclass
class RenameTables:
    pairs: list                          # [(TableRef, TableRef)]


@dataclass
class DropTables:
    tables: list
    if_exists: bool = False


@dataclass
class TruncateTable:
    table: TableRef


@dataclass
class CreateDatabase:
    name: str
    charset: Optional[str] = None
    collation: Optional[str] = None
    replace: bool = False
    if_not_exists: bool = False


@dataclass
class AlterDatabase:
    name: Optional[str]
    charset: Optional[str] = None
    collation: Optional[str] = None


@dataclass
class DropDatabase:
    name: str


@dataclass
class CreateTrigger:
    """A trigger on ``table`` whose body writes ``targets``: how pt-online-schema-change keeps
    its shadow table a copy of the original."""

    table: TableRef
    targets: list


Statement = Union[CreateTable, AlterTable, RenameTables, DropTables, TruncateTable,
                  CreateDatabase, AlterDatabase, DropDatabase, CreateTrigger]


__all__ = ["AddColumn", "AlterDatabase", "AlterTable", "ChangeColumn", "ColumnSpec",
           "ConvertCharset", "CreateDatabase", "CreateTable", "CreateTrigger", "DropColumn",
           "DropDatabase", "DropTables", "RenameColumn", "RenameTables", "RenameTo", "SetDefault",
           "SetPrimaryKey", "Statement", "TableCharset", "TableRef", "TruncateTable"]
