"""The errors of checkpoints and their stores."""
from __future__ import annotations

from typing import Any

from airflow_provider_binlog.errors import ProviderError


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""``save(..., expected=ABSENT)`` succeeds only if nothing is stored yet."""


def describe(value: object) -> str:
    """A checkpoint (or ``ABSENT``, None) as error messages show it."""
    if value is None or value is ABSENT:
        return "no checkpoint"
    return f"[{value}]"


class CheckpointOrderError(ProviderError, ValueError):
    """Two checkpoints that cannot be ordered (different binlog series, or GTID states of
    which neither contains the other)."""


class CheckpointStoreError(ProviderError):
    """The store cannot be read or written."""


class CheckpointConflictError(CheckpointStoreError):
    """Compare-and-set failed: the stored checkpoint is not the expected one."""

    def __init__(self, key: str, expected: object, actual: object) -> None:
        """``expected`` and ``actual``: checkpoints, ``ABSENT`` or None (nothing stored)."""
        self.key, self.expected, self.actual = key, expected, actual
        super().__init__(f"checkpoint {key!r} changed concurrently: expected {describe(expected)}, "
                         f"found {describe(actual)}; another run may be loading the same source")

    def __reduce__(self):
        return type(self), (self.key, self.expected, self.actual)


class CheckpointLockedError(CheckpointStoreError):
    """Another process runs a load of the same key (it holds the key's run lock)."""


class CheckpointLockLostError(CheckpointLockedError):
    """The run lock this run held was taken by another run (its lease ran out while this run
    did not renew it): this run must commit nothing more."""
