"""The watermark snapshot's decision for a committed row change, bare (no follower, no server):
replayed on the chunk being read when its key lies in the chunk's range, staged when its key lies
in a range read already, dropped when its key is read later."""
from __future__ import annotations

import pyarrow as pa

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import ABSENT, Column, TableMap
from airflow_provider_binlog.capture.watermark.chunks import Chunk, Table, apply_rows_event

TM = TableMap(1, "s", "t", (Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True),
                            Column(1, "v", C.MYSQL_TYPE_LONG, 0)), primary_key=(0,))
AT = ("b.000001", 500)


def chunk(done_upto=(10,), after=(10,), upto=(20,), rows=None):
    """Keys up to ``done_upto`` read already; the chunk ``(after, upto]`` being read."""
    table = Table(TM, [0], True, done_upto=done_upto)
    return Chunk(table, after, upto, dict(rows or {}))


def test_a_change_of_a_key_read_in_the_open_chunk_is_replayed_into_it_not_staged():
    c = chunk(rows={(12,): (12, 1)})
    outcome = apply_rows_event(c.table, c, "update", [((12, 1), (12, 2))], AT)
    assert c.rows == {(12,): (12, 2)}
    assert outcome.staged == [] and outcome.replayed == 1


def test_an_insert_and_a_delete_in_the_chunks_range_are_replayed_whether_the_read_saw_them_or_not():
    c = chunk(rows={(12,): (12, 1), (15,): (15, 1)})
    apply_rows_event(c.table, c, "insert", [(13, 3), (15, 1)], AT)  # 15: already seen by the read
    apply_rows_event(c.table, c, "delete", [(12, 1), (18, 0)], AT)  # 18: never seen by the read
    assert c.rows == {(13,): (13, 3), (15,): (15, 1)}


def test_a_change_beyond_the_chunks_range_is_dropped_it_is_read_later():
    c = chunk(rows={(12,): (12, 1)})
    outcome = apply_rows_event(c.table, c, "insert", [(25, 5)], AT)
    assert outcome.staged == [] and outcome.replayed == 0
    assert c.rows == {(12,): (12, 1)}


def test_a_change_of_a_key_read_already_is_staged_as_it_is_and_leaves_the_chunk_alone():
    c = chunk(rows={(12,): (12, 1)})
    outcome = apply_rows_event(c.table, c, "update", [((3, 0), (3, 9))], AT)
    assert outcome.staged == [(0, "update", ((3, 0), (3, 9)))] and outcome.replayed == 0
    assert c.rows == {(12,): (12, 1)}


def test_a_key_moved_from_a_range_read_into_the_chunk_stages_the_delete_and_replays_the_new_row():
    c = chunk()
    outcome = apply_rows_event(c.table, c, "update", [((4, 0), (14, 0))], AT)
    assert outcome.staged == [(0, "delete", (4, 0))]
    assert c.rows == {(14,): (14, 0)} and outcome.replayed == 1


def test_the_last_chunk_has_no_upper_bound_and_a_finished_table_stages_every_change():
    c = chunk(upto=None)
    apply_rows_event(c.table, c, "insert", [(1000, 1)], AT)
    assert c.rows == {(1000,): (1000, 1)}
    done = Table(TM, [0], True, finished=True)
    assert apply_rows_event(done, None, "insert", [(1000, 1)], AT).staged == [(0, "insert", (1000, 1))]


def test_a_chunk_read_into_arrow_stays_in_arrow_until_a_change_concerns_it():
    arrays = [pa.array([12], pa.int32()), pa.array([1], pa.int32())]
    c = chunk()
    c.rows, c.arrays = {}, arrays
    apply_rows_event(c.table, c, "insert", [(25, 5)], AT)
    assert c.arrays is arrays
    apply_rows_event(c.table, c, "update", [((12, 1), (12, 7))], AT)
    assert c.arrays is None and c.rows == {(12,): (12, 7)}


def test_a_partial_image_of_a_row_the_chunk_does_not_hold_is_kept_as_unknown():
    c = chunk()
    apply_rows_event(c.table, c, "update", [((13, ABSENT), (ABSENT, 6))], AT)
    assert c.rows == {(13,): None}


def test_a_table_read_in_one_transaction_stages_the_changes_from_its_read_on_and_replays_none():
    table = Table(TM, [], False, consistent=True, read_from=("b.000001", 500))
    assert apply_rows_event(table, None, "insert", [(1, 1)], ("b.000001", 400)).staged == []
    assert apply_rows_event(table, None, "insert", [(1, 1)], ("b.000001", 500)).staged == [(0, "insert", (1, 1))]
    not_read = Table(TM, [], False, consistent=True)
    assert apply_rows_event(not_read, None, "insert", [(1, 1)], ("b.000002", 4)).staged == []
