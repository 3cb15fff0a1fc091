"""Credentials for staging on an object store from an Airflow connection of the official
providers' types, so they can live in a secrets backend. Without a connection, the
environment's default chain.

- ``aws`` (S3): with the Amazon provider installed (the ``aws`` extra), resolved by its
  ``AwsBaseHook`` (keys, an assumed role, web identity, a profile, per-service endpoints): the
  dump uses the hook's session, whose temporary credentials refresh themselves, and a process
  started with the options (the merge) gets its credentials as of now. Without the provider,
  read field by field as it reads them: login access key id, password secret access key; extra
  ``region_name``, ``endpoint_url``, ``aws_session_token``. Either way extra ``kms_key_id``
  for SSE-KMS.
The other two are read field by field as their providers read them (those need not be installed):

- ``google_cloud_platform`` (GCS): extra ``keyfile_dict`` (a service account key's JSON) or
  ``key_path``, ``project``, and ``kms_key_name`` for a Cloud KMS key; no key: Application
  Default Credentials (workload identity, the metadata server).
- ``wasb`` (Azure Blob Storage, ADLS Gen2): login the storage account, password its key (or
  extra ``shared_access_key``), or extra ``sas_token``, or extra ``connection_string``; host
  the blob endpoint when it is not the public one; extra ``encryption_scope``. No key: the
  environment's Azure credentials (managed or workload identity).
"""
from __future__ import annotations

import dataclasses
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
    options = StorageOptions(
        endpoint_url=s3_config.get("endpoint_url") or extra.get("endpoint_url") or None,
        region=extra.get("region_name") or None,
        access_key=conn.login or extra.get("aws_access_key_id") or None,
        secret_key=conn.password or extra.get("aws_secret_access_key") or None,
        session_token=extra.get("aws_session_token") or None,
        kms_key_id=extra.get("kms_key_id") or None)
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
    except ImportError:  # the Amazon provider is not installed: its fields, read as it reads them
        return options
    return _aws_session(AwsBaseHook(aws_conn_id=conn.conn_id, client_type="s3"), options)


def _aws_session(hook: Any, options: StorageOptions) -> StorageOptions:
    """``options`` with the session the Amazon provider's hook makes of the connection (an
    assumed role, web identity, a profile: whatever it resolves), used in this process and
    refreshed by it; the keys for a process started with them (the merge) are its credentials
    as of now, when the connection names credentials (else that process uses its own chain)."""
    config = hook.conn_config
    session = hook.get_session(region_name=hook.conn_region_name)
    credentials = session.get_credentials()
    named = config.aws_access_key_id or config.role_arn or config.profile_name
    frozen = credentials.get_frozen_credentials() if named and credentials is not None else None
    return dataclasses.replace(
        options, endpoint_url=config.get_service_endpoint_url("s3") or options.endpoint_url,
        region=hook.conn_region_name or options.region, session=session,
        access_key=frozen.access_key if frozen else None, secret_key=frozen.secret_key if frozen else None,
        session_token=frozen.token if frozen else None)


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
