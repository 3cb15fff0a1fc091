"""Where the rows a batch replaces sit in a table's data files, as Iceberg position deletes,
found with pyarrow on the driver.

A direct commit (``merge/lake/direct_commit.py``) replaces the rows of every key its batch
touches. Iceberg can say which rows to drop in two ways: an equality delete (the keys; every
reader must match them against every older data file on every scan, and PyIceberg, Polars and
Daft refuse them) or a position delete (a data file's path and a row's position in it; every
reader applies them). A batch writer can look its rows up, so it writes position deletes: the
key columns of the data files whose key bounds overlap the batch's keys are read (only those
columns, and only the row groups whose statistics overlap), the positions of the touched keys
taken, less those an earlier delete already dropped.

Pure pyarrow: the scan planning that names the files is Iceberg's (``merge/lake/row_locator.py``).
"""
from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Optional, Sequence

from .errors import MergeJobError
from .iceberg_arrow import FIELD_ID

#: Data files searched at once (threads: Arrow releases the GIL while it reads and looks up).
_THREADS = min(4, os.cpu_count() or 1)

#: The reserved field ids and names of a position delete file's columns (Iceberg spec,
#: "Position Delete Files").
FILE_PATH_ID, POS_ID = 2147483546, 2147483545


class KeyColumnsMissing(MergeJobError):
    """A data file without the Iceberg field id of a key column (written without field ids, read
    through a name mapping): its rows cannot be located here."""


@dataclasses.dataclass(frozen=True)
class DataFileScan:
    """One data file a batch's keys may be in: its path, its row count, and the paths of the
    position delete files that apply to it (their rows for this path are already gone)."""

    path: str
    record_count: int
    position_deletes: tuple[str, ...] = ()


def position_delete_schema() -> Any:
    """The columns of a position delete file, as :func:`locate` gives them: ``file_path`` as a
    dictionary of the few data files' paths (a path repeated per row took a hundred bytes a
    row), which Parquet stores as its plain string column when the Arrow schema is not stored
    with the file."""
    import pyarrow as pa

    return pa.schema([
        pa.field("file_path", pa.dictionary(pa.int32(), pa.string()), nullable=False,
                 metadata={FIELD_ID: str(FILE_PATH_ID).encode()}),
        pa.field("pos", pa.int64(), nullable=False, metadata={FIELD_ID: str(POS_ID).encode()}),
    ])


def key_range(column: Any) -> Optional[tuple[Any, Any]]:
    """The lowest and highest value of a key column, for integers and text (whose order Arrow,
    Parquet statistics and Iceberg's bounds agree on); None for other types."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_integer(column.type) or pa.types.is_string(column.type)):
        return None
    bounds = pc.min_max(column).as_py()
    return bounds["min"], bounds["max"]


def _row_groups(metadata: Any, column_index: int, bounds: Optional[tuple[Any, Any]]) -> list[int]:
    """The row groups whose statistics of column ``column_index`` overlap ``bounds`` (all of
    them where a group has no statistics or the bounds are not comparable)."""
    out = []
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column_index).statistics
        if bounds is not None and stats is not None and stats.has_min_max:
            try:
                if stats.max < bounds[0] or stats.min > bounds[1]:
                    continue
            except TypeError:
                pass
        out.append(i)
    return out


def _arange(n: int) -> Any:
    """0, 1, ..., n - 1 as int64, built by Arrow (a Python range of millions would not be)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.indices_nonzero(pc.fill_null(pa.nulls(n, pa.bool_()), True)), pa.int64())


