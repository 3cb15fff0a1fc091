"""Commits that land only on the head their batch was planned on.

Two merges of the same batch may overlap (a retry beside a stuck attempt, two DAGs loading
one namespace). Each table's commit is therefore a compare-and-set from the snapshot the
batch was planned on (``TableWork.state.head``; None for a table that had none):

- direct commits (Iceberg's Java API) are validated from it, or from the table's first
  snapshot, against any data or delete file committed since (:mod:`.direct_commit`);
- Spark writes go to a private branch made at it, and the branch is then published onto
  ``main`` by a fast-forward, which Iceberg refuses when ``main`` moved since
  (:func:`staged_branch`); a table that had no snapshot gets ``main`` created, which Iceberg
  refuses when another writer created it meanwhile.

What Iceberg or Spark raise for such a refusal (a failed validation or fast-forward, a table
or ``main`` created meanwhile) becomes :class:`ConcurrentCommitError`, naming the table
(:func:`conflicts_raised_as`).
"""
from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any, Iterator, Optional

from ..errors import ConcurrentCommitError

log = logging.getLogger(__name__)

#: prefix of the branches Spark writes to before they are published onto ``main``
STAGE_BRANCH_PREFIX = "binlog_stage_"

# what Iceberg, Spark and the catalogs say when a commit meets another writer's
_CONFLICT_CLASSES = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.AlreadyExistsException",
    "org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException",
)
_CONFLICT_TEXTS = ("TABLE_OR_VIEW_ALREADY_EXISTS", "Cannot fast-forward", "Ref main already exists",
                   "Found conflicting", "Missing required files", "is not an ancestor")


def concurrent_commit(table: str, batch_id: str) -> ConcurrentCommitError:
    return ConcurrentCommitError(
        f"another merge committed to {table} since this run planned batch {batch_id} (a retry "
        f"beside a stuck attempt, or two DAGs loading the same namespace); this run's commit of "
        f"{table} was refused, so nothing of the batch is in it twice",
        hint="run the merge again once the other run ended: it finds what that run applied; give each "
             "namespace one load, with a checkpoint store, whose run lock keeps its runs apart")


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` (a py4j or pyspark error, or what it wraps) says a commit met another
    writer's."""
    java = getattr(exc, "java_exception", None)
    names = []
    while java is not None:
        try:
            names.append(java.getClass().getName())
            java = java.getCause()
        except Exception:  # noqa: BLE001 - a gateway gone: judge by the text
            break
    if any(n in _CONFLICT_CLASSES for n in names):
        return True
    text = str(exc)
    return any(t in text for t in _CONFLICT_TEXTS) or any(c.rsplit(".", 1)[1] in text for c in _CONFLICT_CLASSES)


@contextlib.contextmanager
def conflicts_raised_as(table: str, batch_id: str) -> Iterator[None]:
    """Re-raise a conflict with another writer (:func:`is_conflict`) met in the block as
    :class:`ConcurrentCommitError` naming ``table``."""
    try:
        yield
    except ConcurrentCommitError:
        raise
    except Exception as exc:
        if is_conflict(exc):
            raise concurrent_commit(table, batch_id) from exc
        raise


@contextlib.contextmanager
def staged_branch(table: Any, name: str, planned_head: Optional[int], batch_id: str) -> Iterator[str]:
    """A private branch of Iceberg ``table`` (``catalog.namespace.table`` is ``name``) made at
    ``planned_head`` (an empty snapshot for a table that had none), given to the block as the
    identifier Spark writes it through (``name.branch_<branch>``); once the block ends, the
    branch is published onto ``main`` (a fast-forward from ``planned_head``, or ``main``
    created) and removed, in one metadata commit that Iceberg refuses when another writer
    moved ``main`` since. A block that fails leaves ``main`` as it was."""
    branch = f"{STAGE_BRANCH_PREFIX}{uuid.uuid4().hex[:16]}"
    with conflicts_raised_as(name, batch_id):
        table.refresh()
        head = table.currentSnapshot()
        if (None if head is None else int(head.snapshotId())) != planned_head:
            raise concurrent_commit(name, batch_id)
        made = table.manageSnapshots()
        (made.createBranch(branch) if planned_head is None else made.createBranch(branch, planned_head)).commit()
    published = False
    try:
        yield f"{name}.branch_{branch}"
        with conflicts_raised_as(name, batch_id):
            table.refresh()
            staged = table.refs().get(branch).snapshotId()
            publish = table.manageSnapshots()
            if planned_head is None:
                publish = publish.createBranch("main", staged)
            else:
                publish = publish.fastForwardBranch("main", branch)
            publish.removeBranch(branch).commit()
            published = True
    finally:
        if not published:
            with contextlib.suppress(Exception):
                table.refresh()
                table.manageSnapshots().removeBranch(branch).commit()


def remove_stale_branches(table: Any, older_than_seconds: float) -> list[str]:
    """Remove the staging branches of ``table`` a killed merge left behind (whose head is older
    than ``older_than_seconds``): their snapshots keep files that expiry could drop. Returns
    their names."""
    import time

    cutoff = (time.time() - older_than_seconds) * 1000
    table.refresh()
    refs = table.refs()
    stale = []
    for name in list(refs.keySet()):
        if str(name).startswith(STAGE_BRANCH_PREFIX):
            head = table.snapshot(refs.get(name).snapshotId())
            if head is None or head.timestampMillis() < cutoff:
                stale.append(str(name))
    if stale:
        update = table.manageSnapshots()
        for name in stale:
            update = update.removeBranch(name)
        update.commit()
    return stale


__all__ = ["STAGE_BRANCH_PREFIX", "concurrent_commit", "conflicts_raised_as", "is_conflict", "remove_stale_branches",
           "staged_branch"]
