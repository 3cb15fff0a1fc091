"""Operator that verifies the Iceberg tables of a source against MySQL/MariaDB, key range by key
range (``docs/verify.md``): the report in XCom, the task log, metrics, an OpenLineage
data-quality facet and the Binlog CDC view; a difference fails the task or is only reported."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any, Mapping, Optional, Sequence
from urllib.parse import quote, urlsplit

import pymysql
from airflow.sdk import BaseOperator

from ..capture.snapshot import table_map_from_information_schema
from ..capture.verify.canonical import VerifyError
from ..capture.verify.source import source_table
from ..common.tables import TableFilter, iceberg_table_name
from ..hooks.binlog import BinlogHook
from ..merge.contract import DataContract
from ..merge.verify.iceberg import CatalogSpec, load_table, pin
from ..merge.verify.report import TableReport, VerifyReport
from ..merge.verify.run import Settings, TableVerifier, poll_for_merge
from ..replica.information_schema import list_tables
from ..spark.catalogs import IcebergCatalog, catalog_from_settings
from ..utils.verify_signals import record_verify, write_report
from .links import BinlogCdcViewLink

ON_DIFFERENCE = ("fail", "report")
#: the XCom key of the report when the task fails on a difference (its return value is not pushed)
REPORT_KEY = "verify_report"


def catalog_spec(catalog: str = "lake", *, warehouse: Optional[str] = None,
                 iceberg_catalog: Optional[IcebergCatalog] = None) -> CatalogSpec:
    """Where PyIceberg finds the tables the merge writes: the embedded Hadoop catalog
    (``warehouse``), or the merge's catalog settings: Hadoop, the JDBC catalog (PyIceberg's SQL
    catalog on the same database), REST. Other catalogs are refused by name."""
    if iceberg_catalog is None:
        if not warehouse:
            raise VerifyError("verifying needs the catalog: warehouse, catalog_conn_id or catalog_settings")
        return CatalogSpec(catalog, "hadoop", warehouse)
    c = iceberg_catalog
    props = {k: v for k, v in c.properties.items() if not k.startswith("jdbc.")}
    if c.type == "hadoop":
        return CatalogSpec(c.name, "hadoop", c.warehouse, props)
    if c.type == "jdbc" and c.uri:
        return CatalogSpec(c.name, "sql", c.warehouse, {**props, "uri": sqlalchemy_url(c), **(
            {"warehouse": c.warehouse} if c.warehouse else {})})
    if c.type == "rest" and c.uri:
        return CatalogSpec(c.name, "rest", c.warehouse, {**dict(c.properties), "uri": c.uri, **(
            {"warehouse": c.warehouse} if c.warehouse else {})})
    raise VerifyError(f"the Iceberg catalog {c.describe()} is not read by the verification",
                      hint="verification reads Hadoop, JDBC (PostgreSQL, SQLite) and REST catalogs with PyIceberg")


def sqlalchemy_url(c: IcebergCatalog) -> str:
    """The JDBC catalog's database as an SQLAlchemy URL (PostgreSQL through psycopg 3, SQLite)."""
    uri = (c.uri or "")[len("jdbc:"):]
    if uri.startswith("sqlite:"):
        return "sqlite:///" + uri[len("sqlite:"):].lstrip("/") if not uri.startswith("sqlite:/") else \
            "sqlite:///" + uri[len("sqlite:"):]
    parts = urlsplit(uri)
    if parts.scheme != "postgresql":
        raise VerifyError(f"a JDBC catalog on {parts.scheme} is not read by the verification",
                          hint="verification reads JDBC catalogs on PostgreSQL and SQLite")
    user, password = c.properties.get("jdbc.user"), c.properties.get("jdbc.password")
    auth = ""
    if user:
        auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
    return f"postgresql+psycopg://{auth}{parts.netloc}{parts.path}"


