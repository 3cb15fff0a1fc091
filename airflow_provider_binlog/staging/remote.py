"""Staged batches on an object store, around the writer (:mod:`.writer`): which attempt a
published manifest names, the local work area, and what a location gets before its first
write (the check of its conditional writes, the marker that makes it one a tidy may touch:
:mod:`.tidy`)."""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

from .confine import ATTEMPT_ID
from .contract import MANIFEST_FORMAT, MANIFEST_NAME
from .storage import ObjectStaging, StagingStorageError, check_conditional_writes

log = logging.getLogger(__name__)

UNKNOWN = "?"
#: the object that marks a location as a staging location (written by the first writer there);
#: nothing is ever removed from a location without it
MARKER_NAME = ".binlog-staging"
_MARKER_FORMAT = "airflow-provider-binlog staging location"


def published_attempt(remote: ObjectStaging, batch: str) -> Optional[str]:
    """The attempt whose files the manifest of ``batch`` names, read (never inferred from a
    listing): None when there is no manifest, ``UNKNOWN`` when it cannot be read now or names
    no attempt (a manifest this provider did not publish there): then nothing of the batch may
    be deleted."""
    try:
        body = remote.read(batch, MANIFEST_NAME)
        if body is None:
            return None
        data = json.loads(body)
    except Exception:  # noqa: BLE001 - undecided: delete nothing
        return UNKNOWN
    attempt = data.get("attempt") if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT else None
    return attempt if isinstance(attempt, str) and ATTEMPT_ID.fullmatch(attempt) else UNKNOWN


def delete_quietly(remote: ObjectStaging, keys: list[str]) -> None:
    """Delete uploads no manifest names; what fails here is left to :func:`.tidy.remove_stale_attempts`."""
    try:
        remote.delete(keys)
    except Exception:  # noqa: BLE001 - never read, removed later
        log.warning("could not delete %d uploads of an unpublished attempt", len(keys), exc_info=True)


def local_work_root() -> str:
    """Where writers staging on an object store keep their work directories on this machine:
    a directory of this user's under the temporary directory, refused when another user made it
    or can write to it."""
    root = Path(tempfile.gettempdir()) / f"airflow-provider-binlog-staging-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise StagingStorageError(f"{root}: the local work area is not a private directory of this user",
                                  hint="remove it (or set TMPDIR to a directory of this user's)")
    return str(root)


_checked: set[str] = set()


def prepare_location_once(remote: ObjectStaging) -> None:
    """Before the first write to a location in this process: :func:`~.storage.check_conditional_writes`,
    then the location's marker (:data:`MARKER_NAME`) unless it has one."""
    where = remote.location.uri()
    if where not in _checked:
        check_conditional_writes(remote)
        marker = json.dumps({"format": _MARKER_FORMAT, "created_at": dt.datetime.now(dt.timezone.utc).isoformat()})
        remote.create_if_absent(marker.encode(), MARKER_NAME)
        _checked.add(where)


def is_marked(remote: ObjectStaging) -> bool:
    """Whether ``remote`` holds the marker of a staging location (:func:`prepare_location_once`)."""
    try:
        data = json.loads(remote.read(MARKER_NAME, limit=4096) or b"null")
    except ValueError:  # not JSON, or larger than a marker: not ours
        return False
    return isinstance(data, dict) and data.get("format") == _MARKER_FORMAT


check_conditional_writes_once = prepare_location_once
