"""The key a watermark snapshot reads a table by, and whether that key can cut it into chunks."""
from __future__ import annotations

from typing import Optional

from ...codec import constants as C
from ...codec.events import TableMap
from ...codec.mariadb_text import TEXT_FORMS
from ...replica.information_schema import unique_indexes
from ..snapshot import SnapshotError
from .chunks import Table

#: key column types whose order is the same in Python and in the server
_ORDERED_TYPES = frozenset({
    C.MYSQL_TYPE_TINY, C.MYSQL_TYPE_SHORT, C.MYSQL_TYPE_INT24, C.MYSQL_TYPE_LONG,
    C.MYSQL_TYPE_LONGLONG, C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_DATETIME2,
    C.MYSQL_TYPE_TIMESTAMP2, C.MYSQL_TYPE_TIME2, C.MYSQL_TYPE_YEAR})


def chunk_key(conn, tm: TableMap) -> list[int]:
    """The column indexes the table is chunked by: its primary key, else its first unique key
    of NOT NULL columns; raises :class:`SnapshotError` naming the table when it has neither."""
    key = usable_key(conn, tm)
    if key is None:
        raise SnapshotError(
            f"{tm.schema}.{tm.table} has neither a primary key nor a unique key of NOT NULL columns, "
            f"so it cannot be read in chunks; give it one, or read it in one consistent transaction")
    return key


def usable_key(conn, tm: TableMap) -> Optional[list[int]]:
    """The column indexes the table can be chunked by (see :func:`chunk_key`); None when it
    has no usable key."""
    if tm.primary_key:
        return list(tm.primary_key)
    indexes = unique_indexes(conn, tm.schema, tm.table)
    by_name = {c.name: c for c in tm.columns}
    for index in sorted(indexes):
        cols = [by_name.get(n) for n in indexes[index]]
        if all(c is not None and not c.nullable for c in cols):
            return [c.index for c in cols if c is not None]
    return None


def table_to_read(tm: TableMap, key: Optional[list[int]]) -> Table:
    """The table's read state before its first chunk: chunked by ``key`` (read in one chunk when
    the key's order in Python may differ from the server's), or, without a usable key (None),
    read in one consistent transaction."""
    if key is None:
        return Table(tm, [], False, consistent=True)
    # MariaDB UUID/INET keys: read as text, decoded from the binlog as bytes; neither
    # order is the server's, so such a table is read in one chunk
    forms = [TEXT_FORMS.get(tm.columns[i].data_type or "") for i in key]
    ordered = all((tm.columns[i].type in _ORDERED_TYPES or tm.columns[i].text is False) and f is None
                  for i, f in zip(key, forms))
    table = Table(tm, key, ordered)
    if any(forms):
        table.key_forms = forms
    return table


__all__ = ["chunk_key", "table_to_read", "usable_key"]
