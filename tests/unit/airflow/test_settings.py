"""The settings groups of the factory and the operators: each checks its values when made,
with an error naming the field, the merge settings are the merge job's options by name, and
the templated members of a group render when the task runs."""
from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.operators.settings import (  # noqa: E402
    BatchLimits,
    LakeSettings,
    MergeSettings,
    SettingsError,
    SnapshotSettings,
    SparkSettings,
    WaitSettings,
)
from airflow_provider_binlog.staging.ref import StagingRef, StagingRefError  # noqa: E402


@pytest.mark.parametrize("make, error, message", [
    (lambda: StagingRef(""), StagingRefError, "location must be a non-empty path"),
    (lambda: StagingRef("/s", conn_id=""), StagingRefError, "conn_id must be the id of an Airflow connection"),
    (lambda: StagingRef.of(42), StagingRefError, "staging must be a StagingRef"),
    (lambda: LakeSettings(namespace="bad ns"), SettingsError, "LakeSettings.namespace 'bad ns'"),
    (lambda: LakeSettings(namespace="n", catalog="a.b"), SettingsError, "LakeSettings.catalog"),
    (lambda: LakeSettings(namespace="n", warehouse="/w", catalog_settings={"type": "rest", "uri": "http://h"}),
     SettingsError, "one Iceberg catalog, not warehouse and catalog_settings"),
    (lambda: LakeSettings(namespace="n", table_properties=["a"]), TypeError, "LakeSettings.table_properties must be"),
    (lambda: LakeSettings(namespace="n", table_layout={"defaults": {}}), ValueError, "table layout is an object"),
    (lambda: SparkSettings(deploy_mode="local"), SettingsError, "SparkSettings.deploy_mode"),
    (lambda: SparkSettings(conf="x=1"), TypeError, "SparkSettings.conf must be a mapping"),
    (lambda: SparkSettings(iceberg_runtime="jar"), SettingsError, "SparkSettings.iceberg_runtime"),
    (lambda: SparkSettings(conn_id=""), SettingsError, "SparkSettings.conn_id"),
    (lambda: MergeSettings(parallel_tables=0), SettingsError, "MergeSettings: parallel_tables must be a whole"),
    (lambda: MergeSettings(direct_deletes="row"), ValueError, "direct_deletes"),
    (lambda: MergeSettings(maintenance="yes"), SettingsError, "maintenance must be true or false"),
    (lambda: MergeSettings(maintenance_every="daily"), TypeError, "MergeSettings.maintenance_every"),
    (lambda: SnapshotSettings(method="lock"), SettingsError, "SnapshotSettings: method must be one of"),
    (lambda: BatchLimits(max_rows=0), SettingsError, "BatchLimits: max_rows"),
    (lambda: WaitSettings(min_bytes=-1), SettingsError, "WaitSettings.min_bytes"),
    (lambda: WaitSettings(mode="sleep"), SettingsError, "WaitSettings.mode"),
    (lambda: WaitSettings(timeout=0), SettingsError, "WaitSettings.timeout"),
    (lambda: WaitSettings(on_max_lag="page"), SettingsError, "WaitSettings.on_max_lag"),
    (lambda: WaitSettings(lag_notifier="ops@example.com"), TypeError, "WaitSettings.lag_notifier"),
])
def test_each_group_refuses_a_bad_value_naming_the_field(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_the_groups_are_frozen_and_normalize_what_they_are_given():
    lake = LakeSettings(namespace="shop_cdc", table_properties={"format-version": 2})
    assert lake.table_properties == {"format-version": "2"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        lake.namespace = "other"  # type: ignore[misc]
    assert SparkSettings(jars="/a.jar, /b.jar").jars == ["/a.jar", "/b.jar"]
    assert SparkSettings().conf == {} and SparkSettings(jars=[]).jars == []
    assert StagingRef.of("/s") == StagingRef("/s") and StagingRef.of(StagingRef("/s", "c")).conn_id == "c"


def test_the_merge_settings_are_options_of_the_merge_job_by_name():
    merge_fields = {f.name for f in dataclasses.fields(MergeOptions)}
    for field in dataclasses.fields(MergeSettings):
        name = "maintenance_every_hours" if field.name == "maintenance_every" else field.name
        assert name in merge_fields, field.name
    options = MergeSettings(parallel_tables=3, maintenance=True, maintenance_every=dt.timedelta(hours=12),
                            retain_last=4).job_options()
    assert options == {"parallel_tables": 3, "maintenance": True, "maintenance_every_hours": 12.0, "retain_last": 4}
    assert MergeOptions(namespace="n", **options).maintenance_every_hours == 12.0


def merge_operator(**kwargs):
    from airflow_provider_binlog.operators.merge import BinlogMergeOperator

    return BinlogMergeOperator(task_id="merge", manifests="/m", **kwargs)


def test_jinja_values_inside_the_groups_render_and_are_checked_again():
    from airflow_provider_binlog.operators.dump import BinlogDumpOperator

    op = merge_operator(
        lake=LakeSettings(namespace="{{ params.ns }}", warehouse="{{ params.root }}/warehouse"),
        spark=SparkSettings(conf={"spark.app.name": "{{ params.ns }}"}, packages="{{ params.package }}"),
        staging=StagingRef("{{ params.root }}/staging", conn_id="{{ params.conn }}"))
    context = {"params": {"ns": "shop_cdc", "root": "/data", "package": "org.example:x:1", "conn": "stage_s3"}}
    op.render_template_fields(context)
    assert op.lake == LakeSettings(namespace="shop_cdc", warehouse="/data/warehouse")
    assert op.spark.conf == {"spark.app.name": "shop_cdc"} and op.spark.packages == "org.example:x:1"
    assert op.staging == StagingRef("/data/staging", conn_id="stage_s3") and op.staging_conn_id == "stage_s3"
    assert op.merge_options().namespace == "shop_cdc"
    dump = BinlogDumpOperator(task_id="dump", staging=StagingRef("{{ params.root }}/staging"))
    dump.render_template_fields(context)
    assert dump.staging.location == "/data/staging"
    bad = merge_operator(lake=LakeSettings(namespace="{{ params.ns }}"))
    with pytest.raises(SettingsError, match="LakeSettings.namespace 'not valid'"):
        bad.render_template_fields({"params": {"ns": "not valid"}})


def test_the_operators_take_the_groups_and_nothing_in_their_place():
    with pytest.raises(TypeError, match="lake must be a LakeSettings"):
        merge_operator(lake={"namespace": "n"})
    with pytest.raises(TypeError, match="spark must be a SparkSettings"):
        merge_operator(lake=LakeSettings(namespace="n"), spark={"conn_id": "spark_default"})
    with pytest.raises(TypeError, match="Invalid arguments"):
        merge_operator(lake=LakeSettings(namespace="n"), namespace="n")


def test_airflow_shows_the_templated_groups_by_their_fields():
    from airflow.serialization.helpers import serialize_template_field

    op = merge_operator(lake=LakeSettings(namespace="shop_cdc"), staging=StagingRef("/s", conn_id="c"))
    assert serialize_template_field(op.staging, "staging") == {"conn_id": "c", "location": "/s"}
    assert serialize_template_field(op.lake, "lake")["namespace"] == "shop_cdc"
    assert serialize_template_field(op.spark, "spark")["conn_id"] == "spark_default"
