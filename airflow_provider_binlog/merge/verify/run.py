"""A table verified against its Iceberg table, key range by key range.

The first pass reads the source in chunks of the key order (``chunk_rows`` keys each, one
short transaction per chunk) in a thread of its own, while Iceberg's rows are read segment by
segment (``segment_chunks`` chunks, one scan with the segment's key range) and hashed: the two
sides overlap. Each chunk is compared without the keys the binlog changed since Iceberg's
checkpoint (:mod:`.compare`); a differing chunk is narrowed down to its differing keys. The
keys left out are checked again after the next merge (``wait_for_merge``: a newer Iceberg
snapshot with a later checkpoint), up to ``tries`` passes in all; those still changing are
reported not verifiable."""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import pyarrow as pa

from ...capture.verify.canonical import VerifyError
from ...capture.verify.changes import KeyChanges
from ...capture.verify.source import KeyRange, SourceTable, next_upto
from ...capture.watermark.keys import table_to_read
from ...codec.positions import position_key
from ...schema_history import seed_history
from .compare import Narrowing, SourceSide, iceberg_sum, merged
from .iceberg import PinnedTable, missing_columns, read_hashes
from .report import KeyRangeReport, TableReport, key_json

log = logging.getLogger(__name__)
#: in-flight keys checked again per read
KEYS_PER_READ = 500


@dataclass
class Settings:
    """How a table is verified (see the module)."""

    chunk_rows: int = 50_000
    segment_chunks: int = 20
    tries: int = 3
    max_excluded: int = 10_000
    soft_delete: Optional[str] = None  # the data contract's deleted-flag column


@dataclass
class _Chunk:
    range: KeyRange
    sums: Any
    excluded: tuple
    position: tuple[str, int]


@dataclass
class _Pass:
    """What one pass leaves: keys and ranges in flight, the last position read."""

    keys: set = field(default_factory=set)
    ranges: list = field(default_factory=list)
    position: Optional[tuple[str, int]] = None


