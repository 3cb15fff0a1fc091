"""Checkpoints in files: one JSON file per key in a directory, replaced atomically, guarded by
``flock``; for one host or a directory every party mounts."""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
from typing import Any, Callable, Iterator

from airflow_provider_binlog.common.atomic_file import write_atomically

from .checkpoint import Checkpoint
from .errors import ABSENT, CheckpointConflictError, CheckpointLockedError, CheckpointStoreError
from .store import CheckpointStore, RunLock, SavedCheckpoint

_SAFE_KEY_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
_FORMAT_VERSION = 1


def key_to_file_stem(key: str) -> str:
    """A file-system-safe, collision-resistant name for a store key."""
    if not isinstance(key, str) or not key:
        raise ValueError("checkpoint key must be a non-empty string")
    if _SAFE_KEY_RE.fullmatch(key):
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", key)[:80].strip("_") or "key"
    return f"{readable}~{digest}"


class FileCheckpointStore(CheckpointStore):
    """Checkpoints as JSON files under ``root``: ``<key>.json`` each, written
    atomically (temp file, fsync, rename, directory fsync) under an exclusive
    ``flock`` on ``<key>.lock``.  Files are 0600 and the directory 0700."""

    def __init__(self, root: str | os.PathLike[str], *, history_limit: int = 100,
                 clock: Callable[[], dt.datetime] | None = None) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        self.root = os.fspath(root)
        self.history_limit = history_limit
        self._clock = clock or (lambda: dt.datetime.now(dt.timezone.utc))

    def __repr__(self) -> str:
        return f"FileCheckpointStore({self.root!r})"

    # -- paths and locking -------------------------------------------------

    def _ensure_root(self) -> None:
        if not os.path.isdir(self.root):
            os.makedirs(self.root, mode=0o700, exist_ok=True)
            os.chmod(self.root, 0o700)

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key_to_file_stem(key) + ".json")

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        self._ensure_root()
        lock_path = os.path.join(self.root, key_to_file_stem(key) + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    @contextlib.contextmanager
    def exclusive(self, key: str) -> Iterator[RunLock]:
        """An exclusive ``flock`` on ``<key>.run.lock`` (released when the holder exits or
        dies, SIGKILL included: never stale); the file holds the holder's pid."""
        self._ensure_root()
        lock_path = os.path.join(self.root, key_to_file_stem(key) + ".run.lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                raise CheckpointLockedError(
                    f"another run of {key!r} is in progress (process {holder} holds {lock_path}); "
                    f"two runs of the same load must not overlap: let it finish, or wait for "
                    f"it to fail") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield RunLock(key)
        finally:
            os.close(fd)  # releases the lock

    # -- reading -----------------------------------------------------------

    def _read(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CheckpointStoreError(f"cannot read checkpoint file {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT_VERSION or doc.get("key") != key:
            raise CheckpointStoreError(f"checkpoint file {path} is not a format-{_FORMAT_VERSION} "
                                       f"checkpoint for key {key!r}")
        return doc

    def _current(self, key: str, doc: dict[str, Any] | None) -> Checkpoint | None:
        if doc is None or doc.get("current") is None:
            return None
        try:
            return Checkpoint.from_json(doc["current"])
        except ValueError as exc:
            raise CheckpointStoreError(f"checkpoint file {self._path(key)} holds an invalid "
                                       f"checkpoint: {exc}") from None

    def load(self, key: str) -> Checkpoint | None:
        return self._current(key, self._read(key))

    def history(self, key: str, limit: int | None = None) -> list[SavedCheckpoint]:
        doc = self._read(key)
        if doc is None:
            return []
        entries = doc.get("history", [])
        if limit is not None:
            entries = entries[:max(limit, 0)]
        try:
            return [SavedCheckpoint(Checkpoint.from_json(e["checkpoint"]),
                                    dt.datetime.fromisoformat(e["saved_at"])) for e in entries]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointStoreError(f"checkpoint file {self._path(key)} has a bad history "
                                       f"entry: {exc}") from None

    # -- writing -----------------------------------------------------------

    def load_schema_history(self, key: str) -> tuple[Checkpoint, dict] | None:
        doc = self._read(key)
        current = self._current(key, doc)
        if current is None or not isinstance(doc.get("schema_history"), dict):
            return None
        return current, doc["schema_history"]

    def save(self, key: str, checkpoint: Checkpoint, *, expected: Checkpoint | None = None,
             schema_history: dict | None = None) -> None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"expected a Checkpoint, got {type(checkpoint).__name__}")
        with self._locked(key):
            self._remove_stale_temp_files(key)
            doc = self._read(key)
            current = self._current(key, doc)
            if expected is ABSENT:
                if current is not None:
                    raise CheckpointConflictError(key, ABSENT, current)
            elif expected is not None and current != expected:
                raise CheckpointConflictError(key, expected, current)
            saved_at = self._clock().isoformat()
            entry = {"checkpoint": checkpoint.to_json(), "saved_at": saved_at}
            previous = doc.get("history", []) if doc else []
            new_doc = {
                "format": _FORMAT_VERSION,
                "key": key,
                "current": checkpoint.to_json(),
                "saved_at": saved_at,
                "history": [entry, *previous][:self.history_limit],
            }
            if schema_history is not None:
                new_doc["schema_history"] = schema_history
            self._write_atomically(self._path(key), json.dumps(new_doc, indent=1, sort_keys=True))

    def _temp_prefix(self, key: str) -> str:
        return f".{key_to_file_stem(key)}.json~"

    def _remove_stale_temp_files(self, key: str) -> None:
        """Temp files of this key left by a crashed writer (we hold the lock, so
        no live writer owns one)."""
        pattern = re.compile(re.escape(self._temp_prefix(key)) + r"[A-Za-z0-9_]+\.tmp")
        for name in os.listdir(self.root):
            if pattern.fullmatch(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.root, name))

    def _write_atomically(self, path: str, text: str) -> None:
        stem = os.path.basename(path)[:-len(".json")]
        write_atomically(path, text, temp_prefix=f".{stem}.json~")
