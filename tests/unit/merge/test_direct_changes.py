"""A table's staged changes folded to each key's final state with pyarrow (merge.direct_changes),
for the direct commit; written by the real staging writer, no Spark."""
from decimal import Decimal

from airflow_provider_binlog.codec.events import ABSENT
from airflow_provider_binlog.merge.direct_changes import key_ranges
from airflow_provider_binlog.merge.staged_fold import collapse_staged
from airflow_provider_binlog.merge.key_range_split import split_by_key_range
from tests.unit.merge.test_staged_facts import COLUMNS, staged


def state(changes):
    rows = {r["id"]: (r["a"], r["d"]) for r in changes.rows.to_pylist()}
    return rows, [k["id"] for k in changes.keys.to_pylist()]


def test_each_key_takes_its_last_image_and_every_touched_key_is_listed(tmp_path):
    files = staged(tmp_path, ("insert", [(1, 10, Decimal("1.50")), (2, 20, None), (3, 30, None)]),
                   ("update", [((1, 10, Decimal("1.50")), (1, 11, Decimal("1.50")))]),
                   ("update", [((1, 11, Decimal("1.50")), (1, 12, None))]),
                   ("delete", [(2, 20, None)]),
                   ("delete", [(3, 30, None)]), ("insert", [(3, 33, Decimal("3.25"))]))
    rows, keys = state(collapse_staged(files, ["id"], COLUMNS))
    assert rows == {1: (12, None), 3: (33, Decimal("3.25"))}
    assert keys == [1, 2, 3]  # inserted ones too: a row the table should not hold is replaced


def test_a_key_deleted_last_has_no_row_but_loses_the_one_it_had(tmp_path):
    files = staged(tmp_path, ("update", [((4, 1, None), (4, 2, None))]), ("delete", [(4, 2, None)]))
    assert state(collapse_staged(files, ["id"], COLUMNS)) == ({}, [4])


def test_changes_before_a_reset_or_the_tables_own_position_are_left_out(tmp_path):
    # positions: 4, 104, 204 (see staged)
    files = staged(tmp_path, ("insert", [(1, 1, None)]), ("insert", [(2, 2, None)]), ("insert", [(3, 3, None)]))
    assert state(collapse_staged(files, ["id"], COLUMNS, reset=(1, 104))) == ({3: (3, None)}, [3])
    assert state(collapse_staged(files, ["id"], COLUMNS, since=(1, 104))) == ({2: (2, None), 3: (3, None)}, [2, 3])


def test_a_key_change_is_left_to_spark(tmp_path):
    files = staged(tmp_path, ("update", [((5, 1, None), (7, 1, None))]))
    assert collapse_staged(files, ["id"], COLUMNS) is None


def test_an_image_lacking_a_column_is_left_to_spark(tmp_path):
    files = staged(tmp_path, ("update", [((3, ABSENT, ABSENT), (ABSENT, 4, ABSENT))]))
    assert collapse_staged(files, ["id"], COLUMNS) is None
    files = staged(tmp_path / "b", ("update", [((3, 1, None), (3, 4, ABSENT))]))
    assert collapse_staged(files, ["id"], COLUMNS) is None


def test_a_column_the_files_lack_or_too_many_bytes_are_left_to_spark(tmp_path):
    files = staged(tmp_path, ("insert", [(1, 1, None)]))
    assert collapse_staged(files, ["id"], COLUMNS + ["added_later"]) is None
    assert collapse_staged(files, ["id"], COLUMNS, max_bytes=10) is None
    assert collapse_staged(files, ["id"], COLUMNS) is not None


def test_key_ranges_split_the_touched_keys_evenly_and_cover_them_all(tmp_path):
    files = staged(tmp_path, ("insert", [(k, k, None) for k in range(1, 13)]),
                   ("update", [((5, 5, None), (5, 6, None))]), ("delete", [(12, 12, None)]))
    ranges = key_ranges(files, "id", 3)
    assert ranges == [(None, 5), (5, 9), (9, None)]
    assert key_ranges(files, "id", 1) == [(None, None)]
    assert key_ranges(files, "d", 2) is None  # a DECIMAL key: no range split


def test_the_changes_of_one_key_stay_in_one_range(tmp_path):
    files = staged(tmp_path, ("insert", [(7, 0, None)]),
                   ("update", [((7, i, None), (7, i + 1, None)) for i in range(20)]), ("insert", [(9, 0, None)]))
    assert key_ranges(files, "id", 4) == [(None, None)]  # 21 of 22 changes: no bound splits them


