"""The source side of a verification: a table's key ranges and their checksums, computed by
the server in SQL (no row leaves it), each set of ranges in one short consistent transaction
that knows its binlog position, as a watermark snapshot reads a chunk.

On MariaDB the position is exact: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and its
``binlog_snapshot_position``. On MySQL it is the position read right after the transaction:
what the read saw is at or before it, and the changes the binlog has between the position read
before the transaction and this one are the ones the caller must look at."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ...codec.events import TableMap
from ...codec.gtid import Flavor
from ...staging.masking import Masking
from ..snapshot import _converter, binlog_status_row, quote_identifier, snapshot_binlog_position
from ..watermark.keys import table_to_read, usable_key
from .canonical import ColumnForm, VerifyError, column_forms, row_hash_sql


@dataclass(frozen=True)
class KeyRange:
    """Keys ``after < key <= upto`` (None: unbounded on that side), or exactly the keys
    ``keys`` when given (a set of keys checked again)."""

    after: Optional[tuple] = None
    upto: Optional[tuple] = None
    keys: Optional[tuple] = None

    def holds(self, key: tuple) -> bool:
        if self.keys is not None:
            return key in self.keys
        return (self.after is None or key > self.after) and (self.upto is None or key <= self.upto)


@dataclass(frozen=True)
class Checksum:
    """A key range's rows and the sum of their hashes."""

    rows: int
    hash_sum: int


@dataclass
class SourceTable:
    """A captured table as verification reads it: its key, the compared columns and their SQL."""

    tm: TableMap
    key: list[int]
    ordered: bool                 # its key compares alike in Python and in the server
    forms: list[ColumnForm]
    left_out: dict[str, str]
    key_forms: Optional[list] = None
    converters: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.tm.schema}.{self.tm.table}"

    @property
    def quoted(self) -> str:
        return f"{quote_identifier(self.tm.schema)}.{quote_identifier(self.tm.table)}"

    @property
    def key_names(self) -> list[str]:
        return [self.tm.columns[i].name for i in self.key]

    @property
    def key_sql(self) -> str:
        return ", ".join(quote_identifier(n) for n in self.key_names)


def source_table(conn, tm: TableMap, masking: Optional[Masking] = None, *,
                 compare_hashed: bool = True) -> SourceTable:
    """How ``tm``'s table is verified; raises :class:`VerifyError` for a table without a usable
    key (a primary key or a unique key of NOT NULL columns): its rows cannot be told apart."""
    key = usable_key(conn, tm)
    if key is None:
        raise VerifyError(f"{tm.schema}.{tm.table} has no primary key nor unique key of NOT NULL columns",
                          hint="such a table is loaded as a change log; it is not verified")
    read = table_to_read(tm, key)
    forms, left_out = column_forms(tm, masking, compare_hashed=compare_hashed)
    return SourceTable(tm, key, read.ordered, forms, left_out, read.key_forms,
                       [_converter(tm.columns[i]) for i in key])


def _key_value(converter: Any, value: Any) -> Any:
    return value if converter is None or value is None else converter(value)


def sql_value(value: Any) -> Any:
    """A key value (as a read or the binlog decoder gives it) as an SQL parameter: an aware
    datetime as its UTC wall time (the session's time zone is UTC)."""
    import datetime as dt

    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _row(values: Sequence) -> str:
    return "(" + ", ".join(["%s"] * len(values)) + ")"


def range_sql(t: SourceTable, r: KeyRange, exclude: Sequence[tuple] = ()) -> tuple[str, list]:
    """The WHERE clause of a key range (without keys ``exclude``) and its parameters."""
    cols = f"({t.key_sql})"
    parts: list[str] = []
    args: list = []
    if r.keys is not None:
        if not r.keys:
            return "FALSE", []
        parts.append(f"{cols} IN (" + ", ".join(_row(k) for k in r.keys) + ")")
        args += [sql_value(v) for k in r.keys for v in k]
    if r.after is not None:
        parts.append(f"{cols} > {_row(r.after)}")
        args += [sql_value(v) for v in r.after]
    if r.upto is not None:
        parts.append(f"{cols} <= {_row(r.upto)}")
        args += [sql_value(v) for v in r.upto]
    if exclude:
        parts.append(f"{cols} NOT IN (" + ", ".join(_row(k) for k in exclude) + ")")
        args += [sql_value(v) for k in exclude for v in k]
    return (" AND ".join(parts) or "TRUE"), args


