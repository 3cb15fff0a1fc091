"""MySQL/MariaDB DDL statements, parsed into what they do to table schemas.

The text is split into tokens by sqlglot's MySQL tokenizer (quoting, escapes, comments and
literals as the server reads them); a small recursive-descent parser over those tokens reads
the statements that change table schemas: CREATE/ALTER/DROP/TRUNCATE/RENAME TABLE and
CREATE/ALTER/DROP DATABASE. :func:`parse_ddl` returns None for every other statement (DML,
CREATE TRIGGER/VIEW/INDEX, GRANT, ...), and raises :class:`~.errors.DdlSyntaxError` for a
schema statement it cannot read — never a guess.
"""
from __future__ import annotations

from typing import Optional

from .ddl_columns import column_spec, default_value, read_charset
from .ddl_model import (AddColumn, AlterDatabase, AlterTable, ChangeColumn, ConvertCharset,
                        CreateDatabase, CreateTable, CreateTrigger, DropColumn, DropDatabase,
                        DropTables, RenameColumn, RenameTables, RenameTo, SetDefault,
                        SetPrimaryKey, Statement, TableCharset, TableRef, TruncateTable)
from .ddl_tokens import Tok, TokenParser, tokenize, tokenize_head
from .errors import DdlSyntaxError

_CONSTRAINT_WORDS = {"PRIMARY", "KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "CONSTRAINT",
                     "FOREIGN", "CHECK", "PERIOD"}
#: ALTER TABLE actions that change no column, key or character set.
_NEUTRAL_ACTIONS = {
    "ENGINE", "ALGORITHM", "LOCK", "FORCE", "AUTO_INCREMENT", "COMMENT", "ROW_FORMAT",
    "KEY_BLOCK_SIZE", "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "ORDER",
    "ENABLE", "DISABLE", "DISCARD", "IMPORT", "PARTITION", "REMOVE", "COALESCE", "REORGANIZE",
    "EXCHANGE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR", "TRUNCATE", "WITH",
    "WITHOUT", "PACK_KEYS", "CHECKSUM", "TABLE_CHECKSUM", "DELAY_KEY_WRITE", "MAX_ROWS", "MIN_ROWS",
    "AVG_ROW_LENGTH", "DATA", "INDEX", "INSERT_METHOD", "TABLESPACE", "UNION", "ENCRYPTION",
    "ENCRYPTED", "ENCRYPTION_KEY_ID", "PAGE_CHECKSUM", "PAGE_COMPRESSED",
    "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL", "SECONDARY_ENGINE", "SECONDARY_LOAD",
    "SECONDARY_UNLOAD", "COMPRESSION", "AUTOEXTEND_SIZE", "IETF_QUOTES", "SEQUENCE",
    "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "UPGRADE", "STORAGE", "CONNECTION",
    "PASSWORD", "START", "NOWAIT", "WAIT", "VALIDATION",
}


def _key_columns(p: TokenParser) -> list[str]:
    """``(a, b(10) DESC)`` -> ``["a", "b"]``."""
    group = p.skip_balanced()[1:-1]
    sub = TokenParser(group)
    names = []
    for part in sub.split_top_level():
        if not part[0].is_name:
            raise DdlSyntaxError("an expression in a primary key is not supported")
        names.append(part[0].text)
    return names


def _constraint(tokens: list[Tok]) -> Optional[list[str]]:
    """The primary key columns of a table constraint; None for other constraints."""
    p = TokenParser(tokens)
    if p.accept("CONSTRAINT"):
        if p.word() != "PRIMARY":
            p.next()  # the constraint's name
    if p.accept("PRIMARY", "KEY"):
        while p.peek() is not None and p.peek().kind != "(":
            p.next()  # USING BTREE, an index name
        return _key_columns(p)
    return None


_POSITION_WORDS = frozenset({"FIRST", "AFTER"})


def _position(p: TokenParser) -> Optional[tuple]:
    if p.accept("FIRST"):
        return ("first",)
    if p.accept("AFTER"):
        return ("after", p.name())
    return None


def _table_options(p: TokenParser, out) -> None:
    """Table options after a CREATE's definitions; only the character set matters here."""
    while not p.at_end():
        if p.accept("DEFAULT"):
            continue
        if p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
            out.charset = read_charset(p)
        elif p.accept("COLLATE"):
            out.collation = read_charset(p)
        elif p.word() in ("AS", "SELECT", "IGNORE", "REPLACE", "WITH", "TABLE", "VALUES") or \
                (p.peek().kind == "(" and p.word(1) == "SELECT"):
            out.select = True
            return
        elif p.word() == "PARTITION":
            return
        else:
            p.next()
            if p.accept_punct("="):
                pass
            if p.peek() is not None and p.peek().kind == "(":
                p.skip_balanced()  # UNION=(a, b)
        p.accept_punct(",")


