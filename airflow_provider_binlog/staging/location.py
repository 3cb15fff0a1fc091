"""Where a staging location is and how to reach it: a local path (or ``file://``), or an object
store URI (``s3://bucket/prefix``, ``gs://bucket/prefix``,
``abfs://container@account.dfs.core.windows.net/prefix``), and the options (endpoint,
credentials, encryption key) of the store. Credentials come from the environment's default
chain or from an Airflow connection the hooks resolve into :class:`StorageOptions`; they are
never written into a manifest, a command line or a log."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar, Mapping, Optional
from urllib.parse import urlsplit

from ..errors import ProviderError

#: Schemes of object stores and the store each belongs to.
STORE_OF_SCHEME = {"s3": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "azure", "abfss": "azure"}
#: Schemes of object stores.
OBJECT_SCHEMES = tuple(STORE_OF_SCHEME)
_LOCATIONS = ("give a local path, file://, s3://BUCKET/prefix, gs://BUCKET/prefix or "
              "abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/prefix")


class StagingStorageError(ProviderError, ValueError):
    """A staging location that cannot be used as given: its scheme, its bucket, its
    credentials, or a store without conditional writes."""


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    """How to reach an object store. Unset fields come from the environment's default chain
    (an instance role, workload identity, ``GOOGLE_APPLICATION_CREDENTIALS``, a managed
    identity). Fields of other stores are ignored."""

    #: the store's endpoint: an S3-compatible server, a GCS emulator, an Azure blob endpoint
    #: (``https://ACCOUNT.blob.core.windows.net``, or Azurite's ``http://host:port/ACCOUNT``)
    endpoint_url: Optional[str] = None
    region: Optional[str] = None
    access_key: Optional[str] = dataclasses.field(default=None, repr=False)
    secret_key: Optional[str] = dataclasses.field(default=None, repr=False)
    session_token: Optional[str] = dataclasses.field(default=None, repr=False)
    #: server-side encryption of every staged object: S3's SSE-KMS key id, GCS's Cloud KMS key
    #: name, Azure's encryption scope
    kms_key_id: Optional[str] = None
    #: GCS: the project, and a service account's key (its JSON text, or a file holding it)
    project: Optional[str] = None
    credentials_json: Optional[str] = dataclasses.field(default=None, repr=False)
    credentials_file: Optional[str] = None
    #: Azure: the storage account and its key or a SAS token
    account_name: Optional[str] = None
    account_key: Optional[str] = dataclasses.field(default=None, repr=False)
    sas_token: Optional[str] = dataclasses.field(default=None, repr=False)
    #: S3: a boto3 session used in this process instead of the keys (the Amazon provider's, whose
    #: temporary credentials it refreshes as they expire); it never leaves the process
    session: Any = dataclasses.field(default=None, repr=False, compare=False)

    #: field -> (own variable suffix, standard variables read after it)
    _ENV: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = {"endpoint_url": ("ENDPOINT_URL", ()),
            "region": ("REGION", ("AWS_REGION", "AWS_DEFAULT_REGION")),
            "access_key": ("ACCESS_KEY_ID", ("AWS_ACCESS_KEY_ID",)),
            "secret_key": ("SECRET_ACCESS_KEY", ("AWS_SECRET_ACCESS_KEY",)),
            "session_token": ("SESSION_TOKEN", ("AWS_SESSION_TOKEN",)),
            "kms_key_id": ("KMS_KEY_ID", ()),
            "project": ("PROJECT", ("GOOGLE_CLOUD_PROJECT",)),
            "credentials_json": ("CREDENTIALS_JSON", ()),
            "credentials_file": ("CREDENTIALS_FILE", ()),
            "account_name": ("ACCOUNT_NAME", ("AZURE_STORAGE_ACCOUNT",)),
            "account_key": ("ACCOUNT_KEY", ("AZURE_STORAGE_KEY",)),
            "sas_token": ("SAS_TOKEN", ("AZURE_STORAGE_SAS_TOKEN",))}

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "StorageOptions":
        """The options of the environment: the staging's own variables (``BINLOG_STAGING_*``,
        what :meth:`to_env` sets), field by field, else the standard ones (``AWS_*``,
        ``GOOGLE_CLOUD_PROJECT``, ``AZURE_STORAGE_*``). The standard endpoint variables are
        read per store (:meth:`endpoint_for`)."""
        env = os.environ if environ is None else environ

        def get(own: str, standard: tuple[str, ...]) -> Optional[str]:
            for name in (f"BINLOG_STAGING_{own}", *standard):
                if env.get(name):
                    return env[name]
            return None

        values = {name: get(own, standard) for name, (own, standard) in cls._ENV.items()}
        for group in _CREDENTIAL_GROUPS:  # a credential comes whole from one place, never half from each
            if any(env.get(f"BINLOG_STAGING_{cls._ENV[name][0]}") for name in group):
                values.update({name: env.get(f"BINLOG_STAGING_{cls._ENV[name][0]}") or None for name in group})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """These options as the environment variables :meth:`from_env` reads first, for a
        process started with them (never for a command line). They are the staging's own
        (``BINLOG_STAGING_*``), not ``AWS_*``: the process's other clients (the warehouse's
        FileIO, a Glue catalog) keep their own credentials and endpoint."""
        out = {}
        for name, (own, _standard) in self._ENV.items():
            value = getattr(self, name)
            if value:
                out[f"BINLOG_STAGING_{own}"] = value
        return out

    def endpoint_for(self, store: str, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
        """The endpoint for ``store`` (``s3``, ``gcs``, ``azure``): the options' own, else the
        store's standard variable (``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, GCS's
        ``STORAGE_EMULATOR_HOST``), else None (the store's public endpoint)."""
        if self.endpoint_url:
            return self.endpoint_url
        env = os.environ if environ is None else environ
        standard = {"s3": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), "gcs": ("STORAGE_EMULATOR_HOST",)}
        for name in standard.get(store, ()):
            if env.get(name):
                return env[name]
        return None

    def for_store(self, store: str) -> "StorageOptions":
        """These options with the endpoint for ``store`` resolved here (:meth:`endpoint_for`), to
        travel to a process that does not share this one's environment (a Spark executor)."""
        resolved = dataclasses.replace(self, endpoint_url=self.endpoint_for(store), session=None)
        if store == "gcs" and self.credentials_file and not self.credentials_json:
            try:  # a key file on this machine is not on the executors: its content travels instead
                with open(self.credentials_file, encoding="utf-8") as fh:
                    resolved = dataclasses.replace(resolved, credentials_json=fh.read(), credentials_file=None)
            except OSError as exc:
                raise StagingStorageError(f"the service account key file {self.credentials_file} cannot be read: "
                                          f"{exc.strerror or exc}",
                                          hint="fix key_path of the staging connection") from None
        return resolved


