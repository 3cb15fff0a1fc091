"""Where staged batches live: a local directory (a plain path or ``file://``), or an object
store (``s3://bucket/prefix``, ``gs://bucket/prefix``,
``abfs://container@account.dfs.core.windows.net/prefix``).

An object store has no rename and no lock, so a batch is published there by one conditional
write: its part files are uploaded under an attempt prefix of the batch, then its manifest is
created only if no manifest exists (S3 and Azure ``If-None-Match: *``, GCS
``ifGenerationMatch=0``). Two dumps of one range cannot both publish, and a killed dump's
uploads are never named by a manifest, so never read; they are removed later
(:func:`.tidy.remove_stale_attempts`).

Reads go through pyarrow's filesystems; writes through each store's client (:mod:`.stores`),
which sends the conditional write and server-side encryption. Credentials: see
:mod:`.location`.
"""
from __future__ import annotations

import io
import logging
import os
import time
from typing import Any, Optional, Sequence

from .confine import MAX_DOCUMENT_BYTES, check_size
from .location import (
    KMS_KEY_ENV,
    OBJECT_SCHEMES,
    SECRET_ENV,
    ObjectLocation,
    StagingStorageError,
    StorageOptions,
    is_object_store,
    local_path,
    shown,
)
from ..common.atomic_file import write_atomically
from .stores import open_filesystem, open_store

log = logging.getLogger(__name__)

def filesystem(location: str, options: Optional[StorageOptions] = None) -> tuple[Any, str]:
    """pyarrow's filesystem for ``location`` (an object store URI or a local path) and the path
    in it, with ``options`` (default: from the environment)."""
    import pyarrow.fs as pafs

    if not is_object_store(location):
        return pafs.LocalFileSystem(), local_path(location)
    return open_filesystem(ObjectLocation.parse(location), options or StorageOptions.from_env())


class ObjectStaging:
    """A staging location on an object store: keys relative to its prefix, over the store's
    client (:mod:`.stores`)."""

    def __init__(self, location: str, options: Optional[StorageOptions] = None) -> None:
        self.location = ObjectLocation.parse(location)
        self.options = options or StorageOptions.from_env()
        self.store = open_store(self.location, self.options)

    def upload(self, local: str, *parts: str) -> None:
        """Upload the local file ``local`` to ``parts`` (a staged file: in parts when large)."""
        self.store.upload_file(self.location.key(*parts), local)

    def put(self, data: bytes, *parts: str) -> None:
        """Write ``data`` at ``parts``, replacing what is there."""
        self.store.put(self.location.key(*parts), data)

    def create_if_absent(self, data: bytes, *parts: str) -> bool:
        """Write ``data`` at ``parts`` unless an object is there: True when written, False when
        one was (the store refused the conditional write). A store that ignores the condition
        would let two writers both succeed: :func:`check_conditional_writes` finds out."""
        return self.store.put(self.location.key(*parts), data, if_absent=True)

    def read(self, *parts: str, limit: int = MAX_DOCUMENT_BYTES) -> Optional[bytes]:
        """The object at ``parts`` (a document: a manifest, sealed progress, a marker); None when
        there is none. One larger than ``limit`` bytes is refused before it is read."""
        out = io.BytesIO()
        return out.getvalue() if self.store.download(self.location.key(*parts), out, limit=limit) else None

    def download(self, local: str, *parts: str, size: int) -> bool:
        """Copy the object at ``parts``, of ``size`` bytes, into a new private file ``local``
        (never one that is there, nor through a symbolic link); False when there is no object.
        One larger than ``size`` is refused before it is read."""
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            return self.store.download(self.location.key(*parts), out, limit=size)

    def objects(self, *parts: str) -> list[dict[str, Any]]:
        """The objects under ``parts`` (``Key``, ``Size``, ``LastModified``), keys relative to it."""
        base = self.location.key(*parts)
        prefix = base + "/" if base else ""
        return [{**item, "Key": item["Key"][len(prefix):]} for item in self.store.list(prefix)]

    def children(self, *parts: str) -> Sequence[str]:
        """The names directly under ``parts`` that have objects under them (batches, ``.resumable``)."""
        base = self.location.key(*parts)
        return self.store.list_prefixes(base + "/" if base else "")

    def delete(self, keys: list[str]) -> None:
        """Delete the objects ``keys`` (relative to the location's prefix)."""
        self.store.delete([self.location.key(k) for k in keys])


