"""The DAG factory without a server: the two DAGs, their tasks, parameters and assets; the
backfill parameter checks; what the merge puts into asset events; the example DAG file."""
from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import pytest

pytest.importorskip("airflow")

from airflow.sdk import Asset, AssetAlias  # noqa: E402
from airflow.sdk.exceptions import AirflowSkipException, ParamValidationError  # noqa: E402

from airflow_provider_binlog.dags import BackfillParamsError, make_cdc_dags, plan_backfill  # noqa: E402
from airflow_provider_binlog.operators.merge import (BinlogMergeOperator, asset_extra,  # noqa: E402
                                                     summarize)
from airflow_provider_binlog.sensors.position import BinlogPositionSensor, BinlogPurgedFailure  # noqa: E402
from airflow_provider_binlog.operators.settings import (BatchLimits, LakeSettings, MergeSettings,  # noqa: E402
                                                         WaitSettings)

ROOT = Path(__file__).resolve().parents[3]


def lake(**kwargs):
    return LakeSettings(**{"namespace": "shop_cdc", "warehouse": "/warehouse", **kwargs})


def make(**kwargs):
    args = dict(binlog_conn_id="src_conn", tables=["shop.customers", "shop.orders"], staging="/staging",
                lake=lake())
    args.update(kwargs)
    return make_cdc_dags("shop", **args)


def test_incremental_dag_waits_dumps_and_merges():
    incremental, _ = make(merge=MergeSettings(maintenance=True), limits=BatchLimits(max_rows=5000),
                           wait=WaitSettings(poke_interval=30, timeout=300))
    assert incremental.dag_id == "binlog_cdc__shop"
    assert incremental.max_active_runs == 1 and incremental.catchup is False
    assert {t.task_id: sorted(t.upstream_task_ids) for t in incremental.tasks} == {
        "wait_for_changes": [], "dump": ["wait_for_changes"], "merge": ["dump"]}
    wait, dump, merge = (incremental.get_task(t) for t in ("wait_for_changes", "dump", "merge"))
    assert isinstance(wait, BinlogPositionSensor)
    assert (wait.checkpoint_key, wait.poke_interval, wait.timeout, wait.mode, wait.skip_on_timeout) == \
        ("shop", 30, 300, "reschedule", True)
    assert (dump.checkpoint_key, dump.limits.max_rows, dump.tables) == ("shop", 5000, ["shop.customers", "shop.orders"])
    assert isinstance(merge, BinlogMergeOperator)
    assert (merge.checkpoint_key, merge.binlog_conn_id, merge.merge.maintenance, merge.lake.warehouse) == \
        ("shop", "src_conn", True, "/warehouse")
    assert [a.uri for a in merge.outlets] == ["iceberg://lake/shop_cdc/shop__customers",
                                              "iceberg://lake/shop_cdc/shop__orders"]


def test_wildcard_tables_give_one_asset_for_the_source():
    incremental, backfill = make(tables=["shop.*"], exclude=["shop.tmp_*"], lake=lake(catalog="cat"))
    for dag in (incremental, backfill):
        asset, alias = dag.get_task("merge").outlets
        assert isinstance(asset, Asset) and asset.uri.rstrip("/") == "binlog://shop"
        assert isinstance(alias, AssetAlias) and alias.name == "binlog_tables__shop"
    assert incremental.get_task("dump").exclude == ["shop.tmp_*"]