def next_upto(conn, t: SourceTable, after: Optional[tuple], rows: int) -> Optional[tuple]:
    """The last key of the ``rows`` keys after ``after`` (an index read, outside a
    transaction); None when fewer remain (the last range is open)."""
    where, args = range_sql(t, KeyRange(after, None))
    with conn.cursor() as cur:
        cur.execute(f"SELECT {t.key_sql} FROM {t.quoted} WHERE {where} ORDER BY {t.key_sql} LIMIT 1 OFFSET %s",
                    args + [rows - 1])
        row = cur.fetchone()
    if row is None:
        return None
    return tuple(_key_value(c, v) for c, v in zip(t.converters, row))


def key_bounds(conn, t: SourceTable, r: KeyRange, exclude: Sequence[tuple] = ()) -> Optional[tuple[tuple, tuple]]:
    """The first and the last key the source holds in a key range (None: no row)."""
    where, args = range_sql(t, r, exclude)
    out = []
    with conn.cursor() as cur:
        for order in ("", " DESC"):
            keys = ", ".join(f"{quote_identifier(n)}{order}" for n in t.key_names)
            cur.execute(f"SELECT {t.key_sql} FROM {t.quoted} WHERE {where} ORDER BY {keys} LIMIT 1", args)
            row = cur.fetchone()
            if row is None:
                return None
            out.append(tuple(_key_value(c, v) for c, v in zip(t.converters, row)))
    return out[0], out[1]


def position_now(conn) -> tuple[str, int]:
    """The server's binlog position now."""
    with conn.cursor() as cur:
        row = binlog_status_row(cur)
    if row is None:
        raise VerifyError("the server has no binary log (log_bin is OFF)")
    return row[0], int(row[1])


def checksums(conn, flavor: str, t: SourceTable, ranges: Sequence[KeyRange], exclude: Sequence[Sequence[tuple]],
              changed_since: Optional[Callable[[tuple[str, int]], Sequence[Sequence[tuple]]]] = None
              ) -> tuple[list[Checksum], tuple[str, int], list[tuple]]:
    """The checksum of each key range (without the keys of its ``exclude`` list), all read in
    one consistent transaction, its binlog position (see the module), and per range the keys
    taken out afterwards.

    On MariaDB, ``changed_since(position)`` is called inside the transaction, once its exact
    position is known: it gives per range the keys changed between the reads' start and that
    position (which the reads saw); their rows are subtracted in the same snapshot, so the sums
    hold no key changed since. Elsewhere the caller compares the keys changed around the read."""
    sums: list[Checksum] = []
    taken: list[tuple] = [() for _ in ranges]
    hashed = row_hash_sql(t.forms)
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            for r, skip in zip(ranges, exclude):
                where, args = range_sql(t, r, skip)
                cur.execute(f"SELECT COUNT(*), COALESCE(SUM({hashed}), 0) FROM {t.quoted} WHERE {where}", args)
                count, total = cur.fetchone()
                sums.append(Checksum(int(count), int(total)))
            if flavor == Flavor.MARIADB:
                position = snapshot_binlog_position(cur)
                if changed_since is not None:
                    for i, keys in enumerate(changed_since(position)):
                        if not keys:
                            continue
                        where, args = range_sql(t, KeyRange(keys=tuple(keys)), ())
                        cur.execute(f"SELECT COUNT(*), COALESCE(SUM({hashed}), 0) FROM {t.quoted} WHERE {where}",
                                    args)
                        count, total = cur.fetchone()
                        sums[i] = Checksum(sums[i].rows - int(count), sums[i].hash_sum - int(total))
                        taken[i] = tuple(keys)
        finally:
            cur.execute("COMMIT")
    if flavor != Flavor.MARIADB:
        position = position_now(conn)
    return sums, position, taken


__all__ = ["Checksum", "KeyRange", "SourceTable", "checksums", "key_bounds", "next_upto", "position_now",
           "range_sql", "source_table", "sql_value"]
