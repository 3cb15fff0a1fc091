"""Key ranges compared at a common binlog position, and a differing range narrowed down to the
keys that differ.

The Iceberg table is read at its pinned snapshot, whose rows are the source's at its checkpoint
C. The source is read later, at P. A key the binlog changed between C and P may differ for that
reason alone, so each range is compared without such keys: before its read, the binlog is
followed to the server's position and the keys changed there are left out of the read (``NOT
IN``) and of Iceberg's rows; after it, the binlog is followed to P, and if another key of the
range changed in between, the range is read again (a few times; then it is *in flight*). The
keys left out are checked again after the next merge.

A differing range is split at Iceberg's keys into up to :data:`FANOUT` parts, each compared
again (the parts in one transaction), down to parts holding one Iceberg row: there, the source's
other keys are rows missing in Iceberg, and the one key is compared alone."""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...capture.verify.changes import KeyChanges
from ...capture.verify.source import Checksum, KeyRange, SourceTable, checksums, key_bounds, position_now
from ...codec import constants as C
from .iceberg import HASH, in_range
from .report import CHANGED, EXTRA, MISSING, MIXED, KeyRangeReport, key_json

#: parts a differing range is split into, at each step
FANOUT = 16
#: steps of splitting at most (16^6 rows: any chunk)
MAX_DEPTH = 6
#: reads of a range whose keys change during each, before it is in flight
READ_TRIES = 3


@dataclass
class SourceRead:
    """Checksums of key ranges read together: per range the checksum (None: in flight) and the
    keys left out, and the binlog position of the read."""

    sums: list[Optional[Checksum]]
    excluded: list[tuple]
    position: tuple[str, int]


class SourceSide:
    """The source's reads of one table, with the keys the binlog changed since Iceberg's
    checkpoint left out."""

    def __init__(self, conn: Any, flavor: str, table: SourceTable, changes: KeyChanges,
                 max_excluded: int = 10_000) -> None:
        self.conn, self.flavor, self.table, self.changes = conn, flavor, table, changes
        self.name = (table.tm.schema, table.tm.table)
        self.max_excluded = max_excluded
        self._sorted: list = []
        self._sorted_size = -1

    def changed_in(self, r: KeyRange) -> list[tuple]:
        keys = self.changes.keys(self.name)
        if r.keys is not None:
            return [k for k in r.keys if k in keys]
        if not self.table.ordered:
            return sorted(keys, key=repr) if r.after is None and r.upto is None else [k for k in keys if r.holds(k)]
        if self._sorted_size != len(keys):
            self._sorted, self._sorted_size = sorted(keys), len(keys)
        lo = 0 if r.after is None else bisect.bisect_right(self._sorted, r.after)
        hi = len(self._sorted) if r.upto is None else bisect.bisect_right(self._sorted, r.upto)
        return self._sorted[lo:hi]

    def read(self, ranges: Sequence[KeyRange], also_exclude: Optional[Sequence[Sequence[tuple]]] = None) -> SourceRead:
        """The ranges' checksums in one transaction (see the module). On MariaDB the keys
        changed while the reads ran are subtracted inside it (``checksums``' ``changed_since``):
        one read always does; elsewhere a range whose keys changed meanwhile is read again."""
        extra = list(also_exclude) if also_exclude is not None else [()] * len(ranges)
        flight = [False] * len(ranges)
        moved = [False] * len(ranges)
        excluded: list[tuple] = []
        for _ in range(READ_TRIES):
            self.changes.follow_to(*position_now(self.conn))
            excluded = [tuple(self.changed_in(r)) for r in ranges]
            flight = [len(e) > self.max_excluded for e in excluded]
            skip = [(() if f else e) + tuple(x) for e, f, x in zip(excluded, flight, extra)]

            def changed_since(position: tuple[str, int]) -> list[tuple]:
                self.changes.follow_to(*position)
                return [() if f else tuple(k for k in self.changed_in(r) if k not in set(e) and k not in set(x))
                        for r, e, f, x in zip(ranges, excluded, flight, extra)]

            sums, position, taken = checksums(self.conn, self.flavor, self.table, ranges, skip, changed_since)
            self.changes.follow_to(*position)
            excluded = [e + t for e, t in zip(excluded, taken)]
            moved = [not f and any(k not in set(e) and k not in set(x) for k in self.changed_in(r))
                     for r, e, f, x in zip(ranges, excluded, flight, extra)]
            if not any(moved):
                break
        return SourceRead([None if f or m else s for s, f, m in zip(sums, flight, moved)], excluded, position)

    def source_key(self, key: tuple) -> tuple:
        """A key as Iceberg gives it, as the source compares it (TIME: microseconds)."""
        import datetime as dt

        out = []
        for value, i in zip(key, self.table.key):
            if self.table.tm.columns[i].type in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2) and isinstance(value, int):
                value = dt.timedelta(microseconds=value)
            out.append(value)
        return tuple(out)


def iceberg_sum(rows: pa.Table, key_names: Sequence[str], r: KeyRange, exclude: Sequence[tuple] = ()) -> Checksum:
    """The checksum of Iceberg's rows (keys and hashes) in ``r`` without ``exclude``."""
    mask = in_range(rows.select(list(key_names)), r, exclude)
    hashes = rows.column(HASH).filter(mask)
    return Checksum(len(hashes), int(pc.sum(pc.cast(hashes, pa.uint64())).as_py() or 0))


