"""Where a load stopped in the binlog, and a durable store for it.

A ``Checkpoint`` holds binlog coordinates (file + position) and/or the GTID
state reached (a MySQL GTID set or a MariaDB GTID position).  Stores save one
current checkpoint per key with compare-and-set, so two runs of the same load
cannot both advance it.
"""
from __future__ import annotations

import abc
import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import unquote, urlsplit

from airflow_provider_binlog.atomic_file import write_atomically
from airflow_provider_binlog.codec.gtid import MariadbGtidPosition, MysqlGtidSet
from airflow_provider_binlog.codec.positions import position_key, split_binlog_file_name
from airflow_provider_binlog.errors import ProviderError

FLAVOR_MYSQL = "mysql"
FLAVOR_MARIADB = "mariadb"
FLAVORS = (FLAVOR_MYSQL, FLAVOR_MARIADB)

MIN_POSITION = 4  # the first event follows the 4-byte magic

ACCEPTED_FORMS = (
    "accepted forms: file:position (mysql-bin.000003:4); "
    "a MySQL GTID set (3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5); "
    "a MariaDB GTID position (0-1-100,1-2-5); "
    'JSON ({"file": "mysql-bin.000003", "pos": 4} or {"gtid": "...", "flavor": "mysql"})'
)

_MARIADB_POS_RE = re.compile(r"\d+-\d+-\d+(\s*,\s*\d+-\d+-\d+)*,?")
_UUID_IN_TEXT_RE = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_JSON_KEYS = ("file", "pos", "position", "gtid", "flavor", "server_id", "server_uuid")


