"""OpenLineage datasets of the loads, for the operators' ``get_openlineage_facets_on_complete``.

Inputs are the MySQL/MariaDB tables of the staged dumps, named as OpenLineage names MySQL
datasets: namespace ``mysql://<host>:<port>`` (MariaDB too), name ``<schema>.<table>``. The
dump's outputs are its staged files (namespace ``file``, the dump directory's path and the
table). The merge's outputs are the Iceberg tables: namespace the catalog's warehouse when it
is known (``file`` for a local path, ``s3://bucket``...), else ``iceberg://<catalog>``; name
the table's location under it (``<warehouse path>/<namespace>/<schema>__<table>``) or, without
a warehouse, ``<namespace>.<schema>__<table>``. Each dataset carries a schema facet with its
columns (MySQL types for the source, Arrow types of the staged and Iceberg columns).

Nothing here is imported unless OpenLineage is installed (the Airflow OpenLineage provider).
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit

from ..staging import load_manifest
from ..common.tables import iceberg_table_name


def _schema_facet(columns: Iterable[tuple[str, str]]) -> dict:
    from openlineage.client.facet_v2 import schema_dataset

    return {"schema": schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name=name, type=kind) for name, kind in columns])}


def _dataset(namespace: str, name: str, columns: Iterable[tuple[str, str]]) -> Any:
    from openlineage.client.event_v2 import Dataset

    return Dataset(namespace=namespace, name=name, facets=_schema_facet(columns))


def _tables(manifest_paths: Iterable[str], options: Any = None) -> tuple[dict, dict]:
    """``{(server namespace, schema.table): [(column, MySQL type)]}`` and the same keys to
    ``[(column, Arrow type)]``, the latest manifest's columns winning."""
    source: dict = {}
    staged: dict = {}
    for path in manifest_paths:
        manifest = load_manifest(path, options=options)
        server = manifest.server
        namespace = f"mysql://{server.get('host') or 'unknown'}:{server.get('port') or 3306}"
        for entry in manifest.tables:
            key = (namespace, f"{entry['schema']}.{entry['table']}")
            columns = entry.get("columns") or []
            source[key] = [(c["name"], c.get("data_type") or c.get("mysql_type") or "") for c in columns]
            staged[key] = [(c["name"], c.get("arrow_type") or "") for c in columns]
    return source, staged


def source_datasets(manifest_paths: Iterable[str], options: Any = None) -> list:
    """The MySQL/MariaDB tables of these manifests."""
    source, _ = _tables(manifest_paths, options)
    return [_dataset(ns, name, cols) for (ns, name), cols in sorted(source.items())]


def staged_datasets(manifest_path: str, options: Any = None) -> list:
    """The staged files of one dump, one dataset per table."""
    manifest = load_manifest(manifest_path, options=options)
    _, staged = _tables([manifest_path], options)
    directory = manifest.directory_ref
    if manifest.uri is not None:  # s3://bucket/prefix/<dump>: namespace s3://bucket, name the path
        scheme, rest = directory.split("://", 1)
        bucket, _, path = rest.partition("/")
        return [_dataset(f"{scheme}://{bucket}", f"{path}/{name}", cols)
                for (_ns, name), cols in sorted(staged.items())]
    return [_dataset("file", f"{directory}/{name}", cols) for (_ns, name), cols in sorted(staged.items())]


def iceberg_namespace_and_root(catalog: str, warehouse: Optional[str]) -> tuple[str, Optional[str]]:
    """The OpenLineage namespace of the catalog's tables, and the path their locations start with."""
    if not warehouse:
        return f"iceberg://{catalog}", None
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", warehouse):
        return "file", warehouse.rstrip("/")
    parts = urlsplit(warehouse)
    if parts.scheme == "file":
        return "file", parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}", parts.path.strip("/")


def iceberg_datasets(manifest_paths: Iterable[str], *, catalog: str, namespace: str,
                     warehouse: Optional[str], options: Any = None) -> list:
    """The Iceberg tables these manifests load."""
    ns, root = iceberg_namespace_and_root(catalog, warehouse)
    _, staged = _tables(manifest_paths, options)
    out = []
    for (_server, name), cols in sorted(staged.items()):
        table = iceberg_table_name(*name.split(".", 1))
        out.append(_dataset(ns, f"{root}/{namespace}/{table}" if root is not None else f"{namespace}.{table}",
                            cols))
    return out


def capture_lineage(manifest: Optional[str], staging_conn_id: Optional[str]) -> Any:
    """The lineage of a dump or snapshot task that staged ``manifest`` (none: nothing staged):
    its source tables in, their staged files out, read with the staging connection's options."""
    if manifest is None:
        return operator_lineage([], [])
    from ..hooks.staging_storage import staging_storage_options

    staging = staging_storage_options(staging_conn_id)
    return operator_lineage(source_datasets([manifest], staging), staged_datasets(manifest, staging))


def operator_lineage(inputs: list, outputs: list) -> Any:
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs)


def with_openlineage(conf: dict, context: Any, *, parent: bool, transport: bool, log: Any) -> dict:
    """The Spark properties ``conf`` with this task's OpenLineage parent job (``parent``) and the
    OpenLineage transport (``transport``) injected, as ``SparkSubmitOperator`` does; the
    transport's API key is masked in the logs."""
    if not (parent or transport):
        return conf
    from airflow.providers.common.compat.openlineage.utils.spark import (
        inject_parent_job_information_into_spark_properties,
        inject_transport_information_into_spark_properties,
    )
    if parent:
        log.info("injecting the OpenLineage parent job information into the Spark properties")
        conf = inject_parent_job_information_into_spark_properties(conf, context)
    if transport:
        log.info("injecting the OpenLineage transport information into the Spark properties")
        conf = inject_transport_information_into_spark_properties(conf, context)
        from airflow.sdk.log import mask_secret

        for name, value in conf.items():  # the transport's API key: kept out of the logs
            if name.startswith("spark.openlineage.transport") and name.lower().endswith(("apikey", "token")):
                mask_secret(value)
        if any(n.startswith("spark.openlineage.transport") for n in conf) and "spark.redaction.regex" not in conf:
            conf["spark.redaction.regex"] = "(?i)secret|password|token|access[.]key|apikey"
    return conf


__all__ = ["capture_lineage", "iceberg_datasets", "iceberg_namespace_and_root", "operator_lineage", "source_datasets",
           "staged_datasets", "with_openlineage"]