class BinlogVerifyOperator(BaseOperator):
    """Compares each selected table with its Iceberg table, key range by key range, at a common
    binlog position (``docs/verify.md``), and returns the report (per table: key ranges checked,
    equal, differing with their keys, not verifiable, rows per second).

    :param binlog_conn_id: the source's connection (type ``mysql_binlog``).
    :param tables: ``schema.table`` patterns; ``exclude`` patterns left out.
    :param namespace: the Iceberg namespace; ``catalog`` its catalog's name.
    :param warehouse: the embedded Hadoop catalog's warehouse; or ``catalog_conn_id`` (an
        ``iceberg_catalog`` connection) or ``catalog_settings``, as the merge has them.
    :param masking: the masking rules of the load (``masking_secret_conn_id`` the key of its
        hashes): excluded columns are left out, hashed and truncated ones compared as staged
        (``compare_hashed=False``: hashed columns left out).
    :param data_contract: the load's data contract: its columns are left out, soft-deleted rows
        are not the source's.
    :param chunk_rows: keys per compared range (default 50,000).
    :param tries: passes in all: keys changed during a pass are checked again after the next
        merge, waiting up to ``merge_wait_seconds`` for it (polled every ``poll_seconds``).
    :param on_difference: ``fail`` (the default) fails the task when a table differs;
        ``report`` only reports it.
    :param staging_dir: the source's staging directory: the report is kept there for the Binlog
        CDC view (a local directory); ``checkpoint_key`` names the source.
    """

    operator_extra_links = (BinlogCdcViewLink(),)
    template_fields: Sequence[str] = ("binlog_conn_id", "tables", "exclude", "namespace", "on_difference")
    ui_color = "#d7ecd0"

    def __init__(self, *, namespace: str, tables: Sequence[str], binlog_conn_id: str = BinlogHook.default_conn_name,
                 exclude: Optional[Sequence[str]] = None, catalog: str = "lake", warehouse: Optional[str] = None,
                 catalog_conn_id: Optional[str] = None, catalog_settings: Optional[Mapping[str, Any]] = None,
                 masking: Any = None, masking_secret_conn_id: Optional[str] = None, compare_hashed: bool = True,
                 data_contract: Any = None, chunk_rows: int = 50_000, tries: int = 3,
                 merge_wait_seconds: float = 1800.0, poll_seconds: float = 30.0, on_difference: str = "fail",
                 staging_dir: Optional[str] = None, checkpoint_key: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if on_difference not in ON_DIFFERENCE and "{{" not in str(on_difference):
            raise VerifyError(f"on_difference must be 'fail' or 'report', not {on_difference!r}")
        if chunk_rows < 1 or tries < 1:
            raise VerifyError(f"chunk_rows and tries must be at least 1, not {chunk_rows} and {tries}")
        self.binlog_conn_id, self.tables, self.exclude = binlog_conn_id, tables, exclude
        self.namespace, self.catalog, self.warehouse = namespace, catalog, warehouse
        self.catalog_conn_id, self.catalog_settings = catalog_conn_id, catalog_settings
        self.masking, self.masking_secret_conn_id, self.compare_hashed = masking, masking_secret_conn_id, compare_hashed
        self.data_contract = DataContract.parse(data_contract) if not isinstance(data_contract, DataContract) \
            else data_contract
        self.chunk_rows, self.tries = chunk_rows, tries
        self.merge_wait_seconds, self.poll_seconds, self.on_difference = merge_wait_seconds, poll_seconds, on_difference
        self.staging_dir, self.checkpoint_key = staging_dir, checkpoint_key

    def _spec(self) -> CatalogSpec:
        if self.catalog_conn_id:
            from ..hooks.iceberg_catalog import IcebergCatalogHook

            return catalog_spec(self.catalog, iceberg_catalog=IcebergCatalogHook(self.catalog_conn_id)
                                .get_catalog(self.catalog))
        if self.catalog_settings:
            return catalog_spec(self.catalog, iceberg_catalog=catalog_from_settings(self.catalog,
                                                                                    self.catalog_settings))
        return catalog_spec(self.catalog, warehouse=self.warehouse)

    # long: the report's way out (log, metrics, XCom, the view's file, the failure) follows the
    # tables' verification in one place
    def execute(self, context: Any) -> dict:
        from ..hooks.masking import load_masking

        hook = BinlogHook(self.binlog_conn_id)
        with hook.get_replica() as replica:
            flavor = replica.info.flavor
        plain = hook._plain_connect_kwargs()

        def connect() -> Any:
            return pymysql.connect(autocommit=True, charset="utf8mb4", **plain)

        masking = load_masking(self.masking, self.masking_secret_conn_id) if self.masking else None
        spec = self._spec()
        source = self.checkpoint_key or self.binlog_conn_id
        report = VerifyReport()
        conn = connect()
        try:
            selected = list_tables(conn, TableFilter(list(self.tables), list(self.exclude or ()) or None))
        finally:
            conn.close()
        for schema, table in selected:
            name = iceberg_table_name(schema, table)
            table_report = self._verify_one(connect, hook, flavor, spec, masking, schema, table, name)
            report.tables.append(table_report)
            for line in table_report.lines():
                self.log.info("%s", line)
            try:
                record_verify(source, table_report.to_json())
            except Exception:
                self.log.warning("the verification's metrics could not be sent", exc_info=True)
        report.finished_at = dt.datetime.now(dt.timezone.utc).isoformat()
        out = report.to_json()
        self._report = out
        if self.staging_dir:
            try:
                write_report(self.staging_dir, source, out)
            except OSError:
                self.log.warning("the verification's report could not be kept for the Binlog CDC view", exc_info=True)
        differing = [t.table for t in report.tables if t.differing]
        if self.on_difference not in ON_DIFFERENCE:
            raise VerifyError(f"on_difference must be 'fail' or 'report', not {self.on_difference!r}")
        if differing and self.on_difference == "fail":
            from airflow.sdk.exceptions import AirflowFailException

            ti = context.get("ti") if hasattr(context, "get") else None
            if ti is not None:
                ti.xcom_push(key=REPORT_KEY, value=out)
            raise AirflowFailException(f"Iceberg differs from the source in {', '.join(differing)} (see the log; "
                                       f"repair with the verify DAG in mode repair)")
        return out

    def _verify_one(self, connect: Any, hook: BinlogHook, flavor: str, spec: CatalogSpec, masking: Any,
                    schema: str, table: str, name: str) -> TableReport:
        began = time.monotonic()
        conn = connect()
        try:
            tm = table_map_from_information_schema(conn, schema, table, flavor)
            if tm is None:
                return TableReport(f"{schema}.{table}", f"{self.namespace}.{name}", error="the table is gone")
            st = source_table(conn, tm, masking, compare_hashed=self.compare_hashed)
        except VerifyError as exc:
            return TableReport(f"{schema}.{table}", f"{self.namespace}.{name}", error=str(exc),
                               seconds=time.monotonic() - began)
        finally:
            conn.close()
        contract = self.data_contract.for_table(schema, table)
        soft = contract.soft_delete["flag"] if contract.soft_delete else None

        def open_pinned() -> Any:
            return pin(load_table(spec, self.namespace, name))

        settings = Settings(chunk_rows=self.chunk_rows, tries=self.tries, soft_delete=soft)
        wait = poll_for_merge(open_pinned, seconds=self.merge_wait_seconds, poll=self.poll_seconds)
        return TableVerifier(connect, hook.get_replica, flavor, st, f"{self.namespace}.{name}", open_pinned, wait,
                             settings).run()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the verified Iceberg tables as inputs, each with its data-quality facets."""
        from openlineage.client.event_v2 import Dataset

        from ..utils.lineage import iceberg_namespace_and_root, operator_lineage
        from ..utils.verify_signals import quality_facets

        report = getattr(self, "_report", None) or {}
        warehouse = self.warehouse or (self.catalog_settings or {}).get("warehouse")
        ns, root = iceberg_namespace_and_root(self.catalog, warehouse)
        inputs = []
        for table in (report.get("tables") or {}).values():
            iceberg = table["iceberg_table"].split(".")[-1]
            dataset_name = f"{root}/{self.namespace}/{iceberg}" if root is not None else f"{self.namespace}.{iceberg}"
            inputs.append(Dataset(namespace=ns, name=dataset_name, facets=quality_facets(table)))
        return operator_lineage(inputs, [])


__all__ = ["BinlogVerifyOperator", "ON_DIFFERENCE", "REPORT_KEY", "catalog_spec", "sqlalchemy_url"]
