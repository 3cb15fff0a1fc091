"""The rows a batch replaces located in Parquet data files as Iceberg position deletes
(merge.position_deletes), with pyarrow alone: columns found by field id, only overlapping row
groups read, positions already deleted left out."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.merge.direct_changes import check_direct_deletes
from airflow_provider_binlog.merge.errors import MergeOptionError
from airflow_provider_binlog.merge.iceberg_arrow import FIELD_ID
from airflow_provider_binlog.merge.position_deletes import (
    DataFileScan,
    KeyColumnsMissing,
    locate,
    position_delete_schema,
)


def field(name, type_, field_id):
    return pa.field(name, type_, metadata={FIELD_ID: str(field_id).encode()})


def data_file(path, ids, names=None, *, key_name="id", key_type=pa.int64(), row_group_size=None):
    schema = pa.schema([field(key_name, key_type, 1), field("name", pa.string(), 2)])
    table = pa.Table.from_arrays([pa.array(ids, key_type), pa.array(names or [f"n{i}" for i in ids])], schema=schema)
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def keys(*ids, type_=pa.int64()):
    return pa.table({"id": pa.array(ids, type_)})


def deletes(table):
    return list(zip(table.column("file_path").to_pylist(), table.column("pos").to_pylist()))


def test_the_positions_of_the_touched_keys_are_found_in_each_file_sorted_by_path_and_position(tmp_path):
    b = data_file(tmp_path / "b.parquet", [7, 3, 9, 1])
    a = data_file(tmp_path / "a.parquet", [2, 4, 6])
    found = locate([DataFileScan(b, 4), DataFileScan(a, 3)], keys(1, 9, 4, 100), [1], str)
    assert deletes(found) == [(a, 1), (b, 2), (b, 3)]
    assert found.schema == position_delete_schema()
    # the reserved field ids of a position delete file (Iceberg spec)
    assert [f.metadata[FIELD_ID] for f in found.schema] == [b"2147483546", b"2147483545"]


def test_positions_an_earlier_position_delete_dropped_are_not_deleted_again(tmp_path):
    data = data_file(tmp_path / "d.parquet", [1, 2, 3, 1])  # key 1 deleted at 0, inserted again at 3
    earlier = tmp_path / "pos.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([data, "/elsewhere.parquet"]), pa.array([0, 2], pa.int64())],
                                        schema=position_delete_schema()), earlier)
    found = locate([DataFileScan(data, 4, (str(earlier),))], keys(1, 3), [1], str)
    assert deletes(found) == [(data, 2), (data, 3)]


def test_a_renamed_key_column_is_found_by_its_field_id_and_a_narrower_type_is_widened(tmp_path):
    data = data_file(tmp_path / "old.parquet", [5, 6], key_name="old_id", key_type=pa.int32())
    found = locate([DataFileScan(data, 2)], keys(6), [1], str)
    assert deletes(found) == [(data, 1)]


def test_a_file_without_the_key_columns_field_id_is_refused_so_that_spark_merges_the_table(tmp_path):
    data = data_file(tmp_path / "x.parquet", [5, 6])
    with pytest.raises(KeyColumnsMissing, match="field id 99"):
        locate([DataFileScan(data, 2)], keys(5), [99], str)


def test_composite_keys_match_on_every_column(tmp_path):
    path = tmp_path / "c.parquet"
    schema = pa.schema([field("a", pa.int32(), 1), field("b", pa.string(), 2), field("v", pa.int32(), 3)])
    pq.write_table(pa.Table.from_arrays([pa.array([1, 1, 2, 2], pa.int32()), pa.array(["x", "y", "x", "y"]),
                                         pa.array([0, 0, 0, 0], pa.int32())], schema=schema), path)
    wanted = pa.table({"a": pa.array([2, 1], pa.int32()), "b": pa.array(["x", "y"])})
    assert deletes(locate([DataFileScan(str(path), 4)], wanted, [1, 2], str)) == [(str(path), 1), (str(path), 2)]


def test_only_row_groups_whose_statistics_overlap_the_keys_are_read_and_positions_count_across_groups(
        tmp_path, monkeypatch):
    data = data_file(tmp_path / "g.parquet", list(range(100)), row_group_size=10)
    read = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, i, *a, **k: read.append(i) or real(self, i, *a, **k))
    found = locate([DataFileScan(data, 100)], keys(42, 47), [1], str)
    assert deletes(found) == [(data, 42), (data, 47)]
    assert read == [4]


def test_text_keys_prune_row_groups_too_and_other_types_read_every_group(tmp_path, monkeypatch):
    data = data_file(tmp_path / "t.parquet", [f"k{i:03}" for i in range(30)], key_type=pa.string(), row_group_size=10)
    read = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, i, *a, **k: read.append(i) or real(self, i, *a, **k))
    assert deletes(locate([DataFileScan(data, 30)], keys("k025", type_=pa.string()), [1], str)) == [(data, 25)]
    assert read == [2]


def test_the_way_of_deleting_is_checked_and_the_error_names_both():
    assert check_direct_deletes("position") == "position"
    assert check_direct_deletes("equality") == "equality"
    with pytest.raises(MergeOptionError, match="position, equality"):
        check_direct_deletes("positional")
    with pytest.raises(ValueError):
        check_direct_deletes(None)


def test_a_file_in_key_order_is_searched_without_a_hash_lookup_and_finds_the_same_rows(tmp_path, monkeypatch):
    import random

    import pyarrow.compute as pc

    rng = random.Random(7)
    ordered = sorted(rng.sample(range(10_000), 3_000))
    shuffled = rng.sample(ordered, len(ordered))
    wanted = keys(*rng.sample(range(10_000), 800))
    by_hash = locate([DataFileScan(data_file(tmp_path / "s.parquet", shuffled, row_group_size=500), 3_000)],
                     wanted, [1], str)
    expected = sorted(shuffled.index(k) for k in wanted.column("id").to_pylist() if k in set(shuffled))
    assert by_hash.column("pos").to_pylist() == expected

    sorted_file = data_file(tmp_path / "o.parquet", ordered, row_group_size=500)
    monkeypatch.setattr(pc, "is_in", lambda *a, **k: pytest.fail("a hash lookup of a file in key order"))
    found = locate([DataFileScan(sorted_file, 3_000)], wanted, [1], str)
    assert found.column("pos").to_pylist() == sorted(ordered.index(k) for k in wanted.column("id").to_pylist()
                                                     if k in set(ordered))
    assert len(found) > 100
