"""Seed a schema history from ``information_schema`` (any DB-API connection to the server)."""
from __future__ import annotations

from typing import Callable, Optional

from ..codec.gtid import Flavor
from ..replica.information_schema import base_table_columns, primary_key_columns, schemata
from ..common.tables import SYSTEM_SCHEMAS
from .model import ColumnDef, SchemaHistory, TableDef


def _labels(column_type: str) -> tuple:
    """``enum('a','it''s')`` -> ``('a', "it's")`` (information_schema doubles quotes). Read
    with the DDL tokenizer, the history's own reader of quoted strings, as it always was (not
    with :func:`~airflow_provider_binlog.replica.information_schema.enum_labels`)."""
    from .ddl_tokens import tokenize
    inner = column_type[column_type.index("("):]
    return tuple(t.text for t in tokenize("SELECT " + inner) if t.kind == "string")


def _default(raw, extra: str, nullable: bool, flavor: str) -> tuple[str, Optional[str]]:
    """(kind, text) of ``COLUMN_DEFAULT``, which MariaDB and MySQL write differently: MariaDB
    quotes string literals and writes ``NULL`` for DEFAULT NULL and expressions as SQL; MySQL
    writes literals bare and flags expressions with ``DEFAULT_GENERATED`` in ``EXTRA``."""
    if flavor == Flavor.MARIADB:
        if raw is None:
            return "none", None
        if raw == "NULL":
            return "null", None
        if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2:
            return "literal", raw[1:-1].replace("''", "'").replace("\\\\", "\\")
        if raw.startswith("b'") and raw.endswith("'"):
            return "literal", str(int(raw[2:-1] or "0", 2))
        try:
            float(raw)
            return "literal", raw
        except ValueError:
            return "expression", raw
    if raw is None:
        return ("null", None) if nullable else ("none", None)
    if "DEFAULT_GENERATED" in (extra or "").upper():
        return "expression", raw
    return "literal", raw


def read_tables(conn, schemas: list[str], flavor: str) -> list[TableDef]:
    """Every base table of ``schemas`` as information_schema describes it now."""
    if not schemas:
        return []
    rows = base_table_columns(conn, schemas)
    keys = primary_key_columns(conn, schemas)
    tables: dict = {}
    collations: dict = {}
    for row in rows:
        schema, table, name, charset, collation = row.schema, row.table, row.name, row.charset, row.collation
        nullable, max_len, precision, scale = row.is_nullable, row.max_length, row.numeric_precision, row.numeric_scale
        fsp, default, extra, table_collation = row.datetime_precision, row.default, row.extra, row.table_collation
        data_type, column_type = row.data_type.lower(), row.column_type.lower()
        is_null = nullable == "YES"
        kind, text = _default(default, extra or "", is_null, flavor)
        generated = any(w in (extra or "").upper() for w in ("VIRTUAL", "STORED", "PERSISTENT"))
        length = None
        if data_type in ("char", "varchar", "binary", "varbinary") and max_len is not None:
            length = int(max_len)
        elif data_type == "bit" and precision is not None:
            length = int(precision)
        tables.setdefault((schema, table), []).append(ColumnDef(
            name=name, data_type=data_type, unsigned="unsigned" in column_type, nullable=is_null,
            charset=charset.lower() if charset else None,
            collation=collation.lower() if collation else None, length=length,
            precision=int(precision) if data_type == "decimal" and precision is not None else None,
            scale=int(scale) if data_type == "decimal" and scale is not None else None,
            fsp=int(fsp) if fsp is not None and data_type in ("time", "datetime", "timestamp") else None,
            enum_values=_labels(column_type) if data_type == "enum" else None,
            set_values=_labels(column_type) if data_type == "set" else None,
            default_kind=kind, default=text, generated=generated,
            auto_increment="auto_increment" in (extra or "").lower()))
        collations[(schema, table)] = table_collation
    from .apply import charset_of_collation
    return [TableDef(schema, table, tuple(cols), tuple(keys.get((schema, table), ())),
                     charset_of_collation((collations.get((schema, table)) or "").lower()),
                     (collations.get((schema, table)) or "").lower() or None)
            for (schema, table), cols in tables.items()]


def seed_history(conn, followed: Callable[[str], bool], flavor: str,
                 exact_from: Optional[dict] = None) -> SchemaHistory:
    """A history of every table of the databases ``followed`` accepts, read now."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@character_set_server, @@lower_case_table_names")
        server_charset, lctn = cur.fetchone()
    databases = {name: (cs.lower() if cs else None, coll.lower() if coll else None)
                 for name, cs, coll in schemata(conn)
                 if name.lower() not in SYSTEM_SCHEMAS and followed(name)}
    history = SchemaHistory(flavor=flavor, server_charset=(server_charset or "utf8mb4").lower(),
                            lower_case_table_names=int(lctn or 0), exact_from=exact_from)
    for name, charset in databases.items():
        history.databases[history.db_key(name)] = charset
    for tdef in read_tables(conn, sorted(databases), flavor):
        history.put(tdef)
    return history


__all__ = ["read_tables", "seed_history"]
