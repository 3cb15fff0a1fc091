"""Credentials for staging on an object store from an Airflow connection of the official
providers' types, read field by field as those providers do (their packages are not needed),
so they can live in a secrets backend. Without a connection, the environment's default chain.

- ``aws`` (S3): login access key id, password secret access key; extra ``region_name``,
  ``endpoint_url``, ``aws_session_token``, and ``kms_key_id`` for SSE-KMS.
- ``google_cloud_platform`` (GCS): extra ``keyfile_dict`` (a service account key's JSON) or
  ``key_path``, ``project``, and ``kms_key_name`` for a Cloud KMS key; no key: Application
  Default Credentials (workload identity, the metadata server).
- ``wasb`` (Azure Blob Storage, ADLS Gen2): login the storage account, password its key (or
  extra ``shared_access_key``), or extra ``sas_token``, or extra ``connection_string``; host
  the blob endpoint when it is not the public one; extra ``encryption_scope``. No key: the
  environment's Azure credentials (managed or workload identity).
"""
from __future__ import annotations

import json
from typing import Any, Optional

from airflow.sdk import BaseHook

from ..staging.storage import StagingStorageError, StorageOptions

#: Connection types whose fields this reads as the Amazon provider does.
AWS_CONN_TYPES = ("aws", "s3")
GOOGLE_CONN_TYPES = ("google_cloud_platform", "gcpcloudsql", "gcs")
AZURE_CONN_TYPES = ("wasb", "azure_data_lake", "adls")


def _extra(extra: dict[str, Any], name: str, conn_type: str) -> Any:
    """An extra field, also under the ``extra__<type>__`` prefix older providers wrote."""
    return extra.get(name) or extra.get(f"extra__{conn_type}__{name}") or None


def _aws(conn: Any, extra: dict[str, Any]) -> StorageOptions:
    s3_config = (extra.get("service_config") or {}).get("s3") or {}
    return StorageOptions(
        endpoint_url=extra.get("endpoint_url") or s3_config.get("endpoint_url") or None,
        region=extra.get("region_name") or None,
        access_key=conn.login or extra.get("aws_access_key_id") or None,
        secret_key=conn.password or extra.get("aws_secret_access_key") or None,
        session_token=extra.get("aws_session_token") or None,
        kms_key_id=extra.get("kms_key_id") or None)


def _google(conn: Any, extra: dict[str, Any]) -> StorageOptions:
    keyfile = _extra(extra, "keyfile_dict", "google_cloud_platform")
    if isinstance(keyfile, dict):
        keyfile = json.dumps(keyfile)
    return StorageOptions(
        endpoint_url=extra.get("endpoint_url") or None,
        project=_extra(extra, "project", "google_cloud_platform"),
        credentials_json=keyfile,
        credentials_file=_extra(extra, "key_path", "google_cloud_platform"),
        kms_key_id=extra.get("kms_key_name") or extra.get("kms_key_id") or None)


def _connection_string(text: str) -> dict[str, str]:
    parts = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
    return {k.strip().lower(): v.strip() for k, v in parts.items()}


def _azure(conn: Any, extra: dict[str, Any]) -> StorageOptions:
    if _extra(extra, "tenant_id", "wasb"):
        raise StagingStorageError(
            f"staging connection {conn.conn_id!r} is a service principal (tenant_id): staging takes an account "
            f"key, a SAS token or a connection string, else the environment's Azure identity",
            hint="give the storage account as login and its key as password, or leave the connection out and "
                 "give the workers a managed or workload identity")
    fields = _connection_string(_extra(extra, "connection_string", "wasb") or "")
    endpoint = fields.get("blobendpoint") or (conn.host if conn.host and "://" in conn.host else None)
    return StorageOptions(
        endpoint_url=endpoint or extra.get("endpoint_url") or None,
        account_name=fields.get("accountname") or conn.login or None,
        account_key=fields.get("accountkey") or conn.password or _extra(extra, "shared_access_key", "wasb"),
        sas_token=fields.get("sharedaccesssignature") or _extra(extra, "sas_token", "wasb"),
        kms_key_id=extra.get("encryption_scope") or None)


def staging_storage_options(conn_id: Optional[str]) -> Optional[StorageOptions]:
    """The options of connection ``conn_id``; None without one (the default chain). The secret
    parts are registered with Airflow's log masker."""
    if not conn_id:
        return None
    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson or {}
    if conn.conn_type in AWS_CONN_TYPES:
        options = _aws(conn, extra)
    elif conn.conn_type in GOOGLE_CONN_TYPES:
        options = _google(conn, extra)
    elif conn.conn_type in AZURE_CONN_TYPES:
        options = _azure(conn, extra)
    else:
        raise StagingStorageError(f"staging connection {conn_id!r} is of type {conn.conn_type!r}",
                                  hint="give a connection of type 'aws' (S3), 'google_cloud_platform' (GCS) or "
                                       "'wasb' (Azure); see docs/configuration.md#staging-on-an-object-store")
    try:
        from airflow.sdk.log import mask_secret

        for secret in (options.secret_key, options.session_token, options.credentials_json, options.account_key,
                       options.sas_token):
            if secret:
                mask_secret(secret)
    except ImportError:  # pragma: no cover - an Airflow without the Task SDK's masker
        pass
    return options


__all__ = ["AWS_CONN_TYPES", "AZURE_CONN_TYPES", "GOOGLE_CONN_TYPES", "staging_storage_options"]
