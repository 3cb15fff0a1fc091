"""A table's staged changes folded to each key's final state (see :mod:`.direct_changes`), reading
the narrow columns first and only the after images that win.

A fold needs every change's key and binlog order, but only the after image of each key's last
change. So the staged files are read twice, column by column: first the envelope (operation,
binlog order, image sizes) and the key columns of both images, from which each key's last
change is found by one sort (by key, then binlog order: the last row of each key's run);
then, file by file, only the target columns of the after images, of which only the winning
rows are kept. Memory holds the narrow columns of the whole batch and the final rows, never
every change's images (a whole-table fold held about twenty times the staged bytes).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..staging.storage import open_parquet, total_size
from .direct_changes import BINLOG_ORDER, CHANGE_COLUMNS, DEFAULT_DIRECT_MAX_BYTES, DirectChanges

#: The envelope columns the first pass reads (the images' key columns besides).
_ENVELOPE = ("_op", *BINLOG_ORDER, "_after_absent")


def _position_after(position: tuple[int, int], seq: Any, pos: Any, strict: bool) -> Any:
    import pyarrow.compute as pc

    s, p = position
    tail = pc.greater(pos, p) if strict else pc.greater_equal(pos, p)
    return pc.or_(pc.greater(seq, s), pc.and_(pc.equal(seq, s), tail))


def _same_layout(sources: Sequence[Any]) -> bool:
    """Whether every file has the change columns, of the same types (a column added within the
    batch makes the images differ: the MERGE folds those)."""
    first = sources[0].schema_arrow
    if not set(CHANGE_COLUMNS) <= set(first.names):
        return False
    for source in sources[1:]:
        schema = source.schema_arrow
        if not set(CHANGE_COLUMNS) <= set(schema.names):
            return False
        if any(schema.field(c).type != first.field(c).type for c in CHANGE_COLUMNS):
            return False
    return True


def _narrow(sources: Sequence[Any], primary_key: Sequence[str]) -> Any:
    """Every staged change's envelope, before and after key columns (``b<j>``, ``a<j>``), file
    (``_file``) and row in it (``_at``), as one table."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [*_ENVELOPE, *(f"{image}.{k}" for image in ("_before", "_after") for k in primary_key)]
    parts = []
    for i, source in enumerate(sources):
        read = source.read(columns=columns)
        n = read.num_rows
        data = {c: read.column(c) for c in _ENVELOPE}
        for j, k in enumerate(primary_key):
            data[f"b{j}"] = pc.struct_field(read.column("_before"), k)
            data[f"a{j}"] = pc.struct_field(read.column("_after"), k)
        data["_file"] = pa.array(np.full(n, i, dtype=np.int32))
        data["_at"] = pa.array(np.arange(n, dtype=np.int64))
        parts.append(pa.table(data))
    return pa.concat_tables(parts)


def _last_of_runs(sorted_keys: list[Any]) -> Any:
    """A mask of the last row of each run of equal keys (the columns of a sorted table)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(sorted_keys[0])
    if n == 0:
        return pa.array([], pa.bool_())
    differs = None
    for column in sorted_keys:
        step = pc.not_equal(column.slice(0, n - 1), column.slice(1))
        differs = step if differs is None else pc.or_(differs, step)
    return pa.chunked_array([*(differs.chunks if isinstance(differs, pa.ChunkedArray) else [differs]),
                             pa.array([True])], pa.bool_())


def _gather_after(sources: Sequence[Any], files: Any, rows: Any, columns: Sequence[str]) -> Any:
    """The after images at ``(files[i], rows[i])`` of the staged files, in that order, as a
    table of ``columns``: only the row groups holding some, one at a time, only the target
    columns."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    files, rows = np.asarray(files), np.asarray(rows)
    taken, placed = [], []
    for i, source in enumerate(sources):
        here = np.flatnonzero(files == i)
        if not len(here):
            continue
        starts = np.cumsum([0] + [source.metadata.row_group(g).num_rows for g in range(source.num_row_groups)])
        group_of = np.searchsorted(starts, rows[here], side="right") - 1
        for group in np.unique(group_of):
            mine = here[group_of == group]
            images = source.read_row_group(int(group), columns=[f"_after.{c}" for c in columns]).column("_after")
            part = pc.take(images, pa.array(rows[mine] - starts[group]))
            taken.append(pa.table({c: pc.struct_field(part, c) for c in columns}))
            placed.append(mine)
    if not taken:
        return pa.table({c: pa.array([], sources[0].schema_arrow.field("_after").type.field(c).type)
                         for c in columns})
    gathered = pa.concat_tables(taken)
    del taken
    order = np.empty(len(files), dtype=np.int64)
    order[np.concatenate(placed)] = np.arange(len(files), dtype=np.int64)
    return gathered.take(pa.array(order)).combine_chunks()


