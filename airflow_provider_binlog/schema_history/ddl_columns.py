"""Column definitions in CREATE TABLE and ALTER TABLE: the type with its modifiers and the
attributes (NULL, DEFAULT, AUTO_INCREMENT, ...), read into a ColumnSpec."""
from __future__ import annotations

from typing import Optional

from .ddl_model import ColumnSpec
from .ddl_tokens import Tok, TokenParser
from .errors import DdlSyntaxError

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


def _whole_number(tok: Tok) -> int:
    if tok.kind != "number" or not tok.text.isdigit():
        raise DdlSyntaxError(f"expected a whole number at {tok.text!r}")
    return int(tok.text)


def _charset_name(name: str) -> str:
    lowered = name.lower()
    return "utf8mb3" if lowered == "utf8" else lowered


def read_charset(p: TokenParser) -> str:
    p.accept_punct("=")
    return _charset_name(p.name())


def _column_type(p: TokenParser, spec: ColumnSpec) -> None:
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
        spec.precision = _whole_number(args[0]) if args else 10
        spec.scale = _whole_number(args[1]) if len(args) > 1 else 0
    elif data_type == "float" and len(args) == 1 and _whole_number(args[0]) > 24:
        data_type = "double"
    elif data_type in ("time", "datetime", "timestamp"):
        spec.fsp = _whole_number(args[0]) if args else 0
    elif data_type in ("char", "binary", "bit"):
        spec.length = _whole_number(args[0]) if args else 1
    elif data_type in ("varchar", "varbinary"):
        if not args:
            raise DdlSyntaxError(f"{data_type.upper()} column {spec.name!r} needs a length")
        spec.length = _whole_number(args[0])
    elif data_type in ("text", "blob") and args:
        n = _whole_number(args[0])
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
            spec.charset = read_charset(p)
        elif p.accept("COLLATE"):
            spec.collation = read_charset(p)
        else:
            break


def default_value(p: TokenParser) -> tuple[str, Optional[str]]:
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


def _column_attributes(p: TokenParser, spec: ColumnSpec, stop: frozenset = frozenset()) -> None:
    while not p.at_end() and p.word() not in stop:
        if p.accept("NOT", "NULL"):
            spec.nullable = False
        elif p.accept("NULL"):
            spec.nullable = True
        elif p.accept("DEFAULT"):
            spec.default_kind, spec.default = default_value(p)
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
            spec.collation = read_charset(p)
        elif p.accept("CHARACTER", "SET") or p.accept("CHARSET"):
            spec.charset = read_charset(p)
        elif p.accept("GENERATED", "ALWAYS", "AS") or p.accept("AS"):
            spec.generated = True
            if p.peek() is not None and p.peek().kind == "(":
                p.skip_balanced()
            else:  # MariaDB: AS ROW START / ROW END of system-versioned tables
                p.accept("ROW", "START") or p.accept("ROW", "END")
        elif p.accept("VIRTUAL") or p.accept("STORED") or p.accept("PERSISTENT"):
            pass
        elif p.accept("ON", "UPDATE"):
            default_value(p)
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


def column_spec(p: TokenParser, stop: frozenset = frozenset()) -> ColumnSpec:
    spec = ColumnSpec(name=p.name(), data_type="")
    _column_type(p, spec)
    _column_attributes(p, spec, stop)
    return spec


__all__ = ["column_spec", "default_value", "read_charset"]
