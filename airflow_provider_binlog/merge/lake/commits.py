"""What every commit of a batch carries (:func:`commit_properties`), and a commit made through
Iceberg's Java API with it (:func:`commit_update`)."""

from __future__ import annotations

from typing import Any, Mapping

from ..batches import Batch
from ..batches import checkpoint_text as _checkpoint_text
from ..iceberg_contract import SUMMARY_BATCH, SUMMARY_CHECKPOINT, SUMMARY_START, SUMMARY_STREAM


def commit_properties(batch: Batch, stream: str, source: str) -> dict[str, str]:
    """The snapshot summary of a commit of ``batch``: its end checkpoint (the exactly-once
    position), its id, its start, the stream and the source table."""
    return {SUMMARY_CHECKPOINT: _checkpoint_text(batch.end), SUMMARY_BATCH: batch.batch_id,
            SUMMARY_START: _checkpoint_text(batch.start), SUMMARY_STREAM: stream,
            "binlog.source": source}


def commit_update(update: Any, props: Mapping[str, Any]) -> None:
    """Commit an Iceberg ``SnapshotUpdate`` (a Java object made through py4j, e.g. a row
    delta) with ``props`` in its snapshot summary."""
    for key, value in props.items():
        update = update.set(str(key), str(value))
    update.commit()


__all__ = ["commit_properties", "commit_update"]
