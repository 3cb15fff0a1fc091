"""A table's staged changes folded to each key's final state with pyarrow, on the driver, for
the direct commit of small batches (``merge/lake/direct_commit.py``).

A batch that touches hundreds of tables with a few changes each spends its time in Spark's
planning of one MERGE per table, not in moving rows. For a table whose changes are simple the
result of that MERGE is known without Spark: every key the changes touch loses its old row
(an Iceberg position delete of the row, or an equality delete on the primary key), and every
key whose last change is an insert or an update gets its last after image as its new row. That
holds when every after image is whole (no MINIMAL or NOBLOB image leaves a column out) and no
update changes a primary key;
:func:`.staged_fold.collapse_staged` returns None otherwise, and the table goes through the Spark
MERGE.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from .errors import MergeOptionError
from ..staging.storage import open_parquet

#: The staged bytes of a table one direct commit folds at once (in Arrow memory, about ten times
#: as much: see :mod:`.staged_fold`).
DEFAULT_DIRECT_MAX_BYTES = 32 * 1024 * 1024
#: A table's staged changes of more than ``direct_max_bytes`` are folded in at most this many
#: key ranges (1 GiB by default); larger batches go through the Spark MERGE.
MAX_DIRECT_PARTS = 32

#: How a direct commit drops the rows it replaces: position deletes, which every Iceberg
#: reader applies (the rows located by reading the key columns of the data files that may
#: hold them), or equality deletes on the primary key (no read; JVM engines only).
DELETES_POSITION = "position"
DELETES_EQUALITY = "equality"
DIRECT_DELETES = (DELETES_POSITION, DELETES_EQUALITY)


def check_direct_deletes(value: object) -> str:
    """``value`` if it names a way of :data:`DIRECT_DELETES`; else an error saying them."""
    if value not in DIRECT_DELETES:
        raise MergeOptionError(f"direct_deletes must be one of {', '.join(DIRECT_DELETES)}, not {value!r} "
                               f"({DELETES_POSITION!r} is read by every Iceberg reader; {DELETES_EQUALITY!r} "
                               f"only by JVM engines such as Spark, Trino and Flink)")
    return str(value)

BINLOG_ORDER = ("_binlog_seq", "_binlog_pos", "_row")
#: ``(low, high)``: the keys ``low <= key < high`` (None: no bound).
KeyRange = tuple[Any, Any]

#: The most keys :func:`key_ranges` samples to place the bounds of its ranges.
KEY_SAMPLE = 1_000_000

#: The staged columns a fold of changes reads.
CHANGE_COLUMNS = ("_op", *BINLOG_ORDER, "_before", "_after", "_after_absent")


@dataclasses.dataclass(frozen=True)
class DirectChanges:
    """``rows``: the new row of every key whose last change is an insert or an update, its
    columns named as the target's; ``keys``: the primary key of every key the changes touch
    (each loses the row it had, if any); both as pyarrow tables in the staged types."""

    rows: Any
    keys: Any


def change_keys(batch: Any, key: str) -> Any:
    """Key column ``key`` of each staged change in ``batch``: its after image's, else its before
    image's (a delete has only the latter)."""
    import pyarrow.compute as pc

    return pc.coalesce(pc.struct_field(batch.column("_after"), key), pc.struct_field(batch.column("_before"), key))


