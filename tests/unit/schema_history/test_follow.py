"""Following DDL: the history after each statement, and what it means for the Iceberg tables."""
import pytest

from airflow_provider_binlog.schema_history import (ColumnDef, HistoryFollower, SchemaHistory,
                                                    TableDef)
from airflow_provider_binlog.schema_history.apply import statement_ops
from airflow_provider_binlog.schema_history.ddl import parse_ddl
from airflow_provider_binlog.schema_history.errors import DdlSyntaxError
from airflow_provider_binlog.schema_history.ops import DdlOp


def _staged(ops):
    """The operations as the dump stages them (their JSON, pinned by these tests)."""
    assert all(isinstance(op, DdlOp) for op in ops)
    return [op.to_json() for op in ops]


def _history():
    t = TableDef("s", "t", (ColumnDef("id", "int", nullable=False), ColumnDef("a", "int"),
                            ColumnDef("b", "varchar", charset="utf8mb4", length=10)), ("id",), "utf8mb4")
    return SchemaHistory.of([t], flavor="mariadb", databases={"s": ("latin1", None)})


def _follow(history, sql, captured=lambda s, t: (s, t) == ("s", "t")):
    follower = HistoryFollower(history, captured, lambda schema: schema == "s")
    return _staged(follower.apply(parse_ddl(sql), "s"))


def test_drop_an_int_and_add_an_int_keeps_the_names_apart():
    h = _history()
    _follow(h, "ALTER TABLE t DROP COLUMN a")
    ops = _follow(h, "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7 AFTER id")
    assert h.get("s", "t").column_names == ("id", "c", "b")
    assert ops == [{"op": "alter", "table": ["s", "t"], "dropped": [], "renamed": [],
                    "added": [{"name": "c", "column": h.get("s", "t").columns[1].to_json(), "value": "7"}],
                    "primary_key": ["id"], "columns": [c.to_json() for c in h.get("s", "t").columns]}]
    # the codec sees the names of the position
    assert h("s", "t").column_names == ("id", "c", "b")


def test_implicit_defaults_of_not_null_columns_fill_existing_rows():
    h = _history()
    ops = _follow(h, "ALTER TABLE t ADD COLUMN n INT NOT NULL, ADD COLUMN v VARCHAR(3) NOT NULL, "
                     "ADD COLUMN e ENUM('x','y') NOT NULL, ADD COLUMN z INT, "
                     "ADD COLUMN ts DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP")
    assert [(a["name"], a["value"]) for a in ops[0]["added"]] == \
        [("n", "0"), ("v", ""), ("e", "x"), ("z", None), ("ts", None)]


def test_new_text_columns_take_the_table_charset_then_the_database_one():
    h = _history()
    _follow(h, "ALTER TABLE t ADD COLUMN c VARCHAR(5)")
    assert h.get("s", "t").column("c").charset == "utf8mb4"
    _follow(h, "CREATE TABLE u (x TEXT, y VARBINARY(3), z CHAR(2) CHARACTER SET binary)")
    u = h.get("s", "u")
    assert [(c.data_type, c.charset) for c in u.columns] == \
        [("text", "latin1"), ("varbinary", None), ("binary", None)]


def test_rename_column_and_change_keep_the_primary_key():
    h = _history()
    ops = _follow(h, "ALTER TABLE t CHANGE id key_id BIGINT NOT NULL, RENAME COLUMN b TO bb")
    t = h.get("s", "t")
    assert t.column_names == ("key_id", "a", "bb") and t.primary_key == ("key_id",)
    assert ops[0]["renamed"] == [["id", "key_id"], ["b", "bb"]]


def test_online_schema_change_swap_is_a_change_of_columns_of_the_captured_table():
    h = _history()
    assert _follow(h, "CREATE TABLE `_t_new` LIKE t") == []
    assert _follow(h, "ALTER TABLE `_t_new` ADD COLUMN c INT DEFAULT 7, DROP COLUMN a") == []
    ops = _follow(h, "RENAME TABLE t TO _t_old, _t_new TO t")
    assert [(o["op"], o.get("swap_from"), [a["name"] for a in o["added"]], o["dropped"]) for o in ops] == \
        [("alter", ["s", "_t_new"], ["c"], ["a"])]
    assert ops[0]["added"][0]["value"] == "7"
    assert h.get("s", "t").column_names == ("id", "b", "c")
    assert h.get("s", "_t_old").column_names == ("id", "a", "b")