def test_the_folds_of_the_key_range_splits_together_equal_the_whole_fold(tmp_path):
    files = staged(tmp_path, ("insert", [(k, k, None) for k in range(1, 13)]),
                   ("update", [((5, 5, None), (5, 6, Decimal("0.50")))]),
                   ("delete", [(12, 12, None)]), ("delete", [(1, 1, None)]), ("insert", [(1, 100, None)]))
    whole = state(collapse_staged(files, ["id"], COLUMNS))
    spill = tmp_path / "spill"
    spill.mkdir()
    split = split_by_key_range(files, "id", key_ranges(files, "id", 3), str(spill))
    assert [(len(files), n) for files, n in split] == [(1, 5), (1, 5), (1, 6)]
    rows, keys = {}, []
    for part, _ in split:
        part_rows, part_keys = state(collapse_staged(part, ["id"], COLUMNS, max_bytes=None))
        assert not set(part_rows) & set(rows) and not set(part_keys) & set(keys)
        rows.update(part_rows)
        keys += part_keys
    assert (rows, sorted(keys)) == whole
    assert rows[5] == (6, Decimal("0.50")) and 12 not in rows and rows[1] == (100, None)


def test_a_fold_without_a_byte_limit_reads_files_of_any_size(tmp_path):
    files = staged(tmp_path, ("insert", [(k, k, None) for k in range(1, 5)]))
    assert collapse_staged(files, ["id"], COLUMNS, max_bytes=1) is None
    rows, keys = state(collapse_staged(files, ["id"], COLUMNS, max_bytes=None))
    assert sorted(rows) == [1, 2, 3, 4] and keys == [1, 2, 3, 4]


def _random_changes(seed, keys=40, changes=600):
    """Random inserts, updates and deletes of a two-column key in binlog order, each key's
    sequence valid (an insert when absent, an update or delete when present)."""
    import random

    rng = random.Random(seed)
    live, out = {}, []
    for i in range(changes):
        key = (rng.randrange(keys // 4), rng.choice(["a", "b", "c", "d"]))
        before = live.get(key)
        if before is None:
            op, after = "insert", {"k1": key[0], "k2": key[1], "v": rng.randrange(1000), "s": f"s{i}"}
        elif rng.random() < 0.3:
            op, after = "delete", None
        else:
            op, after = "update", {**before, "v": rng.randrange(1000), "s": None if rng.random() < 0.2 else f"u{i}"}
        out.append({"_op": op, "_binlog_seq": 1 + i // 50, "_binlog_pos": 4 + 10 * (i % 50), "_row": i % 3,
                    "_before": before, "_after": after, "_after_absent": []})
        if after is None:
            live.pop(key)
        else:
            live[key] = after
    return out, live


def test_the_fold_reading_narrow_columns_first_equals_the_fold_of_the_whole_images(tmp_path):
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_provider_binlog.merge.direct_changes import fold_changes

    image = pa.struct([("k1", pa.int64()), ("k2", pa.string()), ("v", pa.int64()), ("s", pa.string())])
    schema = pa.schema([("_op", pa.string()), ("_binlog_seq", pa.int64()), ("_binlog_pos", pa.int64()),
                        ("_row", pa.int32()), ("_before", image), ("_after", image),
                        ("_after_absent", pa.list_(pa.string()))])
    for seed in range(5):
        changes, live = _random_changes(seed)
        table = pa.Table.from_pylist(changes, schema)
        shuffled = table.take(pa.array(random.Random(seed).sample(range(len(changes)), len(changes))))
        files = []  # rows out of binlog order, as two staging workers may leave them
        for i, (at, n) in enumerate([(0, 150), (150, 300), (450, 150)]):
            files.append(str(tmp_path / f"{seed}-{i}.parquet"))
            pq.write_table(shuffled.slice(at, n), files[-1], row_group_size=64)
        folded = collapse_staged(files, ["k1", "k2"], ["k1", "k2", "v", "s"], max_bytes=None)
        whole = fold_changes(table, ["k1", "k2"], ["k1", "k2", "v", "s"])
        assert folded.rows.to_pylist() == whole.rows.to_pylist()
        assert folded.keys.to_pylist() == whole.keys.to_pylist()
        assert {(r["k1"], r["k2"]): r for r in folded.rows.to_pylist()} == live  # the source's final rows
        since = (5, 4)  # changes from the fifth transaction group on
        part = table.filter(pa.compute.greater_equal(table.column("_binlog_seq"), 5))
        assert (collapse_staged(files, ["k1", "k2"], ["k1", "k2", "v", "s"], since=since, max_bytes=None).rows
                .to_pylist() == fold_changes(part, ["k1", "k2"], ["k1", "k2", "v", "s"]).rows.to_pylist())
