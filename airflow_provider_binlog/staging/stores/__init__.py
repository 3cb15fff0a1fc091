"""The object stores a batch is published to, one module each, behind one small interface
(:class:`ObjectStore`): write an object (optionally only if none is there: the one conditional
write that publishes a batch), read one (up to a bound), list a prefix, delete. S3 through boto3
(``If-None-Match: *``), GCS through google-cloud-storage (``ifGenerationMatch=0``), Azure Blob
Storage through azure-storage-blob (``If-None-Match: *``). Reads of staged Parquet go through
pyarrow's filesystem of each store (:func:`open_filesystem`), on the driver and on executors."""
from __future__ import annotations

from typing import IO, Any, Optional, Protocol, Sequence, Union

from ..location import ObjectLocation, StorageOptions

Body = Union[bytes, IO[bytes]]


class ObjectStore(Protocol):
    """One bucket (container) of a store; keys are full object keys."""

    def put(self, key: str, body: Body, *, if_absent: bool = False) -> bool:
        """Write ``body`` at ``key``. With ``if_absent``, only if no object is there: False
        when one was (the store refused the conditional write)."""

    def upload_file(self, key: str, local: str) -> None:
        """Write the local file ``local`` at ``key``, replacing what is there, in parts when the
        store needs them for its size."""

    def download(self, key: str, out: IO[bytes], *, limit: Optional[int] = None) -> bool:
        """Write the object's bytes to ``out``; False when there is none. With ``limit``, an
        object larger than that is refused (:class:`~..confine.UntrustedObjectError`) before
        its body is read."""

    def list(self, prefix: str) -> list[dict[str, Any]]:
        """The objects whose keys start with ``prefix``: ``Key``, ``Size``, ``LastModified``
        (an aware datetime)."""

    def list_prefixes(self, prefix: str) -> Sequence[str]:
        """The names directly under ``prefix`` (ending with ``/``, or empty) that have objects
        under them (``a`` for ``<prefix>a/...``): one listing entry per name, not per object."""

    def delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``; those already gone are no error."""


def open_store(location: ObjectLocation, options: StorageOptions) -> ObjectStore:
    """The client of ``location``'s store."""
    if location.store == "s3":
        from .s3 import S3Store
        return S3Store(location, options)
    if location.store == "gcs":
        from .gcs import GcsStore
        return GcsStore(location, options)
    from .azure import AzureStore
    return AzureStore(location, options)


def open_filesystem(location: ObjectLocation, options: StorageOptions) -> tuple[Any, str]:
    """pyarrow's filesystem of ``location``'s store and the location's path in it."""
    if location.store == "s3":
        from .s3 import s3_filesystem
        return s3_filesystem(options), f"{location.bucket}/{location.key()}".rstrip("/")
    if location.store == "gcs":
        from .gcs import gcs_filesystem
        return gcs_filesystem(options), f"{location.bucket}/{location.key()}".rstrip("/")
    from .azure import azure_filesystem
    return azure_filesystem(location, options), f"{location.container}/{location.key()}".rstrip("/")


__all__ = ["Body", "ObjectStore", "open_filesystem", "open_store"]