def _parse_create_table(p: TokenParser, replace: bool) -> CreateTable:
    if_not_exists = p.accept("IF", "NOT", "EXISTS")
    stmt = CreateTable(table=p.table_ref(), replace=replace, if_not_exists=if_not_exists)
    if p.accept("LIKE"):
        stmt.like = p.table_ref()
        return stmt
    if p.peek() is not None and p.peek().kind == "(" and p.word(1) == "LIKE":
        p.next()
        p.next()
        stmt.like = p.table_ref()
        p.expect_punct(")")
        return stmt
    if p.peek() is not None and p.peek().kind == "(" and p.word(1) != "SELECT":
        p.next()
        for element in p.split_top_level():
            head = element[0].word
            if element[0].kind == "word" and head == "LIKE":
                stmt.like = TokenParser(element[1:]).table_ref()
            elif element[0].kind == "word" and head in _CONSTRAINT_WORDS:
                keys = _constraint(element)
                if keys is not None:
                    stmt.primary_key = keys
            else:
                sub = TokenParser(element)
                stmt.columns.append(column_spec(sub))
        p.expect_punct(")")
    _table_options(p, stmt)
    return stmt


def _alter_action(tokens: list[Tok]) -> Optional[object]:
    p = TokenParser(tokens)
    first = p.peek()
    if first.kind != "word":
        raise DdlSyntaxError(f"cannot read the ALTER TABLE action at {first.text!r}")
    w = first.word
    if p.accept("ADD"):
        if p.word() in _CONSTRAINT_WORDS:
            keys = _constraint(tokens[1:])
            return SetPrimaryKey(keys) if keys is not None else None
        if p.word() in ("PARTITION", "SYSTEM"):
            if p.word() == "SYSTEM":
                raise DdlSyntaxError("ADD SYSTEM VERSIONING adds hidden columns that are not followed")
            return None
        p.accept("COLUMN")
        if_not_exists = p.accept("IF", "NOT", "EXISTS")
        if p.peek() is not None and p.peek().kind == "(":
            group = p.skip_balanced()[1:-1]
            return [AddColumn(column_spec(TokenParser(part)), None, if_not_exists)
                    for part in TokenParser(group).split_top_level()]
        spec = column_spec(p, _POSITION_WORDS)
        return AddColumn(spec, _position(p), if_not_exists)
    if p.accept("DROP"):
        if p.accept("PRIMARY", "KEY"):
            return SetPrimaryKey(None)
        if p.word() in ("INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK", "PARTITION", "PERIOD"):
            return None
        if p.word() == "SYSTEM":
            raise DdlSyntaxError("DROP SYSTEM VERSIONING removes hidden columns that are not followed")
        p.accept("COLUMN")
        if_exists = p.accept("IF", "EXISTS")
        return DropColumn(p.name(), if_exists)
    if w in ("MODIFY", "CHANGE"):
        p.next()
        p.accept("COLUMN")
        if_exists = p.accept("IF", "EXISTS")
        old = p.name() if w == "CHANGE" else None
        spec = column_spec(p, _POSITION_WORDS)
        return ChangeColumn(old if old is not None else spec.name, spec, _position(p), if_exists)
    if p.accept("RENAME"):
        if p.accept("COLUMN"):
            old = p.name()
            p.expect("TO")
            return RenameColumn(old, p.name())
        if p.word() in ("INDEX", "KEY"):
            return None
        p.accept("TO") or p.accept("AS")
        return RenameTo(p.table_ref())
    if p.accept("ALTER"):
        if p.word() in ("INDEX", "CHECK", "CONSTRAINT"):
            return None
        p.accept("COLUMN")
        p.accept("IF", "EXISTS")
        name = p.name()
        if p.accept("SET", "DEFAULT"):
            kind, text = default_value(p)
            return SetDefault(name, kind, text)
        if p.accept("DROP", "DEFAULT"):
            return SetDefault(name, "none")
        if p.accept("SET", "VISIBLE") or p.accept("SET", "INVISIBLE"):
            return None
        raise DdlSyntaxError(f"cannot read ALTER COLUMN {name!r} {p._here()}")
    if p.accept("CONVERT", "TO"):
        p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.expect("CHARACTER", "SET")
        charset = read_charset(p)
        collation = read_charset(p) if p.accept("COLLATE") else None
        return ConvertCharset(None if charset == "default" else charset, collation)
    p.accept("DEFAULT")
    if p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
        charset = read_charset(p)
        collation = read_charset(p) if p.accept("COLLATE") else None
        return TableCharset(charset, collation)
    if p.accept("COLLATE"):
        return TableCharset(None, read_charset(p))
    if p.word() in _NEUTRAL_ACTIONS:
        return None
    raise DdlSyntaxError(f"unknown ALTER TABLE action {' '.join(t.text for t in tokens[:4])!r}")


def _parse_alter_table(p: TokenParser) -> AlterTable:
    p.accept("IF", "EXISTS")
    stmt = AlterTable(p.table_ref())
    if p.accept("WAIT"):
        p.next()
    p.accept("NOWAIT")
    for part in p.split_top_level(frozenset({"PARTITION", "REMOVE"})):
        action = _alter_action(part)
        if isinstance(action, list):
            stmt.actions.extend(action)
        elif action is not None:
            stmt.actions.append(action)
    return stmt


