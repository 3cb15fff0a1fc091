"""A snapshot batch's staged rows streamed as each key's final row (merge.snapshot_fold): the
rows of untouched keys as read, the keys the binlog changed folded with their changes;
written by the real staging writer, no Spark."""
import datetime as dt
from decimal import Decimal

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import ABSENT, Column, EventHeader, RowsEvent, TableMap
from airflow_provider_binlog.merge import snapshot_fold
from airflow_provider_binlog.merge.snapshot_fold import SnapshotFold
from airflow_provider_binlog.staging import StagingWriter
from tests.unit.merge.test_staged_facts import COLUMNS, TM

TM2 = TableMap(2, "s", "u", (Column(0, "a", C.MYSQL_TYPE_LONG, 0, primary_key=True, nullable=False),
                             Column(1, "b", C.MYSQL_TYPE_LONG, 0, primary_key=True, nullable=False),
                             Column(2, "v", C.MYSQL_TYPE_LONG, 0)))
TAKEN = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def staged_snapshot(tmp_path, *steps, table_map=TM, row_group_rows=50_000):
    """The staged files of a snapshot batch of ``table_map`` after ``steps``: ("chunk", rows)
    read by the snapshot, or (kind, rows) binlog changes, in order."""
    writer = StagingWriter(tmp_path / "staging", row_group_rows=row_group_rows)
    pos, index = 4, 0
    for kind, rows in steps:
        if kind == "chunk":
            index += writer.add_snapshot_rows(table_map, rows, binlog_file="mysql-bin.000001", position=pos,
                                              gtid=None, taken_at=TAKEN, first_index=index)
        else:
            event = RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, pos + 100, 0), pos, kind, 1, table_map, 0,
                              tuple(rows))
            writer.add_rows(event, binlog_file="mysql-bin.000001", gtid=None, txn=f"t{pos}")
        pos += 100
    manifest = writer.publish(dump_id="d", start={"file": "mysql-bin.000001", "pos": 4},
                              end={"file": "mysql-bin.000001", "pos": pos}, server={"flavor": "mysql"},
                              extra={"mode": "snapshot"})
    return [str(p) for p in manifest.files(manifest.tables[0])]


def final_rows(fold, key="id"):
    out = {}
    for chunk in fold.rows():
        for row in chunk.to_pylist():
            assert row[key] not in out
            out[row[key]] = row
    return out


def test_a_snapshot_without_changes_streams_every_row_as_read(tmp_path):
    files = staged_snapshot(tmp_path, ("chunk", [(1, 10, Decimal("1.50")), (2, 20, None)]),
                            ("chunk", [(3, 30, None)]))
    fold = SnapshotFold.plan(files, ["id"], COLUMNS, max_change_bytes=1 << 20)
    assert fold.changes is None
    rows = final_rows(fold)
    assert {k: (r["a"], r["d"]) for k, r in rows.items()} == {1: (10, Decimal("1.50")), 2: (20, None), 3: (30, None)}
    assert (fold.streamed, fold.folded, fold.unique) == (3, 0, True)


def test_changes_to_rows_already_read_win_and_untouched_rows_stream(tmp_path):
    files = staged_snapshot(tmp_path, ("chunk", [(1, 10, None), (2, 20, None), (3, 30, None)]),
                            ("update", [((1, 10, None), (1, 11, None))]),
                            ("delete", [(2, 20, None)]),
                            ("chunk", [(4, 40, None)]),
                            ("insert", [(5, 50, None)]),
                            ("update", [((4, 40, None), (4, 44, Decimal("4.40")))]))
    fold = SnapshotFold.plan(files, ["id"], COLUMNS, max_change_bytes=1 << 20)
    rows = final_rows(fold)
    assert {k: (r["a"], r["d"]) for k, r in rows.items()} == {
        1: (11, None), 3: (30, None), 4: (44, Decimal("4.40")), 5: (50, None)}
    assert (fold.streamed, fold.folded, fold.unique) == (1, 3, True)


def test_a_chunk_read_after_a_change_of_its_key_is_the_keys_last_state(tmp_path):
    # the watermark snapshot stages a change of a key not read yet only when the chunk will not
    # see it; whichever comes last in the batch wins, as in the MERGE
    files = staged_snapshot(tmp_path, ("insert", [(7, 1, None)]), ("chunk", [(7, 2, None)]))
    rows = final_rows(SnapshotFold.plan(files, ["id"], COLUMNS, max_change_bytes=1 << 20))
    assert rows[7]["a"] == 2


