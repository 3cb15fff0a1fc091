"""Credentials for staging on an object store from an Airflow connection of the Amazon
provider's type ``aws`` (login: access key id, password: secret access key; extra:
``region_name``, ``endpoint_url``, ``aws_session_token``, and ``kms_key_id`` for SSE-KMS), so
they can live in a secrets backend. Without a connection, the environment's default chain."""
from __future__ import annotations

from typing import Optional

from airflow.sdk import BaseHook

from ..staging.storage import StagingStorageError, StorageOptions

#: Connection types whose fields this reads as the Amazon provider does.
AWS_CONN_TYPES = ("aws", "s3")


def staging_storage_options(conn_id: Optional[str]) -> Optional[StorageOptions]:
    """The options of connection ``conn_id``; None without one (the default chain). The secret
    parts are registered with Airflow's log masker."""
    if not conn_id:
        return None
    conn = BaseHook.get_connection(conn_id)
    if conn.conn_type not in AWS_CONN_TYPES:
        raise StagingStorageError(f"staging connection {conn_id!r} is of type {conn.conn_type!r}",
                                  hint="give a connection of type 'aws' (login: access key id, password: secret "
                                       "access key; extra: region_name, endpoint_url, kms_key_id)")
    extra = conn.extra_dejson or {}
    s3_config = (extra.get("service_config") or {}).get("s3") or {}
    options = StorageOptions(
        endpoint_url=extra.get("endpoint_url") or s3_config.get("endpoint_url") or None,
        region=extra.get("region_name") or None,
        access_key=conn.login or extra.get("aws_access_key_id") or None,
        secret_key=conn.password or extra.get("aws_secret_access_key") or None,
        session_token=extra.get("aws_session_token") or None,
        kms_key_id=extra.get("kms_key_id") or None)
    try:
        from airflow.sdk.log import mask_secret

        for secret in (options.secret_key, options.session_token):
            if secret:
                mask_secret(secret)
    except ImportError:  # pragma: no cover - an Airflow without the Task SDK's masker
        pass
    return options


__all__ = ["AWS_CONN_TYPES", "staging_storage_options"]