def key_row_groups(source: Any, keys: Any, field_ids: Sequence[int]) -> Iterator[tuple[int, Any]]:
    """The key columns of one data file (``source``: a path or a file object pyarrow reads),
    row group by row group, as ``(position of the group's first row, key table)``: the columns
    found by Iceberg field id (a renamed column keeps its id) and cast to ``keys``' types;
    only the row groups whose statistics overlap ``keys``' range of the first key column.
    :class:`KeyColumnsMissing` when the file has no column of a key's field id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(source)
    by_id = {}
    for field in parquet.schema_arrow:
        value = (field.metadata or {}).get(FIELD_ID)
        if value is not None:
            by_id[int(value)] = field.name
    names = keys.column_names
    present = [by_id.get(fid) for fid in field_ids]
    if None in present:
        raise KeyColumnsMissing(f"a data file has no column with field id "
                                f"{', '.join(str(f) for f, p in zip(field_ids, present) if p is None)}")
    metadata = parquet.metadata
    groups = list(range(metadata.num_row_groups))
    leaf = _leaf_index(metadata.schema, present[0])
    if leaf is not None:
        groups = _row_groups(metadata, leaf, key_range(keys.column(names[0])))
    starts, at = [], 0
    for i in range(metadata.num_row_groups):
        starts.append(at)
        at += metadata.row_group(i).num_rows
    for group in groups:
        part = parquet.read_row_group(group, columns=present)
        columns = {}
        for name, found in zip(names, present):
            target = keys.schema.field(name).type
            columns[name] = part.column(found).cast(target)
        yield starts[group], pa.table(columns)


def _leaf_index(schema: Any, name: str) -> Optional[int]:
    """The Parquet leaf column index of top-level primitive column ``name``."""
    for i in range(len(schema)):
        if schema.column(i).path == name:
            return i
    return None


def matching_positions(file_keys: Any, start: int, keys: Any) -> Any:
    """The positions (int64, ascending) of the rows of ``file_keys`` (a row group whose first
    row is at ``start``) whose key is one of ``keys`` (same column names and types)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = keys.column_names
    if not file_keys.num_rows or not keys.num_rows:
        return pa.array([], pa.int64())
    found = _sorted_matches(file_keys.column(names[0]), keys.column(names[0])) if len(names) == 1 else None
    if found is None and len(names) == 1:
        hit = pc.fill_null(pc.is_in(file_keys.column(names[0]), value_set=keys.column(names[0]).combine_chunks()),
                           False)
        found = pc.cast(pc.indices_nonzero(hit), pa.int64())
    elif found is None:
        tagged = file_keys.append_column("_pos", _arange(file_keys.num_rows))
        found = tagged.join(keys, names, join_type="inner").column("_pos").combine_chunks()
        found = pc.take(found, pc.sort_indices(found))
    return pc.add(found, start) if start else found


def _sorted_matches(column: Any, wanted: Any) -> Optional[Any]:
    """The positions of ``wanted``'s values in ``column``, found by binary search, when both
    are integers without nulls and ``column`` is strictly increasing (a data file written in
    key order, as direct commits and snapshots write them); None otherwise. A hash lookup of
    every row costs about ten times as much."""
    import numpy as np
    import pyarrow as pa

    if not (pa.types.is_integer(column.type) and pa.types.is_integer(wanted.type)) \
            or column.null_count or wanted.null_count:
        return None
    values = np.asarray(column.to_numpy())
    if len(values) > 1 and not bool(np.all(values[1:] > values[:-1])):
        return None
    targets = np.asarray(wanted.to_numpy())
    if len(targets) > 1 and not bool(np.all(targets[1:] >= targets[:-1])):
        targets = np.sort(targets)
    at = np.searchsorted(values, targets)
    inside = at < len(values)
    at, targets = at[inside], targets[inside]
    at = at[values[at] == targets]
    if len(at) > 1:
        at = at[np.concatenate(([True], at[1:] != at[:-1]))]  # a key wanted twice: its row once
    return pa.array(at.astype(np.int64))


def deleted_positions(delete_files: Sequence[Any], path: str) -> Any:
    """The positions of data file ``path`` that the position delete files (paths or file
    objects) already drop."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    found = []
    for source in delete_files:
        table = pq.read_table(source, columns=["file_path", "pos"], filters=[("file_path", "=", path)])
        found.append(table.column("pos"))
    if not found:
        return pa.array([], pa.int64())
    return pc.unique(pa.chunked_array([c for col in found for c in col.chunks], pa.int64()).combine_chunks())


def locate(files: Sequence[DataFileScan], keys: Any, field_ids: Sequence[int],
           open_file: Callable[[str], Any]) -> Any:
    """The position deletes (a table of :func:`position_delete_schema`, sorted by path and
    position) that drop every live row of ``files`` whose key is one of ``keys``; ``open_file``
    gives what pyarrow reads a path from (a local path, or a file object of the table's
    storage)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def positions_in(scan: DataFileScan) -> Any:
        found = [matching_positions(group, start, keys)
                 for start, group in key_row_groups(open_file(scan.path), keys, field_ids)]
        hits = pa.chunked_array(found, pa.int64()).combine_chunks() if found else pa.array([], pa.int64())
        if len(hits) and scan.position_deletes:
            gone = deleted_positions([open_file(p) for p in scan.position_deletes], scan.path)
            if len(gone):
                hits = pc.filter(hits, pc.invert(pc.is_in(hits, value_set=gone)))
        return hits

    ordered = sorted(files, key=lambda f: f.path)
    # Arrow's reads and lookups release the GIL: the files are searched at once
    with ThreadPoolExecutor(max_workers=max(1, min(len(ordered), _THREADS))) as pool:
        found = list(pool.map(positions_in, ordered))
    import numpy as np

    named, counts, positions = [], [], []
    for scan, hits in zip(ordered, found):
        if len(hits):
            named.append(scan.path)
            counts.append(len(hits))
            positions.append(hits)
    schema = position_delete_schema()
    if not named:
        return schema.empty_table()
    which = pa.array(np.repeat(np.arange(len(named), dtype=np.int32), counts))
    paths = pa.DictionaryArray.from_arrays(which, pa.array(named, pa.string()))
    return pa.Table.from_arrays([paths, pa.chunked_array(positions, pa.int64())], schema=schema)