def check_conditional_writes(staging: ObjectStaging) -> None:
    """Refuse a store that ignores ``If-None-Match``: a probe object written twice must be
    refused the second time. The first write is ours even when refused, if it holds our own
    random body (a retry after its answer was lost)."""
    probe = f".conditional-write-probe-{os.getpid()}-{time.monotonic_ns()}"
    first, second = os.urandom(16).hex().encode(), os.urandom(16).hex().encode()
    try:
        created = staging.create_if_absent(first, probe) or staging.read(probe) == first
        if not created or staging.create_if_absent(second, probe):
            raise StagingStorageError(f"{staging.location.uri()}: the store ignores conditional writes "
                                      f"(If-None-Match, ifGenerationMatch)",
                                      hint="two dumps of one range could both publish there; stage on a store "
                                           "that honours them or on a local path")
    finally:
        try:
            staging.delete([probe])
        except Exception:  # noqa: BLE001 - the probe's answer (or its error) is what counts
            log.warning("could not delete the probe object %s", staging.location.uri(probe), exc_info=True)


def total_size(locations: Sequence[str], known: Optional[int] = None) -> int:
    """The bytes of staged files (local paths or object store URIs): ``known`` when the caller
    has them (a manifest records each file's size, checked when it is loaded), else looked up."""
    if known is not None:
        return known
    total = 0
    for location in locations:
        fs, path = filesystem(location)
        total += int(fs.get_file_info(path).size)
    return total


def read_parquet(location: str, columns: Optional[list[str]] = None,
                 options: Optional[StorageOptions] = None) -> Any:
    """A staged Parquet file (a local path or an object store URI) as a pyarrow table of the
    staging contract's columns (a row file's too: see :mod:`.row_files`)."""
    import pyarrow.parquet as pq

    from .row_files import staged_view

    location = os.fspath(location)
    if not is_object_store(location):
        return open_parquet(location).read(columns=columns)
    fs, path = filesystem(location, options)
    with fs.open_input_file(path) as fh:
        return staged_view(pq.ParquetFile(fh), location).read(columns=columns)


def open_parquet(location: str, options: Optional[StorageOptions] = None) -> Any:
    """A staged Parquet file (a local path or an object store URI) as a ``pyarrow.parquet.
    ParquetFile`` to read in batches, a row file as the contract's columns
    (:func:`.row_files.staged_view`)."""
    import pyarrow.parquet as pq

    from .row_files import staged_view

    location = os.fspath(location)
    if not is_object_store(location):
        return staged_view(pq.ParquetFile(local_path(location)), location)
    fs, path = filesystem(location, options)
    return staged_view(pq.ParquetFile(fs.open_input_file(path)), location)


def staged_footer(location: str) -> tuple[Any, Optional[int]]:
    """What a staged Parquet file's footer says: its Arrow schema (a row file's: the contract's)
    and, for a row file, its row groups (None for a part file)."""
    import pyarrow.parquet as pq

    from .row_files import rows_layout

    def of(parquet: Any) -> tuple[Any, Optional[int]]:
        layout = rows_layout(parquet, location)
        return (parquet.schema_arrow, None) if layout is None else (layout.schema, parquet.num_row_groups)

    if not is_object_store(location):
        return of(pq.ParquetFile(local_path(location)))
    fs, path = filesystem(location)
    with fs.open_input_file(path) as fh:
        return of(pq.ParquetFile(fh))


def read_parquet_schema(location: str) -> Any:
    """The Arrow schema of a staged Parquet file, from its footer (a row file's: the contract's)."""
    return staged_footer(location)[0]


def write_bytes(location: str, data: bytes, options: Optional[StorageOptions] = None) -> None:
    """Write a small file (a local path or an object store URI), replacing what is there; a
    reader sees the old content or the new, never a part (a local file is renamed into place,
    an object is one PUT)."""
    if is_object_store(location):
        parent, name = location.rsplit("/", 1)
        ObjectStaging(parent, options).put(data, name)
        return
    if "://" not in location or location.startswith("file://"):
        write_atomically(location.removeprefix("file://"), data)
        return
    fs, path = filesystem(location)
    with fs.open_output_stream(path) as out:
        out.write(data)


def read_bytes(location: str, options: Optional[StorageOptions] = None, *,
               limit: int = MAX_DOCUMENT_BYTES) -> Optional[bytes]:
    """A small file's bytes (a local path or an object store URI); None when there is none.
    One larger than ``limit`` bytes is refused (:class:`.confine.UntrustedObjectError`) before
    it is read."""
    fs, path = filesystem(location, options)
    try:
        with fs.open_input_file(path) as stream:
            check_size(shown(location), stream.size(), limit)
            return bytes(stream.read())
    except FileNotFoundError:
        return None


def delete_file(location: str, options: Optional[StorageOptions] = None) -> None:
    """Delete a file (a local path or an object store URI) if it is there."""
    fs, path = filesystem(location, options)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


__all__ = ["KMS_KEY_ENV", "OBJECT_SCHEMES", "SECRET_ENV", "ObjectLocation", "ObjectStaging", "StagingStorageError",
           "StorageOptions", "check_conditional_writes", "delete_file", "filesystem", "is_object_store", "local_path",
           "open_parquet", "read_bytes", "read_parquet", "read_parquet_schema", "staged_footer", "total_size",
           "write_bytes"]
