"""Staging on S3 (and S3-compatible stores with conditional writes) through boto3, which sends
``If-None-Match: *`` and SSE-KMS; reads through pyarrow's ``S3FileSystem``. Staged files go
through boto3's managed transfer: above :data:`PART_BYTES`, a multipart upload in parts of that
size (aborted when a part fails), with the same encryption."""
from __future__ import annotations

import time
from typing import IO, Any, Callable, Optional, Sequence
from urllib.parse import urlsplit

from ..confine import check_size
from ..location import ObjectLocation, StagingStorageError, StorageOptions
from . import Body

_DENIED = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken")
#: a staged file above this size is uploaded in parts of this size: S3 takes one PUT up to
#: 5 GiB and 10,000 parts, so up to 640 GiB at this size (part files end at 1 GiB)
PART_BYTES = 64 << 20


def s3_filesystem(options: StorageOptions) -> Any:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {}
    endpoint_url = options.endpoint_for("s3")
    if endpoint_url:
        endpoint = urlsplit(endpoint_url)
        kwargs.update(endpoint_override=endpoint.netloc or endpoint.path, scheme=endpoint.scheme or "https")
    if options.region:
        kwargs["region"] = options.region
    access_key, secret_key, session_token = _keys(options)
    if access_key and secret_key:
        kwargs.update(access_key=access_key, secret_key=secret_key, session_token=session_token)
    return pafs.S3FileSystem(**kwargs)


def _keys(options: StorageOptions) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """The options' keys: their session's as of now (refreshed when they were about to expire),
    else their own."""
    credentials = options.session.get_credentials() if options.session is not None else None
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        return frozen.access_key, frozen.secret_key, frozen.token
    return options.access_key, options.secret_key, options.session_token


class S3Store:
    def __init__(self, location: ObjectLocation, options: StorageOptions) -> None:
        self.location = location
        self.bucket = location.bucket
        self.options = options
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
            if o.session is not None:  # its credentials refresh themselves, for a long dump
                self._client = o.session.client("s3", endpoint_url=o.endpoint_for("s3"), region_name=o.region)
            else:
                self._client = boto3.client("s3", endpoint_url=o.endpoint_for("s3"), region_name=o.region,
                                            aws_access_key_id=o.access_key, aws_secret_access_key=o.secret_key,
                                            aws_session_token=o.session_token)
        return self._client

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except ClientError as exc:
            self._refuse(what, exc)
            raise
        except S3UploadFailedError as exc:  # the managed transfer's wrapper of a ClientError
            if isinstance(exc.__context__, ClientError):
                self._refuse(what, exc.__context__)
            raise StagingStorageError(f"{what}: {exc}", hint="the dump can be run again") from None
        except BotoCoreError as exc:
            raise StagingStorageError(f"{what}: {exc}") from None

    def _refuse(self, what: str, exc: Any) -> None:
        """A typed error for the answers a user can act on (no bucket, access denied)."""
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            raise StagingStorageError(f"{what}: bucket {self.bucket!r} does not exist",
                                      hint="create it, or fix staging_dir") from None
        if code in _DENIED:
            raise StagingStorageError(f"{what}: the store denied access ({code})",
                                      hint="check the staging connection's credentials and the bucket policy") \
                from None

    def _encryption(self) -> dict[str, str]:
        if self.options.kms_key_id:
            return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.options.kms_key_id}
        return {}

    def upload_file(self, key: str, local: str) -> None:
        """Upload the file ``local``: in one PUT up to :data:`PART_BYTES`, else in parts (a part
        that fails ends the upload, which is aborted: no parts are left to pay for)."""
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES, max_concurrency=4,
                                preferred_transfer_client="classic")
        self._call(f"writing {self._where(key)}", self.client.upload_file, local, self.bucket, key,
                   ExtraArgs=self._encryption() or None, Config=config)

    def _where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def put(self, key: str, body: Body, *, if_absent: bool = False) -> bool:
        from botocore.exceptions import ClientError

        extra = self._encryption()
        if not if_absent:
            self._call(f"writing {self._where(key)}", self.client.put_object, Bucket=self.bucket, Key=key,
                       Body=body, **extra)
            return True
        for attempt in range(5):
            try:
                self._call(f"publishing {self._where(key)}", self.client.put_object, Bucket=self.bucket, Key=key,
                           Body=body, IfNoneMatch="*", **extra)
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
        raise StagingStorageError(f"{self._where(key)}: the store kept answering 409 (a conflicting write of the "
                                  f"same key)", hint="run the dump again")

    def download(self, key: str, out: IO[bytes], *, limit: Optional[int] = None) -> bool:
        from botocore.exceptions import ClientError

        ranged = {"Range": f"bytes=0-{limit}"} if limit is not None else {}
        try:
            got = self._call(f"reading {self._where(key)}", self.client.get_object, Bucket=self.bucket, Key=key,
                             **ranged)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                return False
            if code == "InvalidRange" and limit is not None:
                return True  # an empty object has no byte 0
            raise
        body = got["Body"]
        try:
            if limit is not None:  # "bytes 0-9/10": the object's size, known before its body is read
                total = str(got.get("ContentRange") or "").rpartition("/")[2]
                check_size(self._where(key), int(total) if total.isdigit() else int(got["ContentLength"]), limit)
            for chunk in body.iter_chunks(1 << 20):
                out.write(chunk)
        finally:
            body.close()
        return True

    def list(self, prefix: str) -> list[dict[str, Any]]:
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(f"listing {self._where(prefix)}",
                           lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=prefix)))
        return [{"Key": item["Key"], "Size": item["Size"], "LastModified": item["LastModified"]}
                for page in pages for item in page.get("Contents", ())]

    def list_prefixes(self, prefix: str) -> Sequence[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(f"listing {self._where(prefix)}",
                           lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/")))
        return sorted(p["Prefix"][len(prefix):].rstrip("/") for page in pages for p in page.get("CommonPrefixes", ()))

    def delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``, a thousand per request; the keys S3 did not delete (it answers 200
        and lists them) are reported."""
        refused = []
        for at in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[at:at + 1000]]
            answer = self._call(f"deleting under {self.location.uri()}", self.client.delete_objects,
                                Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})
            refused += [f"{e.get('Key')} ({e.get('Code')})" for e in answer.get("Errors", ())]
        if refused:
            raise StagingStorageError(f"deleting under {self.location.uri()}: {len(refused)} of {len(keys)} objects "
                                      f"were not deleted: {', '.join(refused[:10])}"
                                      + (f" and {len(refused) - 10} more" if len(refused) > 10 else ""),
                                      hint="check the role's s3:DeleteObject permission and the bucket's object "
                                           "lock; they are tried again at the next tidy")


__all__ = ["S3Store", "s3_filesystem"]