@dataclass(frozen=True)
class Checkpoint:
    """Binlog coordinates and/or GTID state reached by a load.

    Ordering compares coordinates: file index (numeric suffix, so
    ``mysql-bin.1000000`` > ``mysql-bin.999999``) then position.  Only
    checkpoints with coordinates and the same file basename can be ordered.
    """

    file: str | None = None
    position: int | None = None
    gtid: MysqlGtidSet | MariadbGtidPosition | None = None
    flavor: str | None = None
    server_id: int | None = None
    server_uuid: str | None = None

    def __post_init__(self) -> None:
        if (self.file is None) != (self.position is None):
            raise ValueError("a checkpoint needs both file and position, or neither")
        if self.file is not None:
            split_binlog_file_name(self.file)
            if isinstance(self.position, bool) or not isinstance(self.position, int) \
                    or self.position < MIN_POSITION:
                raise ValueError(f"binlog position must be an integer >= {MIN_POSITION}, "
                                 f"got {self.position!r}")
        if self.gtid is not None and not isinstance(self.gtid, (MysqlGtidSet, MariadbGtidPosition)):
            raise TypeError(f"gtid must be a MysqlGtidSet or MariadbGtidPosition, "
                            f"got {type(self.gtid).__name__}")
        if self.file is None and self.gtid is None:
            raise ValueError("a checkpoint needs a file:position or a GTID state")
        implied = _flavor_of(self.gtid)
        if self.flavor is not None and self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, got {self.flavor!r}")
        if implied is not None:
            if self.flavor not in (None, implied):
                raise ValueError(f"flavor {self.flavor!r} does not match a {implied} GTID state")
            object.__setattr__(self, "flavor", implied)
        if self.server_id is not None and (isinstance(self.server_id, bool)
                                           or not isinstance(self.server_id, int)
                                           or not 0 <= self.server_id < 1 << 32):
            raise ValueError(f"server_id must be an unsigned 32-bit integer, got {self.server_id!r}")

    # -- coordinates -------------------------------------------------------

    @property
    def has_coordinates(self) -> bool:
        return self.file is not None

    @property
    def file_basename(self) -> str | None:
        return None if self.file is None else split_binlog_file_name(self.file)[0]

    @property
    def file_index(self) -> int | None:
        return None if self.file is None else split_binlog_file_name(self.file)[1]

    @property
    def point(self) -> tuple[str, ...]:
        """The place in the binlog this checkpoint names, hashable: its coordinates when it has
        them, else its GTID state (the server identity and flavor left out)."""
        if self.file is not None:
            return ("pos", self.file, str(self.position))
        return ("gtid", str(self.gtid))

    def same_server(self, server_id: int | None, server_uuid: str | None) -> bool | None:
        """Whether this checkpoint was taken on the server of this identity: by ``server_uuid``
        when both have one (MySQL), else by ``server_id``; ``None`` when either is unrecorded."""
        if self.server_uuid and server_uuid:
            return self.server_uuid.lower() == server_uuid.lower()
        if self.server_id is not None and server_id is not None:
            return self.server_id == server_id
        return None

    def compare(self, other: "Checkpoint") -> int:
        """-1, 0 or 1 as this checkpoint is before, at or after ``other``: by binlog
        coordinates when both have them (one series, and not two servers: a promoted replica
        writes other offsets), else by GTID state (one kind, one containing the other). Raises
        :class:`CheckpointOrderError` when they cannot be ordered."""
        if not isinstance(other, Checkpoint):
            raise TypeError(f"cannot compare Checkpoint with {type(other).__name__}")
        if self.file is not None and other.file is not None and \
                self.same_server(other.server_id, other.server_uuid) is not False:
            if self.file_basename != other.file_basename:
                raise CheckpointOrderError(
                    f"cannot order binlog files of different series: {self.file!r} vs {other.file!r} "
                    f"(basenames {self.file_basename!r} and {other.file_basename!r})")
            a, b = position_key(self.file, self.position), position_key(other.file, other.position)
            return (a > b) - (a < b)
        ga, gb = self.gtid, other.gtid
        if ga is not None and gb is not None and type(ga) is type(gb):
            if ga == gb:
                return 0
            if gb.contains(ga):
                return -1
            if ga.contains(gb):
                return 1
        raise CheckpointOrderError(f"cannot order checkpoints [{self}] and [{other}]: they need binlog "
                                   "coordinates or GTID states of which one contains the other")

    def __lt__(self, other: object) -> bool:
        return self.compare(other) < 0  # type: ignore[arg-type]

    def __le__(self, other: object) -> bool:
        return self.compare(other) <= 0  # type: ignore[arg-type]

    def __gt__(self, other: object) -> bool:
        return self.compare(other) > 0  # type: ignore[arg-type]

    def __ge__(self, other: object) -> bool:
        return self.compare(other) >= 0  # type: ignore[arg-type]

    # -- text and JSON -----------------------------------------------------

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(f"{self.file}:{self.position}")
        if self.gtid is not None:
            parts.append(f"gtid={self.gtid}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Dict with stable keys; absent values are None."""
        return {
            "file": self.file,
            "pos": self.position,
            "gtid": None if self.gtid is None else str(self.gtid),
            "flavor": self.flavor,
            "server_id": self.server_id,
            "server_uuid": self.server_uuid,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> "Checkpoint":
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ValueError(f"invalid checkpoint JSON: {exc}; {ACCEPTED_FORMS}") from None
        if not isinstance(data, Mapping):
            raise ValueError(f"checkpoint JSON must be an object; {ACCEPTED_FORMS}")
        unknown = sorted(set(data) - set(_JSON_KEYS))
        if unknown:
            raise ValueError(f"unknown checkpoint key(s) {', '.join(unknown)}; "
                             f"known keys: {', '.join(_JSON_KEYS)}")
        if "pos" in data and "position" in data:
            raise ValueError("give either 'pos' or 'position', not both")
        position = data.get("pos", data.get("position"))
        if isinstance(position, str) and position.strip().isdigit():
            position = int(position)
        flavor = data.get("flavor")
        gtid_text = data.get("gtid")
        gtid = None
        if gtid_text is not None:
            if not isinstance(gtid_text, str):
                raise ValueError("checkpoint 'gtid' must be a string")
            gtid = _parse_gtid_state(gtid_text, flavor)
        try:
            return cls(file=data.get("file"), position=position, gtid=gtid, flavor=flavor,
                       server_id=data.get("server_id"), server_uuid=data.get("server_uuid"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid checkpoint {dict(data)!r}: {exc}") from None

    @classmethod
    def parse(cls, text: str) -> "Checkpoint":
        """Read a checkpoint the way users type one (see ``ACCEPTED_FORMS``)."""
        value = text.strip() if isinstance(text, str) else ""
        if not value:
            raise ValueError(f"empty checkpoint; {ACCEPTED_FORMS}")
        if value.startswith("{"):
            return cls.from_json(value)
        try:
            if _MARIADB_POS_RE.fullmatch(value):
                return cls(gtid=MariadbGtidPosition(value))
            if _UUID_IN_TEXT_RE.match(value):
                return cls(gtid=MysqlGtidSet(value))
            file, sep, position = value.rpartition(":")
            if sep and position.strip().isdigit():
                return cls(file=file.strip(), position=int(position))
        except ValueError as exc:
            raise ValueError(f"invalid checkpoint {text!r}: {exc}; {ACCEPTED_FORMS}") from None
        raise ValueError(f"invalid checkpoint {text!r}; {ACCEPTED_FORMS}")


def _flavor_of(gtid: object) -> str | None:
    if isinstance(gtid, MysqlGtidSet):
        return FLAVOR_MYSQL
    if isinstance(gtid, MariadbGtidPosition):
        return FLAVOR_MARIADB
    return None


def _parse_gtid_state(text: str, flavor: str | None) -> MysqlGtidSet | MariadbGtidPosition:
    if flavor == FLAVOR_MYSQL:
        return MysqlGtidSet(text)
    if flavor == FLAVOR_MARIADB:
        return MariadbGtidPosition(text)
    if flavor is not None:
        raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, got {flavor!r}")
    if not text.strip():
        raise ValueError("an empty 'gtid' needs 'flavor' (mysql or mariadb)")
    if _MARIADB_POS_RE.fullmatch(text.strip()):
        return MariadbGtidPosition(text)
    return MysqlGtidSet(text)


# --------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------

class CheckpointOrderError(ProviderError, ValueError):
    """Two checkpoints that cannot be ordered (different binlog series, or GTID states of
    which neither contains the other)."""


class CheckpointStoreError(ProviderError):
    """The store cannot be read or written."""


class CheckpointConflictError(CheckpointStoreError):
    """Compare-and-set failed: the stored checkpoint is not the expected one."""

    def __init__(self, key: str, expected: object, actual: Checkpoint | None) -> None:
        self.key, self.expected, self.actual = key, expected, actual
        super().__init__(f"checkpoint {key!r} changed concurrently: expected {_describe(expected)}, "
                         f"found {_describe(actual)}; another run may be loading the same source")

    def __reduce__(self):
        return type(self), (self.key, self.expected, self.actual)


class CheckpointLockedError(CheckpointStoreError):
    """Another process runs a load of the same key (it holds the key's run lock)."""


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""``save(..., expected=ABSENT)`` succeeds only if nothing is stored yet."""


def _describe(value: object) -> str:
    if value is None or value is ABSENT:
        return "no checkpoint"
    return f"[{value}]"


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

    def exclusive(self, key: str) -> contextlib.AbstractContextManager:
        """Held by a run that advances ``key`` (the merge job), so that two runs of the same
        load cannot both commit; raises :class:`CheckpointLockedError` at once when another
        holds it. The base class does not lock (compare-and-set alone guards the store)."""
        return contextlib.nullcontext()


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
    def exclusive(self, key: str) -> Iterator[None]:
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
            yield
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


SUPPORTED_STORE_SCHEMES = ("file", "postgresql", "sqlite")


def open_checkpoint_store(uri: str | os.PathLike[str], **options: Any) -> CheckpointStore:
    """Open a store from a plain path or a ``file://`` URI (files, the default), or from a
    SQLAlchemy URL, ``postgresql[+driver]://...`` or ``sqlite:///path`` (a
    :class:`~airflow_provider_binlog.checkpoint_sql.SqlCheckpointStore`); ``options`` go to
    the store's constructor (e.g. ``history_limit``)."""
    text = os.fspath(uri)
    if not text:
        raise ValueError("empty checkpoint store location; give a directory path or file:///path")
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if m is None:
        return FileCheckpointStore(text, **options)
    scheme = m.group(1).lower()
    if scheme.split("+", 1)[0] in ("postgresql", "sqlite"):
        from airflow_provider_binlog.checkpoint_sql import SqlCheckpointStore

        return SqlCheckpointStore(text, **options)
    if scheme != "file":
        raise ValueError(f"unsupported checkpoint store scheme {scheme!r}; supported: "
                         f"a plain directory path or {', '.join(s + '://' for s in SUPPORTED_STORE_SCHEMES)}")
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"file:// URI {text!r} names host {parts.netloc!r}; only local paths "
                         f"are supported (file:///path)")
    path = unquote(parts.path)
    if not path:
        raise ValueError(f"file:// URI {text!r} has no path")
    return FileCheckpointStore(path, **options)

