"""Check a TABLE_MAP event against the table's schema in the history."""
from __future__ import annotations

from ..codec import constants as C
from ..codec.events import TableMap
from ..codec.schema import type_compatible
from .errors import SchemaDivergenceError
from .model import TableDef

_FSP_TYPES = frozenset({C.MYSQL_TYPE_TIME2, C.MYSQL_TYPE_DATETIME2, C.MYSQL_TYPE_TIMESTAMP2})


def _describe_binlog(tm: TableMap) -> str:
    return ", ".join(f"{c.name} {C.COLUMN_TYPE_NAMES.get(c.type, c.type)}" for c in tm.columns)


def _describe_history(tdef: TableDef) -> str:
    return ", ".join(f"{c.name} {c.data_type}" for c in tdef.columns)


def divergence(tm: TableMap, tdef: TableDef) -> str:
    """What does not match ("" when the event matches the history): column count, types,
    type metadata (DECIMAL precision and scale, fractional seconds, BIT width) and, when the
    binlog carries them (``binlog_row_metadata=FULL``), names and signedness."""
    if len(tm.columns) != len(tdef.columns):
        return f"the binlog has {len(tm.columns)} columns, the history {len(tdef.columns)}"
    by_name = tm.names_from == "metadata"
    for col, cdef in zip(tm.columns, tdef.columns):
        label = f"column {col.index + 1} ({cdef.name})"
        if by_name and col.name.lower() != cdef.name.lower():
            return f"{label} is named {col.name!r} in the binlog"
        if not type_compatible(cdef.data_type, col.type):
            return (f"{label}: the history says {cdef.data_type} but the binlog logs type "
                    f"{C.COLUMN_TYPE_NAMES.get(col.type, col.type)}")
        t = col.type
        if t == C.MYSQL_TYPE_NEWDECIMAL and cdef.precision is not None and \
                (col.meta >> 8, col.meta & 0xFF) != (cdef.precision, cdef.scale or 0):
            return (f"{label}: the history says decimal({cdef.precision},{cdef.scale}) but the "
                    f"binlog logs decimal({col.meta >> 8},{col.meta & 0xFF})")
        if t in _FSP_TYPES and cdef.fsp is not None and col.meta != cdef.fsp:
            return f"{label}: the history says {cdef.fsp} fractional digits, the binlog {col.meta}"
        if t == C.MYSQL_TYPE_BIT and cdef.length is not None and \
                (col.meta >> 8) * 8 + (col.meta & 0xFF) != cdef.length:
            return (f"{label}: the history says bit({cdef.length}), the binlog "
                    f"bit({(col.meta >> 8) * 8 + (col.meta & 0xFF)})")
        if by_name and t in C.NUMERIC_TYPES and C.OPT_SIGNEDNESS in (tm.optional_metadata or ()) \
                and col.unsigned != cdef.unsigned:
            return f"{label}: the history says {'un' if cdef.unsigned else ''}signed, the binlog not"
    return ""


def check_table_map(tm: TableMap, tdef: TableDef, position: str) -> None:
    problem = divergence(tm, tdef)
    if problem:
        raise SchemaDivergenceError(
            f"table {tm.schema}.{tm.table} does not match the schema history: {problem}. "
            f"Binlog: ({_describe_binlog(tm)}); history: ({_describe_history(tdef)})",
            position=position)


__all__ = ["check_table_map", "divergence"]
