"""Reading the operations the dump derived from schema statements, per table."""
from types import SimpleNamespace

import pytest

from airflow_provider_binlog.merge.batches import Batch
from airflow_provider_binlog.merge.ddl_plan import (column_defaults, column_renames, ddl_ops, insert_defaults,
                                                    moves, reset_records)
from airflow_provider_binlog.merge.errors import MergeJobError, SchemaEvolutionError
from airflow_provider_binlog.schema_history import ColumnDef, SchemaHistory, TableDef
from tests.unit.merge._manifests import ddl, manifest


def batch(m):
    return Batch(m, m.start, m.end)


def work(columns, since=None):
    return SimpleNamespace(schema="s", table="t", since=since,
                           plan=SimpleNamespace(columns=[(c, None) for c in columns]))


ALTER = {"op": "alter", "table": ["s", "t"], "dropped": [], "renamed": [["a", "b"]],
         "added": [{"name": "c", "value": "7"}, {"name": "z", "value": None}]}


def test_operations_come_in_binlog_order(tmp_path):
    m = manifest(tmp_path, 4, 900, ddl=[ddl(500, {"op": "reset", "table": ["s", "t"]}), ddl(200, ALTER)])
    assert [(pos, op.kind) for pos, _, op in ddl_ops(batch(m))] == [((1, 200), "alter"), ((1, 500), "reset")]


def test_a_record_without_operations_is_refused_with_the_remedy(tmp_path):
    record = ddl(200)
    del record["ops"]
    with pytest.raises(MergeJobError, match="older release.*dump that range again"):
        ddl_ops(batch(manifest(tmp_path, 4, 900, ddl=[record])))


def test_an_operation_of_an_unknown_kind_fails_the_batch_naming_it(tmp_path):
    m = manifest(tmp_path, 4, 900, ddl=[ddl(300, {"op": "explode", "table": ["s", "t"]})])
    with pytest.raises(MergeJobError, match=r"at mysql-bin.000001:300: .*manifest.json: unknown schema operation "
                                            r"'explode'.*dump the range again"):
        ddl_ops(batch(m))


def test_resets_per_table_and_refusals_before_anything_is_committed(tmp_path):
    m = manifest(tmp_path, 4, 900, ddl=[ddl(300, {"op": "reset", "table": ["s", "t"]})])
    assert [r["_position"] for r in reset_records(batch(m))["s.t"]] == [(1, 300)]
    refused = manifest(tmp_path / "r", 4, 900, ddl=[ddl(300, {"op": "refuse", "table": ["s", "t"],
                                                              "reason": "x is not captured"})])
    with pytest.raises(SchemaEvolutionError, match="x is not captured.*Load s.t from a new snapshot"):
        reset_records(batch(refused))


def test_defaults_and_renames_after_the_tables_own_checkpoint_only(tmp_path):
    b = batch(manifest(tmp_path, 4, 900, ddl=[ddl(200, ALTER)]))
    assert column_defaults(b, work(["id", "b", "c", "z"])) == {"c": "7"}
    assert column_renames(b, work(["id"])) == [("a", "b")]
    assert column_defaults(b, work(["id", "c"], since=(1, 300))) == {}  # the table is past the ALTER


def test_insert_defaults_come_from_the_history_at_the_batch_end(tmp_path):
    history = SchemaHistory.of([TableDef("s", "t", (
        ColumnDef("id", "int"), ColumnDef("c", "int", default_kind="literal", default="5"),
        ColumnDef("ts", "timestamp", default_kind="expression", default="current_timestamp()")))])
    b = batch(manifest(tmp_path, 4, 900, history=history.to_json()))
    assert insert_defaults(b, work(["id", "c", "ts"])) == {"c": "5"}


def test_insert_defaults_of_columns_masked_in_the_dump_are_the_masked_ones_never_the_raw(tmp_path):
    history = SchemaHistory.of([TableDef("s", "t", (
        ColumnDef("id", "int"), ColumnDef("email", "varchar", default_kind="literal", default="raw@x.io"),
        ColumnDef("note", "varchar", default_kind="literal", default="abcdef")))])
    b = batch(manifest(tmp_path, 4, 900, history=history.to_json()))
    masked = work(["id", "email", "note"])
    masked.entry = {"masked": {"email": "hash", "note": "truncate"}, "omitted_values": {"note": "abc"}}
    assert insert_defaults(b, masked) == {"note": "abc"}


def test_a_batch_that_goes_on_after_a_move_is_refused(tmp_path):
    move = {"op": "move", "from": ["s", "a"], "to": ["s", "b"]}
    ok = batch(manifest(tmp_path, 4, 900, ddl=[ddl(800, move)]))
    assert [(op.source, op.target) for _, _, op in moves(ok)] == [(("s", "a"), ("s", "b"))]
    later = batch(manifest(tmp_path / "l", 4, 900,
                           ddl=[ddl(500, move), ddl(800, {"op": "reset", "table": ["s", "c"]})]))
    with pytest.raises(MergeJobError, match="goes on after a rename between captured tables"):
        moves(later)
