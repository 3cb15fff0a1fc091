"""Batches: the manifests of dumps, checked and put in checkpoint order."""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Iterable, Optional

from ..checkpoints import Checkpoint, CheckpointOrderError
from ..staging.manifest import Manifest, ManifestError, load_manifest
from .errors import BatchGapError, MergeJobError


def compare_checkpoints(a: Checkpoint, b: Checkpoint) -> int:
    """:meth:`Checkpoint.compare`, its error a :class:`MergeJobError`."""
    try:
        return a.compare(b)
    except CheckpointOrderError as exc:
        raise MergeJobError(str(exc)) from None


def checkpoint_text(cp: Checkpoint) -> str:
    return json.dumps(cp.to_json(), sort_keys=True, separators=(",", ":"))


def binlog_point(cp: Checkpoint) -> Optional[tuple[int, int]]:
    """``(binlog sequence, position)`` of a checkpoint, comparable with staged rows."""
    return (cp.file_index, cp.position) if cp.has_coordinates else None


@dataclasses.dataclass(frozen=True)
class Batch:
    """One manifest to apply, with its start and end checkpoints."""

    manifest: Manifest
    start: Checkpoint
    end: Checkpoint

    @property
    def batch_id(self) -> str:
        return self.manifest.dump_id


def plan_batches(manifests: Iterable[Any]) -> list[Batch]:
    """The batches of ``manifests`` (``Manifest`` objects or paths) in checkpoint order.

    A manifest given twice (same dump id) is applied once. Consecutive batches must be
    contiguous: a gap or an overlap between them raises :class:`BatchGapError`."""
    batches: dict[str, Batch] = {}
    for item in manifests:
        # read again, checking each staged file's checksum: a damaged file fails here,
        # before anything is committed
        manifest = load_manifest(item.ref if isinstance(item, Manifest) else item, verify=True)
        try:
            start, end = manifest.start, manifest.end
        except ManifestError as exc:
            raise MergeJobError(str(exc)) from None
        if manifest.dump_id in batches:
            known = batches[manifest.dump_id]
            if known.start != start or known.end != end:
                raise MergeJobError(f"two manifests with dump id {manifest.dump_id!r} cover "
                                    f"different ranges: {known.manifest.path} and {manifest.path}")
            continue
        if compare_checkpoints(end, start) < 0:
            raise MergeJobError(f"{manifest.path}: ends at [{end}] before its start [{start}]")
        batches[manifest.dump_id] = Batch(manifest, start, end)
    ordered = sorted(batches.values(), key=functools.cmp_to_key(
        lambda x, y: compare_checkpoints(x.start, y.start) or compare_checkpoints(x.end, y.end)))
    for prev, nxt in zip(ordered, ordered[1:]):
        c = compare_checkpoints(prev.end, nxt.start)
        if c < 0:
            raise BatchGapError(
                f"gap between batches: {prev.batch_id} ends at [{prev.end}] but the next batch "
                f"{nxt.batch_id} starts at [{nxt.start}]; the changes in between are missing "
                f"(dump that range first)")
        if c > 0:
            raise BatchGapError(
                f"overlapping batches: {prev.batch_id} ends at [{prev.end}] after the next batch "
                f"{nxt.batch_id} starts at [{nxt.start}]")
    return ordered


__all__ = ["Batch", "binlog_point", "checkpoint_text", "compare_checkpoints", "plan_batches"]
