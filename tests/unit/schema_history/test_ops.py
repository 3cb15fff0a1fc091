"""The typed schema operations: every kind the follower produces round-trips through the JSON
the dump stages, byte for byte; an operation this release does not know is refused."""
import json

import pytest

from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.schema_history import ColumnDef, HistoryFollower, SchemaHistory, TableDef
from airflow_provider_binlog.schema_history.apply import statement_ops
from airflow_provider_binlog.schema_history.ddl import parse_ddl
from airflow_provider_binlog.schema_history.ops import (AddedColumn, AlterOp, DdlOp, DdlOpError, MoveOp,
                                                        RefuseOp, ResetOp)


def _history():
    t = TableDef("s", "t", (ColumnDef("id", "int", nullable=False), ColumnDef("a", "int")), ("id",), "utf8mb4")
    u = TableDef("s", "u", (ColumnDef("id", "int", nullable=False),), ("id",), "utf8mb4")
    return SchemaHistory.of([t, u], flavor="mariadb", databases={"s": ("utf8mb4", None)})


def _produced():
    """One operation of each kind and shape, as the follower and the history-less reading make them."""
    captured = lambda s, t: t in ("t", "u")  # noqa: E731
    h = _history()
    follow = HistoryFollower(h, captured, lambda schema: schema == "s")
    ops = []
    for sql in ("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7, CHANGE a aa BIGINT",  # alter, history
                "CREATE TABLE `_u_new` LIKE u",
                "ALTER TABLE `_u_new` ADD COLUMN d INT DEFAULT 3",
                "RENAME TABLE u TO _u_old, _u_new TO u",                                     # alter, swap_from
                "TRUNCATE TABLE t",                                                          # reset
                "CREATE TABLE other (id INT PRIMARY KEY)",
                "RENAME TABLE t TO t_gone, other TO t",                                      # refuse
                "RENAME TABLE t TO t_x, u TO t"):                                            # reset, move
        ops += follow.apply(parse_ddl(sql), "s")
    ops += statement_ops(parse_ddl("ALTER TABLE t ADD COLUMN e INT, DROP COLUMN a"), "s", captured)
    return ops


def test_every_kind_the_follower_produces_round_trips_byte_for_byte():
    ops = _produced()
    kinds = {type(op) for op in ops}
    assert kinds == {AlterOp, ResetOp, MoveOp, RefuseOp}
    assert any(isinstance(op, AlterOp) and op.swap_from for op in ops)
    assert any(isinstance(op, AlterOp) and op.columns is None for op in ops)  # read without a history
    for op in ops:
        staged = json.dumps(op.to_json(), indent=1, sort_keys=True)  # as the manifest writes it
        again = DdlOp.from_json(json.loads(staged), position="mysql-bin.000001:4")
        assert again == op
        assert json.dumps(again.to_json(), indent=1, sort_keys=True) == staged


def test_the_json_of_each_kind():
    assert ResetOp(("s", "t")).to_json() == {"op": "reset", "table": ["s", "t"]}
    assert MoveOp(("s", "a"), ("s", "b")).to_json() == {"op": "move", "from": ["s", "a"], "to": ["s", "b"]}
    assert RefuseOp(("s", "t"), "why").to_json() == {"op": "refuse", "table": ["s", "t"], "reason": "why"}
    alter = AlterOp(("s", "t"), added=(AddedColumn("c", {"name": "c"}, "7"),), dropped=("a",),
                    renamed=(("b", "bb"),))
    assert alter.to_json() == {"op": "alter", "table": ["s", "t"], "dropped": ["a"], "renamed": [["b", "bb"]],
                               "added": [{"name": "c", "column": {"name": "c"}, "value": "7"}]}
    assert AlterOp(("s", "t"), primary_key=()).to_json()["primary_key"] == []  # empty, not absent


def test_an_unknown_kind_is_refused_with_a_typed_error_naming_it():
    with pytest.raises(DdlOpError) as caught:
        DdlOp.from_json({"op": "explode", "table": ["s", "t"]}, position="mysql-bin.000002:77")
    error = caught.value
    assert isinstance(error, ProviderError) and error.position == "mysql-bin.000002:77"
    assert "unknown schema operation 'explode'" in str(error) and "dump the range again" in str(error)


@pytest.mark.parametrize("data", [{"table": ["s", "t"]}, {"op": "reset"}, {"op": "reset", "table": "s.t"},
                                  {"op": "move", "from": ["s", "a"]}, "reset"])
def test_a_malformed_operation_is_refused(data):
    with pytest.raises(DdlOpError):
        DdlOp.from_json(data)
