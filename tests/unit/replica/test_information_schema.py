"""What the information_schema reader does without a server: parsing ENUM/SET labels, the
rows it returns, the queries it skips. The live tests cover the SQL."""
from __future__ import annotations

from airflow_provider_binlog.replica import information_schema as info


class _Cursor:
    def __init__(self, rows):
        self.rows, self.executed = rows, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.executed.append((sql, args))

    def fetchall(self):
        return self.rows


class _Conn:
    def __init__(self, rows=()):
        self.cur = _Cursor(list(rows))

    def cursor(self):
        return self.cur


def test_enum_labels_undouble_quotes_and_keep_commas_and_parentheses():
    assert info.enum_labels("enum('a','it''s','x,y','(z)')") == ("a", "it's", "x,y", "(z)")
    assert info.enum_labels("set('one','two')") == ("one", "two")
    assert info.enum_labels("enum('')") == ("",)


def test_table_columns_are_named_rows():
    row = ("s", "t", "id", "int", "int(10) unsigned", None, None, "PRI", "NO", None, 10, 0, None, None,
           "auto_increment")
    conn = _Conn([row])
    (col,) = info.table_columns(conn, "s", "t")
    assert col.name == "id" and col.column_key == "PRI" and col.table_collation is None
    assert conn.cur.executed[0][1] == ("s", "t")


def test_no_databases_asks_nothing():
    conn = _Conn()
    assert info.base_table_columns(conn, []) == [] and info.primary_key_columns(conn, []) == {}
    assert conn.cur.executed == []


def test_keys_are_grouped_in_order():
    conn = _Conn([("s", "t", "a"), ("s", "t", "b"), ("s", "u", "c")])
    assert info.primary_key_columns(conn, ["s"]) == {("s", "t"): ["a", "b"], ("s", "u"): ["c"]}
    conn = _Conn([("PRIMARY", "a"), ("uk", "b"), ("uk", "c")])
    assert info.unique_indexes(conn, "s", "t") == {"PRIMARY": ["a"], "uk": ["b", "c"]}


def test_list_tables_and_estimates_filter_what_was_asked():
    from airflow_provider_binlog.common.tables import TableFilter
    conn = _Conn([("mysql", "user"), ("shop", "a"), ("shop", "b")])
    assert info.list_tables(conn, TableFilter(["shop.a"])) == [("shop", "a")]
    conn = _Conn([("shop", "a", 5), ("shop", "b", None), ("x", "y", 1)])
    assert info.estimated_rows(conn, [("shop", "a"), ("shop", "b")]) == {"shop.a": 5, "shop.b": 0}