def test_a_key_given_twice_by_the_snapshot_is_reported_not_unique(tmp_path):
    files = staged_snapshot(tmp_path, ("chunk", [(1, 10, None)]), ("chunk", [(1, 11, None)]))
    fold = SnapshotFold.plan(files, ["id"], COLUMNS, max_change_bytes=1 << 20)
    assert sum(c.num_rows for c in fold.rows()) == 2
    assert fold.unique is False


def test_composite_keys_are_matched_on_every_column(tmp_path):
    files = staged_snapshot(tmp_path, ("chunk", [(1, 1, 10), (1, 2, 20), (2, 1, 30)]),
                            ("update", [((1, 2, 20), (1, 2, 21))]), table_map=TM2)
    fold = SnapshotFold.plan(files, ["a", "b"], ["a", "b", "v"], max_change_bytes=1 << 20)
    rows = sorted((r["a"], r["b"], r["v"]) for c in fold.rows() for r in c.to_pylist())
    assert rows == [(1, 1, 10), (1, 2, 21), (2, 1, 30)]
    assert (fold.streamed, fold.folded, fold.unique) == (2, 1, True)


def test_rows_stream_in_chunks_of_bounded_size(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot_fold, "CHUNK_ROWS", 2)
    files = staged_snapshot(tmp_path, ("chunk", [(i, i, None) for i in range(7)]), row_group_rows=3)
    chunks = list(SnapshotFold.plan(files, ["id"], COLUMNS, max_change_bytes=1 << 20).rows())
    assert max(c.num_rows for c in chunks) <= 2 and sum(c.num_rows for c in chunks) == 7


def test_a_key_change_leaves_the_old_key_gone_and_the_new_key_with_the_image(tmp_path):
    files = staged_snapshot(tmp_path, ("chunk", [(1, 1, None), (2, 2, None), (3, 3, None)]),
                            ("update", [((1, 1, None), (9, 1, None))]),
                            ("update", [((9, 1, None), (2, 7, None))]),  # onto a key read before (UPDATE IGNORE)
                            ("update", [((3, 3, None), (3, 4, None))]))
    rows = final_rows(SnapshotFold.plan(files, ["id"], COLUMNS, max_change_bytes=1 << 20))
    assert {k: r["a"] for k, r in rows.items()} == {2: 7, 3: 4}


def test_changes_that_are_not_simple_or_too_big_are_left_to_spark(tmp_path):
    partial = staged_snapshot(tmp_path / "b", ("chunk", [(1, 1, None)]),
                              ("update", [((1, ABSENT, ABSENT), (ABSENT, 4, ABSENT))]))
    assert SnapshotFold.plan(partial, ["id"], COLUMNS, max_change_bytes=1 << 20) is None
    many = staged_snapshot(tmp_path / "c", ("chunk", [(1, 1, None)]), ("insert", [(i, i, None) for i in range(2, 200)]))
    assert SnapshotFold.plan(many, ["id"], COLUMNS, max_change_bytes=100) is None
    assert SnapshotFold.plan(many, ["id"], COLUMNS, max_change_bytes=1 << 20) is not None
    assert SnapshotFold.plan(many, ["id"], COLUMNS + ["added_later"], max_change_bytes=1 << 20) is None


def test_integer_keys_are_shown_distinct_by_their_ranges_and_a_repeat_or_an_overlap_is_not():
    import pyarrow as pa

    from airflow_provider_binlog.merge.snapshot_fold import UniqueKeys

    def chunk(*keys):
        return pa.table({"id": pa.array(keys, pa.int64())})

    ordered = UniqueKeys(["id"])
    for keys in ((1, 2, 3), (7, 9), (4, 6, 5), (10,), (20, 21)):  # ranges that meet or not, a chunk unsorted
        ordered.add(chunk(*keys))
    assert ordered.distinct() and ordered.ranges == [[1, 10], [20, 21]] and ordered.count == 11
    twice = UniqueKeys(["id"])
    twice.add(chunk(1, 2, 2))
    assert not twice.distinct()
    overlapping = UniqueKeys(["id"])
    overlapping.add(chunk(1, 5))
    overlapping.add(chunk(3))  # distinct, but not shown so without the keys: left to Spark
    assert not overlapping.distinct()


def test_other_keys_are_kept_as_copies_and_counted():
    import pyarrow as pa

    from airflow_provider_binlog.merge.snapshot_fold import UniqueKeys

    keys = UniqueKeys(["a", "b"])
    keys.add(pa.table({"a": [1, 1], "b": ["x", "y"], "v": [0, 0]}))
    keys.add(pa.table({"a": [2], "b": ["x"], "v": [0]}))
    assert keys.distinct() and keys.kept[0].column_names == ["a", "b"]
    keys.add(pa.table({"a": [1], "b": ["y"], "v": [0]}))
    assert not keys.distinct()
