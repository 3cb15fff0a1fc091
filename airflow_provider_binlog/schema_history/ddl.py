"""MySQL/MariaDB DDL statements, parsed into what they do to table schemas.

The text is split into tokens by sqlglot's MySQL tokenizer (quoting, escapes, comments and
literals as the server reads them); a small recursive-descent parser over those tokens reads
the statements that change table schemas: CREATE/ALTER/DROP/TRUNCATE/RENAME TABLE and
CREATE/ALTER/DROP DATABASE. :func:`parse_ddl` returns None for every other statement (DML,
CREATE TRIGGER/VIEW/INDEX, GRANT, ...), and raises :class:`~.errors.DdlSyntaxError` for a
schema statement it cannot read — never a guess.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from .errors import DdlSyntaxError

_TOKENIZER = MySQL().tokenizer

_PUNCT = {TokenType.L_PAREN: "(", TokenType.R_PAREN: ")", TokenType.COMMA: ",",
          TokenType.DOT: ".", TokenType.EQ: "=", TokenType.SEMICOLON: ";", TokenType.DASH: "-",
          TokenType.PLUS: "+"}


@dataclass(frozen=True)
class Tok:
    kind: str    # "word" (unquoted), "ident" (`quoted`), "string", "number", "bits", "hex", or a punctuation text
    text: str

    @property
    def word(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def is_name(self) -> bool:
        return self.kind in ("word", "ident")


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

# -- text -> tokens ------------------------------------------------------------------------


def unwrap_executable_comments(sql: str) -> str:
    """``/*!50100 KEY_BLOCK_SIZE=8 */`` and MariaDB's ``/*M!100100 ... */`` hold SQL the server
    runs: keep their content, drop the markers (outside quoted text only)."""
    out = []
    i, n = 0, len(sql)
    quote = None
    while i < n:
        c = sql[i]
        if quote:
            out.append(c)
            if c == "\\" and quote != "`" and i + 1 < n:
                out.append(sql[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"`":
            quote = c
            out.append(c)
            i += 1
            continue
        if sql.startswith("/*!", i) or sql.startswith("/*M!", i):
            j = i + (3 if sql[i + 2] == "!" else 4)
            while j < n and sql[j].isdigit():
                j += 1
            end = sql.find("*/", j)
            if end < 0:
                end = n
            out.append(" " + sql[j:end] + " ")
            i = end + 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def tokenize(sql: str) -> list[Tok]:
    text = unwrap_executable_comments(sql)
    try:
        raw = _TOKENIZER().tokenize(text)
    except TokenError as exc:
        raise DdlSyntaxError(f"cannot tokenize the statement: {exc}") from None
    out = []
    for t in raw:
        tt = t.token_type
        if tt in _PUNCT:
            out.append(Tok(_PUNCT[tt], _PUNCT[tt]))
        elif tt == TokenType.IDENTIFIER:
            out.append(Tok("ident", t.text))
        elif tt == TokenType.STRING and text[t.start:t.start + 1] not in ("'", '"'):
            # the tokenizer hands the rest of a command (REPLACE ..., RENAME ...) over as one
            # piece: split it too
            out.extend(tokenize(t.text))
        elif tt in (TokenType.STRING, TokenType.NATIONAL_STRING):
            out.append(Tok("string", t.text))
        elif tt == TokenType.NUMBER:
            out.append(Tok("number", t.text))
        elif tt == TokenType.BIT_STRING:
            out.append(Tok("bits", t.text))
        elif tt == TokenType.HEX_STRING:
            out.append(Tok("hex", t.text))
        elif t.text and (t.text[0].isalnum() or t.text[0] in "_$@"):
            # the tokenizer joins some keyword pairs ("PRIMARY KEY", "DOUBLE PRECISION")
            out.extend(Tok("word", part) for part in t.text.split())
        else:
            out.append(Tok(t.text, t.text))
    if out and out[-1].kind == ";":
        out.pop()
    return out


# -- the parser ------------------------------------------------------------------------------

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
_TYPE_ALIASES = {
    "BOOL": ("tinyint", 1), "BOOLEAN": ("tinyint", 1), "INTEGER": ("int", None),
    "INT1": ("tinyint", None), "INT2": ("smallint", None), "INT3": ("mediumint", None),
    "INT4": ("int", None), "INT8": ("bigint", None), "MIDDLEINT": ("mediumint", None),
    "DEC": ("decimal", None), "NUMERIC": ("decimal", None), "FIXED": ("decimal", None),
    "REAL": ("double", None), "FLOAT4": ("float", None), "FLOAT8": ("double", None),
    "CHARACTER": ("char", None), "NCHAR": ("char", None), "NVARCHAR": ("varchar", None),
    "VARCHARACTER": ("varchar", None), "VARCHAR2": ("varchar", None),
    "GEOMCOLLECTION": ("geometrycollection", None),
}
_PLAIN_TYPES = {
    "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE", "BIT",
    "DATE", "TIME", "DATETIME", "TIMESTAMP", "YEAR", "CHAR", "VARCHAR", "BINARY", "VARBINARY",
    "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB",
    "ENUM", "SET", "JSON", "GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT",
    "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION", "UUID", "INET4", "INET6",
    "VECTOR", "SERIAL",
}
_NATIONAL = "utf8mb3"


class _Parser:
    def __init__(self, tokens: list[Tok]) -> None:
        self.t = tokens
        self.i = 0

    # -- token access ------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Optional[Tok]:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def at_end(self) -> bool:
        return self.i >= len(self.t)

    def word(self, k: int = 0) -> str:
        tok = self.peek(k)
        return tok.word if tok else ""

    def next(self) -> Tok:
        tok = self.peek()
        if tok is None:
            raise DdlSyntaxError("the statement ends too early")
        self.i += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consume the words in sequence when they all follow."""
        for k, w in enumerate(words):
            if self.word(k) != w:
                return False
        self.i += len(words)
        return True

    def accept_punct(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == text:
            self.i += 1
            return True
        return False

    def expect_punct(self, text: str) -> None:
        if not self.accept_punct(text):
            raise DdlSyntaxError(f"expected {text!r} {self._here()}")

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise DdlSyntaxError(f"expected {' '.join(words)} {self._here()}")

    def _here(self) -> str:
        tok = self.peek()
        return f"at {tok.text!r}" if tok else "at the end of the statement"

    def name(self) -> str:
        tok = self.next()
        if tok.kind in ("word", "ident", "number"):
            return tok.text
        if tok.kind == "string":  # 'name' is accepted where an identifier is expected
            return tok.text
        raise DdlSyntaxError(f"expected a name at {tok.text!r}")

    def table_ref(self) -> TableRef:
        first = self.name()
        if self.accept_punct("."):
            return TableRef(first, self.name())
        return TableRef(None, first)

    def skip_balanced(self) -> list[Tok]:
        """Consume a parenthesised group (the current token is its "(")."""
        start = self.i
        self.expect_punct("(")
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == "(":
                depth += 1
            elif tok.kind == ")":
                depth -= 1
        return self.t[start:self.i]

    def split_top_level(self, stop_words: frozenset = frozenset()) -> list[list[Tok]]:
        """The remaining tokens split at top-level commas (stop at a closing parenthesis of
        depth 0, left unconsumed, or at one of ``stop_words`` at depth 0)."""
        parts: list[list[Tok]] = [[]]
        depth = 0
        while not self.at_end():
            tok = self.peek()
            if depth == 0 and tok.kind == ")":
                break
            if depth == 0 and tok.word in stop_words and parts[-1]:
                break
            self.i += 1
            if tok.kind == "(":
                depth += 1
            elif tok.kind == ")":
                depth -= 1
            if depth == 0 and tok.kind == ",":
                parts.append([])
                continue
            parts[-1].append(tok)
        return [p for p in parts if p]


def _sub(tokens: list[Tok]) -> _Parser:
    return _Parser(tokens)


def _int(tok: Tok) -> int:
    if tok.kind != "number" or not tok.text.isdigit():
        raise DdlSyntaxError(f"expected a whole number at {tok.text!r}")
    return int(tok.text)


def _charset_name(name: str) -> str:
    lowered = name.lower()
    return "utf8mb3" if lowered == "utf8" else lowered


def _read_charset(p: _Parser) -> str:
    p.accept_punct("=")
    return _charset_name(p.name())


def _column_type(p: _Parser, spec: ColumnSpec) -> None:
    tok = p.next()
    if tok.kind != "word":
        raise DdlSyntaxError(f"expected a column type for {spec.name!r} at {tok.text!r}")
    w = tok.word
    national = False
    if w == "NATIONAL":
        national = True
        w = p.next().word
        if w == "CHARACTER" and p.accept("VARYING"):
            w = "VARCHAR"
    elif w in ("NCHAR", "NVARCHAR"):
        national = True
    if w == "DOUBLE":
        p.accept("PRECISION")
    elif w == "CHARACTER" and p.accept("VARYING"):
        w = "VARCHAR"
    elif w == "CHAR" and p.accept("VARYING"):
        w = "VARCHAR"
    elif w == "LONG":
        if p.accept("VARBINARY"):
            w = "MEDIUMBLOB"
        else:
            p.accept("VARCHAR") or p.accept("CHARACTER", "VARYING")
            w = "MEDIUMTEXT"
    data_type, implied_length = _TYPE_ALIASES.get(w, (w.lower() if w in _PLAIN_TYPES else None, None))
    if data_type is None:
        raise DdlSyntaxError(f"unknown column type {tok.text!r} of column {spec.name!r}")
    if national:
        spec.charset = _NATIONAL
    spec.length = implied_length
    args: list[Tok] = []
    if p.peek() is not None and p.peek().kind == "(":
        group = p.skip_balanced()[1:-1]
        args = [t for t in group if t.kind != ","]
    if data_type in ("enum", "set"):
        if not args or any(t.kind != "string" for t in args):
            raise DdlSyntaxError(f"{data_type.upper()} column {spec.name!r} needs quoted labels")
        spec.labels = tuple(t.text for t in args)
    elif data_type == "decimal":
        spec.precision = _int(args[0]) if args else 10
        spec.scale = _int(args[1]) if len(args) > 1 else 0
    elif data_type == "float" and len(args) == 1 and _int(args[0]) > 24:
        data_type = "double"
    elif data_type in ("time", "datetime", "timestamp"):
        spec.fsp = _int(args[0]) if args else 0
    elif data_type in ("char", "binary", "bit"):
        spec.length = _int(args[0]) if args else 1
    elif data_type in ("varchar", "varbinary"):
        if not args:
            raise DdlSyntaxError(f"{data_type.upper()} column {spec.name!r} needs a length")
        spec.length = _int(args[0])
    elif data_type in ("text", "blob") and args:
        n = _int(args[0])
        size = "tiny" if n < 256 else "" if n < 65536 else "medium" if n < 1 << 24 else "long"
        data_type = size + data_type
    if data_type == "serial":
        data_type, spec.unsigned, spec.nullable, spec.auto_increment = "bigint", True, False, True
    spec.data_type = data_type
    while True:  # type modifiers
        if p.accept("UNSIGNED"):
            spec.unsigned = True
        elif p.accept("SIGNED") or p.accept("ZEROFILL") or p.accept("BYTE"):
            pass
        elif p.accept("BINARY"):
            spec.binary = True
        elif p.accept("ASCII"):
            spec.charset = "latin1"
        elif p.accept("UNICODE"):
            spec.charset = "ucs2"
        elif p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
            spec.charset = _read_charset(p)
        elif p.accept("COLLATE"):
            spec.collation = _read_charset(p)
        else:
            break


def _default_value(p: _Parser) -> tuple[str, Optional[str]]:
    """(kind, text) of a DEFAULT clause's value."""
    tok = p.next()
    if tok.kind == "string":
        return "literal", tok.text
    if tok.kind == "number":
        return "literal", tok.text
    if tok.kind in ("-", "+"):
        num = p.next()
        if num.kind != "number":
            raise DdlSyntaxError(f"expected a number after {tok.text!r} in a DEFAULT")
        return "literal", ("-" if tok.kind == "-" else "") + num.text
    if tok.kind == "bits":
        return "literal", str(int(tok.text or "0", 2))
    if tok.kind == "hex":
        return "expression", "x'" + tok.text + "'"
    if tok.kind == "word":
        w = tok.word
        if w == "NULL":
            return "null", None
        if w in ("TRUE", "FALSE"):
            return "literal", "1" if w == "TRUE" else "0"
        if w.startswith("_") and p.peek() is not None and p.peek().kind == "string":
            return "literal", p.next().text       # a character set introducer: _utf8mb4'x'
        if w in ("DATE", "TIME", "TIMESTAMP") and p.peek() is not None and p.peek().kind == "string":
            return "literal", p.next().text       # DATE '2024-01-01'
        text = tok.text
        if p.peek() is not None and p.peek().kind == "(":
            text += "".join(t.text for t in p.skip_balanced())
        return "expression", text
    if tok.kind == "(":
        p.i -= 1
        group = p.skip_balanced()
        inner = group[1:-1]
        if len(inner) == 1 and inner[0].kind in ("string", "number"):
            return "literal", inner[0].text
        if len(inner) == 2 and inner[0].kind == "-" and inner[1].kind == "number":
            return "literal", "-" + inner[1].text
        return "expression", " ".join(t.text for t in group)
    raise DdlSyntaxError(f"cannot read the DEFAULT value at {tok.text!r}")


def _column_attributes(p: _Parser, spec: ColumnSpec, stop: frozenset = frozenset()) -> None:
    while not p.at_end() and p.word() not in stop:
        if p.accept("NOT", "NULL"):
            spec.nullable = False
        elif p.accept("NULL"):
            spec.nullable = True
        elif p.accept("DEFAULT"):
            spec.default_kind, spec.default = _default_value(p)
        elif p.accept("AUTO_INCREMENT"):
            spec.auto_increment = True
        elif p.accept("PRIMARY", "KEY"):
            spec.primary_key = True
        elif p.accept("UNIQUE"):
            p.accept("KEY")
        elif p.accept("KEY"):
            spec.primary_key = True      # a lone KEY in a column definition means PRIMARY KEY
        elif p.accept("COMMENT"):
            p.next()
        elif p.accept("COLLATE"):
            spec.collation = _read_charset(p)
        elif p.accept("CHARACTER", "SET") or p.accept("CHARSET"):
            spec.charset = _read_charset(p)
        elif p.accept("GENERATED", "ALWAYS", "AS") or p.accept("AS"):
            spec.generated = True
            if p.peek() is not None and p.peek().kind == "(":
                p.skip_balanced()
            else:  # MariaDB: AS ROW START / ROW END of system-versioned tables
                p.accept("ROW", "START") or p.accept("ROW", "END")
        elif p.accept("VIRTUAL") or p.accept("STORED") or p.accept("PERSISTENT"):
            pass
        elif p.accept("ON", "UPDATE"):
            _default_value(p)
        elif p.accept("INVISIBLE") or p.accept("VISIBLE") or p.accept("COMPRESSED"):
            if p.accept_punct("="):
                p.next()
        elif p.accept("COLUMN_FORMAT") or p.accept("STORAGE") or p.accept("SRID"):
            p.next()
        elif p.accept("ENGINE_ATTRIBUTE") or p.accept("SECONDARY_ENGINE_ATTRIBUTE"):
            p.accept_punct("=")
            p.next()
        elif p.accept("CHECK") or p.accept("CONSTRAINT"):
            if p.peek() is not None and p.peek().kind != "(":
                p.next()
                p.expect("CHECK")
            p.skip_balanced()
            p.accept("NOT", "ENFORCED") or p.accept("ENFORCED")
        elif p.accept("REFERENCES"):
            while not p.at_end() and p.word() not in stop:
                p.next()
        elif p.accept("WITH", "SYSTEM", "VERSIONING") or p.accept("WITHOUT", "SYSTEM", "VERSIONING"):
            pass
        else:
            raise DdlSyntaxError(f"unknown attribute {p.peek().text!r} in the definition of "
                                 f"column {spec.name!r}")


def _column_spec(p: _Parser, stop: frozenset = frozenset()) -> ColumnSpec:
    spec = ColumnSpec(name=p.name(), data_type="")
    _column_type(p, spec)
    _column_attributes(p, spec, stop)
    return spec


def _key_columns(p: _Parser) -> list[str]:
    """``(a, b(10) DESC)`` -> ``["a", "b"]``."""
    group = p.skip_balanced()[1:-1]
    sub = _sub(group)
    names = []
    for part in sub.split_top_level():
        if not part[0].is_name:
            raise DdlSyntaxError("an expression in a primary key is not supported")
        names.append(part[0].text)
    return names


def _constraint(tokens: list[Tok]) -> Optional[list[str]]:
    """The primary key columns of a table constraint; None for other constraints."""
    p = _sub(tokens)
    if p.accept("CONSTRAINT"):
        if p.word() != "PRIMARY":
            p.next()  # the constraint's name
    if p.accept("PRIMARY", "KEY"):
        while p.peek() is not None and p.peek().kind != "(":
            p.next()  # USING BTREE, an index name
        return _key_columns(p)
    return None


_POSITION_WORDS = frozenset({"FIRST", "AFTER"})


def _position(p: _Parser) -> Optional[tuple]:
    if p.accept("FIRST"):
        return ("first",)
    if p.accept("AFTER"):
        return ("after", p.name())
    return None


def _table_options(p: _Parser, out) -> None:
    """Table options after a CREATE's definitions; only the character set matters here."""
    while not p.at_end():
        if p.accept("DEFAULT"):
            continue
        if p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
            out.charset = _read_charset(p)
        elif p.accept("COLLATE"):
            out.collation = _read_charset(p)
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


def _parse_create_table(p: _Parser, replace: bool) -> CreateTable:
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
                stmt.like = _sub(element[1:]).table_ref()
            elif element[0].kind == "word" and head in _CONSTRAINT_WORDS:
                keys = _constraint(element)
                if keys is not None:
                    stmt.primary_key = keys
            else:
                sub = _sub(element)
                stmt.columns.append(_column_spec(sub))
        p.expect_punct(")")
    _table_options(p, stmt)
    return stmt


def _alter_action(tokens: list[Tok]) -> Optional[object]:
    p = _sub(tokens)
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
            return [AddColumn(_column_spec(_sub(part)), None, if_not_exists)
                    for part in _sub(group).split_top_level()]
        spec = _column_spec(p, _POSITION_WORDS)
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
        spec = _column_spec(p, _POSITION_WORDS)
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
            kind, text = _default_value(p)
            return SetDefault(name, kind, text)
        if p.accept("DROP", "DEFAULT"):
            return SetDefault(name, "none")
        if p.accept("SET", "VISIBLE") or p.accept("SET", "INVISIBLE"):
            return None
        raise DdlSyntaxError(f"cannot read ALTER COLUMN {name!r} {p._here()}")
    if p.accept("CONVERT", "TO"):
        p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.expect("CHARACTER", "SET")
        charset = _read_charset(p)
        collation = _read_charset(p) if p.accept("COLLATE") else None
        return ConvertCharset(None if charset == "default" else charset, collation)
    p.accept("DEFAULT")
    if p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
        charset = _read_charset(p)
        collation = _read_charset(p) if p.accept("COLLATE") else None
        return TableCharset(charset, collation)
    if p.accept("COLLATE"):
        return TableCharset(None, _read_charset(p))
    if p.word() in _NEUTRAL_ACTIONS:
        return None
    raise DdlSyntaxError(f"unknown ALTER TABLE action {' '.join(t.text for t in tokens[:4])!r}")


def _parse_alter_table(p: _Parser) -> AlterTable:
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


def _parse_rename(p: _Parser) -> RenameTables:
    p.accept("IF", "EXISTS")
    pairs = []
    for part in p.split_top_level():
        sub = _sub(part)
        old = sub.table_ref()
        if sub.accept("WAIT"):
            sub.next()
        sub.accept("NOWAIT")
        sub.expect("TO")
        pairs.append((old, sub.table_ref()))
        if not sub.at_end():
            raise DdlSyntaxError(f"cannot read the RENAME pair {sub._here()}")
    return RenameTables(pairs)


def _database_options(p: _Parser, stmt) -> None:
    while not p.at_end():
        if p.accept("DEFAULT"):
            continue
        if p.accept("CHARACTER", "SET") or p.accept("CHARSET") or p.accept("CHAR", "SET"):
            stmt.charset = _read_charset(p)
        elif p.accept("COLLATE"):
            stmt.collation = _read_charset(p)
        else:
            p.next()
            p.accept_punct("=")
            if not p.at_end():
                p.next()


def _parse_create_trigger(p: _Parser) -> Optional[CreateTrigger]:
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
    p = _Parser(tokens)
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
                sub = _sub(part)
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


def tokenize_head(sql: str) -> list[str]:
    """The first word of ``sql`` (after comments), upper case."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace():
            i += 1
        elif sql.startswith("/*", i) and not sql.startswith("/*!", i) and not sql.startswith("/*M!", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif sql.startswith("--", i) or sql[i] == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        else:
            break
    if sql.startswith("/*", i):  # an executable comment first: tokenize properly
        toks = tokenize(sql)
        return [toks[0].word] if toks and toks[0].kind == "word" else []
    j = i
    while j < n and (sql[j].isalpha()):
        j += 1
    return [sql[i:j].upper()] if j > i else []


__all__ = ["AddColumn", "AlterDatabase", "AlterTable", "ChangeColumn", "ColumnSpec",
           "ConvertCharset", "CreateDatabase", "CreateTable", "DropColumn", "DropDatabase",
           "DropTables", "RenameColumn", "RenameTables", "RenameTo", "SetDefault",
           "SetPrimaryKey", "Statement", "TableCharset", "TableRef", "TruncateTable",
           "named_tables", "parse_ddl", "statement_kind", "tokenize"]
