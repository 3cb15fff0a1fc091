"""A snapshot batch's staged rows as each key's final row, streamed with pyarrow, for the direct
commit of initial loads (``merge/lake/direct_snapshot.py``).

A snapshot batch stages every row of a table once (rows whose ``_txn`` starts with
``snapshot:``: the consistent read, or the watermark snapshot's chunks) and, for a watermark
snapshot, the changes the binlog made to rows already read while the snapshot ran. The
MERGE folds all of it per key; but only the keys those changes touch need folding, and they
are few. So the changes are read first (:meth:`SnapshotFold.plan`), and then the snapshot's
rows stream through (:meth:`SnapshotFold.rows`): a row of an untouched key goes out as it is,
the rows of touched keys are held back and folded with the changes at the end, by the rule
of :func:`..direct_changes.fold_changes` (each key's last change wins). Memory holds the
changes, the held-back rows, one chunk and what shows that the snapshot gave each key once
(:class:`UniqueKeys`: the key ranges of the chunks for an integer key, else a copy of the key
columns); a snapshot that did not, or where that cannot be shown, is left to Spark, which folds
it whole. Row files the direct commit takes as they are (:meth:`SnapshotFold.adopt`) are not
streamed: their keys are read, to check them and to find the rows the changes touch.
"""
from __future__ import annotations

import bisect
import dataclasses
from typing import Any, Iterator, Optional, Sequence

from ..staging.row_files import StagedRowsFile
from ..staging.storage import open_parquet, read_parquet
from .direct_changes import CHANGE_COLUMNS, fold_changes

#: The ``_txn`` of the rows a snapshot read (the rest of a snapshot batch are binlog changes).
SNAPSHOT_TXN_PREFIX = "snapshot:"
#: Rows per chunk read from a staged file.
CHUNK_ROWS = 128 * 1024


