"""Where a load stopped in the binlog (:class:`Checkpoint`), and durable stores for it: files
(:class:`FileCheckpointStore`) or a SQL database (:class:`.sql_store.SqlCheckpointStore`, with
the ``postgres`` extra), opened from a location by :func:`open_checkpoint_store`."""
from .checkpoint import ACCEPTED_FORMS, FLAVOR_MARIADB, FLAVOR_MYSQL, FLAVORS, MIN_POSITION, Checkpoint
from .errors import (
    ABSENT,
    CheckpointConflictError,
    CheckpointLockedError,
    CheckpointLockLostError,
    CheckpointOrderError,
    CheckpointStoreError,
)
from .file_store import FileCheckpointStore, key_to_file_stem
from .opener import SUPPORTED_STORE_SCHEMES, open_checkpoint_store
from .store import CheckpointStore, RunLock, SavedCheckpoint

__all__ = ["ABSENT", "ACCEPTED_FORMS", "Checkpoint", "CheckpointConflictError", "CheckpointLockLostError",
           "CheckpointLockedError", "CheckpointOrderError", "CheckpointStore", "CheckpointStoreError", "FLAVORS",
           "FLAVOR_MARIADB", "FLAVOR_MYSQL", "FileCheckpointStore", "MIN_POSITION", "RunLock",
           "SUPPORTED_STORE_SCHEMES", "SavedCheckpoint", "key_to_file_stem", "open_checkpoint_store"]
