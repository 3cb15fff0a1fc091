"""The key of the masking rules' keyed hashes, from an Airflow connection (its password, else
its extra ``key``): the rules live in the DAG, the key in the secrets backend."""
from __future__ import annotations

from typing import Any, Optional

from airflow.sdk import BaseHook

from ..staging.masking import Masking, MaskingError


def load_masking(rules: Any, secret_conn_id: Optional[str]) -> Optional[Masking]:
    """The rules with their key read from connection ``secret_conn_id``; None without rules."""
    if not rules:
        return None
    secret = None
    if secret_conn_id:
        conn = BaseHook.get_connection(secret_conn_id)
        secret = conn.password or (conn.extra_dejson or {}).get("key")
        if not secret:
            raise MaskingError(f"masking: connection {secret_conn_id!r} has no password (nor extra 'key') "
                               f"to use as the hash key")
    return Masking.parse(rules, secret=secret)


__all__ = ["load_masking"]
