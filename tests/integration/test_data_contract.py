"""Data-contract options of merged tables in the merge job: change columns, soft deletes and
the change log of a keyed table, on staged batches (the end-to-end DAG runs are in
tests/e2e/test_data_contract_e2e.py)."""
from __future__ import annotations

import datetime as dt
import json

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.checkpoints import FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.codec.events import ABSENT  # noqa: E402
from airflow_provider_binlog.merge.contract import ContractError, DataContract  # noqa: E402
from airflow_provider_binlog.merge.errors import MergeJobError  # noqa: E402
from airflow_provider_binlog.merge.spark import engine as merge_engine  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from tests.merging import read_table_properties  # noqa: E402
from tests.integration.test_merge_job import Binlog, col, table_map  # noqa: E402

UTC = dt.timezone.utc
T0 = 1_700_000_000  # the synthetic binlog's first event time; each event is a second later
SOFT = DataContract.parse({"default": {"change_columns": True, "soft_delete": True}})


def keyed(name: str, table_id: int = 1):
    return table_map("s", name, [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
                                 col(1, "a", C.MYSQL_TYPE_LONG),
                                 col(2, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True)], table_id=table_id)


def rows_by_id(spark, name: str) -> dict:
    return {r["id"]: r.asDict() for r in spark.table(name).collect()}


def at(seconds: int) -> dt.datetime:
    """An event's commit time as Spark returns it (a naive local time of the session's zone, UTC)."""
    return dt.datetime.fromtimestamp(T0 + seconds, UTC).replace(tzinfo=None)


def test_change_columns_record_each_rows_last_change_and_soft_deletes_keep_deleted_rows(spark, tmp_path):
    tm = keyed("soft")
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 10, "x"), (2, 20, "y"), (3, 30, "z")])          # pos 4, t0
    first = log.publish()
    log.begin()
    log.rows(tm, "update", [((1, 10, "x"), (1, 11, "x"))])                      # pos 104, t1
    log.rows(tm, "delete", [(2, 20, "y")])                                      # pos 204, t2
    log.rows(tm, "update", [((3, 30, "z"), (4, 30, "z"))])                      # pos 304, t3: key 3 -> 4
    second = log.publish()
    apply_manifests(spark, [first, second], MergeOptions(namespace="dc_soft", data_contract=SOFT))
    name = "lake.dc_soft.s__soft"
    got = rows_by_id(spark, name)
    assert sorted(got) == [1, 2, 3, 4]  # deleted rows stay
    assert {k: (r["a"], r["_cdc_op"], r["_cdc_deleted"], r["_cdc_binlog_pos"]) for k, r in got.items()} == {
        1: (11, "update", False, 104), 2: (20, "delete", True, 204),
        3: (30, "delete", True, 304), 4: (30, "insert", False, 304)}
    assert got[2]["_cdc_deleted_at"] == at(2) and got[2]["_cdc_commit_ts"] == at(2)
    assert got[1]["_cdc_deleted_at"] is None and got[1]["_cdc_commit_ts"] == at(1)
    assert {r["_cdc_batch_id"] for r in got.values()} == {second.dump_id}
    assert {r["_cdc_binlog_file"] for r in got.values()} == {"mysql-bin.000001"}
    assert got[4]["_cdc_gtid"] is None  # no GTID in this binlog

    log.begin()
    log.rows(tm, "insert", [(2, None, "back")])                                 # pos 404: revives key 2
    log.rows(tm, "update", [((4, ABSENT, ABSENT), (ABSENT, 31, ABSENT))])       # MINIMAL: keeps b
    third = log.publish()
    apply_manifests(spark, [third], MergeOptions(namespace="dc_soft", data_contract=SOFT))
    got = rows_by_id(spark, name)
    assert (got[2]["a"], got[2]["b"], got[2]["_cdc_op"], got[2]["_cdc_deleted"], got[2]["_cdc_deleted_at"]) == \
        (None, "back", "insert", False, None)
    assert (got[4]["a"], got[4]["b"], got[4]["_cdc_op"]) == (31, "z", "update")
    assert got[1]["_cdc_batch_id"] == second.dump_id  # untouched rows keep their last change
    assert got[2]["_cdc_batch_id"] == third.dump_id
    props = read_table_properties(spark, name)
    assert json.loads(props["binlog.contract-columns"]) == sorted(
        ["_cdc_op", "_cdc_commit_ts", "_cdc_binlog_file", "_cdc_binlog_pos", "_cdc_gtid", "_cdc_batch_id",
         "_cdc_deleted", "_cdc_deleted_at"])


def test_change_columns_on_the_first_load_of_a_table_are_written_by_its_append(spark, tmp_path):
    tm = keyed("fresh")
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 1, "a"), (2, 2, "b")])
    log.rows(tm, "delete", [(2, 2, "b")])
    log.rows(tm, "update", [((1, 1, "a"), (1, 5, "a"))])
    manifest = log.publish()
    contract = DataContract.parse({"default": {"change_columns": {"prefix": "meta_"}, "soft_delete": True}})
    apply_manifests(spark, [manifest], MergeOptions(namespace="dc_fresh", data_contract=contract))
    got = rows_by_id(spark, "lake.dc_fresh.s__fresh")
    # a key inserted and deleted within the first batch never reaches the table
    assert list(got) == [1]
    assert (got[1]["a"], got[1]["meta_op"], got[1]["meta_binlog_pos"], got[1]["_cdc_deleted"]) == \
        (5, "update", 204, False)


