"""The canonical form in which a verification compares a row of the source with the row Iceberg
holds, and the SQL that computes it on the source.

A row's canonical text is its compared columns' texts joined by ``,``; a null is ``N``. Each
column's text depends on its *kind* (the type it is staged as, ``staging/contract.py``):

==========  ===================================================================================
kind        text
==========  ===================================================================================
int         the integer in decimal (TINYINT .. BIGINT UNSIGNED, YEAR, BIT(n))
decimal     the digits as the server prints them, every digit of the scale (``-0.50``)
float       ``0`` for a zero, else ``[-]MpE``: the value is exactly M × 2^E, M the IEEE
            significand with its hidden bit and E the exponent less 52 (FLOAT as its double)
days        days since 1970-01-01 (DATE); zero and invalid dates are null, as staged
micros      microseconds since 1970-01-01 00:00:00 (DATETIME, TIMESTAMP in UTC) or of the
            duration (TIME); zero and invalid dates are null, as staged
text        ``<bytes>:<text>``: the UTF-8 byte length, then the UTF-8 text (CHAR .. TEXT, ENUM,
            SET, JSON, UUID, INET4/INET6)
bytes       ``<bytes>:<bytes>``: the length, then the bytes (BINARY .. BLOB, GEOMETRY)
==========  ===================================================================================

Every text is one both sides produce exactly: numbers as integers or as the decimal digits
both print alike, floats by their bits (no formatting of a double to text), dates and times as
integers, and text and bytes with their length in front, so no value can pass for two.

A row's hash is the CRC-32 of its canonical text (the server's ``CRC32``, Python's
``zlib.crc32``); a key range's checksum is the number of its rows and the sum of their hashes:
order-independent, computed by the server without a row leaving it.

Masked columns are compared as staged: a hashed column by the same HMAC-SHA256 computed by the
server from the key's pads (``SHA2`` twice), a truncated one by its first N characters (bytes);
an excluded column is not in Iceberg and is left out. VECTOR columns are left out.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

import pyarrow as pa

from ...codec import constants as C
from ...codec.events import TableMap
from ...errors import ProviderError
from ...staging.contract import arrow_type_for
from ...staging.masking import EXCLUDE, HASH, Masking
from ..snapshot import quote_identifier

INT, DECIMAL, FLOAT, DAYS, MICROS, TEXT, BYTES = "int", "decimal", "float", "days", "micros", "text", "bytes"
KINDS = (INT, DECIMAL, FLOAT, DAYS, MICROS, TEXT, BYTES)
#: a null's text, and the separator of a row's column texts
NULL_TEXT, SEPARATOR = "N", ","
#: TO_DAYS('1970-01-01')
_EPOCH_DAYS = 719528
#: the SQL types whose staged Arrow text form the server prints alike, so that a hashed column
#: of them hashes the same text on both sides
_HASHABLE = (INT, DECIMAL, DAYS, TEXT, BYTES)


class VerifyError(ProviderError):
    """A verification that cannot go on: the message says what, and the hint what to do."""


@dataclass(frozen=True)
class ColumnForm:
    """One compared column: its name, its kind and the SQL expression of its canonical text
    (NULL for a null), and how it is masked (``hash``, ``truncate N``; None: as it is)."""

    name: str
    kind: str
    sql: str
    masked: Optional[str] = None


def _kind(col, arrow: pa.DataType) -> Optional[str]:
    if col.type in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2):
        return MICROS  # staged as int64 microseconds
    if pa.types.is_integer(arrow) or (pa.types.is_decimal(arrow) and col.type != C.MYSQL_TYPE_NEWDECIMAL):
        return INT
    if pa.types.is_decimal(arrow) or col.type in (C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DECIMAL):
        return DECIMAL
    if pa.types.is_floating(arrow):
        return FLOAT
    if pa.types.is_date(arrow):
        return DAYS
    if pa.types.is_timestamp(arrow):
        return MICROS
    if pa.types.is_string(arrow):
        return TEXT
    if pa.types.is_binary(arrow):
        return BYTES
    return None  # VECTOR


def _valid_temporal(column: str, expr: str) -> str:
    """``expr`` where ``column`` holds a date the calendar has, else NULL (zero dates, zero
    months or days, year 0, dates ALLOW_INVALID_DATES let in: staged as null)."""
    return f"IF(DATE_ADD({column}, INTERVAL 0 DAY) IS NULL, NULL, {expr})"


def float_sql(value: str) -> str:
    """The ``float`` text of the double ``value`` (an SQL expression), computed from its bits:
    the exponent from LOG2 (kept within -1023 .. 1023), corrected by one where LOG2 rounds across
    a power of two, clamped at -1022 for subnormals; the significand by an exact division by a power of two."""
    a = f"ABS({value})"
    e0 = f"LEAST(GREATEST(FLOOR(LOG2({a})), -1023), 1023)"  # POW(2, e0) neither overflows nor underflows
    e = f"GREATEST({e0} - ({a} < POW(2, {e0})) + ({a} / 2 >= POW(2, {e0})), -1022) - 52"
    return (f"IF({value} = 0, '0', CONCAT(IF({value} < 0, '-', ''), CAST({a} / POW(2, {e}) AS UNSIGNED), 'p', "
            f"CAST({e} AS SIGNED)))")


def _with_length(text: str) -> str:
    return f"CONCAT(LENGTH({text}), ':', {text})"


def _value_sql(col, kind: str, q: str) -> str:
    """The canonical text of source column ``col`` (quoted name ``q``) of ``kind``."""
    t = col.type
    if kind == INT:
        return f"({q} + 0)" if t in (C.MYSQL_TYPE_YEAR, C.MYSQL_TYPE_BIT) else q
    if kind == DECIMAL:
        return q
    if kind == FLOAT:
        return float_sql(f"({q} * 1e0)")
    if kind == DAYS:
        return _valid_temporal(q, f"TO_DAYS({q}) - {_EPOCH_DAYS}")
    if kind == MICROS:
        if t in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2):
            return f"CAST(TIME_TO_SEC({q}) * 1000000 AS SIGNED)"
        return _valid_temporal(q, f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {q})")
    if kind == TEXT:
        return _with_length(f"CONVERT({q} USING utf8mb4)")
    return _with_length(q)


def _arrow_text_sql(col, kind: str, q: str) -> str:
    """The value's text as the staging hashes it (its Arrow text form; text as UTF-8, bytes as
    they are), for the kinds :data:`_HASHABLE` names."""
    if kind == TEXT:
        return f"CONVERT({q} USING utf8mb4)"
    if kind == DAYS:
        return _valid_temporal(q, f"CONCAT({q})")
    if kind == INT and col.type in (C.MYSQL_TYPE_YEAR, C.MYSQL_TYPE_BIT):
        return f"CONCAT({q} + 0)"
    return q


def hmac_sql(secret: bytes, value: str) -> str:
    """HMAC-SHA256 of ``value`` (an SQL expression of bytes or UTF-8 text) under ``secret``,
    as lower-case hex, in SQL: ``SHA2(opad || UNHEX(SHA2(ipad || value)))``."""
    key = hashlib.sha256(secret).digest() if len(secret) > 64 else secret
    key = key.ljust(64, b"\0")
    ipad = bytes(b ^ 0x36 for b in key).hex()
    opad = bytes(b ^ 0x5C for b in key).hex()
    return f"SHA2(CONCAT(X'{opad}', UNHEX(SHA2(CONCAT(X'{ipad}', {value}), 256))), 256)"


# long: one decision per column, masking included: kind, SQL text, or the reason it is left out
def column_forms(tm: TableMap, masking: Optional[Masking] = None, *,
                 compare_hashed: bool = True) -> tuple[list[ColumnForm], dict[str, str]]:
    """The compared columns of a table (as the source describes it) in the canonical form, and
    the columns left out with the reason (excluded by masking, a VECTOR, a hashed column of a
    type whose text the server prints otherwise, or every hashed column when
    ``compare_hashed`` is False)."""
    forms: list[ColumnForm] = []
    left_out: dict[str, str] = {}
    rules = masking.for_table(tm.schema, tm.table, [c.name for c in tm.columns]) if masking else {}
    for col in tm.columns:
        rule = rules.get(col.name)
        if rule is not None and rule.action == EXCLUDE:
            left_out[col.name] = "excluded by masking: not in Iceberg"
            continue
        kind = _kind(col, arrow_type_for(col))
        if kind is None:
            left_out[col.name] = f"{col.type_name} columns are not compared"
            continue
        q = quote_identifier(col.name)
        if rule is None:
            forms.append(ColumnForm(col.name, kind, _value_sql(col, kind, q)))
        elif rule.action == HASH:
            if not compare_hashed:
                left_out[col.name] = "hashed by masking: left out (compare_hashed is off)"
            elif kind not in _HASHABLE:
                left_out[col.name] = f"hashed by masking: a hashed {col.type_name} is not compared"
            else:
                assert masking is not None
                text = hmac_sql(masking.secret, _arrow_text_sql(col, kind, q))
                forms.append(ColumnForm(col.name, TEXT, _with_length(text), HASH))
        else:  # truncate: text by characters, bytes by bytes
            if kind == TEXT:
                cut = f"LEFT(CONVERT({q} USING utf8mb4), {int(rule.length)})"
            else:
                cut = f"LEFT({q}, {int(rule.length)})"
            forms.append(ColumnForm(col.name, kind, _with_length(cut), f"truncate {rule.length}"))
    return forms, left_out


def row_text_sql(forms: list[ColumnForm]) -> str:
    """The SQL of a row's canonical text."""
    if not forms:
        return "''"
    return f"CONCAT_WS('{SEPARATOR}', " + ", ".join(f"IFNULL({f.sql}, '{NULL_TEXT}')" for f in forms) + ")"


def row_hash_sql(forms: list[ColumnForm]) -> str:
    """The SQL of a row's hash: the CRC-32 of its canonical text."""
    return f"CRC32({row_text_sql(forms)})"


__all__ = ["BYTES", "ColumnForm", "DAYS", "DECIMAL", "FLOAT", "INT", "KINDS", "MICROS", "NULL_TEXT", "SEPARATOR",
           "TEXT", "VerifyError", "column_forms", "float_sql", "hmac_sql", "row_hash_sql", "row_text_sql"]