class TableVerifier:
    """Verifies one table. ``connect()`` opens a pymysql connection (autocommit),
    ``replica_factory()`` a replica session (the binlog between positions), ``open_pinned()``
    the Iceberg table at its current snapshot; ``wait_for_merge(pinned)`` returns the table at a
    later checkpoint, or None when none comes."""

    def __init__(self, connect: Callable[[], Any], replica_factory: Callable[[], Any], flavor: str,
                 table: SourceTable, iceberg_name: str, open_pinned: Callable[[], PinnedTable],
                 wait_for_merge: Callable[[PinnedTable], Optional[PinnedTable]], settings: Settings) -> None:
        self.connect, self.replica_factory, self.flavor = connect, replica_factory, flavor
        self.table, self.open_pinned, self.wait_for_merge = table, open_pinned, wait_for_merge
        self.settings = settings
        self.report = TableReport(table.name, iceberg_name, left_out=dict(table.left_out))
        self.key_names = table.key_names

    def run(self) -> TableReport:
        began = time.monotonic()
        try:
            pinned = self.open_pinned()
            flight = self._first_pass(pinned)
            tries = 1
            while (flight.keys or flight.ranges) and tries < self.settings.tries:
                newer = self.wait_for_merge(pinned)
                if newer is None:
                    break
                pinned = newer
                tries += 1
                flight = self._again(pinned, flight)
            self.report.tries = tries
            self._not_verifiable(flight)
        except VerifyError as exc:
            self.report.error = str(exc)
        finally:
            self.report.seconds = time.monotonic() - began
        return self.report

    # ------------------------------------------------------------------------- a pass

    def _start(self, pinned: PinnedTable, conn: Any) -> SourceSide:
        """The source side of a pass against ``pinned``: the binlog from its checkpoint."""
        cp = pinned.checkpoint
        if cp is None or not cp.has_coordinates:
            raise VerifyError(f"Iceberg table {self.report.iceberg_table} holds no binlog checkpoint",
                              hint="load it with the backfill DAG (mode snapshot) first")
        missing = missing_columns(pinned, self.key_names + [f.name for f in self.table.forms])
        if missing:
            raise VerifyError(f"Iceberg table {self.report.iceberg_table} has no column {', '.join(missing)}",
                              hint="the table differs from the source in its columns: reload it")
        self.report.checkpoint = f"{cp.file}:{cp.position}"
        tm = self.table.tm
        history = seed_history(conn, lambda db: db == tm.schema, self.flavor)
        read_state = table_to_read(tm, self.table.key)
        changes = KeyChanges(self.replica_factory, {(tm.schema, tm.table): read_state}, history,
                             (cp.file, int(cp.position)))
        return SourceSide(conn, self.flavor, self.table, changes, self.settings.max_excluded)

    def _schema_check(self, source: SourceSide) -> None:
        at = source.changes.schema_changed.get(source.name)
        if at is not None:
            raise VerifyError(f"a schema statement changed {self.table.name} at {at}, after Iceberg's checkpoint",
                              position=at, hint="verify again once a merge has applied it")

    # long: the first pass's two sides (a reader thread for the source, segments of Iceberg here)
    # and the comparison of each chunk, in one place so that the overlap stays visible
    def _first_pass(self, pinned: PinnedTable) -> _Pass:
        conn = self.connect()
        reader_conn = self.connect()
        flight = _Pass()
        try:
            for c in (conn, reader_conn):
                with c.cursor() as cur:
                    cur.execute("SET SESSION time_zone = '+00:00'")
            source = self._start(pinned, reader_conn)
            chunks: queue.Queue = queue.Queue(maxsize=4 * self.settings.segment_chunks)
            failure: list[BaseException] = []

            def produce() -> None:
                try:
                    after: Optional[tuple] = None
                    while True:
                        upto = next_upto(reader_conn, self.table, after, self.settings.chunk_rows) \
                            if self.table.ordered else None
                        r = KeyRange(after, upto)
                        read = source.read([r])
                        chunks.put(_Chunk(r, read.sums[0], read.excluded[0], read.position))
                        if upto is None:
                            break
                        after = upto
                except BaseException as exc:  # handed to the consumer
                    failure.append(exc)
                finally:
                    chunks.put(None)

            thread = threading.Thread(target=produce, name=f"verify-{self.table.name}", daemon=True)
            thread.start()
            differing: list[tuple[KeyRange, pa.Table]] = []
            done = False
            while not done:
                segment: list[_Chunk] = []
                while len(segment) < self.settings.segment_chunks:
                    item = chunks.get()
                    if item is None:
                        done = True
                        break
                    segment.append(item)
                if segment:
                    differing += self._segment(pinned, segment, flight)
            thread.join()
            if failure:
                raise failure[0]
            self._schema_check(source)
            narrowing = Narrowing(source, self.key_names)
            for r, rows in differing:
                self.report.differing += merged(narrowing.narrow(r, rows))
            self._schema_check(source)
            return flight
        finally:
            conn.close()
            reader_conn.close()

    def _segment(self, pinned: PinnedTable, segment: list[_Chunk], flight: _Pass) -> list[tuple[KeyRange, pa.Table]]:
        """Compare a segment's chunks with Iceberg's rows of its key range; the differing ones."""
        span = KeyRange(segment[0].range.after, segment[-1].range.upto)
        rows = read_hashes(pinned, self.key_names, self.table.forms, [span], self.settings.soft_delete)
        out = []
        for chunk in segment:
            self.report.chunks += 1
            flight.position = chunk.position
            self.report.position = f"{chunk.position[0]}:{chunk.position[1]}"
            if chunk.sums is None:
                flight.ranges.append(chunk.range)
                continue
            self.report.rows += chunk.sums.rows
            flight.keys.update(chunk.excluded)
            if iceberg_sum(rows, self.key_names, chunk.range, chunk.excluded) == chunk.sums:
                self.report.equal += 1
            else:
                self.report.differing_chunks += 1
                out.append((chunk.range, rows))
        return out

    def _again(self, pinned: PinnedTable, flight: _Pass) -> _Pass:
        """The keys and ranges in flight, checked against a later Iceberg snapshot."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION time_zone = '+00:00'")
            source = self._start(pinned, conn)
            keys = sorted(flight.keys, key=repr) if not self.table.ordered else sorted(flight.keys)
            ranges = [KeyRange(keys=tuple(keys[i:i + KEYS_PER_READ])) for i in range(0, len(keys), KEYS_PER_READ)]
            ranges += flight.ranges
            out = _Pass()
            if not ranges:
                return out
            rows = read_hashes(pinned, self.key_names, self.table.forms, ranges, self.settings.soft_delete)
            read = source.read(ranges)
            self._schema_check(source)
            narrowing = Narrowing(source, self.key_names)
            out.position = read.position
            self.report.position = f"{read.position[0]}:{read.position[1]}"
            for r, total, excluded in zip(ranges, read.sums, read.excluded):
                if total is None:
                    (out.keys.update(r.keys) if r.keys is not None else out.ranges.append(r))
                    continue
                out.keys.update(excluded)
                if iceberg_sum(rows, self.key_names, r, excluded) != total:
                    self.report.differing += merged(narrowing.narrow(r, rows))
            return out
        finally:
            conn.close()

    def _not_verifiable(self, flight: _Pass) -> None:
        """What stayed in flight after the last pass."""
        why = "changed by the binlog during every check"
        if flight.keys:
            keys = sorted(flight.keys, key=repr) if not self.table.ordered else sorted(flight.keys)
            self.report.not_verifiable.append(KeyRangeReport(key_json(keys[0]), key_json(keys[-1]),
                                                             f"{len(keys)} key(s) {why}"))
        for r in flight.ranges:
            self.report.not_verifiable.append(KeyRangeReport(key_json(r.after), key_json(r.upto),
                                                             f"a key range {why} (after first, up to last)"))


def checkpoint_after(older: PinnedTable, newer: PinnedTable) -> bool:
    """Whether ``newer`` holds a later checkpoint than ``older``."""
    a, b = older.checkpoint, newer.checkpoint
    if b is None or not b.has_coordinates:
        return False
    if a is None or not a.has_coordinates:
        return True
    return position_key(b.file, int(b.position)) > position_key(a.file, int(a.position))


def poll_for_merge(open_pinned: Callable[[], PinnedTable], *, seconds: float,
                   poll: float = 10.0) -> Callable[[PinnedTable], Optional[PinnedTable]]:
    """``wait_for_merge`` that reloads the table every ``poll`` seconds, for at most ``seconds``."""
    def wait(pinned: PinnedTable) -> Optional[PinnedTable]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
            newer = open_pinned()
            if checkpoint_after(pinned, newer):
                return newer
        return None
    return wait


__all__ = ["KEYS_PER_READ", "Settings", "TableVerifier", "checkpoint_after", "poll_for_merge"]
