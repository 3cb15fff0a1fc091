"""The exactly-once gate, pure: whether a batch is applied, already applied, or refused, from
the position the load stands at (:func:`batch_gate`), and the same for one table from the
checkpoint its last commit carries (:func:`table_gate`). The reads they may need (is this very
batch in the ledger, or on the table) are given as functions, called only when the positions
alone do not tell."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from ..checkpoints import Checkpoint
from .batches import binlog_point, compare_checkpoints
from .errors import BatchGapError, MergeJobError


def _describe(cp: Optional[Checkpoint]) -> str:
    return "nothing" if cp is None else f"[{cp}]"


def batch_gate(batch_id: str, start: Checkpoint, end: Checkpoint, snapshot: bool, position: Optional[Checkpoint],
               source: str, ledger_has_batch: Callable[[], bool]) -> bool:
    """Whether batch ``batch_id`` (``start`` .. ``end``; a ``snapshot`` or not) is applied
    already, the load standing at ``position`` (of ``source``: a checkpoint store's key or a
    ledger stream; None: nothing applied). Raises :class:`BatchGapError` for a batch that would
    leave a gap, overlap the position, or rewind the tables.

    A snapshot at the position the load stands at is a reload (a repair while the source is
    idle) unless the ledger holds this very batch (``ledger_has_batch()``)."""
    if position is None:
        return False
    if snapshot:
        at = compare_checkpoints(end, position)
        if at == 0:
            return ledger_has_batch()
        if at < 0:
            raise BatchGapError(
                f"snapshot {batch_id} at [{end}] is older than {source} at {_describe(position)}: applying it "
                f"would rewind the tables; take a new snapshot instead")
        return False
    if compare_checkpoints(start, position) == 0:
        return False
    if compare_checkpoints(end, position) <= 0:
        return True
    if compare_checkpoints(start, position) > 0:
        raise BatchGapError(
            f"batch {batch_id} starts at [{start}] but {source} is at {_describe(position)}: the changes in "
            f"between are missing; dump them first (or reset the position if that is intended)")
    raise BatchGapError(
        f"batch {batch_id} [{start}] .. [{end}] overlaps the position {_describe(position)} of {source}; "
        f"give batches that start there")


@dataclasses.dataclass(frozen=True)
class TableGate:
    """One table's share of a batch: ``applied`` already; else applied from ``since`` (the
    table went past the batch's start: only the changes after its checkpoint), or, for a
    change log inside a snapshot, with its changes after ``logged_to`` only."""

    applied: bool
    since: Optional[tuple[int, int]] = None
    logged_to: Optional[tuple[int, int]] = None


def table_gate(start: Checkpoint, end: Checkpoint, batch_id: str, snapshot: bool, change_log: bool, table: str,
               checkpoint: Optional[Checkpoint], committed: Callable[[], bool]) -> TableGate:
    """The share of batch ``batch_id`` of ``table``, whose last commit carries ``checkpoint``
    (None: none); ``committed()`` tells whether a commit of the table is this very batch's.
    Raises :class:`MergeJobError` for a reload the incremental load went past."""
    if checkpoint is None:
        return TableGate(False)
    if compare_checkpoints(end, checkpoint) <= 0:
        applied = not snapshot or committed()
        if not applied and compare_checkpoints(end, checkpoint) < 0:
            # a reload of some tables that the incremental load went past before it was merged:
            # skipping it would silently keep the content it was taken to replace
            raise MergeJobError(
                f"{table} is at [{checkpoint}], past the end of snapshot {batch_id} [{end}], which it never "
                f"applied: the incremental load went further before this snapshot was merged. Take the "
                f"snapshot again (its merge must run before the next incremental merge of the table)")
        # not applied: a snapshot at the table's own position that it never applied (a reload
        # to repair the table while the source was idle) replaces the content all the same
        return TableGate(applied)
    if not snapshot and compare_checkpoints(start, checkpoint) < 0:
        # the table went further than the batch start (a batch cut differently before): apply
        # only the changes after its checkpoint (a snapshot replaces it whole)
        since = binlog_point(checkpoint)
        if since is None:
            raise MergeJobError(f"{table} is at [{checkpoint}] inside batch {batch_id}, which needs binlog "
                                f"coordinates to resume")
        return TableGate(False, since=since)
    if snapshot and change_log and compare_checkpoints(start, checkpoint) < 0:
        # a change log the incremental load already wrote past the snapshot's start: the
        # snapshot's rows all go in, its changes only after what is logged (never twice)
        return TableGate(False, logged_to=binlog_point(checkpoint))
    return TableGate(False)


__all__ = ["TableGate", "batch_gate", "table_gate"]
