"""Retention: a published batch is removed once every merge that reads the location is past it,
so that a staging location holds what is not merged yet (and what a minimum age keeps), not
every batch since the first.

Given the checkpoints of every consumer (the position each merge reading this location has
applied up to, from its checkpoint store), a batch goes when its manifest's end is at or before
each of them (a snapshot, whose start and end are one position, when it is before each: a
consumer placed at that very position may not have merged it yet). A batch whose end cannot be
ordered with a checkpoint (another binlog series, another server) stays. The location is listed
one name per batch, never object by object; only names of the batch-id grammar
(:data:`.confine.BATCH_NAME`) are looked at, each batch's manifest is read before anything of it
is removed, and the manifest goes first (the batch is then unpublished: a reader refuses it, the
tidy removes what is left). Sealed work (``.resumable/``) and anything not named as a batch are
never touched; on an object store, nothing is removed from a location without the staging
marker."""
from __future__ import annotations

import datetime as dt
import fcntl
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Optional, Sequence

from ..checkpoints import Checkpoint, CheckpointOrderError
from .confine import UntrustedObjectError, is_batch_name, parse_document
from .contract import MANIFEST_FORMAT, MANIFEST_NAME
from .manifest import MODE_SNAPSHOT
from .remote import is_marked
from .storage import ObjectStaging, StagingStorageError, StorageOptions, is_object_store, local_path, read_bytes

log = logging.getLogger(__name__)


def is_merged(data: Any, checkpoints: Sequence[Checkpoint]) -> bool:
    """Whether the batch of manifest ``data`` is behind every one of ``checkpoints``: its end at
    or before each (a snapshot's before each); False when it cannot be ordered with one, or the
    manifest is not a staging manifest with an end."""
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return False
    try:
        end = Checkpoint.from_json(data["end"])
    except (KeyError, TypeError, ValueError):
        return False
    snapshot = data.get("mode") == MODE_SNAPSHOT
    for checkpoint in checkpoints:
        try:
            order = end.compare(checkpoint)
        except CheckpointOrderError:
            return False
        if order > 0 or (order == 0 and snapshot):
            return False
    return True


def _old_enough(data: dict[str, Any], min_age: float, now: float) -> bool:
    if min_age <= 0:
        return True
    try:
        created = dt.datetime.fromisoformat(str(data["created_at"]))
    except (KeyError, ValueError):
        return False  # no time to go by: kept
    if created.tzinfo is None:
        created = created.replace(tzinfo=dt.timezone.utc)
    return created.timestamp() <= now - min_age


def remove_merged_batches(staging_dir: str | os.PathLike[str], checkpoints: Sequence[Checkpoint], *,
                          min_age: float = 0.0, now: Optional[float] = None,
                          options: Optional[StorageOptions] = None) -> list[str]:
    """Remove the published batches of ``staging_dir`` (a directory or an object store URI)
    that every consumer is past (:func:`is_merged` with ``checkpoints``, one per merge that reads
    the location) and whose manifest is at least ``min_age`` seconds old; returns their names.
    ``checkpoints`` may not be empty: with no consumer known, nothing is known to be merged."""
    if not checkpoints:
        raise StagingStorageError(f"{staging_dir}: no checkpoint to keep batches from",
                                  hint="give the checkpoint of every merge that reads this staging location")
    now = time.time() if now is None else now
    if is_object_store(staging_dir):
        return _remove_from_store(ObjectStaging(os.fspath(staging_dir), options), checkpoints, min_age, now)
    return _remove_from_directory(Path(local_path(staging_dir)), checkpoints, min_age, now)


def _document(where: str, body: Optional[bytes]) -> Any:
    """A manifest's JSON, or None when it is not there or not one this provider reads."""
    if body is None:
        return None
    try:
        return parse_document(where, body)
    except UntrustedObjectError as exc:
        log.warning("retention: %s kept: %s", where, exc)
        return None


def _remove_from_store(remote: ObjectStaging, checkpoints: Sequence[Checkpoint], min_age: float,
                       now: float) -> list[str]:
    if not is_marked(remote):
        log.warning("retention: %s has no staging marker: nothing of it is removed (a writer of this release "
                    "leaves one there at its first publish)", remote.location.uri())
        return []
    removed = []
    for name in remote.children():
        if not is_batch_name(name):
            continue
        data = _document(remote.location.uri(name, MANIFEST_NAME), remote.read(name, MANIFEST_NAME))
        if data is None or not is_merged(data, checkpoints) or not _old_enough(data, min_age, now):
            continue
        remote.delete([f"{name}/{MANIFEST_NAME}"])  # unpublished first: no reader takes a batch losing its files
        remote.delete([f"{name}/{o['Key']}" for o in remote.objects(name)])
        removed.append(name)
    return removed


def _remove_from_directory(root: Path, checkpoints: Sequence[Checkpoint], min_age: float, now: float) -> list[str]:
    removed = []
    with os.scandir(root) as entries:
        batches = sorted(e.name for e in entries if is_batch_name(e.name) and e.is_dir(follow_symlinks=False))
    for name in batches:
        manifest = root / name / MANIFEST_NAME
        try:
            data = _document(str(manifest), read_bytes(str(manifest)))
        except OSError:
            continue
        if data is None or not is_merged(data, checkpoints) or not _old_enough(data, min_age, now):
            continue
        # publishers of the directory take turns with this (a rerun of the same range replaces it)
        lock = os.open(root / ".publish.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            trash = root / f".replaced-{uuid.uuid4().hex}"
            os.replace(root / name, trash)  # gone for readers at once; removed below
        finally:
            os.close(lock)
        shutil.rmtree(trash, ignore_errors=True)
        removed.append(name)
    return removed


__all__ = ["is_merged", "remove_merged_batches"]