#: Fields that make one credential: taken together from the staging's own variables when any
#: of them is set there, so a connection's keys are never paired with another's token.
_CREDENTIAL_GROUPS = (("access_key", "secret_key", "session_token"), ("account_key", "sas_token"),
                      ("credentials_json", "credentials_file"))

#: The environment variables (:meth:`StorageOptions.to_env`) holding secrets.
SECRET_ENV = ("BINLOG_STAGING_SECRET_ACCESS_KEY", "BINLOG_STAGING_SESSION_TOKEN", "BINLOG_STAGING_CREDENTIALS_JSON",
              "BINLOG_STAGING_ACCOUNT_KEY", "BINLOG_STAGING_SAS_TOKEN")
#: The environment variable naming a KMS key (or Azure encryption scope) for staged objects.
KMS_KEY_ENV = "BINLOG_STAGING_KMS_KEY_ID"


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
        raise StagingStorageError(f"{shown(text)} is on an object store, not a local path")
    raise StagingStorageError(f"unknown staging scheme {scheme!r} in {shown(text)!r}", hint=_LOCATIONS)


def shown(text: str) -> str:
    """A location as messages show it: without a query, a fragment or a password (a SAS
    token or a key pasted into it stays out of errors and logs)."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return "<a malformed location>"
    netloc = parts.netloc.rsplit("@", 1)[-1] if parts.password else parts.netloc
    if parts.password and parts.username:
        netloc = f"{parts.username}:***@{netloc}"
    return f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path


@dataclasses.dataclass(frozen=True)
class ObjectLocation:
    """``scheme://bucket/prefix``, parsed and checked. On Azure the bucket part is
    ``container@account.dfs.core.windows.net`` (or just ``container``, the account then given
    in the options)."""

    scheme: str
    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> "ObjectLocation":
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in OBJECT_SCHEMES:
            raise StagingStorageError(f"unknown staging scheme {parts.scheme!r} in {shown(text)!r}", hint=_LOCATIONS)
        # abfs://container@account...: the user part is the container, not a credential
        if parts.password or (parts.username and scheme not in ("abfs", "abfss")):
            raise StagingStorageError(f"{scheme}://...@{parts.hostname}: a staging location takes no credentials",
                                      hint="give them in the staging connection or the environment")
        if not parts.netloc or parts.netloc.startswith("@") or parts.netloc.endswith("@"):
            raise StagingStorageError(f"{shown(text)!r} names no bucket", hint=_LOCATIONS)
        if parts.query or parts.fragment:
            raise StagingStorageError(f"{shown(text)!r}: a staging location takes no query or fragment "
                                      f"(endpoints and credentials go in the connection or the environment)")
        return cls(scheme, parts.netloc, parts.path.strip("/"))

    @property
    def store(self) -> str:
        """``s3``, ``gcs`` or ``azure``."""
        return STORE_OF_SCHEME[self.scheme]

    @property
    def container(self) -> str:
        """The bucket, or on Azure the container (the part before ``@``)."""
        return self.bucket.split("@", 1)[0]

    @property
    def account(self) -> Optional[str]:
        """Azure: the storage account the URI names (``container@ACCOUNT.dfs...``), if it names one."""
        if "@" not in self.bucket:
            return None
        return self.bucket.split("@", 1)[1].split(".", 1)[0] or None

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` under the prefix."""
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p and p.strip("/"))

    def uri(self, *parts: str) -> str:
        key = self.key(*parts)
        return f"{self.scheme}://{self.bucket}/{key}" if key else f"{self.scheme}://{self.bucket}"


__all__ = ["KMS_KEY_ENV", "OBJECT_SCHEMES", "ObjectLocation", "SECRET_ENV", "STORE_OF_SCHEME",
           "StagingStorageError", "StorageOptions", "is_object_store", "local_path"]
