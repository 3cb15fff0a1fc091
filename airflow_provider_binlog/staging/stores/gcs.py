"""Staging on Google Cloud Storage through google-cloud-storage: a batch is published by
creating its manifest with ``ifGenerationMatch=0`` (created only if no live object has that
name); reads through pyarrow's ``GcsFileSystem``. Credentials: a service account's key from
the options (the staging connection), else Application Default Credentials; an endpoint
(``STORAGE_EMULATOR_HOST`` or the options') over plain ``http://`` without credentials is an
emulator, reached anonymously; an ``https://`` endpoint (Private Service Connect) keeps the
credentials."""
from __future__ import annotations

import json
import os
from typing import IO, Any, Callable, Optional, Sequence
from urllib.parse import urlsplit

from ..confine import check_size
from ..location import ObjectLocation, StagingStorageError, StorageOptions
from . import Body

_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)


def _service_account(options: StorageOptions) -> Any:
    """The service account of the options' key, or None."""
    if not (options.credentials_json or options.credentials_file):
        return None
    from google.oauth2 import service_account

    try:
        if options.credentials_json:
            return service_account.Credentials.from_service_account_info(json.loads(options.credentials_json),  # type: ignore[no-untyped-call]
                                                                         scopes=_SCOPES)
        return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
            options.credentials_file, scopes=_SCOPES)
    except (ValueError, OSError) as exc:
        raise StagingStorageError(f"the staging connection's service account key cannot be used: {exc}",
                                  hint="give the key file's JSON (keyfile_dict) or its path (key_path)") from None


def _emulator(endpoint: Optional[str]) -> bool:
    """An endpoint over plain HTTP: an emulator, which takes no credentials."""
    if not endpoint:
        return False
    return endpoint.startswith("http://") or "://" not in endpoint


def gcs_filesystem(options: StorageOptions) -> Any:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {}
    endpoint_url = options.endpoint_for("gcs")
    if endpoint_url:
        endpoint = urlsplit(endpoint_url if "://" in endpoint_url else f"http://{endpoint_url}")
        kwargs.update(endpoint_override=endpoint.netloc, scheme=endpoint.scheme)
    if options.project:
        kwargs["project_id"] = options.project
    account = _service_account(options)
    if account is not None:  # pyarrow takes a token: one for the service account, valid for an hour
        from google.auth.transport.requests import Request

        account.refresh(Request())
        kwargs.update(access_token=account.token, credential_token_expiration=account.expiry)
    elif _emulator(endpoint_url):
        kwargs["anonymous"] = True
    return pafs.GcsFileSystem(**kwargs)


class GcsStore:
    def __init__(self, location: ObjectLocation, options: StorageOptions) -> None:
        self.location = location
        self.bucket_name = location.bucket
        self.options = options
        self._bucket: Any = None

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            try:
                from google.cloud import storage
            except ImportError:
                raise StagingStorageError("staging on gs:// needs google-cloud-storage",
                                          hint="pip install 'airflow-provider-binlog[gcs]'") from None
            o = self.options
            credentials = _service_account(o)
            endpoint = o.endpoint_for("gcs")
            kwargs: dict[str, Any] = {}
            if endpoint:
                kwargs["client_options"] = {"api_endpoint": endpoint if "://" in endpoint else f"http://{endpoint}"}
                if credentials is None and _emulator(endpoint):
                    from google.auth.credentials import AnonymousCredentials
                    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
            project = o.project or getattr(credentials, "project_id", None) or ("-" if endpoint else None)
            client = storage.Client(project=project, credentials=credentials, **kwargs)
            self._bucket = client.bucket(self.bucket_name)
        return self._bucket

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, reading: bool = False, **kwargs: Any) -> Any:
        from google.api_core import exceptions as gexc
        from google.auth.exceptions import GoogleAuthError

        try:
            return fn(*args, **kwargs)
        except gexc.NotFound as exc:
            # a write, a listing or a delete finds no bucket; a read, no object (or no bucket)
            if not reading or "specified bucket does not exist" in str(exc).lower():
                raise StagingStorageError(f"{what}: bucket {self.bucket_name!r} does not exist",
                                          hint="create it, or fix staging_dir") from None
            raise
        except (gexc.Forbidden, gexc.Unauthorized) as exc:
            raise StagingStorageError(f"{what}: the store denied access ({exc.code})",
                                      hint="check the staging connection's service account and the bucket's IAM") \
                from None
        except GoogleAuthError as exc:
            raise StagingStorageError(f"{what}: no usable Google credentials ({exc})",
                                      hint="set the staging connection's key, or Application Default Credentials") \
                from None

    def _where(self, key: str) -> str:
        return f"gs://{self.bucket_name}/{key}"

    def put(self, key: str, body: Body, *, if_absent: bool = False) -> bool:
        from google.api_core.exceptions import PreconditionFailed

        blob = self.bucket.blob(key, kms_key_name=self.options.kms_key_id or None)
        condition: dict[str, Any] = {"if_generation_match": 0} if if_absent else {}
        if isinstance(body, bytes):
            upload: Callable[..., Any] = blob.upload_from_string
        else:  # its size known: one multipart or resumable upload as the size calls for, no buffering
            condition["size"] = os.fstat(body.fileno()).st_size
            upload = blob.upload_from_file
        try:
            self._call(f"{'publishing' if if_absent else 'writing'} {self._where(key)}", upload, body, **condition)
        except PreconditionFailed:
            return False
        return True

    def download(self, key: str, out: IO[bytes], *, limit: Optional[int] = None) -> bool:
        from google.api_core.exceptions import NotFound

        where = f"reading {self._where(key)}"
        blob = self._call(where, self.bucket.get_blob, key, reading=True)
        if blob is None:
            return False
        if limit is not None:
            check_size(self._where(key), int(blob.size or 0), limit)
        try:  # the generation whose size was checked, not one written since
            self._call(where, blob.download_to_file, out, if_generation_match=blob.generation, reading=True)
        except NotFound:
            return False
        return True

    def upload_file(self, key: str, local: str) -> None:
        """Upload the file ``local``, streamed (the client splits a large one)."""
        with open(local, "rb") as fh:
            self.put(key, fh)

    def list(self, prefix: str) -> list[dict[str, Any]]:
        blobs = self._call(f"listing {self._where(prefix)}",
                           lambda: list(self.bucket.client.list_blobs(self.bucket_name, prefix=prefix)))
        return [{"Key": b.name, "Size": int(b.size or 0), "LastModified": b.updated} for b in blobs]

    def list_prefixes(self, prefix: str) -> Sequence[str]:
        def names() -> set[str]:
            blobs = self.bucket.client.list_blobs(self.bucket_name, prefix=prefix, delimiter="/")
            # GCS answers the prefixes; a store that ignores the delimiter answers every object
            found = {b.name[len(prefix):].split("/", 1)[0] for b in blobs if "/" in b.name[len(prefix):]}
            return found | {p[len(prefix):].rstrip("/") for p in blobs.prefixes}
        return sorted(self._call(f"listing {self._where(prefix)}", names))

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            self._call(f"deleting under {self.location.uri()}", self.bucket.delete_blobs,
                       [self.bucket.blob(k) for k in keys], on_error=lambda blob: None)


__all__ = ["GcsStore", "gcs_filesystem"]
