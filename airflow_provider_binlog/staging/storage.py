"""Where staged batches live: a local directory (a plain path or ``file://``), or an object store
(``s3://bucket/prefix``; ``gs://`` and ``abfs://`` are read, not yet published to).

An object store has no rename and no lock, so a batch is published there by one conditional
write: its part files are uploaded under an attempt prefix of the batch, then its manifest is
created only if no manifest exists (S3 ``If-None-Match: *``). Two dumps of one range cannot both
publish, and a killed dump's uploads are never named by a manifest, so never read; they are
removed later (:func:`.remote.remove_stale_attempts`).

Reads go through pyarrow's filesystems; writes to S3 through boto3, which sends the
conditional header and server-side encryption. Credentials come from the environment's
default chain (``AWS_ACCESS_KEY_ID``..., a profile, an instance role) or from an Airflow
connection the hooks resolve into :class:`StorageOptions`; they are never written into a
manifest, a command line or a log.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Optional, Sequence
from urllib.parse import urlsplit

from ..errors import ProviderError

#: Schemes of object stores pyarrow reads (``gs``/``gcs``: GCS, ``abfs``/``abfss``: Azure).
OBJECT_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss")
#: Schemes a batch can be published to (the conditional write is implemented for these).
PUBLISH_SCHEMES = ("s3",)
#: The environment variable naming a KMS key for the server-side encryption of staged objects.
KMS_KEY_ENV = "BINLOG_STAGING_KMS_KEY_ID"
#: The environment variables holding secrets (see :meth:`StorageOptions.to_env`).
SECRET_ENV = ("BINLOG_STAGING_SECRET_ACCESS_KEY", "BINLOG_STAGING_SESSION_TOKEN")


class StagingStorageError(ProviderError, ValueError):
    """A staging location that cannot be used as given: its scheme, its bucket, its
    credentials, or a store without conditional writes."""


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    """How to reach an object store. Unset fields come from the environment's default chain."""

    endpoint_url: Optional[str] = None
    region: Optional[str] = None
    access_key: Optional[str] = dataclasses.field(default=None, repr=False)
    secret_key: Optional[str] = dataclasses.field(default=None, repr=False)
    session_token: Optional[str] = dataclasses.field(default=None, repr=False)
    #: a KMS key: every staged object is written with SSE-KMS under it
    kms_key_id: Optional[str] = None

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "StorageOptions":
        """The options of the environment: the staging's own variables (``BINLOG_STAGING_*``,
        what :meth:`to_env` sets), field by field, else the standard ``AWS_*`` ones."""
        env = os.environ if environ is None else environ

        def get(own: str, *standard: str) -> Optional[str]:
            for name in (f"BINLOG_STAGING_{own}", *standard):
                if env.get(name):
                    return env[name]
            return None

        return cls(endpoint_url=get("ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
                   region=get("REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
                   access_key=get("ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
                   secret_key=get("SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
                   session_token=get("SESSION_TOKEN", "AWS_SESSION_TOKEN"),
                   kms_key_id=get("KMS_KEY_ID"))

    def to_env(self) -> dict[str, str]:
        """These options as the environment variables :meth:`from_env` reads first, for a
        process started with them (never for a command line). They are the staging's own
        (``BINLOG_STAGING_*``), not ``AWS_*``: the process's other S3 clients (the warehouse's
        FileIO, a Glue catalog) keep their own credentials and endpoint."""
        pairs = (("ENDPOINT_URL", self.endpoint_url), ("REGION", self.region), ("ACCESS_KEY_ID", self.access_key),
                 ("SECRET_ACCESS_KEY", self.secret_key), ("SESSION_TOKEN", self.session_token),
                 ("KMS_KEY_ID", self.kms_key_id))
        return {f"BINLOG_STAGING_{k}": v for k, v in pairs if v}


def is_object_store(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names an object store (``s3://...``); a plain path or ``file://`` not."""
    text = os.fspath(location)
    return "://" in text and text.split("://", 1)[0].lower() in OBJECT_SCHEMES


def local_path(location: str | os.PathLike[str]) -> str:
    """The local path of a plain path or ``file://`` URI; an error for any other scheme."""
    text = os.fspath(location)
    if "://" not in text:
        return text
    scheme, rest = text.split("://", 1)
    if scheme.lower() == "file":
        return "/" + rest.lstrip("/") if rest.startswith("/") or not rest else rest
    if scheme.lower() in OBJECT_SCHEMES:
        raise StagingStorageError(f"{text} is on an object store, not a local path")
    raise StagingStorageError(f"unknown staging scheme {scheme!r} in {text!r}",
                              hint="give a local path, file://, s3://bucket/prefix, gs://... or abfs://...")


@dataclasses.dataclass(frozen=True)
class ObjectLocation:
    """``scheme://bucket/prefix``, parsed and checked."""

    scheme: str
    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> "ObjectLocation":
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in OBJECT_SCHEMES:
            raise StagingStorageError(f"unknown staging scheme {parts.scheme!r} in {text!r}",
                                      hint="give a local path, file://, s3://bucket/prefix, gs://... or abfs://...")
        # abfs://container@account...: the user part is the container, not a credential
        if parts.password or (parts.username and scheme not in ("abfs", "abfss")):
            raise StagingStorageError(f"{scheme}://...@{parts.hostname}: a staging location takes no credentials",
                                      hint="give them in the staging connection or the environment")
        if not parts.netloc:
            raise StagingStorageError(f"{text!r} names no bucket", hint=f"write {scheme}://BUCKET/prefix")
        if parts.query or parts.fragment:
            raise StagingStorageError(f"{text!r}: a staging location takes no query or fragment "
                                      f"(endpoints and credentials go in the connection or the environment)")
        return cls(scheme, parts.netloc, parts.path.strip("/"))

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` under the prefix."""
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p and p.strip("/"))

    def uri(self, *parts: str) -> str:
        key = self.key(*parts)
        return f"{self.scheme}://{self.bucket}/{key}" if key else f"{self.scheme}://{self.bucket}"


def filesystem(location: str, options: Optional[StorageOptions] = None) -> tuple[Any, str]:
    """pyarrow's filesystem for ``location`` (an object store URI or a local path) and the path
    in it; for S3, with ``options`` (default: from the environment)."""
    import pyarrow.fs as pafs

    if not is_object_store(location):
        return pafs.LocalFileSystem(), local_path(location)
    parsed = ObjectLocation.parse(location)
    if parsed.scheme == "s3":
        opts = options or StorageOptions.from_env()
        kwargs: dict[str, Any] = {}
        if opts.endpoint_url:
            endpoint = urlsplit(opts.endpoint_url)
            kwargs.update(endpoint_override=endpoint.netloc or endpoint.path, scheme=endpoint.scheme or "https")
        if opts.region:
            kwargs["region"] = opts.region
        if opts.access_key and opts.secret_key:
            kwargs.update(access_key=opts.access_key, secret_key=opts.secret_key, session_token=opts.session_token)
        return pafs.S3FileSystem(**kwargs), f"{parsed.bucket}/{parsed.key()}".rstrip("/")
    try:
        fs, path = pafs.FileSystem.from_uri(location)
    except Exception as exc:  # noqa: BLE001 - pyarrow's own reason, with the location
        raise StagingStorageError(f"{location}: {exc}") from None
    return fs, path


class ObjectStaging:
    """A staging location on an object store: reads through pyarrow, writes (and the
    conditional create that publishes a batch) through the store's client."""

    def __init__(self, location: str, options: Optional[StorageOptions] = None) -> None:
        self.location = ObjectLocation.parse(location)
        self.options = options or StorageOptions.from_env()
        if self.location.scheme not in PUBLISH_SCHEMES:
            raise StagingStorageError(
                f"{location}: publishing staged batches needs a conditional write this release "
                f"implements for {', '.join(s + '://' for s in PUBLISH_SCHEMES)} only",
                hint="stage on s3:// (or an S3-compatible store with If-None-Match) or on a local path")
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
            except ImportError:
                raise StagingStorageError("staging on s3:// needs boto3",
                                          hint="pip install 'airflow-provider-binlog[s3]'") from None
            o = self.options
            self._client = boto3.client("s3", endpoint_url=o.endpoint_url, region_name=o.region,
                                        aws_access_key_id=o.access_key, aws_secret_access_key=o.secret_key,
                                        aws_session_token=o.session_token)
        return self._client

    def _extra(self) -> dict[str, str]:
        if self.options.kms_key_id:
            return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.options.kms_key_id}
        return {}

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                raise StagingStorageError(f"{what}: bucket {self.location.bucket!r} does not exist",
                                          hint="create it, or fix staging_dir") from None
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
                raise StagingStorageError(f"{what}: the store denied access ({code})",
                                          hint="check the staging connection's credentials and the bucket policy") \
                    from None
            raise
        except BotoCoreError as exc:
            raise StagingStorageError(f"{what}: {exc}") from None

    def upload(self, local: str, *parts: str) -> None:
        key = self.location.key(*parts)
        with open(local, "rb") as fh:
            self._call(f"uploading {self.location.uri(*parts)}", self.client.put_object,
                       Bucket=self.location.bucket, Key=key, Body=fh, **self._extra())

    def put(self, data: bytes, *parts: str) -> None:
        """Write ``data`` at ``parts``, replacing what is there."""
        self._call(f"writing {self.location.uri(*parts)}", self.client.put_object, Bucket=self.location.bucket,
                   Key=self.location.key(*parts), Body=data, **self._extra())

    def create_if_absent(self, data: bytes, *parts: str) -> bool:
        """Write ``data`` at ``parts`` unless an object is there: True when written, False when
        one was (the store answered 412 to ``If-None-Match: *``). A store that ignores the
        header would let two writers both succeed: :func:`check_conditional_writes` finds out."""
        from botocore.exceptions import ClientError

        for attempt in range(5):
            try:
                self._call(f"publishing {self.location.uri(*parts)}", self.client.put_object,
                           Bucket=self.location.bucket, Key=self.location.key(*parts), Body=data,
                           IfNoneMatch="*", **self._extra())
                return True
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                code = exc.response.get("Error", {}).get("Code")
                if code == "ConditionalRequestConflict" or status == 409:
                    time.sleep(0.2 * (attempt + 1))  # a concurrent write of the key: S3 asks to retry
                    continue
                if code == "PreconditionFailed" or status == 412:
                    return False
                if code == "NotImplemented":
                    raise StagingStorageError(f"{self.location.uri()}: the store does not support conditional "
                                              f"writes (If-None-Match)",
                                              hint="two dumps of one range could both publish there; stage on a "
                                                   "store that has them (S3 has since 2024) or on a local path") \
                        from None
                raise
        raise StagingStorageError(f"{self.location.uri(*parts)}: the store kept answering 409 (a conflicting "
                                  f"write of the same key)", hint="run the dump again")

    def read(self, *parts: str) -> Optional[bytes]:
        """The object at ``parts``; None when there is none."""
        from botocore.exceptions import ClientError

        try:
            got = self._call(f"reading {self.location.uri(*parts)}", self.client.get_object,
                             Bucket=self.location.bucket, Key=self.location.key(*parts))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        return bytes(got["Body"].read())

    def objects(self, *parts: str) -> list[dict[str, Any]]:
        """The objects under ``parts`` (``Key``, ``Size``, ``LastModified``), keys relative to it."""
        base = self.location.key(*parts)
        prefix = base + "/" if base else ""
        out: list[dict[str, Any]] = []
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(f"listing {self.location.uri(*parts)}", lambda: list(
            paginator.paginate(Bucket=self.location.bucket, Prefix=prefix)))
        for page in pages:
            for item in page.get("Contents", ()):
                out.append({**item, "Key": item["Key"][len(prefix):]})
        return out

    def delete(self, keys: list[str]) -> None:
        """Delete the objects ``keys`` (relative to the location's prefix)."""
        for at in range(0, len(keys), 1000):
            chunk = [{"Key": self.location.key(k)} for k in keys[at:at + 1000]]
            self._call(f"deleting under {self.location.uri()}", self.client.delete_objects,
                       Bucket=self.location.bucket, Delete={"Objects": chunk, "Quiet": True})


def check_conditional_writes(staging: ObjectStaging) -> None:
    """Refuse a store that ignores ``If-None-Match``: a probe object written twice must be
    refused the second time."""
    probe = f".conditional-write-probe-{os.getpid()}-{time.monotonic_ns()}"
    try:
        if not staging.create_if_absent(b"1", probe) or staging.create_if_absent(b"2", probe):
            raise StagingStorageError(f"{staging.location.uri()}: the store ignores conditional writes "
                                      f"(If-None-Match)",
                                      hint="two dumps of one range could both publish there; stage on a store "
                                           "that honours them or on a local path")
    finally:
        staging.delete([probe])


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
    """A staged Parquet file (a local path or an object store URI) as a pyarrow table."""
    import pyarrow.parquet as pq

    if not is_object_store(location):
        return pq.read_table(local_path(location), columns=columns)
    fs, path = filesystem(location, options)
    return pq.read_table(path, columns=columns, filesystem=fs)


def read_parquet_schema(location: str) -> Any:
    """The Arrow schema of a staged Parquet file, from its footer."""
    import pyarrow.parquet as pq

    if not is_object_store(location):
        return pq.read_schema(local_path(location))
    fs, path = filesystem(location)
    with fs.open_input_file(path) as fh:
        return pq.read_schema(fh)


def write_bytes(location: str, data: bytes, options: Optional[StorageOptions] = None) -> None:
    """Write a small file (a local path or an object store URI), replacing what is there."""
    if is_object_store(location) and ObjectLocation.parse(location).scheme == "s3":
        parent, name = location.rsplit("/", 1)
        ObjectStaging(parent, options).put(data, name)
        return
    fs, path = filesystem(location)
    with fs.open_output_stream(path) as out:
        out.write(data)


def read_bytes(location: str, options: Optional[StorageOptions] = None) -> Optional[bytes]:
    """A small file's bytes (a local path or an object store URI); None when there is none."""
    fs, path = filesystem(location, options)
    try:
        with fs.open_input_stream(path) as stream:
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
