"""Data-contract options parsed without Spark: defaults, per-table overrides, refusals."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.merge.contract import ContractError, DataContract, TableContract


def test_true_gives_the_cdc_prefixed_columns_in_a_fixed_order():
    c = TableContract.parse({"change_columns": True, "soft_delete": True})
    assert c.extra_columns() == [
        ("_cdc_op", "string"), ("_cdc_commit_ts", "timestamp"), ("_cdc_binlog_file", "string"),
        ("_cdc_binlog_pos", "bigint"), ("_cdc_gtid", "string"), ("_cdc_batch_id", "string"),
        ("_cdc_deleted", "boolean"), ("_cdc_deleted_at", "timestamp")]
    assert c.change_log is None


def test_a_prefix_and_single_names_rename_the_columns():
    c = TableContract.parse({"change_columns": {"prefix": "meta_", "names": {"op": "operation"}},
                             "soft_delete": {"names": {"flag": "is_deleted"}}, "change_log": {"suffix": "_hist"}})
    assert [n for n, _ in c.extra_columns()] == [
        "operation", "meta_commit_ts", "meta_binlog_file", "meta_binlog_pos", "meta_gtid", "meta_batch_id",
        "is_deleted", "_cdc_deleted_at"]
    assert c.change_log == "_hist"


def test_per_table_options_override_the_default_key_by_key_exact_names_first():
    contract = DataContract.parse({"default": {"change_columns": True, "soft_delete": True},
                                   "tables": {"shop.audit_*": {"soft_delete": False},
                                              "shop.audit_log": {"change_log": True}}})
    exact = contract.for_table("shop", "audit_log")
    assert exact.soft_delete is not None and exact.change_log == "__changes"  # the pattern is not used
    pattern = contract.for_table("shop", "audit_2024")
    assert pattern.soft_delete is None and pattern.change_columns is not None
    assert contract.for_table("other", "t") == contract.default
    assert DataContract.parse(contract.to_json()) == contract


@pytest.mark.parametrize("value, message", [
    ({"default": {"soft_deletes": True}},
     "unknown key\\(s\\) soft_deletes; known: change_columns, change_log, soft_delete"),
    ({"default": {"change_columns": {"names": {"opp": "x"}}}}, "unknown column key\\(s\\) opp"),
    ({"default": {"change_columns": {"prefix": "1x_"}}}, "column name '1x_op' is not letters"),
    ({"default": {"change_columns": {"names": {"op": "same"}}, "soft_delete": {"names": {"flag": "same"}}}},
     "column name\\(s\\) same given twice"),
    ({"default": {"change_log": {"suffix": "a b"}}}, "suffix 'a b' is not letters"),
    ({"tables": {"orders": {}}}, "key 'orders' is not schema.table"),
    ("{nope", "not JSON"),
    ({"defaults": {}}, "an object with 'default' and/or 'tables'"),
])
def test_bad_options_are_refused_with_what_is_wrong(value, message):
    with pytest.raises(ContractError, match=message):
        DataContract.parse(value)


def test_columns_clashing_with_the_source_table_are_named():
    c = TableContract.parse({"soft_delete": True})
    c.check_columns(["id", "name"], "shop.t")
    with pytest.raises(ContractError, match="shop.t: column\\(s\\) _cdc_deleted of the data-contract"):
        c.check_columns(["id", "_CDC_DELETED"], "shop.t")


def test_no_options_add_nothing():
    assert DataContract.parse(None).for_table("a", "b").extra_columns() == []
    assert DataContract.parse("").default == TableContract()