def _parse_rename(p: TokenParser) -> RenameTables:
    p.accept("IF", "EXISTS")
    pairs = []
    for part in p.split_top_level():
        sub = TokenParser(part)
        old = sub.table_ref()
        if sub.accept("WAIT"):
            sub.next()
        sub.accept("NOWAIT")
        sub.expect("TO")
        pairs.append((old, sub.table_ref()))
        if not sub.at_end():
            raise DdlSyntaxError(f"cannot read the RENAME pair {sub._here()}")
    return RenameTables(pairs)


def _database_options(p: TokenParser, stmt) -> None:
    while not p.at_end():
        if p.accept("DEFAULT"):
            continue
        if p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
            stmt.charset = read_charset(p)
        elif p.accept("COLLATE"):
            stmt.collation = read_charset(p)
        else:
            p.next()
            p.accept_punct("=")
            if not p.at_end():
                p.next()


def _parse_create_trigger(p: TokenParser) -> Optional[CreateTrigger]:
    """``CREATE [DEFINER=...] TRIGGER name {BEFORE|AFTER} event ON table FOR EACH ROW body``:
    the table and the tables the body writes (after INTO, UPDATE, or DELETE ... FROM)."""
    while not p.at_end() and p.word() not in ("TRIGGER", "VIEW", "PROCEDURE", "FUNCTION",
                                              "EVENT", "INDEX", "TABLE", "USER", "ROLE"):
        p.next()
    if not p.accept("TRIGGER"):
        return None
    while not p.at_end() and p.word() != "ON":
        p.next()
    if not p.accept("ON"):
        return None
    table = p.table_ref()
    targets = []
    while not p.at_end():
        w = p.next().word
        if w in ("INTO", "UPDATE", "FROM") and p.peek() is not None and p.peek().is_name:
            if w == "UPDATE" and p.word() == "OF":
                continue
            targets.append(p.table_ref())
    return CreateTrigger(table, targets)


def parse_ddl(sql: str) -> Optional[Statement]:
    """The schema statement ``sql`` is, or None when it changes no table schema."""
    tokens = tokenize(sql)
    p = TokenParser(tokens)
    w = p.word()
    if w == "CREATE":
        p.next()
        replace = p.accept("OR", "REPLACE")
        if p.accept("TEMPORARY"):
            return None  # temporary tables are neither captured nor logged as rows
        if p.accept("TABLE"):
            return _parse_create_table(p, replace)
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            if_not_exists = p.accept("IF", "NOT", "EXISTS")
            stmt = CreateDatabase(p.name(), replace=replace, if_not_exists=if_not_exists)
            _database_options(p, stmt)
            return stmt
        return _parse_create_trigger(p)
    if w == "ALTER":
        p.next()
        p.accept("ONLINE")
        p.accept("IGNORE")
        if p.accept("TABLE"):
            return _parse_alter_table(p)
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            name = None
            if p.peek() is not None and p.word() not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE",
                                                         "CHAR", "UPGRADE", "READ", "ENCRYPTION"):
                name = p.name()
            stmt = AlterDatabase(name)
            _database_options(p, stmt)
            return stmt
        return None
    if w == "RENAME":
        p.next()
        if p.accept("TABLE") or p.accept("TABLES"):
            return _parse_rename(p)
        return None
    if w == "DROP":
        p.next()
        if p.accept("TEMPORARY"):
            return None
        if p.accept("TABLE") or p.accept("TABLES"):
            if_exists = p.accept("IF", "EXISTS")
            tables = []
            for part in p.split_top_level():
                sub = TokenParser(part)
                tables.append(sub.table_ref())
            return DropTables(tables, if_exists)
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            p.accept("IF", "EXISTS")
            return DropDatabase(p.name())
        return None
    if w == "TRUNCATE":
        p.next()
        p.accept("TABLE")
        return TruncateTable(p.table_ref())
    return None


def named_tables(stmt: Statement) -> list[TableRef]:
    """Every table a statement names."""
    if isinstance(stmt, CreateTable):
        return [stmt.table] + ([stmt.like] if stmt.like else [])
    if isinstance(stmt, AlterTable):
        return [stmt.table] + [a.table for a in stmt.actions if isinstance(a, RenameTo)]
    if isinstance(stmt, RenameTables):
        return [ref for pair in stmt.pairs for ref in pair]
    if isinstance(stmt, DropTables):
        return list(stmt.tables)
    if isinstance(stmt, TruncateTable):
        return [stmt.table]
    return []


def statement_kind(sql: str) -> Optional[str]:
    """The first keyword of a statement that may change schemas (CREATE, ALTER, DROP, RENAME,
    TRUNCATE), else None: a cheap test before the full parse."""
    for tok in tokenize_head(sql):
        return tok if tok in ("CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE") else None
    return None


__all__ = ["named_tables", "parse_ddl", "statement_kind"]
