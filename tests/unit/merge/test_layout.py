"""Table layouts: partition fields with Iceberg's transforms, sort fields, properties, for all
tables and per table, checked before anything is created."""
import pytest

from airflow_provider_binlog.merge.errors import MergeJobError
from airflow_provider_binlog.merge.layout import LayoutError, TableLayout, TableLayouts, partition_field, sort_field


@pytest.mark.parametrize("text, sql, column", [
    ("id", "`id`", "id"),
    ("`order date`", "`order date`", "order date"),
    ("bucket(16, id)", "bucket(16, `id`)", "id"),
    ("TRUNCATE( 4 ,code)", "truncate(4, `code`)", "code"),
    ("days(created_at)", "days(`created_at`)", "created_at"),
    ("Hours(ts)", "hours(`ts`)", "ts"),
])
def test_partition_fields_are_columns_or_iceberg_transforms(text, sql, column):
    assert partition_field(text) == (sql, column)


@pytest.mark.parametrize("bad", ["bucket(id)", "days(a, b)", "id; DROP TABLE x", "weeks(ts)", "bucket(0, id)", ""])
def test_other_partition_fields_are_refused_with_the_forms_that_exist(bad):
    with pytest.raises(LayoutError, match="bucket|width"):
        partition_field(bad)


def test_sort_fields_take_a_direction_and_a_nulls_order():
    assert sort_field("at desc nulls first") == ("`at` DESC NULLS FIRST", "at")
    assert sort_field("id") == ("`id`", "id")
    with pytest.raises(LayoutError, match="sort field"):
        sort_field("id sideways")


def test_a_table_takes_its_own_keys_and_the_default_for_the_others():
    layouts = TableLayouts.parse({
        "default": {"partition_by": ["bucket(8, id)"], "properties": {"a": "1", "b": "1"}},
        "tables": {"shop.orders": {"sort_by": ["at DESC"], "properties": {"b": "2"}},
                   "shop.log_*": {"partition_by": []}}})
    orders = layouts.for_table("shop", "orders")
    assert orders == TableLayout(("bucket(8, id)",), ("at DESC",), {"a": "1", "b": "2"})
    assert layouts.for_table("shop", "log_2024").partition_by == ()          # a pattern, emptied
    assert layouts.for_table("crm", "accounts") == layouts.default
    assert TableLayouts.parse(layouts.to_json()) == layouts
    with_props = layouts.with_properties({"a": "0", "c": "3"})                # --table-property
    assert with_props.for_table("crm", "x").properties == {"a": "1", "b": "1", "c": "3"}


def test_columns_are_checked_when_the_table_is_created():
    layout = TableLayout(partition_by=("days(at)",), sort_by=("id",))
    assert layout.partition_sql({"id", "at"}, "shop.t") == ["days(`at`)"]
    with pytest.raises(LayoutError, match=r"shop.t: partition field 'days\(at\)' names no column"):
        layout.partition_sql({"id"}, "shop.t")
    with pytest.raises(LayoutError, match="shop.t: sort field 'id' names no column"):
        TableLayout(sort_by=("id",)).sort_sql({"at"}, "shop.t")


@pytest.mark.parametrize("bad, message", [
    ("{", "not JSON"),
    ({"tables": {"orders": {}}}, "not schema.table"),
    ({"default": {"partition": ["id"]}}, "unknown key"),
    ({"other": {}}, "'default' and/or 'tables'"),
    ({"tables": {"s.t": {"properties": ["x"]}}}, "properties must be an object"),
])
def test_bad_layouts_are_refused_before_anything_runs(bad, message):
    with pytest.raises(LayoutError, match=message) as err:
        TableLayouts.parse(bad)
    assert isinstance(err.value, MergeJobError) and isinstance(err.value, ValueError)
