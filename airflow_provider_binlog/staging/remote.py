"""Staged batches on an object store, around the writer (:mod:`.writer`): which attempt a
published manifest names, the local work area, and keeping a staging location tidy (uploads
no manifest names, sealed work nobody resumed) without listing it at every dump."""
from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from .contract import MANIFEST_NAME
from .sealed import RESUMABLE
from .storage import ObjectStaging, StagingStorageError, check_conditional_writes

log = logging.getLogger(__name__)

#: sealed work kept on a store that no writer resumed is removed after this many seconds
RESUMABLE_SECONDS = 7 * 24 * 3600
#: a location is tidied at most this often (a marker object holds the last time)
TIDY_SECONDS = 3600
#: attempts (uploads under a batch) no manifest names are removed after this many seconds
STALE_ATTEMPT_SECONDS = 24 * 3600
_TIDIED = ".tidied-at"

UNKNOWN = "?"


def published_attempt(remote: ObjectStaging, batch: str) -> Optional[str]:
    """The attempt whose files the manifest of ``batch`` names: None when there is no manifest,
    ``UNKNOWN`` when it cannot be read now."""
    try:
        body = remote.read(batch, MANIFEST_NAME)
        if body is None:
            return None
        return str(json.loads(body).get("attempt") or "")
    except Exception:  # noqa: BLE001 - undecided: delete nothing
        return UNKNOWN


def delete_quietly(remote: ObjectStaging, keys: list[str]) -> None:
    """Delete uploads no manifest names; what fails here is left to :func:`remove_stale_attempts`."""
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


_ATTEMPT = re.compile(r"[0-9a-f]{32}")


def remove_stale_attempts(remote: ObjectStaging, *, older_than: float = STALE_ATTEMPT_SECONDS,
                          now: Optional[float] = None) -> list[str]:
    """Delete the uploads under a batch of ``remote`` that its manifest does not name (a dump
    killed before it published, or one that lost the race to publish), once older than
    ``older_than`` seconds (a younger one may still be uploading); returns the attempts removed
    as ``<batch>/<attempt>``. Only ``<batch>/<attempt id>/...`` objects directly under the
    location are considered (a nested staging location is left alone), and a manifest is read
    only for a batch with more than one attempt or none."""
    now = time.time() if now is None else now
    by_attempt: dict[tuple[str, str], list[dict[str, Any]]] = {}
    manifests = set()
    for item in remote.objects():
        parts = item["Key"].split("/")
        if parts[0].startswith("."):  # sealed work to resume, results: not batches
            continue
        if len(parts) == 2 and parts[1] == MANIFEST_NAME:
            manifests.add(parts[0])
        elif len(parts) >= 3 and _ATTEMPT.fullmatch(parts[1]):
            by_attempt.setdefault((parts[0], parts[1]), []).append(item)
    attempts_of: dict[str, list[str]] = {}
    for batch, attempt in by_attempt:
        attempts_of.setdefault(batch, []).append(attempt)
    removed = []
    for batch, attempts in sorted(attempts_of.items()):
        if batch in manifests and len(attempts) == 1:
            continue  # the published attempt
        named = published_attempt(remote, batch) if batch in manifests else None
        if named == UNKNOWN:
            continue
        for attempt in sorted(attempts):
            items = by_attempt[(batch, attempt)]
            if attempt == named or max(i["LastModified"].timestamp() for i in items) > now - older_than:
                continue
            remote.delete([i["Key"] for i in items])
            removed.append(f"{batch}/{attempt}")
    return removed


def remove_stale_resumable(remote: ObjectStaging, *, older_than: float = RESUMABLE_SECONDS,
                           now: Optional[float] = None) -> list[str]:
    """Delete the sealed work kept under ``.resumable/<key>/`` that nothing touched for
    ``older_than`` seconds (no retry resumed it); returns the keys removed."""
    now = time.time() if now is None else now
    by_key: dict[str, list[dict[str, Any]]] = {}
    for item in remote.objects(RESUMABLE):
        by_key.setdefault(item["Key"].split("/", 1)[0], []).append(item)
    removed = []
    for key, items in sorted(by_key.items()):
        if max(i["LastModified"].timestamp() for i in items) <= now - older_than:
            remote.delete([f"{RESUMABLE}/{i['Key']}" for i in items])
            removed.append(key)
    return removed


def tidy_location(remote: ObjectStaging, *, every: float = TIDY_SECONDS, now: Optional[float] = None) -> list[str]:
    """Run :func:`remove_stale_attempts` and :func:`remove_stale_resumable` on ``remote`` unless
    that was done less than ``every`` seconds ago (a marker object records when): each dump
    may call it without listing the whole location each time. Returns what was removed."""
    now = time.time() if now is None else now
    last = remote.read(_TIDIED)
    try:
        if last is not None and now - float(last.decode()) < every:
            return []
    except ValueError:
        pass
    remote.put(f"{now:.0f}".encode(), _TIDIED)
    stale = remove_stale_resumable(remote, now=now)
    return remove_stale_attempts(remote, now=now) + [f"{RESUMABLE}/{k}" for k in stale]


_checked: set[str] = set()


def prepare_location_once(remote: ObjectStaging) -> None:
    """Before the first write to a location in this process: :func:`~.storage.check_conditional_writes`."""
    where = remote.location.uri()
    if where not in _checked:
        check_conditional_writes(remote)
        _checked.add(where)


check_conditional_writes_once = prepare_location_once