def test_an_option_turned_on_later_adds_its_columns_and_turned_off_keeps_them(spark, tmp_path):
    tm = keyed("later")
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 1, "a"), (2, 2, "b")])
    first = log.publish()
    apply_manifests(spark, [first], MergeOptions(namespace="dc_later"))
    name = "lake.dc_later.s__later"
    assert spark.table(name).columns == ["id", "a", "b"]
    log.begin()
    log.rows(tm, "update", [((1, 1, "a"), (1, 9, "a"))])
    second = log.publish()
    contract = DataContract.parse({"tables": {"s.later": {"change_columns": {"names": {"op": "op"},
                                                                             "prefix": "c_"}}}})
    apply_manifests(spark, [second], MergeOptions(namespace="dc_later", data_contract=contract))
    got = rows_by_id(spark, name)
    assert spark.table(name).columns == ["id", "a", "b", "op", "c_commit_ts", "c_binlog_file", "c_binlog_pos",
                                         "c_gtid", "c_batch_id"]
    assert (got[1]["op"], got[2]["op"]) == ("update", None)  # rows not changed since have none
    log.begin()
    log.rows(tm, "delete", [(1, 9, "a")])
    third = log.publish()
    apply_manifests(spark, [third], MergeOptions(namespace="dc_later"))  # the option is off again
    assert "op" in spark.table(name).columns  # the columns stay, no longer maintained
    assert sorted(rows_by_id(spark, name)) == [2]  # hard delete again


def test_contract_columns_clashing_with_the_source_are_refused_before_any_commit(spark, tmp_path):
    tm = table_map("s", "clash", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                  col(1, "_cdc_op", C.MYSQL_TYPE_LONG)])
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 1)])
    manifest = log.publish()
    with pytest.raises(ContractError, match=r"s\.clash: column\(s\) _cdc_op .* clash"):
        apply_manifests(spark, [manifest], MergeOptions(namespace="dc_clash", data_contract=SOFT))
    assert not spark.catalog.tableExists("lake.dc_clash.s__clash")


def test_a_keyed_tables_change_log_holds_every_change_once_even_after_a_failed_run(spark, tmp_path, monkeypatch):
    tm = keyed("logged")
    log, store = Binlog(tmp_path), FileCheckpointStore(tmp_path / "store")
    log.begin()
    log.rows(tm, "insert", [(1, 1, "a"), (2, 2, "b")])
    log.rows(tm, "update", [((1, 1, "a"), (1, 3, "a"))])
    log.rows(tm, "delete", [(2, 2, "b")])
    manifest = log.publish()
    contract = DataContract.parse({"tables": {"s.log*": {"change_log": True}}})

    def killed(*args, **kwargs):  # the change log's commit fails after the merged table's
        raise RuntimeError("killed")

    with monkeypatch.context() as m:
        m.setattr(merge_engine, "apply_changelog_table", killed)
        with pytest.raises(RuntimeError, match="killed"):
            apply_manifests(spark, [manifest], MergeOptions(namespace="dc_log", checkpoint_store=store.root,
                                                            checkpoint_key="log", data_contract=contract,
                                                            parallel_tables=1))
    assert store.load("log") is None
    assert not spark.catalog.tableExists("lake.dc_log.s__logged__changes") or \
        spark.table("lake.dc_log.s__logged__changes").count() == 0
    result = apply_manifests(spark, [manifest], MergeOptions(namespace="dc_log", checkpoint_store=store.root,
                                                             checkpoint_key="log", data_contract=contract))
    assert {t["table"]: t["status"] for t in result["batches"][0]["tables"]} == {
        "lake.dc_log.s__logged": "already-applied", "lake.dc_log.s__logged__changes": "committed"}
    changes = spark.sql("SELECT _op, _binlog_pos, _row, id, a FROM lake.dc_log.s__logged__changes "
                        "ORDER BY _binlog_seq, _binlog_pos, _row").collect()
    assert [tuple(r) for r in changes] == [("insert", 4, 0, 1, 1), ("insert", 4, 1, 2, 2),
                                           ("update", 104, 0, 1, 3), ("delete", 204, 0, 2, 2)]
    assert {k: r["a"] for k, r in rows_by_id(spark, "lake.dc_log.s__logged").items()} == {1: 3}
    again = apply_manifests(spark, [manifest], MergeOptions(namespace="dc_log", checkpoint_store=store.root,
                                                            checkpoint_key="log", data_contract=contract))
    assert again["batches"][0]["status"] == "already-applied"
    assert spark.table("lake.dc_log.s__logged__changes").count() == 4


def test_a_change_log_suffix_naming_another_captured_table_is_refused(spark, tmp_path):
    # the default suffix cannot collide ("__" in a source name is escaped); another one can
    a, b = keyed("t"), keyed("t_changes", table_id=2)
    log = Binlog(tmp_path).begin()
    log.rows(a, "insert", [(1, 1, "a")])
    log.rows(b, "insert", [(1, 1, "a")])
    manifest = log.publish()
    with pytest.raises(MergeJobError, match="the change log of s.t and the table s.t_changes map to "
                                            "the same table s__t_changes; give the change log another suffix"):
        apply_manifests(spark, [manifest], MergeOptions(namespace="dc_same",
                                                        data_contract=DataContract.parse(
            {"default": {"change_log": {"suffix": "_changes"}}})))
    assert not spark.catalog.tableExists("lake.dc_same.s__t")