def test_backfill_dag_branches_to_snapshot_or_dump():
    _, backfill = make()
    assert backfill.dag_id == "binlog_backfill__shop" and backfill.schedule is None
    assert backfill.max_active_runs == 1
    up = {t.task_id: set(t.upstream_task_ids) for t in backfill.tasks}
    assert up["wait_for_incremental"] == set() and up["plan"] == {"wait_for_incremental"}
    assert up["choose"] == {"plan"}
    assert {"choose"} <= up["snapshot"] and {"choose"} <= up["dump"]
    assert {"snapshot", "dump"} <= up["merge"]
    assert backfill.get_task("merge").trigger_rule == "none_failed_min_one_success"
    params = backfill.params
    assert params["mode"] == "snapshot" and params["tables"] == ["shop.customers", "shop.orders"]
    assert params.get_param("mode").schema["enum"] == ["snapshot", "from_position", "from_gtid"]
    params.validate()

    def check(conf):
        for name, value in conf.items():
            params.get_param(name).resolve(value)

    check({"mode": "from_position", "from_position": "mariadb-bin.000002:4", "stop": "current",
           "from_gtid": None, "tables": ["shop.orders"]})
    for bad in ({"mode": "rewind"}, {"from_position": "no position"}, {"tables": []},
                {"tables": ["no_dot"]}, {"stop": "later"}):
        with pytest.raises(ParamValidationError):
            check(bad)


def test_factory_checks_its_arguments():
    with pytest.raises(ValueError, match="source_id"):
        make_cdc_dags("bad id", binlog_conn_id="c", tables=["a.b"], staging="/s", lake=LakeSettings(namespace="n"))
    with pytest.raises(ValueError, match="schema.table"):
        make(tables=["customers"])
    with pytest.raises(ValueError, match="at least one"):
        make(tables=[])


SOURCE = ["shop.customers", "shop.orders"]


def test_plan_of_a_snapshot():
    plan = plan_backfill({"mode": "snapshot"}, source_tables=SOURCE, checkpoint_key="shop")
    assert plan == {"mode": "snapshot", "branch": "snapshot", "tables": SOURCE, "start": None, "stop": "current",
                    "advance_checkpoint": True, "stream": None}
    partial = plan_backfill({"mode": "snapshot", "tables": ["shop.orders"]}, source_tables=SOURCE,
                            checkpoint_key="shop")
    assert partial["tables"] == ["shop.orders"]
    assert partial["advance_checkpoint"] is False and partial["stream"] == "shop.partial"


def test_plan_of_replays():
    plan = plan_backfill({"mode": "from_position", "from_position": " mariadb-bin.000003:1234 ",
                          "stop": "mariadb-bin.000004:99"}, source_tables=SOURCE, checkpoint_key="shop")
    assert plan["branch"] == "dump" and plan["advance_checkpoint"] is True
    assert (plan["start"]["file"], plan["start"]["pos"], plan["start"]["gtid"]) == ("mariadb-bin.000003", 1234, None)
    assert (plan["stop"]["file"], plan["stop"]["pos"]) == ("mariadb-bin.000004", 99)
    gtid = plan_backfill({"mode": "from_gtid", "from_gtid": "0-1-100"}, source_tables=SOURCE,
                         checkpoint_key="shop")
    assert gtid["start"]["gtid"] == "0-1-100" and gtid["stop"] == "current"


@pytest.mark.parametrize("params, message", [
    ({"mode": "from_position"}, "needs the parameter from_position"),
    ({"mode": "from_gtid"}, "needs the parameter from_gtid"),
    ({"mode": "from_position", "from_position": "0-1-5"}, "must be binlog file:position"),
    ({"mode": "from_gtid", "from_gtid": "mariadb-bin.000001:4"}, "must be a GTID"),
    ({"mode": "from_position", "from_position": "f.000001:4", "from_gtid": "0-1-5"}, "not from_gtid"),
    ({"mode": "snapshot", "from_position": "f.000001:4"}, "leave from_position"),
    ({"mode": "snapshot", "stop": "f.000001:4"}, "no stop position"),
    ({"mode": "from_position", "from_position": "f.000001:4", "tables": ["shop.orders"]},
     "whole table selection"),
    ({"mode": "from_position", "from_position": "f.000001:4", "stop": "0-1-9"}, "stop must be"),
    ({"mode": "later"}, "mode must be one of"),
])
def test_invalid_backfill_parameters_are_refused(params, message):
    with pytest.raises(BackfillParamsError, match=message):
        plan_backfill(params, source_tables=SOURCE, checkpoint_key="shop")


# ---------------------------------------------------------------------- asset events

