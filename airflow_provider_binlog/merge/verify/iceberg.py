"""The Iceberg side of a verification, without a JVM: a table loaded with PyIceberg, pinned at
its current snapshot with the binlog checkpoint it holds, and its rows of a key range read
(PyIceberg prunes files by the range, deletes applied) into their keys and row hashes.

Where a table is: an embedded Hadoop catalog's table is read from the metadata file its
``version-hint.text`` names; a catalog PyIceberg knows (the JDBC catalog on PostgreSQL as
PyIceberg's SQL catalog, REST) from the same settings the merge uses (:class:`CatalogSpec`)."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...capture.verify.canonical import ColumnForm, VerifyError
from ...capture.verify.source import KeyRange
from ...checkpoints import Checkpoint
from ..iceberg_contract import SUMMARY_CHECKPOINT
from .canonical_arrow import row_hashes, with_length

#: the column of row hashes in the tables :func:`read_hashes` returns
HASH = "__verify_hash"
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class CatalogSpec:
    """Where the Iceberg tables are: ``type`` ``hadoop`` (``warehouse``: the directory or URI)
    or a PyIceberg catalog type (``sql``, ``rest``, ...) with its ``properties`` (``uri`` ...)."""

    name: str = "lake"
    type: str = "hadoop"
    warehouse: Optional[str] = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PinnedTable:
    """A table at one snapshot, and the binlog checkpoint of the newest snapshot carrying one at
    or before it (the position the table's rows are at)."""

    table: Any
    snapshot_id: Optional[int]
    checkpoint: Optional[Checkpoint]


def load_table(spec: CatalogSpec, namespace: str, name: str) -> Any:
    """The PyIceberg table ``namespace.name`` of the catalog ``spec``."""
    try:
        if spec.type == "hadoop":
            return _hadoop_table(spec, namespace, name)
        from pyiceberg.catalog import load_catalog

        catalog = load_catalog(spec.name, **{"type": spec.type, **dict(spec.properties)})
        return catalog.load_table((*namespace.split("."), name))
    except ImportError:
        raise VerifyError("verifying needs PyIceberg", hint="pip install 'airflow-provider-binlog[verify]'") from None


def _hadoop_table(spec: CatalogSpec, namespace: str, name: str) -> Any:
    from pyiceberg.io import load_file_io
    from pyiceberg.table import StaticTable

    if not spec.warehouse:
        raise VerifyError("a Hadoop catalog needs its warehouse", hint="give the warehouse the merge writes to")
    root = spec.warehouse.rstrip("/")
    metadata = "/".join([root, *namespace.split("."), name, "metadata"])
    io = load_file_io(dict(spec.properties), metadata)
    try:
        with io.new_input(f"{metadata}/version-hint.text").open() as f:
            version = int(f.read().decode().strip())
    except FileNotFoundError:
        raise VerifyError(f"no Iceberg table {namespace}.{name} in {root}",
                          hint="load it first (the backfill DAG in mode snapshot)") from None
    return StaticTable.from_metadata(f"{metadata}/v{version}.metadata.json", dict(spec.properties))


def pin(table: Any) -> PinnedTable:
    """The table at its current snapshot, with the checkpoint of the newest snapshot of its main
    branch that carries one (snapshots of other commits, such as compactions, are passed over)."""
    snapshot = table.current_snapshot()
    head = None if snapshot is None else snapshot.snapshot_id
    while snapshot is not None:
        text = (snapshot.summary or {}).get(SUMMARY_CHECKPOINT)
        if text:
            return PinnedTable(table, head, Checkpoint.from_json(json.loads(text) if text.startswith("{") else text))
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return PinnedTable(table, head, None)


def _field_type(table: Any, name: str) -> Any:
    return table.schema().find_field(name).field_type


def literal_value(value: Any, field_type: Any) -> Any:
    """A key value as a literal of an Iceberg row filter on a field of ``field_type``."""
    from pyiceberg.types import DateType, DecimalType, LongType, TimestampType, TimestamptzType

    if isinstance(value, dt.timedelta):
        return value // dt.timedelta(microseconds=1)
    if isinstance(field_type, DateType) and isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    if isinstance(field_type, (TimestampType, TimestamptzType)) and isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return (value - _EPOCH_UTC) // dt.timedelta(microseconds=1)
        return (value - _EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(field_type, DecimalType) and isinstance(value, int):
        return Decimal(value)
    if isinstance(field_type, LongType) and isinstance(value, Decimal):
        return int(value)
    return value


def row_filter(table: Any, key_names: Sequence[str], ranges: Sequence[KeyRange]) -> Any:
    """A PyIceberg filter that holds every row of ``ranges`` (on the first key column; the exact
    ranges are applied on the rows read): pruning by the files' bounds."""
    from pyiceberg import expressions as ex

    # the predicates' typing (pydantic fields) and their constructors disagree: called as documented
    ge, le, one_of = cast(Any, ex.GreaterThanOrEqual), cast(Any, ex.LessThanOrEqual), cast(Any, ex.In)
    AlwaysTrue, And, Or = ex.AlwaysTrue, ex.And, ex.Or

    first = key_names[0]
    ftype = _field_type(table, first)
    out = None
    for r in ranges:
        if r.keys is not None:
            part: Any = one_of(first, {literal_value(k[0], ftype) for k in r.keys}) if r.keys else None
        else:
            part = AlwaysTrue()
            if r.after is not None:
                part = And(part, ge(first, literal_value(r.after[0], ftype)))
            if r.upto is not None:
                part = And(part, le(first, literal_value(r.upto[0], ftype)))
        if part is not None:
            out = part if out is None else Or(out, part)
    return out


def arrow_scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    """A key value as an Arrow scalar of the type Iceberg's column is read as."""
    if isinstance(value, dt.timedelta):
        value = value // dt.timedelta(microseconds=1)
    if pa.types.is_decimal(arrow_type) and isinstance(value, int):
        value = Decimal(value)
    if pa.types.is_integer(arrow_type) and isinstance(value, Decimal):
        value = int(value)
    if pa.types.is_timestamp(arrow_type) and isinstance(value, dt.datetime):
        if arrow_type.tz is None and value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        elif arrow_type.tz is not None and value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
    return pa.scalar(value, arrow_type)


def _after(columns: Sequence[pa.Array], bound: tuple, strict: bool) -> pa.Array:
    """Rows whose key (``columns``) is after ``bound`` (``strict``) or at or after it:
    lexicographically, as the server compares row values."""
    out: Optional[pa.Array] = None
    for col, value in reversed(list(zip(columns, bound))):
        scalar = arrow_scalar(value, col.type)
        if out is None:
            out = pc.greater(col, scalar) if strict else pc.greater_equal(col, scalar)
        else:
            out = pc.or_(pc.greater(col, scalar), pc.and_(pc.equal(col, scalar), out))
    assert out is not None
    return out


def key_texts(columns: Sequence[pa.Array]) -> pa.Array:
    """A key per row as one value (its columns' texts, text and bytes with their length in
    front, joined), to find keys in a set."""
    if len(columns) == 1:
        return columns[0]
    texts = []
    for c in columns:
        if pa.types.is_string(c.type) or pa.types.is_large_string(c.type) or pa.types.is_binary(c.type):
            texts.append(pc.cast(with_length(c), pa.large_binary()))
        else:
            texts.append(pc.cast(pc.cast(c, pa.string()), pa.large_binary()))
    return pc.binary_join_element_wise(*texts, pa.scalar(b",", pa.large_binary()))


def key_set_texts(keys: Sequence[tuple], types: Sequence[pa.DataType]) -> pa.Array:
    columns = [pa.array([arrow_scalar(k[i], t).as_py() for k in keys], t) for i, t in enumerate(types)]
    return key_texts(columns)


def in_range(keys: pa.Table, r: KeyRange, exclude: Sequence[tuple] = ()) -> pa.Array:
    """Which rows of ``keys`` (the key columns) lie in ``r``, less the keys ``exclude``."""
    columns = [keys.column(i).combine_chunks() for i in range(keys.num_columns)]
    mask = pa.array(np.ones(keys.num_rows, bool))
    if r.keys is not None:
        wanted = key_set_texts(list(r.keys), [c.type for c in columns])
        mask = pc.is_in(key_texts(columns), value_set=wanted)
    if r.after is not None:
        mask = pc.and_(mask, _after(columns, r.after, True))
    if r.upto is not None:
        mask = pc.and_(mask, pc.invert(_after(columns, r.upto, True)))
    if exclude:
        dropped = key_set_texts(list(exclude), [c.type for c in columns])
        mask = pc.and_(mask, pc.invert(pc.is_in(key_texts(columns), value_set=dropped)))
    return mask


def read_hashes(pinned: PinnedTable, key_names: Sequence[str], forms: Sequence[ColumnForm],
                ranges: Sequence[KeyRange], soft_delete: Optional[str] = None) -> pa.Table:
    """The key columns and the row hash (column :data:`HASH`) of every row of the pinned
    snapshot in ``ranges`` (a superset: the caller applies each range exactly); rows flagged
    deleted by the data contract's ``soft_delete`` column are not rows of the source."""
    table = pinned.table
    names = list(dict.fromkeys([*key_names, *(f.name for f in forms)]))
    missing = missing_columns(pinned, names)
    if missing:
        raise VerifyError(f"Iceberg has no column {', '.join(missing)}")
    selected = names + ([soft_delete] if soft_delete and _has_all(table, [soft_delete]) else [])
    kwargs: dict = {"selected_fields": tuple(selected)}
    if pinned.snapshot_id is not None:
        kwargs["snapshot_id"] = pinned.snapshot_id
    flt = row_filter(table, key_names, ranges)
    if flt is None or pinned.snapshot_id is None:
        return _empty(table, key_names)
    kwargs["row_filter"] = flt
    parts = []
    for batch in table.scan(**kwargs).to_arrow_batch_reader():
        if batch.num_rows == 0:
            continue
        if soft_delete and soft_delete in batch.schema.names:
            batch = batch.filter(pc.invert(pc.fill_null(batch.column(soft_delete), False)))
        hashes = pa.array(row_hashes(batch, forms))
        parts.append(pa.table([batch.column(n) for n in key_names] + [hashes], names=[*key_names, HASH]))
    if not parts:
        return _empty(table, key_names)
    return pa.concat_tables(parts, promote_options="permissive")


def _has_all(table: Any, names: Sequence[str]) -> bool:
    have = {f.name for f in table.schema().fields}
    return all(n in have for n in names)


def _empty(table: Any, key_names: Sequence[str]) -> pa.Table:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    arrow = schema_to_pyarrow(table.schema())
    return pa.table([pa.array([], arrow.field(n).type) for n in key_names] + [pa.array([], pa.uint32())],
                    names=[*key_names, HASH])


def missing_columns(pinned: PinnedTable, names: Sequence[str]) -> list[str]:
    have = {f.name for f in pinned.table.schema().fields}
    return [n for n in names if n not in have]


__all__ = ["CatalogSpec", "HASH", "PinnedTable", "arrow_scalar", "in_range", "key_texts", "literal_value",
           "load_table", "missing_columns", "pin", "read_hashes", "row_filter"]
