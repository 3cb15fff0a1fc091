"""The watermark snapshot's decisions without a server: a change read from the binlog is replayed
on the chunk being read, staged when its key was read already, dropped when its key is read
later; a key change keeps only the half that concerns keys read."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import ABSENT, Column, EventHeader, RowsEvent, TableMap
from airflow_provider_binlog.capture.snapshot import SnapshotError
from airflow_provider_binlog.capture.watermark.chunks import Chunk, Table
from airflow_provider_binlog.capture.watermark.follower import Follower

TM = TableMap(1, "s", "t", (Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True),
                            Column(1, "v", C.MYSQL_TYPE_LONG, 0)), primary_key=(0,))


class Writer:
    def __init__(self):
        self.staged = []

    def add_decoded_rows(self, tm, kind, rows, *, first_index, position, **kw):
        self.staged += [(position, first_index + i, kind, row) for i, row in enumerate(rows)]


def setup(done_upto=None, chunk=(None, None)):
    table = Table(TM, [0], True, done_upto=done_upto)
    writer = Writer()
    follower = Follower(lambda: None, {("s", "t"): table}, None, None, writer, ("b.000001", 4))
    current = Chunk(table, chunk[0], chunk[1], {})
    return table, writer, follower, current


def rows_event(kind, rows, pos=500):
    return RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, pos + 100, 0), pos, kind, 1, TM, 0, tuple(rows))


def test_changes_are_replayed_in_the_chunk_staged_when_read_and_dropped_when_read_later():
    table, writer, follower, chunk = setup(done_upto=(10,), chunk=((10,), (20,)))
    chunk.rows = {(12,): (12, 1), (15,): (15, 1)}
    follower._rows("b.000001", 500, rows_event("insert", [(5, 5), (13, 13), (25, 25)]), table, chunk)
    follower._rows("b.000001", 600, rows_event("update", [((12, 1), (12, 2)), ((3, 0), (3, 9))]), table, chunk)
    follower._rows("b.000001", 700, rows_event("delete", [(15, 1), (30, 0)]), table, chunk)
    assert chunk.rows == {(12,): (12, 2), (13,): (13, 13)}
    assert writer.staged == [(500, 0, "insert", (5, 5)), (600, 1, "update", ((3, 0), (3, 9)))]


def test_a_key_change_keeps_the_half_that_concerns_keys_read():
    table, writer, follower, chunk = setup(done_upto=(10,), chunk=((10,), (20,)))
    chunk.rows = {(12,): (12, 1)}
    follower._rows("b.000001", 500, rows_event("update", [
        ((4, 0), (40, 0)),     # read -> later: the delete of 4
        ((50, 7), (6, 7)),     # later -> read: the insert of 6
        ((12, 1), (8, 1)),     # chunk -> read: out of the chunk, the insert of 8
        ((45, 3), (14, 3)),    # later -> chunk: into the chunk only
        ((2, 2), (3, 2)),      # read -> read: the update as it is
    ]), table, chunk)
    assert chunk.rows == {(14,): (14, 3)}
    assert writer.staged == [(500, 0, "delete", (4, 0)), (500, 1, "insert", (6, 7)), (500, 2, "insert", (8, 1)),
                             (500, 4, "update", ((2, 2), (3, 2)))]


def test_partial_images_complete_the_chunk_row_and_refuse_what_cannot_be_known():
    table, writer, follower, chunk = setup(chunk=(None, (20,)))
    chunk.rows = {(12,): (12, 1)}
    follower._rows("b.000001", 500, rows_event("update", [((12, ABSENT), (ABSENT, 5))]), table, chunk)
    assert chunk.rows == {(12,): (12, 5)}
    follower._rows("b.000001", 600, rows_event("update", [((13, ABSENT), (ABSENT, 6))]), table, chunk)
    assert chunk.rows[(13,)] is None  # known only in part: the read must complete it or a delete remove it
    table.done_upto = (20,)
    with pytest.raises(SnapshotError, match="moved a row not read yet to a key already read with a partial"):
        follower._rows("b.000001", 700, rows_event("update", [((30, ABSENT), (7, ABSENT))]), table, None)


def test_with_chunks_of_several_tables_open_a_change_is_replayed_on_its_own_tables_chunk():
    other_tm = TableMap(2, "s", "u", TM.columns, primary_key=(0,))
    table, writer, _, chunk = setup(chunk=(None, (20,)))
    other = Table(other_tm, [0], True)
    follower = Follower(lambda: None, {("s", "t"): table, ("s", "u"): other}, None, None, writer,
                         ("b.000001", 4))
    other_chunk = Chunk(other, None, (20,), {(3,): (3, 0)})
    chunk.rows = {(3,): (3, 0)}
    event = RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, 600, 0), 500, "update", 2, other_tm, 0,
                      (((3, 0), (3, 7)),))
    follower._rows("b.000001", 500, event, other, [chunk, other_chunk])
    assert other_chunk.rows == {(3,): (3, 7)} and chunk.rows == {(3,): (3, 0)}
    assert writer.staged == []  # replayed in the chunk being read, not staged


def test_a_uuid_key_decoded_from_the_binlog_as_bytes_finds_its_row_read_as_text():
    from airflow_provider_binlog.codec.mariadb_text import TEXT_FORMS

    tm = TableMap(3, "s", "u", (Column(0, "id", C.MYSQL_TYPE_STRING, 0, primary_key=True, data_type="uuid"),
                                Column(1, "v", C.MYSQL_TYPE_LONG, 0)), primary_key=(0,))
    table = Table(tm, [0], False, key_forms=[TEXT_FORMS["uuid"]])
    writer = Writer()
    follower = Follower(lambda: None, {("s", "u"): table}, None, None, writer, ("b.000001", 4))
    raw = bytes(range(16))
    text = TEXT_FORMS["uuid"](raw)
    chunk = Chunk(table, None, None, {(text,): (text, 1)})
    event = RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, 600, 0), 500, "delete", 3, tm, 0, ((raw, 1),))
    follower._rows("b.000001", 500, event, table, chunk)
    assert chunk.rows == {}  # the row deleted while its chunk was read is not staged
