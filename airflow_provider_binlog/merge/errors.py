"""Errors of the merge job."""
from __future__ import annotations

from typing import Optional

from ..errors import ProviderError


class MergeJobError(ProviderError):
    """The merge job cannot apply the batches as given; the message says why."""


class MergeOptionError(MergeJobError, ValueError):
    """An option of the merge has a value it does not take."""


class BatchGapError(MergeJobError):
    """A batch does not start where the previous one (or the target) ended."""


class ConcurrentRunError(MergeJobError):
    """Another merge of the same checkpoint key is running."""


class ConcurrentCommitError(ConcurrentRunError):
    """Another merge committed to a table since this run planned its batch: this run's commit
    of that table was refused, so nothing of the batch lands twice."""


class SchemaEvolutionError(MergeJobError):
    """A staged schema change the Iceberg table cannot follow."""


class SparkNeeded(ProviderError):
    """This merge needs Spark (a table to create with a partition spec or to alter, key changes,
    partial images, a change log, maintenance that is due), and the engine running it is
    Iceberg's Java API alone: the batch is refused before anything of it is committed, and
    Spark then applies it. Every table committed by batches before holds its batch's end,
    which the Spark run finds and skips."""

    def __init__(self, message: str, *, partial: Optional[dict] = None) -> None:
        super().__init__(message)
        #: the result of the batch refused, with the tables committed before (None: none)
        self.partial = partial
        #: the results of the batches applied before Spark was needed (set by the merge)
        self.applied: list = []


__all__ = ["BatchGapError", "ConcurrentCommitError", "ConcurrentRunError", "MergeJobError", "MergeOptionError",
           "SchemaEvolutionError", "SparkNeeded"]
