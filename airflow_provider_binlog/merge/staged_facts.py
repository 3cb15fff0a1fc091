"""What a table's staged changes say before Spark reads them: whether some update changes a
primary key, whether some update's after image lacks a column, and the values of the first key
column the changes touch.

The merge job decides three things from these facts for every table: whether keys linked by
key changes must be folded in order (only possible when a key changes), whether the MERGE
must read the target's other columns (only when an image lacks some), and the key filter of
the MERGE's target scan. Read here with pyarrow on the driver, for tables whose staged files
are small, they cost no Spark job. Each fact errs on the safe side: a key change or a
partial image that a later TRUNCATE or the table's own checkpoint makes irrelevant still
counts, and the key values are a superset of the keys of the collapsed changes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from ..staging.storage import open_parquet, total_size
from .direct_changes import DEFAULT_DIRECT_MAX_BYTES, MAX_DIRECT_PARTS
from .iceberg_contract import DEFAULT_MAX_FILTER_KEYS

#: Tables whose staged files hold more bytes than this are left to Spark: as many as a direct
#: commit folds in key ranges with the default ``direct_max_bytes`` (the facts are read batch
#: by batch, so memory holds one batch's images at a time).
DEFAULT_MAX_STAGED_BYTES = MAX_DIRECT_PARTS * DEFAULT_DIRECT_MAX_BYTES
#: Rows of a staged file read at a time.
FACT_BATCH_ROWS = 65_536


@dataclasses.dataclass(frozen=True)
class StagedFacts:
    key_changes: bool            # some update changes a primary key column
    partial_updates: bool        # some update's after image lacks a non-key column
    #: distinct values of the first key column, before and after images, sorted; when there
    #: are more than the key filter takes, only that many and one more
    first_key_values: list[Any]
    #: some insert's image lacks a column (a MINIMAL image leaves out what the statement did not
    #: set: its value is the column's default, which only Spark's MERGE fills in)
    partial_inserts: bool = False


def staged_facts(files: Sequence[str], primary_key: Sequence[str], columns: Sequence[str],
                 fields: Sequence[Mapping[str, str]] = (), *,
                 max_bytes: int = DEFAULT_MAX_STAGED_BYTES,
                 staged_bytes: Optional[int] = None,
                 max_key_values: int = DEFAULT_MAX_FILTER_KEYS) -> Optional[StagedFacts]:
    """The facts of the staged ``files`` of one table (in staging order) whose target columns
    are ``columns``; ``fields[i]`` names, for file ``i``, the staged field of a column renamed
    after its rows. None when the files hold more than ``max_bytes`` (``staged_bytes``, as the
    manifest records them, else looked up), or lack a column of the staging contract (then
    Spark decides). ``first_key_values`` holds all the values when there are at most
    ``max_key_values`` (the most a key filter takes), else ``max_key_values + 1`` of them."""
    import pyarrow.compute as pc

    if not primary_key or total_size(files, staged_bytes) > max_bytes:
        return None
    key_changes = partial = partial_inserts = enough = False
    values: list[Any] = []
    keyset = set(primary_key)
    for part, path in enumerate(files):
        renamed = dict(fields[part]) if part < len(fields) else {}
        field = [renamed.get(k, k) for k in primary_key]
        source = open_parquet(path)
        names = set(source.schema_arrow.names)
        if not {"_op", "_before", "_after", "_after_absent"} <= names:
            return None
        after_type = source.schema_arrow.field("_after").type
        staged = {after_type.field(i).name for i in range(after_type.num_fields)}
        if not set(field) <= staged:
            return None
        if any(renamed.get(c, c) not in staged for c in columns if c not in keyset):
            partial = True  # a column the file's rows do not have yet (added later in the batch)
        # batch by batch: memory holds one batch's images, whatever the file's size; of the
        # images only the key columns are read (a dotted path; a name holding a dot reads too)
        images = [f"{image}.{name}" for image in ("_before", "_after") for name in field]
        for batch in source.iter_batches(batch_size=FACT_BATCH_ROWS, columns=["_op", *images, "_after_absent"]):
            updates = pc.equal(batch.column("_op"), "update")
            absent = batch.column("_after_absent")
            lacking_any = pc.greater(pc.fill_null(pc.list_value_length(absent), 0), 0)  # an image lacks a column
            if not partial_inserts:
                partial_inserts = bool(pc.any(pc.and_(pc.equal(batch.column("_op"), "insert"), lacking_any)).as_py())
            if not partial and pc.any(pc.and_(updates, lacking_any)).as_py():
                lacking = {name for row in pc.filter(absent, updates).to_pylist() for name in (row or ())}
                partial = bool(lacking - {renamed.get(k, k) for k in keyset})
            before, after = batch.column("_before"), batch.column("_after")
            for j, name in enumerate(field):
                b, a = pc.struct_field(before, name), pc.struct_field(after, name)
                if pc.any(pc.fill_null(pc.and_(updates, pc.not_equal(b, a)), False)).as_py():
                    key_changes = True
                if j == 0 and not enough:  # the first key column's values, of both images
                    values.extend([pc.unique(pc.drop_null(b)), pc.unique(pc.drop_null(a))])
            if not enough and sum(len(v) for v in values) > 4 * max_key_values:  # keep them few
                distinct = _distinct(values)
                enough = len(distinct) > max_key_values  # more than a key filter takes: no more needed
                values = [distinct.slice(0, max_key_values + 1) if enough else distinct]
    return StagedFacts(key_changes, partial, _first_values(values, max_key_values), partial_inserts)


def _distinct(arrays: list) -> Any:
    """The distinct values of ``arrays`` as one array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = [a for a in arrays if len(a)]
    if not arrays:
        return pa.array([], pa.null())
    if len({a.type for a in arrays}) == 1:
        return pc.unique(pa.chunked_array(arrays, arrays[0].type).combine_chunks())
    return pc.unique(pa.array([v for a in arrays for v in a.to_pylist()]))


def _first_values(arrays: list, limit: int) -> list[Any]:
    """The distinct values of ``arrays``, sorted, when there are at most ``limit``; else
    ``limit + 1`` of them (enough to tell that there are more), without making every value a
    Python object."""
    distinct = _distinct(arrays)
    if len(distinct) > limit:
        return distinct.slice(0, limit + 1).to_pylist()
    return sorted(distinct.to_pylist())
