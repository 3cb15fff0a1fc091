"""Keeping a staging location on an object store tidy, touching only its own: uploads no
manifest names (a dump killed before it published, or one that lost the race to publish) and
sealed work nobody resumed, at most hourly.

What makes an object the provider's own: the location carries the marker its first writer left
(:data:`.remote.MARKER_NAME`; without it nothing is removed), the object is
``<batch>/<attempt id>/...`` with a batch named as dumps and snapshots name theirs
(:data:`.confine.BATCH_NAME`) or under ``.resumable/``, and the batch's manifest, read just
before, does not name that attempt. Objects of other applications in the same bucket or prefix
(an MLflow run's ``1/<32 hex>/artifacts/...``, ``uploads/<uuid>/...``) are never touched."""
from __future__ import annotations

import logging
import time
from typing import Any, Optional

from .confine import ATTEMPT_ID, is_batch_name
from .contract import MANIFEST_NAME
from .remote import MARKER_NAME, UNKNOWN, is_marked, published_attempt
from .sealed import RESUMABLE
from .storage import ObjectStaging

log = logging.getLogger(__name__)

#: sealed work kept on a store that no writer resumed is removed after this many seconds
RESUMABLE_SECONDS = 7 * 24 * 3600
#: a location is tidied at most this often (a marker object holds the last time)
TIDY_SECONDS = 3600
#: attempts (uploads under a batch) no manifest names are removed after this many seconds
STALE_ATTEMPT_SECONDS = 24 * 3600
_TIDIED = ".tidied-at"


def _marked(remote: ObjectStaging) -> bool:
    if is_marked(remote):
        return True
    log.warning("%s has no staging marker (%s): nothing of it is removed; a writer of this release leaves one "
                "there at its first publish", remote.location.uri(), MARKER_NAME)
    return False


def remove_stale_attempts(remote: ObjectStaging, *, older_than: float = STALE_ATTEMPT_SECONDS,
                          now: Optional[float] = None) -> list[str]:
    """Delete the uploads under a batch of ``remote`` that its manifest does not name, once older
    than ``older_than`` seconds (a younger one may still be uploading); returns the attempts
    removed as ``<batch>/<attempt>``. Only ``<batch>/<attempt id>/...`` objects of batches
    directly under a marked location are considered (a nested staging location, another
    application's objects are left alone); the batch's manifest is read before any of them is
    deleted (a listing decides only what is kept), and one that cannot be read or names no
    attempt keeps them all."""
    now = time.time() if now is None else now
    if not _marked(remote):
        return []
    by_attempt: dict[tuple[str, str], list[dict[str, Any]]] = {}
    listed_manifests = set()
    for item in remote.objects():
        parts = item["Key"].split("/")
        if not is_batch_name(parts[0]):  # sealed work, results, markers, and whatever is not ours
            continue
        if len(parts) == 2 and parts[1] == MANIFEST_NAME:
            listed_manifests.add(parts[0])
        elif len(parts) >= 3 and ATTEMPT_ID.fullmatch(parts[1]):
            by_attempt.setdefault((parts[0], parts[1]), []).append(item)
    attempts_of: dict[str, list[str]] = {}
    for batch, attempt in by_attempt:
        attempts_of.setdefault(batch, []).append(attempt)
    removed = []
    for batch, attempts in sorted(attempts_of.items()):
        if batch in listed_manifests and len(attempts) == 1:
            continue  # the published attempt: nothing to delete
        stale = [a for a in sorted(attempts)
                 if max(i["LastModified"].timestamp() for i in by_attempt[(batch, a)]) <= now - older_than]
        if not stale:
            continue
        named = published_attempt(remote, batch)
        if named == UNKNOWN:
            log.warning("%s: its manifest cannot be read now or names no attempt: nothing of it is removed",
                        remote.location.uri(batch))
            continue
        for attempt in stale:
            if attempt != named:
                remote.delete([i["Key"] for i in by_attempt[(batch, attempt)]])
                removed.append(f"{batch}/{attempt}")
    return removed


def remove_stale_resumable(remote: ObjectStaging, *, older_than: float = RESUMABLE_SECONDS,
                           now: Optional[float] = None) -> list[str]:
    """Delete the sealed work kept under ``.resumable/<key>/`` of a marked location that nothing
    touched for ``older_than`` seconds (no retry resumed it); returns the keys removed."""
    now = time.time() if now is None else now
    if not _marked(remote):
        return []
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
    that was done less than ``every`` seconds ago (a marker object records when) or the location
    has no staging marker: each dump may call it without listing the whole location each time.
    Returns what was removed."""
    now = time.time() if now is None else now
    if not _marked(remote):
        return []
    try:
        last = remote.read(_TIDIED, limit=64)
        if last is not None and now - float(last.decode()) < every:
            return []
    except ValueError:  # not a time (or larger than one): tidied now
        pass
    remote.put(f"{now:.0f}".encode(), _TIDIED)
    stale = remove_stale_resumable(remote, now=now)
    return remove_stale_attempts(remote, now=now) + [f"{RESUMABLE}/{k}" for k in stale]


__all__ = ["MARKER_NAME", "RESUMABLE_SECONDS", "STALE_ATTEMPT_SECONDS", "TIDY_SECONDS", "remove_stale_attempts",
           "remove_stale_resumable", "tidy_location"]
