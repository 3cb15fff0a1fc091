"""What a merge task's asset events say (:func:`asset_extra`): per Iceberg table, and per source."""
from __future__ import annotations


def iceberg_asset_uri(catalog: str, namespace: str, table: str) -> str:
    """The asset URI of an Iceberg table: ``iceberg://<catalog>/<namespace>/<table>``."""
    return f"iceberg://{catalog}/{namespace}/{table}"


def asset_extra(uri: str, summary: dict, catalog: str, namespace: str) -> dict:
    """The ``extra`` of an asset event for a merge ``summary``.

    For ``iceberg://<catalog>/<namespace>/<table>``: that table's ``source``, ``inserted``,
    ``updated``, ``deleted``, ``snapshot_id`` and ``status`` (zeros when the run did not touch
    it). For any other asset (one for a whole source): the totals and ``tables``, the counts
    per source table. Both hold ``end_checkpoint``, ``batches`` and ``mode`` (``snapshot`` or
    ``incremental``)."""
    batches = summary.get("batches") or []
    extra: dict = {"end_checkpoint": summary.get("end_checkpoint"),
                   "batches": [list(b) for b in batches],
                   "mode": summary.get("mode") or "incremental"}
    prefix = iceberg_asset_uri(catalog, namespace, "")
    if uri.startswith(prefix) and "/" not in uri[len(prefix):]:
        name = f"{catalog}.{namespace}.{uri[len(prefix):]}"
        for source, info in (summary.get("tables") or {}).items():
            if info.get("iceberg_table") == name:
                extra.update(source=source, iceberg_table=name, inserted=info.get("inserted", 0),
                             updated=info.get("updated", 0), deleted=info.get("deleted", 0),
                             snapshot_id=info.get("snapshot_id"), status=info.get("status"))
                return extra
        extra.update(iceberg_table=name, inserted=0, updated=0, deleted=0, status="not-in-batch")
        return extra
    extra.update(inserted=summary.get("inserted", 0), updated=summary.get("updated", 0),
                 deleted=summary.get("deleted", 0),
                 tables={source: {k: info.get(k, 0) for k in ("inserted", "updated", "deleted")}
                         for source, info in (summary.get("tables") or {}).items()})
    return extra


__all__ = ["asset_extra", "iceberg_asset_uri"]
