"""Retention from the factory and its operator: the incremental DAG removes, after its merge,
the staged batches every load reading the location is past (and old enough), with the staging
location, the checkpoint store and the keys of the load and of the other consumers; nothing
while a consumer has merged nothing; bad settings refused when the DAG is parsed."""
from __future__ import annotations

import datetime as dt

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import open_checkpoint_store  # noqa: E402
from airflow_provider_binlog.dags import LakeSettings, make_cdc_dags  # noqa: E402
from airflow_provider_binlog.operators.retention import BinlogStagingRetentionOperator  # noqa: E402
from airflow_provider_binlog.staging.ref import StagingRef  # noqa: E402
from tests.airflow_conn import set_connection  # noqa: E402
from tests.integration.test_staging_retention import at, three_batches  # noqa: E402


def make(**kwargs):
    return make_cdc_dags("shop", binlog_conn_id="src_conn", tables=["shop.orders"],
                         staging=StagingRef("/staging", "s3_conn"), lake=LakeSettings(namespace="shop_cdc"),
                         checkpoint_store_uri="/store", **kwargs)


def test_the_incremental_dag_removes_merged_batches_after_its_merge_when_retention_is_on():
    incremental, backfill = make(staging_retention=dt.timedelta(hours=6), staging_consumers=["shop", "audit"])
    assert {t.task_id: sorted(t.upstream_task_ids) for t in incremental.tasks} == {
        "wait_for_changes": [], "dump": ["wait_for_changes"], "merge": ["dump"], "remove_merged_batches": ["merge"]}
    task = incremental.get_task("remove_merged_batches")
    assert isinstance(task, BinlogStagingRetentionOperator)
    assert (task.staging, task.checkpoint_keys, task.binlog_conn_id, task.checkpoint_store_uri,
            task.min_age) == (StagingRef("/staging", "s3_conn"), ["shop", "audit"], "src_conn", "/store", 6 * 3600.0)
    assert "remove_merged_batches" not in backfill.task_ids


def test_without_retention_staged_batches_are_kept():
    incremental, _ = make()
    assert "remove_merged_batches" not in incremental.task_ids


@pytest.mark.parametrize("value", [-1, "1d", True])
def test_a_bad_retention_is_refused_when_the_dag_is_parsed(value):
    with pytest.raises(ValueError, match="staging_retention"):
        make(staging_retention=value)


def _age(staging, seconds: float) -> None:
    """Make every manifest ``seconds`` older (retention goes by the manifest's created_at)."""
    import json

    for manifest in staging.glob("*/manifest.json"):
        data = json.loads(manifest.read_text())
        created = dt.datetime.fromisoformat(data["created_at"])
        data["created_at"] = (created - dt.timedelta(seconds=seconds)).isoformat()
        manifest.write_text(json.dumps(data))


def test_the_operator_removes_what_every_consumer_merged_and_nothing_while_one_merged_nothing(
        monkeypatch, tmp_path):
    staging = tmp_path / "staging"
    first, second, third = three_batches(tmp_path, staging)
    store_dir = tmp_path / "store"
    conn_id = set_connection(monkeypatch, host="h", extra={"checkpoint_store_uri": str(store_dir)})
    store = open_checkpoint_store(str(store_dir))
    store.save("shop", at(204))
    op = BinlogStagingRetentionOperator(task_id="r", staging=str(staging), checkpoint_keys=["shop", "audit"],
                                        binlog_conn_id=conn_id, min_age=0)
    assert op.execute({}) == []  # "audit" has merged nothing yet
    store.save("audit", at(104))
    assert op.execute({}) == [first.dump_id]
    store.save("audit", at(304))
    young = BinlogStagingRetentionOperator(task_id="r2", staging=str(staging), checkpoint_keys=["shop", "audit"],
                                           binlog_conn_id=conn_id)  # a day by default
    assert young.execute({}) == []
    _age(staging, 2 * 86400)
    assert young.execute({}) == [second.dump_id]
    assert sorted(p.name for p in staging.iterdir() if not p.name.startswith(".")) == [third.dump_id]


def test_a_templated_staging_location_renders_like_the_other_tasks(tmp_path):
    op = BinlogStagingRetentionOperator(task_id="r", staging=StagingRef("{{ params.root }}/staging", "s3_conn"),
                                        checkpoint_keys=["shop"])
    op.render_template_fields({"params": {"root": "s3://bucket"}})
    assert op.staging == StagingRef("s3://bucket/staging", "s3_conn")