def key_ranges(files: Sequence[str], key: str, parts: int) -> Optional[list[KeyRange]]:
    """At most ``parts`` ranges ``(low, high)`` (``low <= key < high``; None: no bound) of key
    column ``key``, holding about as many of the staged ``files``' changes each (their after
    image's key, else their before image's), together all of them; None when the key is not an
    integer or a string, a file lacks it, or no change has one. The bounds are quantiles of a
    sample of at most :data:`KEY_SAMPLE` keys (every n-th change), so memory holds the sample;
    a key with very many changes may still make one range larger than the others."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sources = [open_parquet(path) for path in files]
    kinds = set()
    for source in sources:  # the key's type from the files' schemas, before any row is read
        for image in ("_before", "_after"):
            if image not in source.schema_arrow.names or source.schema_arrow.field(image).type.get_field_index(key) < 0:
                return None
            kinds.add(source.schema_arrow.field(image).type.field(key).type)
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return None
    stride = max(1, -(-sum(source.metadata.num_rows for source in sources) // KEY_SAMPLE))
    chunks = []
    for source in sources:
        for batch in source.iter_batches(batch_size=65_536, columns=[f"_before.{key}", f"_after.{key}"]):
            keys = change_keys(batch, key)
            chunks.append(pc.drop_null(keys.take(pa.array(range(0, len(keys), stride), pa.int64()))))
    sample = pa.chunked_array(chunks, kind).combine_chunks()
    if not len(sample):
        return None
    sample = pc.take(sample, pc.sort_indices(sample))
    bounds: list[Any] = []
    for i in range(1, max(1, parts)):  # each bound once, increasing: a run of one key stays whole
        bound = sample[i * len(sample) // parts].as_py()
        if bound != sample[0].as_py() and (not bounds or bound > bounds[-1]):
            bounds.append(bound)
    lows: list[Any] = [None, *bounds]
    return list(zip(lows, [*bounds, None]))


def _ranks(order: Any) -> Any:
    """The position of each row in ``order`` (the inverse permutation of sort indices)."""
    import numpy as np
    import pyarrow as pa

    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order.to_numpy()] = np.arange(len(order), dtype=np.int64)
    return pa.array(ranks)


def fold_changes(staged: Any, primary_key: Sequence[str], columns: Sequence[str]) -> Optional[DirectChanges]:
    """The final state of each key of ``staged`` (a pyarrow table of :data:`CHANGE_COLUMNS`, in
    any order) for the target ``columns``; None when the changes are not simple (see
    :func:`.staged_fold.collapse_staged`, which folds staged files without reading every image)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    image_type = staged.schema.field("_after").type
    have = {image_type.field(i).name for i in range(image_type.num_fields)}
    if not set(columns) <= have or not set(primary_key) <= set(columns):
        return None
    # the rows' binlog order as indices: sorting the table itself would copy both images
    order = pc.sort_indices(staged, sort_keys=[(c, "ascending") for c in BINLOG_ORDER])
    rank = _ranks(order)
    op = staged.column("_op")
    deletes = pc.equal(op, "delete")
    updates = pc.equal(op, "update")
    before, after = staged.column("_before"), staged.column("_after")
    absent = pc.fill_null(pc.list_value_length(staged.column("_after_absent")), 0)
    if pc.any(pc.and_(pc.invert(deletes), pc.greater(absent, 0))).as_py():
        return None  # an image lacks a column: its value comes from the row before (Spark)
    key_columns = {}
    for name in primary_key:
        b, a = pc.struct_field(before, name), pc.struct_field(after, name)
        if pc.any(pc.fill_null(pc.and_(updates, pc.not_equal(b, a)), False)).as_py():
            return None  # a key change: the keys it links are folded in order (Spark)
        key_columns[name] = pc.if_else(deletes, b, a)
    if any(pc.any(pc.is_null(k)).as_py() for k in key_columns.values()):
        return None
    indexed = pa.table({**{f"k{j}": key_columns[n] for j, n in enumerate(primary_key)}, "_i": rank})
    last = indexed.group_by([f"k{j}" for j in range(len(primary_key))]).aggregate([("_i", "max")])
    last_index = pc.take(order, last.column("_i_max"))  # each key's last change, as a row of staged
    # every touched key, inserted ones too: like the MERGE's upsert, a row the table should
    # not have held (a table out of step with its checkpoint) is replaced, never doubled
    keys = pa.table({n: last.column(f"k{j}") for j, n in enumerate(primary_key)})
    final = staged.select(["_op", "_after"]).take(last_index)
    live = final.filter(pc.invert(pc.equal(final.column("_op"), "delete")))
    image = live.column("_after")
    rows = pa.table({n: pc.struct_field(image, n) for n in columns})
    return DirectChanges(rows.sort_by([(k, "ascending") for k in primary_key]),
                         keys.sort_by([(k, "ascending") for k in primary_key]))