SUMMARY = {
    "tables": {"shop.orders": {"iceberg_table": "lake.shop_cdc.shop__orders", "inserted": 3, "updated": 2,
                               "deleted": 1, "snapshot_id": 77, "status": "committed"}},
    "batches": [("b1", "applied")], "end_checkpoint": {"file": "mariadb-bin.000001", "pos": 900},
    "mode": "incremental", "inserted": 3, "updated": 2, "deleted": 1,
}


def test_asset_extra_per_table_and_per_source():
    extra = asset_extra("iceberg://lake/shop_cdc/shop__orders", SUMMARY, "lake", "shop_cdc")
    assert extra == {"end_checkpoint": {"file": "mariadb-bin.000001", "pos": 900}, "batches": [["b1", "applied"]],
                     "mode": "incremental", "source": "shop.orders", "iceberg_table": "lake.shop_cdc.shop__orders",
                     "inserted": 3, "updated": 2, "deleted": 1, "snapshot_id": 77, "status": "committed"}
    untouched = asset_extra("iceberg://lake/shop_cdc/shop__customers", SUMMARY, "lake", "shop_cdc")
    assert (untouched["inserted"], untouched["updated"], untouched["deleted"]) == (0, 0, 0)
    assert untouched["end_checkpoint"] == SUMMARY["end_checkpoint"]
    source = asset_extra("binlog://shop/", SUMMARY, "lake", "shop_cdc")
    assert (source["inserted"], source["updated"], source["deleted"]) == (3, 2, 1)
    assert source["tables"] == {"shop.orders": {"inserted": 3, "updated": 2, "deleted": 1}}
    json.dumps(extra), json.dumps(source)


def test_merge_sets_the_extra_of_its_asset_outlets():
    assets = [Asset("iceberg://lake/shop_cdc/shop__orders"), Asset("binlog://shop")]
    op = BinlogMergeOperator(task_id="merge", manifests="/m", lake=LakeSettings(namespace="shop_cdc"), outlets=assets)

    class Accessor:
        extra = None

    events = {a: Accessor() for a in assets}

    class Events(dict):
        def __getitem__(self, key):
            return events[key]

    op._emit_asset_events({"outlet_events": Events()}, SUMMARY)
    assert events[assets[0]].extra["source"] == "shop.orders"
    assert events[assets[1]].extra["tables"] == {"shop.orders": {"inserted": 3, "updated": 2, "deleted": 1}}


def test_through_the_alias_each_merged_table_gets_an_event_on_its_own_asset():
    from airflow.sdk.execution_time.context import OutletEventAccessors

    incremental, _ = make(tables=["shop.*"])
    merge = incremental.get_task("merge")
    summary = {**SUMMARY, "tables": {**SUMMARY["tables"], "shop.customers": {
        "iceberg_table": "lake.shop_cdc.shop__customers", "inserted": 0, "updated": 4, "deleted": 0,
        "snapshot_id": 78, "status": "committed"}}}
    events = OutletEventAccessors()
    merge._emit_asset_events({"outlet_events": events}, summary)
    alias = merge.outlets[1]
    emitted = {e.dest_asset_key.uri: e.extra for e in events[alias].asset_alias_events}
    assert sorted(emitted) == ["iceberg://lake/shop_cdc/shop__customers", "iceberg://lake/shop_cdc/shop__orders"]
    assert (emitted["iceberg://lake/shop_cdc/shop__orders"]["inserted"],
            emitted["iceberg://lake/shop_cdc/shop__customers"]["updated"]) == (3, 4)
    assert events[merge.outlets[0]].extra["tables"]["shop.customers"]["updated"] == 4
    explicit, _ = make()
    assert [type(o).__name__ for o in explicit.get_task("merge").outlets] == ["Asset", "Asset"]


