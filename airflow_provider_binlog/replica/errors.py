"""Errors of the replica client, each with what to do next."""
from __future__ import annotations

from ..errors import ProviderError


class ReplicaError(ProviderError):
    """Base class: ``hint`` says what to do next."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint=hint)

    def __reduce__(self):
        return type(self), (self.message, self.hint)


class BinlogPurgedError(ReplicaError):
    """The requested binlog position or GTIDs are no longer on the server."""


class BinlogAccessDeniedError(ReplicaError):
    """Bad credentials or missing REPLICATION SLAVE / REPLICATION CLIENT grants."""


class ReplicationConnectionLost(ReplicaError):
    """The server closed the replication stream."""


class ServerUnavailableError(ReplicationConnectionLost):
    """The server cannot be reached (down, restarting, unreachable): worth retrying."""
