"""What the main branch of a target table records of the binlog (:class:`AppliedState`), read
through Iceberg's Java API: its head snapshot and the checkpoint of its last batch."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

from ...checkpoints import Checkpoint
from ..errors import MergeJobError
from ..iceberg_contract import SUMMARY_BATCH, SUMMARY_CHECKPOINT, SUMMARY_STREAM
from .base import Lake


@dataclasses.dataclass(frozen=True)
class AppliedState:
    """What the main branch of an Iceberg table records about the binlog."""

    head: Optional[int]                 # current snapshot id
    checkpoint: Optional[Checkpoint]    # end checkpoint of the last batch committed
    batch_id: Optional[str]
    snapshot_id: Optional[int]          # the snapshot holding that checkpoint
    committed_at_micros: Optional[int]


NOTHING = AppliedState(None, None, None, None, None)


def applied_state(lake: Lake, table: str, stream: Optional[str] = None, loaded: Optional[Any] = None) -> AppliedState:
    """Walk the main branch of ``table`` from its head to the newest snapshot whose summary
    holds a ``binlog.checkpoint`` (of ``stream``, when given). Snapshots of other commits
    (compaction, manual changes) are passed over. ``loaded``: the table as loaded already."""
    head: Optional[int] = None
    for snapshot_id, cp, batch, snap_stream, micros in _main_branch(lake, table, loaded):
        head = snapshot_id if head is None else head
        if cp is not None and (stream is None or snap_stream == stream):
            try:
                checkpoint = Checkpoint.from_json(cp)
            except ValueError as exc:
                raise MergeJobError(f"{table}: snapshot {snapshot_id} has an unreadable "
                                    f"{SUMMARY_CHECKPOINT}: {exc}") from None
            return AppliedState(head, checkpoint, batch, snapshot_id, micros)
    return AppliedState(head, None, None, None, None)


def committed_batch(lake: Lake, table: str, batch_id: str) -> bool:
    """Whether a snapshot of the main branch of ``table`` (as far as they are kept) was
    committed by batch ``batch_id``."""
    return any(batch == batch_id for _sid, _cp, batch, _stream, _micros in _main_branch(lake, table))


def head_snapshot(lake: Lake, table: str) -> Optional[int]:
    """The id of the table's current snapshot (None: no table, or no snapshot yet)."""
    loaded = lake.load_table(table)
    snapshot = None if loaded is None else loaded.currentSnapshot()
    return None if snapshot is None else int(snapshot.snapshotId())


_Snapshot = tuple[int, Optional[str], Optional[str], Optional[str], int]


def _main_branch(lake: Lake, table: str, loaded: Optional[Any] = None) -> Iterator[_Snapshot]:
    """The snapshots of the main branch from its head back (as far as they are kept):
    ``(snapshot id, checkpoint, batch id, stream, committed-at micros)``, read one at a time
    (of ``loaded``, the table as loaded already, when given)."""
    loaded = lake.load_table(table) if loaded is None else loaded
    snapshot = None if loaded is None else loaded.currentSnapshot()
    while snapshot is not None:
        summary = snapshot.summary()
        yield (int(snapshot.snapshotId()), summary.get(SUMMARY_CHECKPOINT), summary.get(SUMMARY_BATCH),
               summary.get(SUMMARY_STREAM), int(snapshot.timestampMillis()) * 1000)
        parent = snapshot.parentId()
        snapshot = None if parent is None else loaded.snapshot(parent)  # None: expired


__all__ = ["AppliedState", "NOTHING", "applied_state", "committed_batch", "head_snapshot"]