def _is_snapshot(txn: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(txn.type):
        txn = txn.cast(pa.string())
    return pc.fill_null(pc.starts_with(txn, SNAPSHOT_TXN_PREFIX), False)


def _may_hold_changes(metadata: Any) -> bool:
    """Whether a staged file (its footer's ``metadata``) may hold rows other than the snapshot's,
    by the statistics of its ``_txn`` column (kept for the envelope columns): a row group whose
    least and greatest ``_txn`` both start with :data:`SNAPSHOT_TXN_PREFIX` holds only such
    values."""
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        column = next((row_group.column(i) for i in range(row_group.num_columns)
                       if row_group.column(i).path_in_schema == "_txn"), None)
        stats = None if column is None else column.statistics
        if stats is None or not stats.has_min_max:
            return True
        if not (str(stats.min).startswith(SNAPSHOT_TXN_PREFIX) and str(stats.max).startswith(SNAPSHOT_TXN_PREFIX)):
            return True
    return False


@dataclasses.dataclass
class SnapshotFold:
    """The plan of one table's snapshot batch (see the module's docstring): ``changes`` (the
    staged binlog changes, :data:`CHANGE_COLUMNS`), their keys, and which files hold some."""

    files: list[str]
    primary_key: list[str]
    columns: list[str]
    changes: Any
    changed_keys: Any
    files_with_changes: frozenset[str]
    #: after :meth:`rows` ran: rows that went out as read, rows folded, and whether the
    #: snapshot gave each key once (when False, what :meth:`rows` gave must not be committed)
    streamed: int = 0
    folded: int = 0
    unique: Optional[bool] = None
    #: row files taken as they are (:meth:`adopt`), with their rows
    adopted: dict[str, int] = dataclasses.field(default_factory=dict)
    #: positions (in the file) of the rows of adopted files that the changes replace
    deleted: dict[str, Any] = dataclasses.field(default_factory=dict)
    held_adopted: list[Any] = dataclasses.field(default_factory=list)
    _sent: Optional["UniqueKeys"] = None

    @classmethod
    def plan(cls, files: Sequence[str], primary_key: Sequence[str], columns: Sequence[str], *,
             max_change_bytes: int) -> Optional["SnapshotFold"]:
        """Read the changes of ``files`` (one table's staged files of a snapshot batch). None
        (leave the table to Spark) when a file lacks a target column, the changes are not simple
        (see :func:`..direct_changes.fold_changes`) or hold more than ``max_change_bytes``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not primary_key or not files or not set(primary_key) <= set(columns):
            return None
        footers = {}
        for location in files:  # each file's footer, read once
            parquet = open_parquet(location)
            image = parquet.schema_arrow.field("_after").type
            if not set(columns) <= {image.field(i).name for i in range(image.num_fields)}:
                return None
            footers[location] = parquet
        parts, with_changes, size = [], set(), 0
        for location in files:
            if isinstance(footers[location], StagedRowsFile) or not _may_hold_changes(footers[location].metadata):
                continue  # a row file holds a snapshot's rows only
            changed = pc.invert(_is_snapshot(read_parquet(location, columns=["_txn"]).column("_txn")))
            if not pc.any(changed).as_py():
                continue
            part = read_parquet(location, columns=list(CHANGE_COLUMNS)).filter(changed)
            size += part.nbytes
            if size > max_change_bytes:
                return None
            parts.append(part)
            with_changes.add(location)
        if any(p.schema != parts[0].schema for p in parts[1:]):
            return None
        changes = pa.concat_tables(parts) if parts else None
        keys = None
        if changes is not None:
            changes = split_key_changes(changes, primary_key)
            folded = fold_changes(changes, primary_key, columns)
            if folded is None:
                return None
            keys = folded.keys
        return cls(list(files), list(primary_key), list(columns), changes, keys, frozenset(with_changes))

    def _touched(self, rows: Any) -> Optional[Any]:
        """Which of ``rows`` (flattened) have a key the changes touch, as a boolean mask; None
        when none can (no changes)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.changed_keys is None or not self.changed_keys.num_rows:
            return None
        if len(self.primary_key) == 1:
            name = self.primary_key[0]
            return pc.is_in(rows.column(name), value_set=self.changed_keys.column(name))
        indexed = rows.select(self.primary_key).append_column("_i", pa.array(range(rows.num_rows), pa.int64()))
        hit = indexed.join(self.changed_keys, self.primary_key, join_type="left semi").column("_i")
        return pc.is_in(pa.array(range(rows.num_rows), pa.int64()), value_set=hit)

    def _keys_sent(self) -> "UniqueKeys":
        if self._sent is None:
            self._sent = UniqueKeys(self.primary_key)
        return self._sent

    def adopt(self, location: str, source: StagedRowsFile, *, with_deletes: bool = False) -> bool:
        """Take row file ``location`` (``staging/row_files.py``, opened as ``source``) as it is:
        its keys join those checked distinct, and :meth:`rows` skips it. When a change touches
        some of its keys, it is taken only ``with_deletes``: the rows of those keys are folded with
        the changes and their positions in the file kept in :attr:`deleted` (to commit as
        position deletes). False (nothing taken) when a change touches it without deletes."""
        import numpy as np
        import pyarrow.compute as pc

        keys = source.file.read(columns=self.primary_key)
        touched = self._touched(keys)
        if touched is not None and pc.any(touched).as_py():
            if not with_deletes:
                return False
            positions = pc.indices_nonzero(touched)
            self._hold_rows(source, positions.to_numpy().astype(np.int64))
            self.deleted[location] = positions
            keys = keys.filter(pc.invert(touched))
        self._keys_sent().add(keys)
        self.adopted[location] = keys.num_rows
        return True

    def _hold_rows(self, source: StagedRowsFile, positions: Any) -> None:
        """The rows at ``positions`` of a row file, to fold with the changes (read by row group)."""
        import numpy as np

        starts = np.asarray(source.group_starts, dtype=np.int64)
        columns = ["_binlog_seq", "_binlog_pos", "_row", "_after"]
        for group in np.unique(np.searchsorted(starts, positions, side="right") - 1):
            inside = positions[(positions >= starts[group]) & (positions < starts[group + 1])] - starts[group]
            rows = source.read_row_group(int(group), columns=columns).take(inside)
            self.held_adopted.append(self._as_changes(rows))

    def rows(self) -> Iterator[Any]:
        """Each key's final row, in chunks (pyarrow tables of the target ``columns`` in their
        staged types): the snapshot's rows of untouched keys as they are read (but for the files
        taken by :meth:`adopt`), then the keys the changes touch, folded. Sets :attr:`streamed`,
        :attr:`folded` and :attr:`unique` (which counts the adopted files' keys too)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        held: list[Any] = []
        sent = self._keys_sent()
        read = ["_txn", "_op", "_binlog_seq", "_binlog_pos", "_row", "_after"]
        self.streamed = self.folded = 0
        self.unique = None
        for location in self.files:
            if location in self.adopted:
                continue
            parquet = open_parquet(location)
            columns = read if self.changes is not None else ["_after"]  # no change: the rows alone
            for batch in parquet.iter_batches(batch_size=CHUNK_ROWS, columns=columns):
                if location in self.files_with_changes:
                    batch = batch.filter(_is_snapshot(batch.column("_txn")))
                if not batch.num_rows:
                    continue
                after = batch.column("_after")
                flat = pa.table({n: pc.struct_field(after, n) for n in self.columns})
                touched = self._touched(flat)
                if touched is not None and pc.any(touched).as_py():
                    held.append(self._as_changes(batch.filter(touched)))
                    flat = flat.filter(pc.invert(touched))
                if flat.num_rows:
                    sent.add(flat)
                    self.streamed += flat.num_rows
                    yield flat
        self.unique = sent.distinct()
        if self.changes is None:
            return
        held += self.held_adopted
        staged = pa.concat_tables([self.changes, *held]) if held else self.changes
        final = fold_changes(staged, self.primary_key, self.columns)
        if final is None:  # pragma: no cover - the changes alone folded, and snapshot rows are whole inserts
            self.unique = False
            return
        self.folded = final.rows.num_rows
        if final.rows.num_rows:
            yield final.rows

    def _as_changes(self, rows: Any) -> Any:
        """Snapshot rows (a record batch as staged) as staged inserts in the changes' schema,
        to fold with them."""
        import pyarrow as pa

        schema = self.changes.schema
        n = rows.num_rows
        columns = {
            "_op": pa.array(["insert"] * n, schema.field("_op").type),
            "_binlog_seq": rows.column("_binlog_seq").cast(schema.field("_binlog_seq").type),
            "_binlog_pos": rows.column("_binlog_pos").cast(schema.field("_binlog_pos").type),
            "_row": rows.column("_row").cast(schema.field("_row").type),
            "_before": pa.nulls(n, schema.field("_before").type),
            "_after": _cast_struct(rows.column("_after"), schema.field("_after").type),
            "_after_absent": pa.nulls(n, schema.field("_after_absent").type),
        }
        return pa.table(columns, schema=schema)


def split_key_changes(staged: Any, primary_key: Sequence[str]) -> Any:
    """``staged`` changes (:data:`CHANGE_COLUMNS`) with each update that changes the primary key
    made a delete of its old key and an insert of its new one, at its position. Exact for the
    final state of whole images (what a fold computes): the old key's row is gone, the new key
    holds the after image."""
    import pyarrow as pa
    import pyarrow.compute as pc

    op, before, after = staged.column("_op"), staged.column("_before"), staged.column("_after")
    moved = None
    for name in primary_key:
        differs = pc.not_equal(pc.struct_field(before, name), pc.struct_field(after, name))
        moved = differs if moved is None else pc.or_(moved, differs)
    moved = pc.fill_null(pc.and_(pc.equal(op, "update"), moved), False)
    if not pc.any(moved).as_py():
        return staged
    rows = staged.filter(moved)
    n, names = rows.num_rows, staged.schema.names

    def with_column(table: Any, name: str, values: Any) -> Any:
        return table.set_column(names.index(name), staged.schema.field(name), values)

    op_type = staged.schema.field("_op").type
    deletes = with_column(with_column(rows, "_op", pa.array(["delete"] * n, op_type)), "_after",
                          pa.nulls(n, after.type))
    inserts = with_column(with_column(rows, "_op", pa.array(["insert"] * n, op_type)), "_before",
                          pa.nulls(n, before.type))
    return pa.concat_tables([staged.filter(pc.invert(moved)), deletes, inserts])


def _cast_struct(array: Any, target: Any) -> Any:
    """A staged image in the changes' image type (the same columns; a file of the batch may
    stage a column in a narrower type than another)."""
    if array.type == target:
        return array
    return array.cast(target)


class UniqueKeys:
    """Whether the keys of the rows streamed are distinct, holding little: keys of one integer
    column are checked as ranges (each chunk sorted on its own; a snapshot reads a table in key
    order, so the ranges of its chunks follow one another and merge), any other key is kept as
    a copy of its columns and counted at the end. A chunk whose range overlaps one seen before
    cannot be checked that way: the answer is then "not shown distinct" (False)."""

    def __init__(self, primary_key: Sequence[str]) -> None:
        self.primary_key = list(primary_key)
        self.count = 0
        self.ranges: list[list[int]] = []   # disjoint [low, high], sorted
        self.kept: list[Any] = []
        self.overlap = False

    def add(self, rows: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not rows.num_rows:
            return
        self.count += rows.num_rows
        if len(self.primary_key) != 1 or not pa.types.is_integer(rows.schema.field(self.primary_key[0]).type):
            keys = rows.select(self.primary_key)
            self.kept.append(keys.take(pa.array(range(keys.num_rows))))  # a copy: not the chunk's buffers
            return
        column = rows.column(self.primary_key[0])
        n = len(column)
        if n > 1 and not pc.all(pc.greater(column.slice(1), column.slice(0, n - 1))).as_py():
            column = column.take(pc.sort_indices(column))  # not in key order as read: sorted first
        if n > 1 and not pc.all(pc.greater(column.slice(1), column.slice(0, n - 1))).as_py():
            self.overlap = True  # a key twice in the chunk itself
            return
        low, high = column[0].as_py(), column[n - 1].as_py()
        at = bisect.bisect_left(self.ranges, [low, low])
        before = self.ranges[at - 1] if at else None
        after = self.ranges[at] if at < len(self.ranges) else None
        if (before is not None and before[1] >= low) or (after is not None and after[0] <= high):
            self.overlap = True
            return
        if before is not None and before[1] + 1 == low:
            before[1] = high
            if after is not None and after[0] == high + 1:
                before[1] = after[1]
                del self.ranges[at]
        elif after is not None and after[0] == high + 1:
            after[0] = low
        else:
            self.ranges.insert(at, [low, high])

    def distinct(self) -> bool:
        """Whether every key added was distinct (False too when it could not be shown)."""
        import pyarrow as pa

        if self.overlap:
            return False
        if not self.kept:
            return True
        keys = pa.concat_tables(self.kept)
        return keys.group_by(self.primary_key).aggregate([]).num_rows == keys.num_rows