def test_a_rename_of_an_unrelated_table_onto_a_captured_name_is_refused():
    h = _history()
    _follow(h, "CREATE TABLE other (id INT PRIMARY KEY)")
    ops = _follow(h, "RENAME TABLE t TO t_gone, other TO t")
    assert [(o["op"], o["table"]) for o in ops] == [("refuse", ["s", "t"])]
    assert "renames s.other to the captured table s.t; s.other is not captured" in ops[0]["reason"]


def test_a_captured_table_renamed_away_is_reset():
    h = _history()
    assert _follow(h, "RENAME TABLE t TO t_archive") == [{"op": "reset", "table": ["s", "t"]}]
    assert h.get("s", "t") is None and h.get("s", "t_archive") is not None


def test_drop_truncate_and_replace_reset_captured_tables():
    h = _history()
    assert _follow(h, "TRUNCATE TABLE t") == [{"op": "reset", "table": ["s", "t"]}]
    assert _follow(h, "CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)") == [{"op": "reset", "table": ["s", "t"]}]
    assert _follow(h, "DROP TABLE t") == [{"op": "reset", "table": ["s", "t"]}]
    assert h.get("s", "t") is None


def test_a_statement_about_a_column_that_is_not_there_is_an_error():
    with pytest.raises(DdlSyntaxError, match="drops column 'nope'"):
        _follow(_history(), "ALTER TABLE t DROP COLUMN nope")


def test_the_history_round_trips_through_json():
    h = _history()
    _follow(h, "ALTER TABLE t ADD COLUMN e ENUM('a','b') DEFAULT 'b'")
    again = SchemaHistory.from_json(h.to_json())
    assert again.to_json() == h.to_json()
    assert again.get("s", "t") == h.get("s", "t")


def _statement_ops(stmt, schema, captured):
    return _staged(statement_ops(stmt, schema, captured))


def test_without_a_history_names_alone_give_resets_and_added_defaults():
    captured = lambda s, t: t == "t"  # noqa: E731
    assert _statement_ops(parse_ddl("TRUNCATE t"), "s", captured) == [{"op": "reset", "table": ["s", "t"]}]
    ops = _statement_ops(parse_ddl("ALTER TABLE t ADD COLUMN d INT NOT NULL DEFAULT 9"), "s", captured)
    assert [(a["name"], a["value"]) for a in ops[0]["added"]] == [("d", "9")]
    assert _statement_ops(parse_ddl("RENAME TABLE x TO t"), "s", captured)[0]["op"] == "refuse"


def test_pt_osc_shadow_kept_in_step_by_triggers_is_swapped_in_as_a_column_change():
    h = _history()
    _follow(h, "CREATE TABLE `s`.`_t_new` (id INT NOT NULL, a INT, b VARCHAR(10), PRIMARY KEY (id))")
    _follow(h, "ALTER TABLE `s`.`_t_new` ADD COLUMN flag INT NOT NULL DEFAULT 3")
    for event, body in (("DELETE", "DELETE IGNORE FROM `s`.`_t_new` WHERE `s`.`_t_new`.`id` <=> OLD.`id`"),
                        ("UPDATE", "BEGIN DELETE IGNORE FROM `s`.`_t_new` WHERE !(OLD.`id` <=> NEW.`id`) "
                                   "AND `s`.`_t_new`.`id` <=> OLD.`id`; REPLACE INTO `s`.`_t_new` "
                                   "(`id`, `a`, `b`) VALUES (NEW.`id`, NEW.`a`, NEW.`b`); END"),
                        ("INSERT", "REPLACE INTO `s`.`_t_new` (`id`, `a`, `b`) VALUES (NEW.`id`, NEW.`a`, NEW.`b`)")):
        _follow(h, f"CREATE DEFINER=`root`@`localhost` TRIGGER `pt_osc_s_t_{event.lower()}` AFTER {event} "
                   f"ON `s`.`t` FOR EACH ROW {body}")
    assert h.get("s", "_t_new").like == ("s", "t")
    ops = _follow(h, "RENAME TABLE `s`.`t` TO `s`.`_t_old`, `s`.`_t_new` TO `s`.`t`")
    assert [(o["op"], [a["name"] for a in o["added"]], o["added"][0]["value"]) for o in ops] == \
        [("alter", ["flag"], "3")]
