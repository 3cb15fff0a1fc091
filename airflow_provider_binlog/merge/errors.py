"""Errors of the merge job."""
from __future__ import annotations

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


__all__ = ["BatchGapError", "ConcurrentCommitError", "ConcurrentRunError", "MergeJobError", "MergeOptionError",
           "SchemaEvolutionError"]