def test_summary_counts_nothing_for_an_already_applied_batch(monkeypatch):
    import airflow_provider_binlog.staging as staging
    from airflow_provider_binlog.staging.manifest import Manifest
    data = {"dump_id": "d1", "tables": [{"schema": "shop", "table": "orders",
                                         "rows": {"insert": 4, "update": 1, "delete": 0}}]}
    monkeypatch.setattr(staging, "load_manifest", lambda path, **kw: Manifest(Path(path), data))
    manifest = "/staging/d1/manifest.json"
    applied = {"batches": [{"batch_id": "d1", "status": "applied", "tables": [
        {"source": "shop.orders", "table": "lake.ns.shop__orders", "status": "committed", "snapshot_id": 5}]}],
        "checkpoint": {"file": "f.000001", "pos": 9}}
    summary = summarize(applied, [str(manifest)])
    assert summary["tables"]["shop.orders"] == {"iceberg_table": "lake.ns.shop__orders", "inserted": 4,
                                                "updated": 1, "deleted": 0, "snapshot_id": 5,
                                                "status": "committed"}
    again = summarize({"batches": [{"batch_id": "d1", "status": "already-applied", "tables": []}],
                       "checkpoint": {"file": "f.000001", "pos": 9}}, [str(manifest)])
    assert again["tables"] == {} and (again["inserted"], again["updated"], again["deleted"]) == (0, 0, 0)
    assert again["batches"] == [("d1", "already-applied")]


def test_merge_takes_the_checkpoint_store_from_the_connection(monkeypatch, tmp_path):
    from tests.airflow_conn import set_connection
    conn_id = set_connection(monkeypatch, host="h", extra={"checkpoint_store_uri": str(tmp_path / "cp")})
    op = BinlogMergeOperator(task_id="m", manifests="/m", binlog_conn_id=conn_id, lake=LakeSettings(namespace="n"))
    assert op._checkpoint_store() == (str(tmp_path / "cp"), conn_id)
    op = BinlogMergeOperator(
        task_id="m",
        manifests="/m",
        binlog_conn_id=conn_id,
        lake=LakeSettings(namespace="n"),
        checkpoint_key="shop",
        checkpoint_store_uri="/other",
    )
    assert op._checkpoint_store() == ("/other", "shop")
    op = BinlogMergeOperator(
        task_id="m",
        manifests="/m",
        binlog_conn_id=conn_id,
        lake=LakeSettings(namespace="n"),
        advance_checkpoint=False,
    )
    assert op._checkpoint_store() == (None, None)


# ---------------------------------------------------------------------- sensor

class _Idle(BinlogPositionSensor):
    def _check(self, context):
        return {"ready": False, "reason": None, "target": {}}


class _Purged(BinlogPositionSensor):
    def _check(self, context):
        raise BinlogPurgedFailure("mariadb-bin.000001 is purged", "take a new snapshot")


def test_an_idle_sensor_is_skipped_but_purged_binlogs_fail():
    idle = _Idle(task_id="w", timeout=0, poke_interval=0, mode="poke", skip_on_timeout=True)
    with pytest.raises(AirflowSkipException, match="no new binlog data"):
        idle.execute({})
    strict = _Idle(task_id="w2", timeout=0, poke_interval=0, mode="poke")
    with pytest.raises(Exception, match="timed out"):
        strict.execute({})
    purged = _Purged(task_id="w3", timeout=0, poke_interval=0, mode="poke", skip_on_timeout=True)
    with pytest.raises(BinlogPurgedFailure):
        purged.execute({})


# ---------------------------------------------------------------------- example DAG file

