"""A batch published into a local (or shared) staging directory: its work directory renamed
to the batch's name, publishers of one directory taking turns, and a batch a merge may be
reading never replaced in place."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from .manifest import ManifestError, load_manifest
from .storage import StagingStorageError


def publish_directory(work_dir: Path, final: Path, dump_id: str, manifest: dict[str, Any]) -> Path:
    """Make ``work_dir`` (whose manifest is ``manifest``) the published batch ``final``.

    A complete copy of the same range and tables already there is kept (an earlier run that
    died after publishing, or a concurrent one: readers may be using it) and ``work_dir``
    removed. An intact batch of another range or table selection under the same id is refused
    with :class:`StagingStorageError`, as an object store refuses it; a damaged one (a file
    gone), which no merge can read, is replaced."""
    staging_dir = final.parent
    # publishers of one staging directory take turns (two runs of the same range at once)
    publish_lock = os.open(staging_dir / ".publish.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(publish_lock, fcntl.LOCK_EX)
        existing = _intact_manifest(final)
        if existing is not None and same_manifest(existing, manifest):
            shutil.rmtree(work_dir, ignore_errors=True)
        elif existing is not None:
            raise StagingStorageError(
                f"{final}: another batch is published for {dump_id} (another range or table selection)",
                hint="a merge may be reading it, so it is not replaced: delete that batch directory if "
                     "nothing reads it, then dump again")
        elif final.exists():
            trash = staging_dir / f".replaced-{uuid.uuid4().hex}"
            os.replace(final, trash)
            os.replace(work_dir, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(work_dir, final)
    finally:
        os.close(publish_lock)
    return final


def _intact_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of the batch in ``directory`` when all its files are there, else None."""
    if not directory.exists():
        return None
    try:
        return load_manifest(directory, verify=True).data
    except ManifestError:
        return None


def same_manifest(existing: dict[str, Any], manifest: dict[str, Any]) -> bool:
    """Two manifests of the same range and tables (a batch dumped twice)."""
    keys = ("dump_id", "start", "end", "tables_filter", "mode", "format", "version")
    return all(existing.get(k) == json.loads(json.dumps(manifest.get(k), default=str)) for k in keys)
