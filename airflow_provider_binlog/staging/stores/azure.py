"""Staging on Azure Blob Storage (ADLS Gen2 included) through azure-storage-blob: a batch is
published by uploading its manifest without overwrite (``If-None-Match: *``); reads through
pyarrow's ``AzureFileSystem``. Credentials: the account key or a SAS token from the options
(the staging connection), else the environment's chain (``DefaultAzureCredential``: a managed
identity, workload identity, the Azure CLI)."""
from __future__ import annotations

import logging
from typing import IO, Any, Callable, Optional, Sequence
from urllib.parse import urlsplit

from ..confine import check_size
from ..location import ObjectLocation, StagingStorageError, StorageOptions
from . import Body

# The SDK logs every request and its headers at INFO: a task's log would hold one entry per object.
logging.getLogger("azure.core.pipeline.policies.http_logging_policy").setLevel(logging.WARNING)


def _account(location: ObjectLocation, options: StorageOptions) -> str:
    account = location.account or options.account_name
    if not account:
        raise StagingStorageError(f"{location.uri()} names no storage account",
                                  hint="write abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/prefix, or give the "
                                       "account in the staging connection (login)")
    return account


def azure_filesystem(location: ObjectLocation, options: StorageOptions) -> Any:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {"account_name": _account(location, options)}
    endpoint_url = options.endpoint_for("azure")
    if endpoint_url:
        endpoint = urlsplit(endpoint_url)
        host, scheme = endpoint.netloc, endpoint.scheme or "https"
        account = kwargs["account_name"]
        if host.startswith(f"{account}.blob."):  # a sovereign cloud or private link: ACCOUNT.blob.<suffix>
            suffix = host[len(account) + len(".blob."):]
            kwargs.update(blob_storage_authority=f".blob.{suffix}", dfs_storage_authority=f".dfs.{suffix}")
        else:  # an emulator (Azurite): the account is the first path segment on one host
            kwargs.update(blob_storage_authority=host, dfs_storage_authority=host)
        kwargs.update(blob_storage_scheme=scheme, dfs_storage_scheme=scheme)
    if options.account_key:
        kwargs["account_key"] = options.account_key
    elif options.sas_token:
        kwargs["sas_token"] = options.sas_token.lstrip("?")
    return pafs.AzureFileSystem(**kwargs)


class AzureStore:
    def __init__(self, location: ObjectLocation, options: StorageOptions) -> None:
        self.location = location
        self.container_name = location.container
        self.options = options
        self._container: Any = None

    @property
    def container(self) -> Any:
        if self._container is None:
            try:
                from azure.storage.blob import ContainerClient
            except ImportError:
                raise StagingStorageError("staging on abfs:// needs azure-storage-blob",
                                          hint="pip install 'airflow-provider-binlog[azure]'") from None
            o = self.options
            account = _account(self.location, o)
            url = o.endpoint_for("azure") or f"https://{account}.blob.core.windows.net"
            credential: Any
            if o.account_key:
                credential = {"account_name": account, "account_key": o.account_key}
            elif o.sas_token:
                credential = o.sas_token.lstrip("?")
            else:
                try:
                    from azure.identity import DefaultAzureCredential
                except ImportError:
                    raise StagingStorageError(
                        f"{self.location.uri()}: no account key or SAS token, and azure-identity is not installed "
                        f"for the environment's credentials",
                        hint="give the key in the staging connection, or pip install azure-identity") from None
                credential = DefaultAzureCredential()
            self._container = ContainerClient(url.rstrip("/"), self.container_name, credential=credential)
        return self._container

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from azure.core.exceptions import (
            ClientAuthenticationError,
            HttpResponseError,
            ResourceNotFoundError,
            ServiceRequestError,
            ServiceResponseError,
        )

        try:
            return fn(*args, **kwargs)
        except (ServiceRequestError, ServiceResponseError) as exc:
            # their text is the transport's, with the request's URL (and a SAS token's query)
            raise StagingStorageError(f"{what}: the store could not be reached ({type(exc).__name__})",
                                      hint="check the endpoint and the network; the dump can be run again") \
                from None
        except ResourceNotFoundError as exc:
            if getattr(exc, "error_code", None) == "ContainerNotFound":
                raise StagingStorageError(f"{what}: container {self.container_name!r} does not exist",
                                          hint="create it, or fix staging_dir") from None
            raise
        except ClientAuthenticationError as exc:
            raise StagingStorageError(f"{what}: the store denied access ({exc.status_code})",
                                      hint="check the staging connection's key or SAS token and the container's "
                                           "role assignments") from None
        except HttpResponseError as exc:
            if exc.status_code == 403:
                raise StagingStorageError(f"{what}: the store denied access (403 {exc.error_code})",
                                          hint="check the staging connection's key or SAS token and the "
                                               "container's role assignments") from None
            raise

    def _where(self, key: str) -> str:
        return self.location.uri() if not key else f"{self.location.scheme}://{self.location.bucket}/{key}"

    def put(self, key: str, body: Body, *, if_absent: bool = False) -> bool:
        from azure.core.exceptions import ResourceExistsError

        extra = {"encryption_scope": self.options.kms_key_id} if self.options.kms_key_id else {}
        try:
            self._call(f"{'publishing' if if_absent else 'writing'} {self._where(key)}", self.container.upload_blob,
                       key, body, overwrite=not if_absent, **extra)
        except ResourceExistsError as exc:
            if not if_absent or getattr(exc, "error_code", None) != "BlobAlreadyExists":
                raise  # an immutability policy, a container being deleted: not "published already"
            return False
        return True

    def download(self, key: str, out: IO[bytes], *, limit: Optional[int] = None) -> bool:
        from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

        ranged = {"offset": 0, "length": limit + 1} if limit is not None else {}
        try:
            stream = self._call(f"reading {self._where(key)}", self.container.download_blob, key, **ranged)
        except ResourceNotFoundError:
            return False
        except HttpResponseError as exc:
            if limit is not None and getattr(exc, "error_code", None) == "InvalidRange":
                return True  # an empty blob has no byte 0
            raise
        if limit is not None:  # the blob's size, from the first answer's range ("bytes 0-10/<size>")
            total = str(stream.properties.content_range or "").rpartition("/")[2]
            check_size(self._where(key), int(total) if total.isdigit() else int(stream.size), limit)
        self._call(f"reading {self._where(key)}", stream.readinto, out)
        return True

    def upload_file(self, key: str, local: str) -> None:
        """Upload the file ``local``, streamed (the client splits a large one)."""
        with open(local, "rb") as fh:
            self.put(key, fh)

    def list(self, prefix: str) -> list[dict[str, Any]]:
        blobs = self._call(f"listing {self._where(prefix)}",
                           lambda: list(self.container.list_blobs(name_starts_with=prefix or None)))
        return [{"Key": b.name, "Size": int(b.size or 0), "LastModified": b.last_modified} for b in blobs]

    def list_prefixes(self, prefix: str) -> Sequence[str]:
        from azure.storage.blob import BlobPrefix

        items = self._call(f"listing {self._where(prefix)}",
                           lambda: list(self.container.walk_blobs(name_starts_with=prefix or None, delimiter="/")))
        return sorted(i.name[len(prefix):].rstrip("/") for i in items if isinstance(i, BlobPrefix))

    def delete(self, keys: Sequence[str]) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        for key in keys:
            try:
                self._call(f"deleting {self._where(key)}", self.container.delete_blob, key)
            except ResourceNotFoundError:
                pass


__all__ = ["AzureStore", "azure_filesystem"]
