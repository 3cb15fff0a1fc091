"""Replica client: connects with pymysql and reads binlog events like a replica does."""
from .client import ReplicaConnection, ServerInfo
from .errors import (
                     BinlogAccessDeniedError,
                     BinlogPurgedError,
                     ReplicaError,
                     ReplicationConnectionLost,
                     ServerUnavailableError,
)
from .identity import ServerChangedError

__all__ = ["BinlogAccessDeniedError", "BinlogPurgedError", "ReplicaConnection", "ReplicaError",
           "ReplicationConnectionLost", "ServerChangedError", "ServerInfo", "ServerUnavailableError"]