def _keys_of(rows: pa.Table, key_names: Sequence[str]) -> list[tuple]:
    columns = [rows.column(n).to_pylist() for n in key_names]
    return list(zip(*columns))


class Narrowing:
    """A differing range of one table narrowed down to the keys that differ (see the module)."""

    def __init__(self, source: SourceSide, key_names: Sequence[str]) -> None:
        self.source, self.key_names = source, list(key_names)
        self.reads = 0

    def narrow(self, r: KeyRange, rows: pa.Table) -> list[Optional[KeyRangeReport]]:
        """Differing key ranges of ``r`` in key order, an equal part between two of them as None
        (ranges are merged only across no equal part). ``rows``: Iceberg's rows of ``r`` at least."""
        rows = rows.filter(in_range(rows.select(self.key_names), r))
        return self._narrow(r, rows, 0)

    def _narrow(self, r: KeyRange, rows: pa.Table, depth: int) -> list[Optional[KeyRangeReport]]:
        n = rows.num_rows
        if r.keys is not None:
            return self._narrow_keys(list(r.keys), rows)
        if n <= 1 or depth >= MAX_DEPTH or not self.source.table.ordered:
            return self._leaf(r, rows)
        order = pc.sort_indices(rows.select(self.key_names), [(k, "ascending") for k in self.key_names])
        keys = rows.select(self.key_names).take(order)
        step = -(-n // FANOUT)
        bounds = [self.source.source_key(tuple(keys.slice(i, 1).to_pylist()[0].values()))
                  for i in range(step - 1, n - 1, step)]
        edges = [r.after, *bounds, r.upto]
        parts = [KeyRange(a, b) for a, b in zip(edges[:-1], edges[1:])]
        read = self.source.read(parts)
        self.reads += 1
        out: list[Optional[KeyRangeReport]] = []
        for part, total, excluded in zip(parts, read.sums, read.excluded):
            if total is None:
                continue  # in flight: checked again after the next merge
            if iceberg_sum(rows, self.key_names, part, excluded) == total:
                out.append(None)
            else:
                out += self._narrow(part, rows.filter(in_range(rows.select(self.key_names), part)), depth + 1)
        return out

    def _narrow_keys(self, keys: list[tuple], rows: pa.Table) -> list[Optional[KeyRangeReport]]:
        if len(keys) == 1:
            return self._leaf(KeyRange(keys=tuple(keys)), rows)
        half = len(keys) // 2
        parts = [KeyRange(keys=tuple(keys[:half])), KeyRange(keys=tuple(keys[half:]))]
        read = self.source.read(parts)
        self.reads += 1
        out: list[Optional[KeyRangeReport]] = []
        for part, total, excluded in zip(parts, read.sums, read.excluded):
            if total is None:
                continue
            if iceberg_sum(rows, self.key_names, part, excluded) == total:
                out.append(None)
            else:
                out += self._narrow_keys([k for k in part.keys or () if k not in excluded], rows)
        return out

    def _leaf(self, r: KeyRange, rows: pa.Table) -> list[Optional[KeyRangeReport]]:
        """A range holding at most one Iceberg row (or one not split further)."""
        iceberg_keys = [self.source.source_key(k) for k in _keys_of(rows, self.key_names)]
        if len(iceberg_keys) > 1:  # not split further: the range as a whole
            read = self.source.read([r])
            total = read.sums[0]
            if total is None:
                return []
            bounds = key_bounds(self.source.conn, self.source.table, r, read.excluded[0])
            keys = sorted(iceberg_keys + ([bounds[0], bounds[1]] if bounds else []))
            return [KeyRangeReport(key_json(keys[0]), key_json(keys[-1]), MIXED, total.rows, len(iceberg_keys))]
        ranges = [r] + [KeyRange(keys=(k,)) for k in iceberg_keys]
        read = self.source.read(ranges, [tuple(iceberg_keys)] + [()] * len(iceberg_keys))
        self.reads += 1
        out: list[Optional[KeyRangeReport]] = []
        rest = read.sums[0]
        if rest is not None and rest.rows:
            bounds = key_bounds(self.source.conn, self.source.table, r, read.excluded[0] + tuple(iceberg_keys))
            if bounds is not None:
                out.append(KeyRangeReport(key_json(bounds[0]), key_json(bounds[1]), MISSING, rest.rows, 0))
        for key, total, excluded in zip(iceberg_keys, read.sums[1:], read.excluded[1:]):
            if total is None or excluded:
                continue
            mine = iceberg_sum(rows, self.key_names, KeyRange(keys=(key,)))
            if mine == total:
                out.append(None)
            else:
                how = EXTRA if total.rows == 0 else CHANGED
                out.append(KeyRangeReport(key_json(key), key_json(key), how, total.rows, mine.rows))
        return out


def merged(parts: Sequence[Optional[KeyRangeReport]]) -> list[KeyRangeReport]:
    """Consecutive differing ranges of one kind (no equal part between) made one."""
    out: list[KeyRangeReport] = []
    joinable = False
    for part in parts:
        if part is None:
            joinable = False
            continue
        if joinable and out and out[-1].how == part.how:
            last = out[-1]
            last.last = part.last
            if last.source_rows is not None and part.source_rows is not None:
                last.source_rows += part.source_rows
                last.iceberg_rows = (last.iceberg_rows or 0) + (part.iceberg_rows or 0)
        else:
            out.append(part)
        joinable = True
    return out


__all__ = ["FANOUT", "Narrowing", "SourceRead", "SourceSide", "iceberg_sum", "merged"]
