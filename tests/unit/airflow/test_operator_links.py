"""The operators' extra links: the source's section of the Binlog CDC view, and the Spark
application a merge ran; registered in the provider info and computed as Airflow 3's task
runner does when a task ends (``get_link`` on the worker)."""
from __future__ import annotations

import json

import pytest

from airflow_provider_binlog.operators.dump import BinlogDumpOperator
from airflow_provider_binlog.operators.merge import BinlogMergeOperator
from airflow_provider_binlog.operators.snapshot import BinlogSnapshotOperator
from airflow_provider_binlog.operators.links import (
    BinlogCdcViewLink,
    SparkApplicationLink,
    spark_application_url,
    view_url,
)
from airflow_provider_binlog.staging.storage import write_bytes
from tests.unit.airflow.test_merge_operator_cluster import CLUSTER_CONF, manifest  # noqa: F401
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings


def test_the_view_link_lands_on_the_sources_section_under_the_api_base_url(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/team-a/")
    assert view_url("shop db") == "https://airflow.example.com/team-a/binlog-cdc/#checkpoint-shop%20db"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "")
    assert view_url(None) == "/binlog-cdc/"


def test_the_view_serves_the_anchor_the_link_names():
    import datetime as dt

    from airflow_provider_binlog.plugins.cdc_view import URL_PREFIX
    from airflow_provider_binlog.plugins.page import render_source

    html = render_source({"conn_id": "mariadb_shop", "checkpoint_key": "shop db", "state": "ok"},
                         dt.datetime.now(dt.timezone.utc))
    assert view_url("shop db").endswith(URL_PREFIX + "/#checkpoint-shop%20db")
    assert 'id="checkpoint-shop%20db"' in html


def test_each_operator_links_to_its_source_by_checkpoint_key_else_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://af:8080")
    dump = BinlogDumpOperator(task_id="dump", binlog_conn_id="mariadb_shop", staging="/s", checkpoint_key="shop")
    snapshot = BinlogSnapshotOperator(task_id="snap", binlog_conn_id="mariadb_shop", staging="/s")
    merge = BinlogMergeOperator(
        task_id="merge",
        manifests="/m",
        lake=LakeSettings(namespace="ns"),
        checkpoint_key="shop",
    )
    link = BinlogCdcViewLink()
    assert [link.get_link(op, ti_key=None) for op in (dump, snapshot, merge)] == [
        "http://af:8080/binlog-cdc/#checkpoint-shop", "http://af:8080/binlog-cdc/#checkpoint-mariadb_shop",
        "http://af:8080/binlog-cdc/#checkpoint-shop"]
    assert [type(x).__name__ for x in merge.operator_extra_links] == ["BinlogCdcViewLink", "SparkApplicationLink"]
    assert [type(x).__name__ for x in dump.operator_extra_links] == ["BinlogCdcViewLink"]


def test_the_spark_link_goes_to_the_history_server_else_the_standalone_master_else_nowhere():
    result = {"spark_application_id": "app-20261127-0001"}
    assert spark_application_url(result, "spark://m1:7077", "http://history:18080/") == \
        "http://history:18080/history/app-20261127-0001/"
    assert spark_application_url(result, "spark://m1:7077,m2:7077") == "http://m1:8080/app/?appId=app-20261127-0001"
    assert spark_application_url(result, "local[2]") == ""
    assert spark_application_url({}, "spark://m1:7077", "http://history:18080") == ""


def test_a_merge_records_the_spark_application_its_job_reported(manifest, monkeypatch):  # noqa: F811
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_provider_binlog.staging import load_manifest

    def submit(self, application="", **kwargs):
        command = self._build_spark_submit_command(application)
        args = command[command.index(application) + 1:]
        end = load_manifest(args[args.index("--manifest") + 1]).end.to_json()
        write_bytes(args[args.index("--output-json") + 1], json.dumps(
            {"batches": [], "checkpoint": end, "spark_application_id": "app-42"}).encode())

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://master",
                                                                 "port": 7077}))
    monkeypatch.setenv("AIRFLOW__BINLOG__SPARK_HISTORY_URL", "http://history:18080")
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF),
        advance_checkpoint=False,
    )
    assert SparkApplicationLink().get_link(op, ti_key=None) == ""
    op.execute(context={})
    assert SparkApplicationLink().get_link(op, ti_key=None) == "http://history:18080/history/app-42/"


def test_the_provider_info_registers_both_links_and_the_history_option():
    from airflow_provider_binlog.provider_info import get_provider_info

    info = get_provider_info()
    assert info["extra-links"] == ["airflow_provider_binlog.operators.links.BinlogCdcViewLink",
                                   "airflow_provider_binlog.operators.links.SparkApplicationLink"]
    assert "spark_history_url" in info["config"]["binlog"]["options"]
    for path in info["extra-links"]:
        module, _, name = path.rpartition(".")
        assert getattr(pytest.importorskip(module), name)().name in ("Binlog CDC", "Spark application")