def test_example_dag_file_defines_both_dags(monkeypatch, tmp_path):
    for name in [k for k in os.environ if k.startswith("BINLOG_")]:
        monkeypatch.delenv(name)
    defaults = runpy.run_path(str(ROOT / "dags" / "binlog_cdc.py"))
    assert defaults["binlog_cdc"].dag_id == "binlog_cdc__shop"
    assert defaults["binlog_backfill"].dag_id == "binlog_backfill__shop"
    merge = defaults["binlog_cdc"].get_task("merge")
    assert merge.binlog_conn_id == "mysql_binlog_default" and merge.lake.namespace == "shop_cdc"
    assert merge.lake.warehouse.endswith(os.path.join("binlog", "warehouse"))
    monkeypatch.setenv("BINLOG_SOURCE_ID", "crm")
    monkeypatch.setenv("BINLOG_CONN_ID", "crm_db")
    monkeypatch.setenv("BINLOG_TABLES", "crm.accounts, crm.contacts")
    monkeypatch.setenv("BINLOG_STAGING_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("BINLOG_CATALOG_CONN_ID", "lakehouse")
    monkeypatch.setenv("BINLOG_SPARK_JARS", "/opt/a.jar,/opt/b.jar")
    configured = runpy.run_path(str(ROOT / "dags" / "binlog_cdc.py"))
    incremental = configured["binlog_cdc"]
    assert incremental.dag_id == "binlog_cdc__crm"
    dump = incremental.get_task("dump")
    assert (dump.binlog_conn_id, dump.tables, dump.staging.location) == \
        ("crm_db", ["crm.accounts", "crm.contacts"], str(tmp_path / "s"))
    merge = incremental.get_task("merge")
    assert merge.lake.warehouse is None and merge.lake.catalog_conn_id == "lakehouse"
    assert merge.spark.jars == ["/opt/a.jar", "/opt/b.jar"]
    assert [a.uri for a in incremental.get_task("merge").outlets] == [
        "iceberg://lake/crm_cdc/crm__accounts", "iceberg://lake/crm_cdc/crm__contacts"]


def test_data_contract_and_masking_reach_the_merge_the_dumps_and_the_snapshot():
    from airflow_provider_binlog.merge.contract import ContractError
    from airflow_provider_binlog.staging.masking import MaskingError

    contract = {"default": {"soft_delete": True}, "tables": {"shop.orders": {"change_log": True}}}
    rules = {"hash": ["shop.customers.email"]}
    incremental, backfill = make(lake=lake(data_contract=contract), masking=rules,
                                 masking_secret_conn_id="mask_key")
    for dag in (incremental, backfill):
        contract_json = dag.get_task("merge").lake.data_contract
        assert contract_json["tables"]["shop.orders"] == {"change_log": {"suffix": "__changes"}}
        assert dag.get_task("dump").masking == rules and dag.get_task("dump").masking_secret_conn_id == "mask_key"
    assert backfill.get_task("snapshot").masking == rules
    # bad options fail when the DAG file is parsed, with what to change
    with pytest.raises(ContractError, match="unknown key\\(s\\) soft_deletes"):
        lake(data_contract={"default": {"soft_deletes": True}})
    with pytest.raises(MaskingError, match="hash rules need a secret key; give masking_secret_conn_id"):
        make(masking=rules)


def test_the_masking_key_is_read_from_its_connection_at_run_time(monkeypatch):
    from airflow_provider_binlog.hooks.masking import load_masking
    from airflow_provider_binlog.staging.masking import MaskingError

    monkeypatch.setenv("AIRFLOW_CONN_MASK_KEY", json.dumps({"conn_type": "generic", "password": "k1"}))
    monkeypatch.setenv("AIRFLOW_CONN_MASK_EXTRA", json.dumps({"conn_type": "generic", "extra": {"key": "k2"}}))
    monkeypatch.setenv("AIRFLOW_CONN_MASK_NONE", json.dumps({"conn_type": "generic"}))
    rules = {"hash": ["s.t.c"]}
    assert load_masking(rules, "mask_key").secret == b"k1"
    assert load_masking(rules, "mask_extra").secret == b"k2"
    with pytest.raises(MaskingError, match="connection 'mask_none' has no password"):
        load_masking(rules, "mask_none")
    assert load_masking(None, "mask_key") is None


def test_merge_direct_max_bytes_and_parallel_tables_reach_both_merges():
    incremental, backfill = make(merge=MergeSettings(direct_max_bytes=0, parallel_tables=3))
    for dag in (incremental, backfill):
        merge = dag.get_task("merge")
        assert (merge.merge.direct_max_bytes, merge.merge.parallel_tables) == (0, 3)
    default, _ = make()
    assert default.get_task("merge").merge.direct_max_bytes is None  # the job's default (32 MiB)


def test_event_driven_schedule_watches_the_binlog_and_the_sensor_takes_what_is_there():
    from airflow.serialization.serialized_objects import DagSerialization

    from airflow_provider_binlog.dags import OnNewBinlogData
    from airflow_provider_binlog.triggers.new_data import BinlogNewDataTrigger

    incremental, backfill = make(tables=["shop.*"], schedule=OnNewBinlogData(poke_interval=2, min_interval=15),
                                 wait=WaitSettings(min_bytes=4096, max_threshold_wait=120), checkpoint_key="shop_key")
    (watched,) = incremental.timetable.asset_condition.objects
    assert watched.uri == "binlog://shop/changes" and watched.name == "binlog_changes__shop"
    (watcher,) = watched.watchers
    trigger = watcher.trigger
    assert isinstance(trigger, BinlogNewDataTrigger)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_binlog.triggers.new_data.BinlogNewDataTrigger"
    assert (kwargs["binlog_conn_id"], kwargs["checkpoint_key"], kwargs["min_bytes"], kwargs["max_threshold_wait"],
            kwargs["poke_interval"], kwargs["min_interval"], kwargs["refire_after"]) == \
        ("src_conn", "shop_key", 4096, 120, 2.0, 15, 600.0)
    wait = incremental.get_task("wait_for_changes")
    assert (wait.min_bytes, wait.min_transactions, wait.max_threshold_wait) == (None, None, None)
    assert (wait.poke_interval, wait.timeout) == (2, 60)
    strict, _ = make(schedule=OnNewBinlogData(), wait=WaitSettings(skip_when_idle=False))
    assert strict.get_task("wait_for_changes").skip_on_timeout is True
    # the merge's own asset is another one: its events do not start the DAG again
    assert [getattr(a, "uri", "").rstrip("/") for a in incremental.get_task("merge").outlets] == ["binlog://shop", ""]
    assert type(backfill.timetable).__name__ == "NullTimetable"
    serialized = DagSerialization.to_dict(incremental)
    assert "BinlogNewDataTrigger" in json.dumps(serialized)
    with pytest.raises(ValueError, match="poke_interval"):
        OnNewBinlogData(poke_interval=0)
    with pytest.raises(ValueError, match="refire_after"):
        OnNewBinlogData(refire_after=-1)


class _Counts:
    """The two counts the guards ask Airflow's task runner for, recorded."""

    def __init__(self, runs=0, loading=0):
        self.runs, self.loading, self.asked = runs, loading, []

    def get_dr_count(self, dag_id, states=None, **_):
        self.asked.append(("runs", dag_id, tuple(states)))
        return self.runs

    def get_task_states(self, dag_id, task_ids=None, **_):
        """``loading``: a number of runs dumping, or {run_id: ({task: state}, run state)}."""
        self.asked.append(("states", dag_id, tuple(task_ids)))
        if isinstance(self.loading, dict):
            return {run_id: tasks for run_id, (tasks, _) in self.loading.items()}
        return {f"r{i}": {"dump": "running", "merge": None} for i in range(self.loading)}

    def get_dagrun_state(self, dag_id, run_id):
        self.asked.append(("run", dag_id, run_id))
        return self.loading[run_id][1] if isinstance(self.loading, dict) else "running"


def test_an_incremental_merge_yields_to_a_running_backfill_before_reading_anything(monkeypatch):
    incremental, backfill = make()
    merge = incremental.get_task("merge")
    assert merge.yield_to_dag_id == "binlog_backfill__shop" and backfill.get_task("merge").yield_to_dag_id is None
    monkeypatch.setattr("airflow_provider_binlog.operators.merge.manifest_paths",
                        lambda manifests: pytest.fail("the merge read its manifests"))
    with pytest.raises(AirflowSkipException, match="merge yields"):
        merge.execute({"ti": _Counts(runs=1)})


def test_an_incremental_dump_yields_to_a_running_backfill(monkeypatch):
    incremental, _ = make()
    dump = incremental.get_task("dump")
    assert dump.yield_to_dag_id == "binlog_backfill__shop"
    counts = _Counts(runs=1)
    with pytest.raises(AirflowSkipException, match="binlog_backfill__shop"):
        dump.execute({"ti": counts})
    assert counts.asked == [("runs", "binlog_backfill__shop", ("running",))]
    called = []
    monkeypatch.setattr("airflow_provider_binlog.operators.dump.BinlogHook.dump",
                        lambda self, **kw: called.append(kw) or {"manifest": "m"})
    counts.runs = 0
    assert dump.execute({"ti": counts})["manifest"] == "m" and len(called) == 1


def test_the_backfill_waits_while_an_incremental_run_is_loading(monkeypatch):
    from airflow_provider_binlog import dags

    _, backfill = make()
    guard = backfill.get_task("wait_for_incremental")
    assert guard.mode == "reschedule" and guard.poke_interval == 30 and guard.timeout == 6 * 3600
    counts = _Counts(runs=1, loading=2)
    assert dags.incremental_loading(counts, "shop") == 2
    assert counts.asked[:2] == [("runs", "binlog_cdc__shop", ("running",)),
                                ("states", "binlog_cdc__shop", ("dump", "merge"))]
    assert {"running", "queued", "scheduled", "up_for_retry", "deferred"} <= set(dags.UNFINISHED_STATES)
    assert not {"success", "failed", "skipped", "upstream_failed"} & set(dags.UNFINISHED_STATES)
    counts = _Counts(runs=0, loading=2)  # no run of the incremental DAG is running: nothing asked
    assert dags.incremental_loading(counts, "shop") == 0 and len(counts.asked) == 1
    counts = _Counts(runs=1, loading=1)
    monkeypatch.setattr("airflow.sdk.get_current_context", lambda: {"ti": counts})
    assert guard.python_callable().is_done is False
    counts.loading = 0
    assert guard.python_callable().is_done is True


@pytest.mark.parametrize("runs, loading", [
    # a run waiting in its sensor (dump and merge without a state): not loading
    ({"r1": ({"dump": None, "merge": None}, "running")}, 0),
    # a run dumping
    ({"r1": ({"dump": "running", "merge": None}, "running")}, 1),
    # a run whose dump has just succeeded, its merge without a state yet: still loading
    ({"r1": ({"dump": "success", "merge": None}, "running")}, 1),
    # a run merging, the one before it done
    ({"r0": ({"dump": "success", "merge": "success"}, "success"),
      "r1": ({"dump": "success", "merge": "running"}, "running")}, 1),
    # a run marked failed with its merge left without a state, the next one in its sensor
    ({"r0": ({"dump": "success", "merge": None}, "failed"),
      "r1": ({"dump": None, "merge": None}, "running")}, 0),
    # both finished (a merge skipped)
    ({"r0": ({"dump": "success", "merge": "success"}, "success"),
      "r1": ({"dump": "success", "merge": "skipped"}, "success")}, 0),
])
def test_the_backfill_counts_running_runs_between_their_dump_and_the_end_of_their_merge(runs, loading):
    from airflow_provider_binlog import dags

    assert dags.incremental_loading(_Counts(runs=1, loading=runs), "shop") == loading


def test_the_assets_register_the_source_for_the_view_without_a_password():
    incremental, _ = make(checkpoint_store_uri="/cp", checkpoint_key="shop_key")
    for asset in incremental.get_task("merge").outlets:
        assert {k: asset.extra.get(k) for k in ("binlog_conn_id", "checkpoint_key", "staging_dir",
                                                "checkpoint_store_uri")} == {
            "binlog_conn_id": "src_conn", "checkpoint_key": "shop_key", "staging_dir": "/staging",
            "checkpoint_store_uri": "/cp"}
    for uri in ("postgresql://u:pw@db/cp", "postgresql://u@db/cp?password=pw"):
        secret, _ = make(tables=["shop.*"], checkpoint_store_uri=uri)
        (asset, _alias) = secret.get_task("merge").outlets
        assert "checkpoint_store_uri" not in asset.extra and asset.extra["checkpoint_key"] == "shop"
