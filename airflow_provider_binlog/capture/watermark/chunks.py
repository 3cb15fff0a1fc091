"""What a row change read from the binlog does during a watermark snapshot, without I/O: the
tables' read progress, the chunk being read, and the decision for each row of a rows event —
replayed on the open chunk (its key in the chunk's range), staged (its key in a range read
already), or dropped (its key read later)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Sequence, Union

from ...codec.events import ABSENT, TableMap
from ..snapshot import SnapshotError
from .positions import at_or_after

if TYPE_CHECKING:
    from ..arrow_reader import ArrowChunkReader


@dataclass
class Table:
    """A captured table's chunking and how far it was read."""
    tm: TableMap
    key: list[int]
    ordered: bool                      # its key compares alike in Python and in the server
    done_upto: Optional[tuple] = None  # keys at or below this are in chunks read (None: none)
    finished: bool = False             # every chunk read
    rows: int = 0
    chunks: int = 0
    arrow: Optional[ArrowChunkReader] = None  # reads its chunks into Arrow
    arrow_chunks: int = 0              # chunks read into Arrow (by this process)
    key_forms: Optional[list] = None   # per key column: bytes -> the text a read returns (or None)
    #: no usable key: read in one consistent transaction (..consistent_table), at this position
    #: once read; the binlog's changes from there on are staged, those before it dropped
    consistent: bool = False
    read_from: Optional[tuple[str, int]] = None


@dataclass
class Chunk:
    """The chunk being read: its key range ``(after, upto]`` (None: open) and its rows, as
    Arrow arrays (read straight into Arrow) until a change of the binlog concerns them."""
    table: Table
    after: Optional[tuple]
    upto: Optional[tuple]
    rows: dict = field(default_factory=dict)   # key -> row tuple (None: known only as partial)
    arrays: Optional[list] = None              # one per column, in its staging type

    def holds(self, key: tuple) -> bool:
        return (self.after is None or key > self.after) and (self.upto is None or key <= self.upto)

    def materialize(self) -> None:
        """The rows as Python tuples, for a change to be replayed on them."""
        if self.arrays is not None:
            columns = [a.to_pylist() for a in self.arrays]
            key = self.table.key
            self.rows = {tuple(r[i] for i in key): r for r in zip(*columns)}
            self.arrays = None


#: the chunks being read: one, several (of different tables, read at once), or none
OpenChunks = Union[Chunk, Sequence[Chunk], None]


def chunk_of(chunks: OpenChunks, table: Table) -> Optional[Chunk]:
    """The chunk of ``table`` among those being read, if any."""
    if chunks is None or isinstance(chunks, Chunk):
        return chunks if chunks is not None and chunks.table is table else None
    return next((c for c in chunks if c.table is table), None)


class RowsEventOutcome(NamedTuple):
    """What a rows event did: the rows to stage at its position, each ``(row index in the
    event, kind, row image)``, and how many row changes were replayed on the open chunk."""
    staged: list[tuple[int, str, Any]]
    replayed: int


def apply_rows_event(table: Table, chunk: Optional[Chunk], kind: str, rows: Sequence,
                     position: tuple[str, int]) -> RowsEventOutcome:
    """Replay the rows of a committed rows event of ``table`` at binlog ``position`` on
    ``chunk`` (the table's chunk being read, or None), and decide what is staged: changes of
    keys read already. A key change whose one key is read and the other not keeps only that
    half (the delete of the old key, or the insert of the new one); the rest is dropped (read
    later). A table read in one consistent transaction stages every change at or after the
    position it was read at, and drops the others."""
    if table.consistent:  # read at one position: its changes after it, every row
        if table.read_from is not None and at_or_after(position, table.read_from):
            return RowsEventOutcome([(index, kind, row) for index, row in enumerate(rows)], 0)
        return RowsEventOutcome([], 0)
    staged: list[tuple[int, str, Any]] = []
    replayed = 0
    for index, row in enumerate(rows):
        before, after = (row if kind == "update" else (row, None) if kind == "delete" else (None, row))
        if chunk is not None:
            replayed += replay(chunk, kind, before, after)
        part = _staged_part(table, kind, row, before, after, position)
        if part is not None:
            staged.append((index, *part))
    return RowsEventOutcome(staged, replayed)


def _staged_part(table: Table, kind: str, row: Any, before: Any, after: Any,
                 position: tuple[str, int]) -> Optional[tuple[str, Any]]:
    """What of one row change is staged, as ``(kind, image)``; None: nothing (its keys are read later)."""
    old = row_key(table, before) if before is not None else None
    new = row_key(table, after) if after is not None else None
    if kind == "update" and new is None:
        new = old  # a MINIMAL after image without the (unchanged) key
    read_old = old is not None and read_already(table, old)
    read_new = new is not None and read_already(table, new)
    if kind != "update" or old == new or (read_old and read_new):
        return (kind, row) if read_old or read_new else None
    if read_old:
        return "delete", before
    if read_new:
        if ABSENT in after:
            raise SnapshotError(
                f"{table.tm.schema}.{table.tm.table}: a key change at {position[0]}:{position[1]} moved a row not "
                f"read yet to a key already read with a partial row image (binlog_row_image MINIMAL); "
                f"take the snapshot again or with binlog_row_image=FULL")
        return "insert", after
    return None


def row_key(table: Table, image: Sequence) -> Optional[tuple]:
    """The chunk key of a row image, as a read returns it; None when the image lacks part of it."""
    key = tuple(image[i] for i in table.key)
    if any(v is ABSENT for v in key):
        return None
    if table.key_forms is not None:
        key = tuple(f(v) if f is not None and isinstance(v, (bytes, bytearray)) else v
                    for f, v in zip(table.key_forms, key))
    return key


def read_already(table: Table, key: tuple) -> bool:
    """Whether ``key`` lies in a chunk of ``table`` read (and staged) already."""
    return table.finished or (table.done_upto is not None and key <= table.done_upto)


def replay(chunk: Chunk, kind: str, before: Optional[Sequence], after: Optional[Sequence]) -> int:
    """Replay one row change on ``chunk`` when one of its keys lies in the chunk's range: the
    old key's row removed (a delete, or a key change), the new image set (merged over the row
    it changes when partial). Returns the number of row changes applied to the chunk."""
    table = chunk.table
    old_key = row_key(table, before) if before is not None else None
    new_key = row_key(table, after) if after is not None else old_key
    if after is not None and new_key is None:  # a MINIMAL update image without its key
        new_key = old_key
    if not ((old_key is not None and chunk.holds(old_key)) or (new_key is not None and chunk.holds(new_key))):
        return 0  # neither key in the chunk's range
    chunk.materialize()
    replayed = 0
    previous = chunk.rows.get(old_key) if old_key is not None else None
    if old_key is not None and chunk.holds(old_key) and (kind == "delete" or new_key != old_key):
        chunk.rows.pop(old_key, None)
        replayed += 1
    if after is None or new_key is None or not chunk.holds(new_key):
        return replayed
    base = chunk.rows.get(new_key, previous if new_key != old_key else None)
    if ABSENT in after:
        if base is None and kind == "update":
            chunk.rows[new_key] = None  # known only in part: a later change must complete it
            return replayed
        merged = tuple(a if a is not ABSENT else (b if base is not None else ABSENT)
                       for a, b in zip(after, base or after))
    else:
        merged = tuple(after)
    chunk.rows[new_key] = merged
    return replayed + 1
