"""The provider's asset URIs, registered in its provider info (``asset-uris``) so that Airflow
checks them when an :class:`~airflow.sdk.Asset` is made and OpenLineage names them:

- ``iceberg://<catalog>/<namespace>/<table>``: an Iceberg table the merge writes (one asset per
  table, see :mod:`...dags`); as OpenLineage: namespace ``iceberg://<catalog>``, name
  ``<namespace>.<table>`` (as :mod:`.lineage` names a table whose warehouse is not known);
- ``binlog://<source_id>``: the tables of a source captured by patterns;
- ``binlog://<source_id>/changes``: the source's binlog, watched for new data by the
  event-driven runs (:class:`~.dags.OnNewBinlogData`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import SplitResult, urlsplit

if TYPE_CHECKING:  # pragma: no cover
    from airflow.sdk import Asset


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """``iceberg://<catalog>/<namespace>/<table>`` as given; a ValueError saying the form
    otherwise (Airflow calls this for every asset URI of the scheme)."""
    parts = [p for p in uri.path.split("/") if p]
    if not uri.netloc or len(parts) != 2 or uri.query or uri.fragment:
        raise ValueError(f"{uri.geturl()!r} is not an Iceberg table's asset URI: "
                         "iceberg://<catalog>/<namespace>/<table>")
    return uri


def sanitize_source_uri(uri: SplitResult) -> SplitResult:
    """``binlog://<source_id>`` or ``binlog://<source_id>/changes`` as given; a ValueError saying
    the forms otherwise."""
    if not uri.netloc or uri.path.strip("/") not in ("", "changes") or uri.query or uri.fragment:
        raise ValueError(f"{uri.geturl()!r} is not a binlog source's asset URI: binlog://<source_id> "
                         "or binlog://<source_id>/changes")
    return uri


def create_asset(*, catalog: str, namespace: str, table: str, extra: Optional[dict] = None) -> "Asset":
    """The asset of Iceberg table ``catalog.namespace.table``."""
    from airflow.sdk import Asset

    return Asset(uri=f"iceberg://{catalog}/{namespace}/{table}", extra=extra)


def convert_asset_to_openlineage(asset: Any, lineage_context: Any) -> Any:
    """The OpenLineage dataset of an ``iceberg://`` asset."""
    from openlineage.client.event_v2 import Dataset

    parts = urlsplit(asset.uri)
    namespace, table = [p for p in parts.path.split("/") if p]
    return Dataset(namespace=f"iceberg://{parts.netloc}", name=f"{namespace}.{table}")
