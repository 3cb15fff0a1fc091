"""Follow DDL statements: apply them to a :class:`~.model.SchemaHistory` and say what they mean
for the captured tables' Iceberg tables.

:meth:`HistoryFollower.apply` takes one QUERY event's statement, updates the history and
returns the *operations* the merge carries out at the statement's binlog position
(:mod:`.ops`: :class:`~.ops.ResetOp`, :class:`~.ops.AlterOp`, :class:`~.ops.MoveOp`,
:class:`~.ops.RefuseOp`; their JSON is what the dump stages).

An online schema change cut-over (``RENAME TABLE t TO _t_old, _t_new TO t`` where ``_t_new``
was created ``LIKE t``, as pt-online-schema-change and gh-ost do) is an ``alter`` of ``t``:
by the tools' design the shadow holds ``t``'s rows at the swap, with the new layout.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from ..codec.gtid import Flavor
from . import ddl, ddl_model
from .errors import DdlSyntaxError
from .model import ColumnDef, SchemaHistory, TableDef
from .ops import AddedColumn, AlterOp, DdlOp, MoveOp, RefuseOp, ResetOp

Captured = Callable[[str, str], bool]

_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})
_TO_BINARY = {"char": "binary", "varchar": "varbinary", "tinytext": "tinyblob", "text": "blob",
              "mediumtext": "mediumblob", "longtext": "longblob"}


def charset_of_collation(collation: Optional[str]) -> Optional[str]:
    """``utf8mb4_bin`` -> ``utf8mb4``; ``utf8_general_ci`` -> ``utf8mb3``; None when the
    collation does not name its character set (MariaDB's ``uca1400_ai_ci``)."""
    if not collation:
        return None
    if collation == "binary":
        return "binary"
    head = collation.split("_", 1)[0]
    if head == "utf8":
        return "utf8mb3"
    return None if head in ("uca1400",) else head


def column_def(spec: ddl_model.ColumnSpec, *, table_charset: tuple, flavor: str,
               primary_key: bool = False) -> ColumnDef:
    """The :class:`ColumnDef` of a column as written in a statement, its character set
    resolved from the column, the table's default or the database's default."""
    data_type = spec.data_type
    charset = collation = None
    if data_type == "json" and flavor == Flavor.MARIADB:
        data_type, charset, collation = "longtext", "utf8mb4", "utf8mb4_bin"  # MariaDB's JSON alias
    elif data_type in _TEXT:
        charset = spec.charset or charset_of_collation(spec.collation)
        collation = spec.collation
        if charset is None:
            charset = table_charset[0] or charset_of_collation(table_charset[1])
            collation = collation or (
                table_charset[1] if charset_of_collation(table_charset[1]) in (None, charset) else None)
        if charset == "binary":
            if data_type in _TO_BINARY:
                data_type, charset, collation = _TO_BINARY[data_type], None, None
            else:
                charset = None
        elif spec.binary and charset:
            collation = f"{charset}_bin"
    nullable = spec.nullable if spec.nullable is not None else not (spec.primary_key or primary_key)
    return ColumnDef(
        name=spec.name, data_type=data_type, unsigned=spec.unsigned, nullable=nullable,
        charset=charset, collation=collation, length=spec.length, precision=spec.precision,
        scale=spec.scale, fsp=spec.fsp,
        enum_values=spec.labels if data_type == "enum" else None,
        set_values=spec.labels if data_type == "set" else None,
        default_kind=spec.default_kind, default=spec.default, generated=spec.generated,
        auto_increment=spec.auto_increment)


def _place(columns: list, column: ColumnDef, position: Optional[tuple], where: str) -> None:
    if position is None:
        columns.append(column)
    elif position[0] == "first":
        columns.insert(0, column)
    else:
        after = position[1].lower()
        for i, c in enumerate(columns):
            if c.name.lower() == after:
                columns.insert(i + 1, column)
                return
        raise DdlSyntaxError(f"{where}: AFTER names column {position[1]!r}, which the table does not have")


def _find(columns: list, name: str) -> int:
    lowered = name.lower()
    return next((i for i, c in enumerate(columns) if c.name.lower() == lowered), -1)


def _existing(columns: list, name: str, if_exists: bool, what: str) -> Optional[int]:
    """The index of column ``name``; None when it is missing and the statement said IF EXISTS."""
    i = _find(columns, name)
    if i >= 0:
        return i
    if if_exists:
        return None
    raise DdlSyntaxError(f"{what} column {name!r}, which the table does not have")


class HistoryFollower:
    """Applies DDL to a history. ``captured(schema, table)`` says which tables are loaded;
    ``followed(schema)`` which databases the history follows (every table of a captured
    database, so that the shadow tables of online schema change tools are known)."""

    def __init__(self, history: SchemaHistory, captured: Captured,
                 followed: Callable[[str], bool]) -> None:
        self.history = history
        self.captured = captured
        self.followed = followed

    # -- entry point -------------------------------------------------------------------------
    def statement(self, sql: str) -> Optional[ddl_model.Statement]:
        return ddl.parse_ddl(sql)

    def names(self, stmt: ddl_model.Statement, default_schema: str) -> list[tuple]:
        if isinstance(stmt, (ddl_model.CreateDatabase, ddl_model.DropDatabase)):
            return []
        if isinstance(stmt, ddl_model.CreateTrigger):
            return [r.resolve(default_schema) for r in [stmt.table, *stmt.targets]]
        return [ref.resolve(default_schema) for ref in ddl.named_tables(stmt)]

    def concerns_us(self, stmt: ddl_model.Statement, default_schema: str) -> bool:
        if isinstance(stmt, (ddl_model.CreateDatabase, ddl_model.DropDatabase)):
            return self.followed(stmt.name)
        if isinstance(stmt, ddl_model.AlterDatabase):
            return self.followed(stmt.name or default_schema or "")
        return any(self.followed(s) for s, _ in self.names(stmt, default_schema))

    def apply(self, stmt: ddl_model.Statement, default_schema: str) -> list[DdlOp]:
        """Apply a parsed statement; return the operations on captured tables."""
        handler = getattr(self, "_" + type(stmt).__name__)
        return handler(stmt, default_schema or "")

    # -- databases ---------------------------------------------------------------------------
    def _CreateDatabase(self, stmt: ddl_model.CreateDatabase, default_schema: str) -> list[DdlOp]:
        h = self.history
        ops: list[DdlOp] = []
        if stmt.replace:
            ops = self._DropDatabase(ddl_model.DropDatabase(stmt.name), default_schema)
        elif stmt.if_not_exists and h.db_key(stmt.name) in h.databases:
            return []
        charset = stmt.charset or charset_of_collation(stmt.collation) or h.server_charset
        h.databases[h.db_key(stmt.name)] = (charset, stmt.collation)
        return ops

    def _AlterDatabase(self, stmt: ddl_model.AlterDatabase, default_schema: str) -> list[DdlOp]:
        h = self.history
        name = stmt.name or default_schema
        old = h.database_charset(name)
        charset = stmt.charset or charset_of_collation(stmt.collation) or old[0]
        h.databases[h.db_key(name)] = (charset, stmt.collation or (old[1] if charset == old[0] else None))
        return []

    def _DropDatabase(self, stmt: ddl_model.DropDatabase, default_schema: str) -> list[DdlOp]:
        h = self.history
        ops: list[DdlOp] = []
        key = h.db_key(stmt.name)
        for (schema, table), tdef in list(h.tables.items()):
            if schema == key:
                h.tables.pop((schema, table))
                if self.captured(tdef.schema, tdef.name):
                    ops.append(ResetOp((tdef.schema, tdef.name)))
        h.databases.pop(key, None)
        return ops

    def _CreateTrigger(self, stmt: ddl_model.CreateTrigger, default_schema: str) -> list[DdlOp]:
        """A trigger on ``t`` writing into another table of the history makes that table a
        copy kept in step with ``t`` (pt-online-schema-change's shadow)."""
        h = self.history
        source = stmt.table.resolve(default_schema)
        for ref in stmt.targets:
            target = ref.resolve(source[0])
            tdef = h.get(*target)
            if tdef is not None and target != source and h.get(*source) is not None:
                h.put(dataclasses.replace(tdef, like=source))
        return []

    # -- tables ------------------------------------------------------------------------------
    def _require(self, schema: str, table: str, what: str) -> TableDef:
        found = self.history.get(schema, table)
        if found is None:
            raise DdlSyntaxError(f"{what} names {schema}.{table}, which the schema history does not "
                                 f"know (created before the history was seeded, in a database that "
                                 f"is not followed, or dropped)")
        return found

    def _CreateTable(self, stmt: ddl_model.CreateTable, default_schema: str) -> list[DdlOp]:
        h = self.history
        schema, table = stmt.table.resolve(default_schema)
        if not self.followed(schema):
            return []
        exists = h.get(schema, table) is not None
        if exists and stmt.if_not_exists:
            return []
        if stmt.like is not None:
            src_schema, src_table = stmt.like.resolve(default_schema)
            source = self._require(src_schema, src_table, f"CREATE TABLE {schema}.{table} LIKE")
            tdef = dataclasses.replace(source, schema=schema, name=table, like=(src_schema, src_table))
        else:
            if stmt.select:
                raise DdlSyntaxError(
                    f"CREATE TABLE {schema}.{table} ... SELECT takes columns from a query; with "
                    "binlog_format=ROW the server logs the full column list instead: check the "
                    "server's binlog_format")
            table_charset = (stmt.charset or charset_of_collation(stmt.collation), stmt.collation)
            if table_charset[0] is None:
                db = h.database_charset(schema)
                table_charset = (db[0], stmt.collation or db[1])
            keys = [k.lower() for k in (stmt.primary_key or [])] + \
                [c.name.lower() for c in stmt.columns if c.primary_key]
            columns = tuple(column_def(c, table_charset=table_charset, flavor=h.flavor,
                                       primary_key=c.name.lower() in keys) for c in stmt.columns)
            pk = tuple(c.name for c in stmt.columns if c.primary_key) or tuple(stmt.primary_key or ())
            tdef = TableDef(schema, table, columns, pk, table_charset[0], table_charset[1])
        h.put(tdef)
        if exists and stmt.replace and self.captured(schema, table):
            return [ResetOp((schema, table))]
        return []

    def _DropTables(self, stmt: ddl_model.DropTables, default_schema: str) -> list[DdlOp]:
        ops: list[DdlOp] = []
        for ref in stmt.tables:
            schema, table = ref.resolve(default_schema)
            if self.history.remove(schema, table) is not None or self.captured(schema, table):
                if self.captured(schema, table):
                    ops.append(ResetOp((schema, table)))
        return ops

    def _TruncateTable(self, stmt: ddl_model.TruncateTable, default_schema: str) -> list[DdlOp]:
        schema, table = stmt.table.resolve(default_schema)
        return [ResetOp((schema, table))] if self.captured(schema, table) else []

    def _RenameTables(self, stmt: ddl_model.RenameTables, default_schema: str) -> list[DdlOp]:
        pairs = [(a.resolve(default_schema), b.resolve(default_schema)) for a, b in stmt.pairs]
        return self._renames(pairs, "RENAME TABLE")

    def _renames(self, pairs: list, what: str) -> list[DdlOp]:
        """Apply renames in order, then say what each captured name holds afterwards."""
        h = self.history
        before = {pair: h.get(*pair) for pair in {p for ab in pairs for p in ab}}
        origin: dict = {}          # current name -> the name whose content it holds
        for old, new in pairs:
            tdef = h.get(*old)
            if tdef is None:
                if self.followed(old[0]) or self.followed(new[0]):
                    raise DdlSyntaxError(f"{what} renames {old[0]}.{old[1]}, which the schema "
                                         "history does not know")
                continue
            h.remove(*old)
            h.put(dataclasses.replace(tdef, schema=new[0], name=new[1]))
            origin[new] = origin.pop(old, old)
        ops: list[DdlOp] = []
        moved_away = {src for src in origin.values()}
        for new, src in origin.items():
            if new == src:
                continue
            new_captured, src_captured = self.captured(*new), self.captured(*src)
            if src_captured and not new_captured and src not in origin:
                ops.append(ResetOp((src[0], src[1])))
            if not new_captured:
                continue
            if src_captured:
                ops.append(MoveOp(src, new))
                continue
            shadow = before.get(src)
            old_def = before.get(new)
            if shadow is not None and old_def is not None and shadow.like == new and new in moved_away:
                ops.append(self._layout_change(new, old_def, h.get(*new), swap_from=src))
            else:
                ops.append(RefuseOp(new, (
                    f"{what} renames {src[0]}.{src[1]} to the captured table {new[0]}.{new[1]}; "
                    f"{src[0]}.{src[1]} is not captured, so the rows it brings are not in the binlog")))
        for src in moved_away:
            if self.captured(*src) and src not in origin and not any(
                    getattr(o, "table", None) == src for o in ops) and not any(
                    isinstance(o, MoveOp) and o.source == src for o in ops):
                ops.append(ResetOp(src))
        return ops

    def _layout_change(self, name: tuple, old: TableDef, new: TableDef, *,
                       swap_from: Optional[tuple] = None, renamed: Optional[list] = None) -> AlterOp:
        renamed = renamed or []
        renamed_new = {b.lower() for _, b in renamed}
        renamed_old = {a.lower() for a, _ in renamed}
        old_names = {c.name.lower() for c in old.columns}
        added = tuple(AddedColumn(c.name, c.to_json(), c.value_for_existing_rows()) for c in new.columns
                      if c.name.lower() not in old_names and c.name.lower() not in renamed_new)
        new_names = {c.name.lower() for c in new.columns}
        dropped = tuple(c.name for c in old.columns
                        if c.name.lower() not in new_names and c.name.lower() not in renamed_old)
        return AlterOp((name[0], name[1]), added=added, dropped=dropped,
                       renamed=tuple((a, b) for a, b in renamed), primary_key=tuple(new.primary_key),
                       columns=tuple(c.to_json() for c in new.columns),
                       swap_from=None if swap_from is None else (swap_from[0], swap_from[1]))

    def _AlterTable(self, stmt: ddl_model.AlterTable, default_schema: str) -> list[DdlOp]:
        h = self.history
        schema, table = stmt.table.resolve(default_schema)
        if not self.followed(schema) and not any(
                isinstance(a, ddl_model.RenameTo) and self.followed(a.table.resolve(schema)[0]) for a in stmt.actions):
            return []
        where = f"ALTER TABLE {schema}.{table}"
        old = self._require(schema, table, "ALTER TABLE")
        columns = list(old.columns)
        keys = list(old.primary_key)
        charset = (old.charset, old.collation)
        renamed: list = []
        rename_to = None
        for action in stmt.actions:
            if isinstance(action, ddl_model.AddColumn):
                if _find(columns, action.column.name) >= 0:
                    if action.if_not_exists:
                        continue
                    raise DdlSyntaxError(f"{where} adds column {action.column.name!r}, which exists")
                _place(columns, column_def(action.column, table_charset=charset, flavor=h.flavor,
                                           primary_key=action.column.primary_key), action.position, where)
                if action.column.primary_key:
                    keys = [action.column.name]
            elif isinstance(action, ddl_model.DropColumn):
                i = _existing(columns, action.name, action.if_exists, f"{where} drops")
                if i is None:
                    continue
                columns.pop(i)
                keys = [k for k in keys if k.lower() != action.name.lower()]
            elif isinstance(action, ddl_model.ChangeColumn):
                i = _existing(columns, action.old_name, action.if_exists, f"{where} changes")
                if i is None:
                    continue
                in_key = any(k.lower() == action.old_name.lower() for k in keys)
                column = column_def(action.column, table_charset=charset, flavor=h.flavor,
                                    primary_key=in_key or action.column.primary_key)
                columns.pop(i)
                if action.position is None:
                    columns.insert(i, column)
                else:
                    _place(columns, column, action.position, where)
                if action.old_name.lower() != column.name.lower():
                    renamed.append([action.old_name, column.name])
                    keys = [column.name if k.lower() == action.old_name.lower() else k for k in keys]
            elif isinstance(action, ddl_model.RenameColumn):
                i = _existing(columns, action.old_name, False, f"{where} renames")
                columns[i] = dataclasses.replace(columns[i], name=action.new_name)
                renamed.append([action.old_name, action.new_name])
                keys = [action.new_name if k.lower() == action.old_name.lower() else k for k in keys]
            elif isinstance(action, ddl_model.SetDefault):
                i = _existing(columns, action.name, False, f"{where} sets the default of")
                columns[i] = dataclasses.replace(columns[i], default_kind=action.default_kind,
                                                 default=action.default)
            elif isinstance(action, ddl_model.SetPrimaryKey):
                keys = list(action.columns or [])
                if action.columns:
                    for k in action.columns:
                        i = _find(columns, k)
                        if i < 0:
                            raise DdlSyntaxError(f"{where} makes {k!r} a primary key column, which it does not have")
                        columns[i] = dataclasses.replace(columns[i], nullable=False)
            elif isinstance(action, ddl_model.ConvertCharset):
                new = action.charset or charset_of_collation(action.collation) or h.database_charset(schema)[0]
                charset = (new, action.collation)
                columns = [self._convert(c, new, action.collation) for c in columns]
            elif isinstance(action, ddl_model.TableCharset):
                charset = (action.charset or charset_of_collation(action.collation) or charset[0],
                           action.collation)
            elif isinstance(action, ddl_model.RenameTo):
                rename_to = action.table.resolve(schema)
        new_def = TableDef(schema, table, tuple(columns), tuple(keys), charset[0], charset[1], old.like)
        h.put(new_def)
        ops: list[DdlOp] = []
        if self.captured(schema, table) and (
                new_def.columns != old.columns or new_def.primary_key != old.primary_key):
            ops.append(self._layout_change((schema, table), old, new_def, renamed=renamed))
        if rename_to is not None and rename_to != (schema, table):
            ops += self._renames([((schema, table), rename_to)], "ALTER TABLE ... RENAME")
        return ops

    @staticmethod
    def _convert(c: ColumnDef, charset: str, collation: Optional[str]) -> ColumnDef:
        if c.charset is None or c.data_type not in _TEXT:
            return c
        if c.data_type in ("tinytext", "text", "mediumtext") and charset != c.charset:
            pass  # the server may widen TEXT types; the binlog logs them as BLOB alike
        return dataclasses.replace(c, charset=charset, collation=collation)


__all__ = ["HistoryFollower", "charset_of_collation", "column_def"]


def statement_ops(stmt: ddl_model.Statement, default_schema: str, captured: Captured) -> list[DdlOp]:
    """The operations of a statement read without a history (a dump given no schema history):
    what follows from the names alone — resets, moves between captured tables, refusals.
    Column changes are then seen in the staged files only."""
    if isinstance(stmt, ddl_model.DropTables):
        refs = [r.resolve(default_schema) for r in stmt.tables]
        return [ResetOp((r[0], r[1])) for r in refs if captured(*r)]
    if isinstance(stmt, ddl_model.TruncateTable) or (isinstance(stmt, ddl_model.CreateTable) and stmt.replace):
        ref = stmt.table.resolve(default_schema)
        return [ResetOp((ref[0], ref[1]))] if captured(*ref) else []
    pairs = []
    if isinstance(stmt, ddl_model.AlterTable):
        table = stmt.table.resolve(default_schema)
        added = [a.column for a in stmt.actions if isinstance(a, ddl_model.AddColumn)]
        dropped = [a.name for a in stmt.actions if isinstance(a, ddl_model.DropColumn)]
        if captured(*table) and (added or dropped):
            defs = [column_def(c, table_charset=(None, None), flavor=Flavor.MYSQL) for c in added]
            return [AlterOp((table[0], table[1]), dropped=tuple(dropped),
                            added=tuple(AddedColumn(d.name, d.to_json(), d.value_for_existing_rows())
                                        for d in defs))] + \
                statement_ops(ddl_model.AlterTable(stmt.table, [a for a in stmt.actions
                                                          if isinstance(a, ddl_model.RenameTo)]),
                              default_schema, captured)
    if isinstance(stmt, ddl_model.RenameTables):
        pairs = [(a.resolve(default_schema), b.resolve(default_schema)) for a, b in stmt.pairs]
    elif isinstance(stmt, ddl_model.AlterTable):
        old = stmt.table.resolve(default_schema)
        pairs = [(old, a.table.resolve(old[0])) for a in stmt.actions if isinstance(a, ddl_model.RenameTo)]
    ops: list[DdlOp] = []
    origin: dict = {}
    for old, new in pairs:
        origin[new] = origin.pop(old, old)
    for new, src in origin.items():
        if new == src:
            continue
        if captured(*src) and not captured(*new):
            ops.append(ResetOp(src))
        elif captured(*new) and captured(*src):
            ops.append(MoveOp(src, new))
        elif captured(*new):
            ops.append(RefuseOp(new, (
                f"the statement renames {src[0]}.{src[1]} to the captured table {new[0]}.{new[1]}; "
                f"{src[0]}.{src[1]} is not captured, so the rows it brings are not in the binlog")))
    return ops
