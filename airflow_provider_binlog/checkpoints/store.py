"""The interface of checkpoint stores: one current checkpoint per key, saved with
compare-and-set so two runs of the same load cannot both advance it, plus a bounded history."""
from __future__ import annotations

import abc
import contextlib
import datetime as dt
from dataclasses import dataclass

from .checkpoint import Checkpoint


@dataclass(frozen=True)
class SavedCheckpoint:
    checkpoint: Checkpoint
    saved_at: dt.datetime


class CheckpointStore(abc.ABC):
    """One current checkpoint per key, plus a bounded history of saves."""

    @abc.abstractmethod
    def load(self, key: str) -> Checkpoint | None:
        """The current checkpoint, or None if the key was never saved."""

    @abc.abstractmethod
    def save(self, key: str, checkpoint: Checkpoint, *, expected: Checkpoint | None = None,
             schema_history: dict | None = None) -> None:
        """Store ``checkpoint``.  If ``expected`` is given (a checkpoint, or
        ``ABSENT``), raise ``CheckpointConflictError`` unless the stored value
        equals it; the check and the write are atomic.

        ``schema_history`` is the schema history valid at ``checkpoint`` (its JSON form),
        written in the same atomic write; a save without one drops the stored one, which
        belonged to the previous checkpoint."""

    def load_schema_history(self, key: str) -> tuple[Checkpoint, dict] | None:
        """The current checkpoint with the schema history saved with it, or None when the
        key has no checkpoint or its checkpoint was saved without a history."""
        return None

    @abc.abstractmethod
    def history(self, key: str, limit: int | None = None) -> list[SavedCheckpoint]:
        """The last saves, newest first (at most ``limit``)."""

    def exclusive(self, key: str) -> contextlib.AbstractContextManager["RunLock"]:
        """Held by a run that advances ``key`` (the merge job), so that two runs of the same
        load cannot both commit; raises :class:`CheckpointLockedError` at once when another
        holds it. The block gets the :class:`RunLock`, to verify before each commit. The base
        class does not lock (compare-and-set alone guards the store)."""
        return contextlib.nullcontext(RunLock(key))


class RunLock:
    """A held run lock (what :meth:`CheckpointStore.exclusive` gives its block). A run checks
    it with :meth:`verify` before each commit phase; a lock that cannot be lost while its
    process lives (a file lock) has nothing to check."""

    def __init__(self, key: str) -> None:
        self.key = key

    def verify(self) -> None:
        """Raise :class:`CheckpointLockLostError` when this run no longer holds the lock."""

    def pause_renewal(self) -> None:
        """Stop renewing a lease (what a stuck process does); nothing for other locks."""
