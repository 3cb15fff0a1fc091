"""OpenLineage: with the Airflow OpenLineage provider installed, the dump operator (after a live
dump from MariaDB) reports the source tables, namespaced by host and port, as inputs and their
staged files as outputs; the merge operator the source tables as inputs and the Iceberg tables
as outputs; each with its columns in a schema facet. The provider's extractor manager takes
them from the operators' ``get_openlineage_facets_on_complete``."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("airflow.providers.openlineage")

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook  # noqa: E402

from airflow_provider_binlog.checkpoints import ABSENT, Checkpoint, FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.operators.dump import BinlogDumpOperator  # noqa: E402
from airflow_provider_binlog.operators.merge import BinlogMergeOperator  # noqa: E402
from airflow_provider_binlog.staging import load_manifest  # noqa: E402
from tests.airflow_conn import create_user, set_connection  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings

COLUMNS_MYSQL = [("id", "int"), ("customer", "varchar"), ("amount", "decimal")]
COLUMNS_ARROW = [("id", "int32"), ("customer", "string"), ("amount", "decimal128(9, 2)")]


def fields(dataset) -> list[tuple]:
    return [(f.name, f.type) for f in dataset.facets["schema"].fields]


@pytest.fixture()
def dumped(mariadb, tmp_path, monkeypatch):
    """A live dump of two tables through the operator; the operator and its manifest."""
    create_user(mariadb)
    mariadb.execute("CREATE DATABASE IF NOT EXISTS lineagedb")
    for table in ("orders", "refunds"):
        mariadb.execute(f"DROP TABLE IF EXISTS lineagedb.{table}")
        mariadb.execute(f"CREATE TABLE lineagedb.{table} (id INT PRIMARY KEY, customer VARCHAR(40), "
                        "amount DECIMAL(9,2))")
    file, pos = mariadb.master_status()
    store = FileCheckpointStore(tmp_path / "store")
    store.save("lineage", Checkpoint(file=file, position=pos, flavor="mariadb"), expected=ABSENT)
    mariadb.execute("INSERT INTO lineagedb.orders VALUES (1, 'a', 1.50), (2, 'b', 2.50)")
    mariadb.execute("INSERT INTO lineagedb.refunds VALUES (1, 'a', 0.50)")
    set_connection(monkeypatch, mariadb, conn_id="lineage_db",
                   extra={"server_id": 7393, "checkpoint_store_uri": str(store.root)})
    op = BinlogDumpOperator(
        task_id="dump",
        binlog_conn_id="lineage_db",
        checkpoint_key="lineage",
        tables=["lineagedb.*"],
        staging=str(tmp_path / "staging"),
    )
    result = op.execute(context={})
    return op, result["manifest"]


def test_the_dump_reports_source_tables_in_and_staged_files_out(mariadb, dumped):
    op, manifest = dumped
    lineage = op.get_openlineage_facets_on_complete(None)
    namespace = f"mysql://{mariadb.host}:{mariadb.port}"
    assert [(d.namespace, d.name) for d in lineage.inputs] == [(namespace, "lineagedb.orders"),
                                                               (namespace, "lineagedb.refunds")]
    assert all(fields(d) == COLUMNS_MYSQL for d in lineage.inputs)
    directory = str(load_manifest(manifest).directory)
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("file", f"{directory}/lineagedb.orders"),
                                                                ("file", f"{directory}/lineagedb.refunds")]
    assert all(fields(d) == COLUMNS_ARROW for d in lineage.outputs)
    # before it ran, an operator reports nothing
    fresh = BinlogDumpOperator(task_id="fresh", staging="/s")
    assert (fresh.get_openlineage_facets_on_complete(None).inputs, fresh.get_openlineage_facets_on_complete(
        None).outputs) == ([], [])


def test_the_merge_reports_source_tables_in_and_iceberg_tables_out(mariadb, dumped, tmp_path, monkeypatch):
    _op, manifest = dumped

    def submit(self, application="", **kwargs):  # the job "succeeds"; Spark is not needed here
        command = self._build_spark_submit_command(application)
        data = load_manifest(manifest).data
        with open(command[command.index("--output-json") + 1], "w") as fh:
            json.dump({"batches": [{"batch_id": data["dump_id"], "status": "applied", "tables": []}],
                       "checkpoint": data["end"]}, fh)

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LINEAGE", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    warehouse = str(tmp_path / "warehouse")
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", catalog="lake", warehouse=warehouse),
        spark=SparkSettings(conn_id="spark_lineage"),
        advance_checkpoint=False,
    )
    op.execute(context={})
    lineage = op.get_openlineage_facets_on_complete(None)
    assert [d.name for d in lineage.inputs] == ["lineagedb.orders", "lineagedb.refunds"]
    assert {d.namespace for d in lineage.inputs} == {f"mysql://{mariadb.host}:{mariadb.port}"}
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        ("file", f"{warehouse}/shop_cdc/lineagedb__orders"), ("file", f"{warehouse}/shop_cdc/lineagedb__refunds")]
    assert all(fields(d) == COLUMNS_ARROW for d in lineage.outputs)
    # a catalog without a known warehouse: the catalog's name
    rest = BinlogMergeOperator(
        task_id="rest",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", catalog="lake", catalog_settings={"type": "rest", "uri": "http://cat"}),
        spark=SparkSettings(conn_id="spark_lineage", jars=[]),
        advance_checkpoint=False,
    )
    rest.execute(context={})
    assert [(d.namespace, d.name) for d in rest.get_openlineage_facets_on_complete(None).outputs] == [
        ("iceberg://lake", "shop_cdc.lineagedb__orders"), ("iceberg://lake", "shop_cdc.lineagedb__refunds")]


def test_the_openlineage_provider_takes_the_facets_from_the_operators(dumped):
    from airflow.providers.openlineage.extractors.base import DefaultExtractor
    from airflow.providers.openlineage.extractors.manager import ExtractorManager

    op, _manifest = dumped
    manager = ExtractorManager()
    assert manager.get_extractor_class(op) is DefaultExtractor
    assert manager.get_extractor_class(BinlogMergeOperator(
        task_id="m",
        manifests="/x",
        lake=LakeSettings(namespace="n"),
    )) \
        is DefaultExtractor
    extracted = DefaultExtractor(op).extract_on_complete(None)
    assert [d.name for d in extracted.inputs] == ["lineagedb.orders", "lineagedb.refunds"]