def collapse_staged(files: Sequence[str], primary_key: Sequence[str], columns: Sequence[str], *,
                    since: Optional[tuple[int, int]] = None,
                    reset: Optional[tuple[int, int]] = None,
                    max_bytes: Optional[int] = DEFAULT_DIRECT_MAX_BYTES,
                    staged_bytes: Optional[int] = None) -> Optional[DirectChanges]:
    """The final state of each key the staged ``files`` of one table (in staging order) touch,
    for the target ``columns``, both sorted by key: only changes at or after ``since``, and
    strictly after ``reset`` (a TRUNCATE: the table keeps only what follows it). None when the
    changes are not simple (an update changes a key, an after image lacks a column, the files
    differ in columns or lack one, a key is null) or the files hold more than ``max_bytes``
    (``staged_bytes``, as the manifest records them, else looked up; ``max_bytes`` None: any
    size)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not primary_key or not files:
        return None
    if max_bytes is not None and total_size(files, staged_bytes) > max_bytes:
        return None
    sources = [open_parquet(f) for f in files]
    if not _same_layout(sources):
        return None
    image_type = sources[0].schema_arrow.field("_after").type
    have = {image_type.field(i).name for i in range(image_type.num_fields)}
    if not set(columns) <= have or not set(primary_key) <= set(columns):
        return None
    staged = _narrow(sources, primary_key)
    seq, pos = staged.column("_binlog_seq"), staged.column("_binlog_pos")
    keep = None
    if since is not None:
        keep = _position_after(since, seq, pos, strict=False)
    if reset is not None:
        later = _position_after(reset, seq, pos, strict=True)
        keep = later if keep is None else pc.and_(keep, later)
    if keep is not None:
        staged = staged.filter(keep)
    op = staged.column("_op")
    deletes, updates = pc.equal(op, "delete"), pc.equal(op, "update")
    absent = pc.fill_null(pc.list_value_length(staged.column("_after_absent")), 0)
    if pc.any(pc.and_(pc.invert(deletes), pc.greater(absent, 0))).as_py():
        return None  # an image lacks a column: its value comes from the row before (Spark)
    keys = {}
    for j in range(len(primary_key)):
        b, a = staged.column(f"b{j}"), staged.column(f"a{j}")
        if pc.any(pc.fill_null(pc.and_(updates, pc.not_equal(b, a)), False)).as_py():
            return None  # a key change: the keys it links are folded in order (Spark)
        keys[f"k{j}"] = pc.if_else(deletes, b, a)
        if keys[f"k{j}"].null_count:
            return None
    # sorted by key, then binlog order: each key's last change ends its run (only indices move)
    order = pc.sort_indices(pa.table({**keys, **{c: staged.column(c) for c in BINLOG_ORDER}}),
                            sort_keys=[(c, "ascending") for c in [*keys, *BINLOG_ORDER]])
    last = pc.filter(order, _last_of_runs([pc.take(k, order) for k in keys.values()]))
    del order
    # every touched key, inserted ones too: like the MERGE's upsert, a row the table should not
    # have held (a table out of step with its checkpoint) is replaced, never doubled
    touched = pa.table({k: pc.take(keys[f"k{j}"], last) for j, k in enumerate(primary_key)})
    live = pc.filter(last, pc.invert(pc.take(deletes, last)))
    rows = _gather_after(sources, pc.take(staged.column("_file"), live).to_numpy(),
                         pc.take(staged.column("_at"), live).to_numpy(), columns)
    return DirectChanges(rows, touched.combine_chunks())


__all__ = ["collapse_staged"]
