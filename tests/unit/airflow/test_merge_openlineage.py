"""The merge operator passes OpenLineage's parent job and transport into the Spark job's
properties as ``SparkSubmitOperator`` does: asked by its arguments or by ``[openlineage]``."""
from __future__ import annotations

import pytest

pytest.importorskip("airflow.providers.openlineage")

from airflow_provider_binlog.operators.merge import BinlogMergeOperator  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings

COMPAT = "airflow.providers.common.compat.openlineage.utils.spark"


def merge(**kwargs):
    return BinlogMergeOperator(
        task_id="merge",
        manifests=["/s/m.json"],
        lake=LakeSettings(namespace="ns", warehouse="/w"),
        **kwargs,
    )


def test_the_injection_follows_the_openlineage_config_unless_given(monkeypatch):
    assert (merge().openlineage_inject_parent_job_info, merge().openlineage_inject_transport_info) == (False, False)
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO", "true")
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_TRANSPORT_INFO", "true")
    assert (merge().openlineage_inject_parent_job_info, merge().openlineage_inject_transport_info) == (True, True)
    off = merge(openlineage_inject_parent_job_info=False, openlineage_inject_transport_info=False)
    assert (off.openlineage_inject_parent_job_info, off.openlineage_inject_transport_info) == (False, False)


def test_the_spark_properties_get_the_parent_job_and_the_transport(monkeypatch):
    seen = []
    monkeypatch.setattr(f"{COMPAT}.inject_parent_job_information_into_spark_properties",
                        lambda props, context: seen.append(("parent", context)) or
                        {**props, "spark.openlineage.parentJobName": "dag.merge"})
    monkeypatch.setattr(f"{COMPAT}.inject_transport_information_into_spark_properties",
                        lambda props, context: seen.append(("transport", context)) or
                        {**props, "spark.openlineage.transport.type": "http"})
    context = {"ti": "the task instance"}
    conf = merge(openlineage_inject_parent_job_info=True, openlineage_inject_transport_info=True)._with_openlineage(
        {"spark.sql.shuffle.partitions": "4"}, context)
    assert conf == {"spark.sql.shuffle.partitions": "4", "spark.openlineage.parentJobName": "dag.merge",
                    "spark.openlineage.transport.type": "http",
                    "spark.redaction.regex": "(?i)secret|password|token|access[.]key|apikey"}
    assert seen == [("parent", context), ("transport", context)]
    seen.clear()
    assert merge(openlineage_inject_parent_job_info=False)._with_openlineage({"a": "1"}, context) == {"a": "1"}
    assert seen == []


def test_properties_set_by_the_user_are_kept():
    from airflow.providers.common.compat.openlineage.utils.spark import (
        inject_parent_job_information_into_spark_properties,
    )

    mine = {"spark.openlineage.parentJobName": "mine"}
    assert merge(openlineage_inject_parent_job_info=True)._with_openlineage(dict(mine), None) == mine
    assert inject_parent_job_information_into_spark_properties(dict(mine), None) == mine


def test_the_transport_api_key_is_masked_and_redacted_in_spark(monkeypatch):
    masked = []
    monkeypatch.setattr("airflow.sdk.log.mask_secret", lambda value, name=None: masked.append(value))
    monkeypatch.setattr(f"{COMPAT}.inject_transport_information_into_spark_properties",
                        lambda props, context: {**props, "spark.openlineage.transport.type": "http",
                                                "spark.openlineage.transport.auth.apiKey": "s3cr3t"})
    conf = merge(openlineage_inject_transport_info=True)._with_openlineage({}, {"ti": None})
    assert masked == ["s3cr3t"]
    assert "apikey" in conf["spark.redaction.regex"]
