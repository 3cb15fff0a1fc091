"""Errors of the replica client, each with what to do next."""
from __future__ import annotations


class ReplicaError(Exception):
    """Base class: ``hint`` says what to do next."""

    def __init__(self, message: str, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


class BinlogPurgedError(ReplicaError):
    """The requested binlog position or GTIDs are no longer on the server."""


class BinlogAccessDeniedError(ReplicaError):
    """Bad credentials or missing REPLICATION SLAVE / REPLICATION CLIENT grants."""


class ReplicationConnectionLost(ReplicaError):
    """The server closed the replication stream."""


class ServerUnavailableError(ReplicationConnectionLost):
    """The server cannot be reached (down, restarting, unreachable): worth retrying."""
