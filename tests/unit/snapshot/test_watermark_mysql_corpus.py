"""The watermark snapshot's binlog follower on a real MySQL 8 binlog (GTIDs, COLUMN_NAME
metadata; from the shared corpus, no MySQL server runs here): the changes of a table read
already are staged with their GTIDs as transaction ids, those of a table read later are dropped,
a chunk being read replays them to the table's final state, and the CREATE TABLE in the file is
a schema statement that stops the snapshot."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.codec import read_binlog_file
from airflow_provider_binlog.codec.events import RowsEvent
from airflow_provider_binlog.capture.snapshot import SnapshotError
from airflow_provider_binlog.capture.watermark.chunks import Chunk, Table
from airflow_provider_binlog.capture.watermark.follower import Follower
from tests.corpus import CORPUS

FILE = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/mysql-enum-string-set.000001"
UUID = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"

if not FILE.exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)


class Writer:
    def __init__(self):
        self.staged = []

    def add_decoded_rows(self, tm, kind, rows, *, position, gtid, txn, first_index, **kw):
        self.staged += [(position, kind, gtid, txn, row) for row in rows]


def follow(table_state: dict, from_pos: int = 0, chunk: bool = False):
    events = [e for e in read_binlog_file(FILE) if e.pos >= from_pos]
    tm = next(e.table_map for e in events if isinstance(e, RowsEvent))
    table = Table(tm, [0], True, **table_state)
    writer = Writer()
    follower = Follower(lambda: None, {("mysql", "t"): table}, None, None, writer, ("binlog.000001", 4))
    current = Chunk(table, None, None, {}) if chunk else None
    for event in events:
        follower._handle("binlog.000001", event.pos, event, current)
    return writer.staged, current


def test_changes_of_a_table_read_already_are_staged_with_their_mysql_gtids():
    staged, _ = follow({"finished": True}, from_pos=791)  # after the CREATE TABLE
    assert [(pos, kind, gtid) for pos, kind, gtid, _txn, _row in staged] == [
        (1077, "insert", f"{UUID}:3"), (1855, "update", f"{UUID}:4"), (2945, "delete", f"{UUID}:5")]
    assert all(txn == gtid for _pos, _kind, gtid, txn, _row in staged)


def test_changes_of_a_table_read_later_are_dropped_and_a_chunk_replays_them():
    staged, _ = follow({}, from_pos=791)
    assert staged == []
    staged, chunk = follow({}, from_pos=791, chunk=True)
    assert staged == [] and chunk.rows == {}  # inserted, its key changed, then deleted


def test_the_create_table_in_the_binlog_stops_the_snapshot():
    with pytest.raises(SnapshotError, match="a schema statement on a captured table ran during the snapshot "
                                            "at binlog.000001:572 .*CREATE TABLE t"):
        follow({"finished": True})


class FakeConn:
    """A MySQL server's replies to the status statements: 8.4+ knows SHOW BINARY LOG STATUS,
    earlier versions only SHOW MASTER STATUS."""

    def __init__(self, new_syntax: bool):
        self.new_syntax, self.sql = new_syntax, []

    def cursor(self):
        conn = self

        class Cursor:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def execute(self, sql, args=None):
                conn.sql.append(sql)
                if sql == "SHOW BINARY LOG STATUS" and not conn.new_syntax:
                    import pymysql
                    raise pymysql.err.ProgrammingError(1064, "syntax")

            def fetchone(self):
                return ("binlog.000007", 1234, "", "", f"{UUID}:1-42")
        return Cursor()


@pytest.mark.parametrize("new_syntax", [True, False])
def test_the_watermark_on_mysql_is_the_binary_log_status_with_its_executed_gtid_set(new_syntax):
    from airflow_provider_binlog.capture.watermark.positions import binlog_status

    conn = FakeConn(new_syntax)
    assert binlog_status(conn, "mysql") == ("binlog.000007", 1234, f"{UUID}:1-42")
    assert binlog_status(conn, "mysql", gtid=False) == ("binlog.000007", 1234, None)
    if new_syntax:
        assert conn.sql == ["SHOW BINARY LOG STATUS"] * 2
    else:
        assert conn.sql == ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"] * 2


class CuttingReplica:
    """Streams the corpus file from a position; its first stream ends after ``cut`` events
    (inside a transaction), as a server that has not synced more, or MariaDB at a file's end."""

    calls: list = []

    def __init__(self, events, cut):
        self.events, self.cut = events, cut

    def stream(self, file, pos, **kwargs):
        CuttingReplica.calls.append(pos)
        events = [e for e in self.events if e.pos >= pos]
        if len(CuttingReplica.calls) == 1:
            events = events[:self.cut]
        for event in events:
            yield file, event

    def close(self):
        pass


def test_a_stream_ended_inside_a_transaction_is_read_again_from_its_start_and_staged_once():
    events = list(read_binlog_file(FILE))
    tm = next(e.table_map for e in events if isinstance(e, RowsEvent))
    table = Table(tm, [0], True, finished=True)
    writer = Writer()
    CuttingReplica.calls = []
    follower = Follower(lambda: CuttingReplica(events, cut=4), {("mysql", "t"): table}, None, None, writer,
                         ("binlog.000001", 791))
    follower.follow_to("binlog.000001", 3331, None)
    assert CuttingReplica.calls == [791, 791]  # the cut transaction (its rows read, not its XID) from its start
    assert [(pos, kind, gtid) for pos, kind, gtid, _txn, _row in writer.staged] == [
        (1077, "insert", f"{UUID}:3"), (1855, "update", f"{UUID}:4"), (2945, "delete", f"{UUID}:5")]
    assert (follower.file, follower.pos) == ("binlog.000001", 3331)


def test_a_stream_that_ends_without_progress_before_the_watermark_stops_the_snapshot():
    class Empty:
        def stream(self, *args, **kwargs):
            return iter(())

        def close(self):
            pass

    table = Table(next(e.table_map for e in read_binlog_file(FILE) if isinstance(e, RowsEvent)), [0], True)
    follower = Follower(Empty, {("mysql", "t"): table}, None, None, Writer(), ("binlog.000001", 791))
    with pytest.raises(SnapshotError, match="the binlog stream ended at binlog.000001:791, before the "
                                            "watermark binlog.000001:3331 the server reported, 5 times"):
        follower.follow_to("binlog.000001", 3331, None)
