"""The transaction tracker bare, fed event sequences as MariaDB and MySQL write them (the
MariaDB ones as a MariaDB 10.11 server logs them): where a transaction opens, which event ends
it, its GTID and end position, and the statement that is a transaction of its own."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.capture.transactions import (
    Statement,
    Transaction,
    TransactionCommitted,
    TransactionCutShort,
    TransactionStarted,
    TransactionTracker,
    TxnState,
)
from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import (
    AnnotateRowsEvent,
    Column,
    EventHeader,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    QueryStatus,
    RowsEvent,
    TableMap,
    TableMapEvent,
    TransactionPayloadEvent,
    XaPrepareEvent,
    XidEvent,
)
from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.replica import ReplicationConnectionLost

FILE = "mariadb-bin.000003"
UUID = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"
TM = TableMap(1, "s", "t", (Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True),), primary_key=(0,))


def _header(pos: int, size: int, server_id: int = 101) -> EventHeader:
    return EventHeader(1_700_000_000, 0, server_id, size, pos + size, 0)


def mariadb_gtid(pos: int, seq: int, flags: int = 0x0C) -> MariadbGtidEvent:
    return MariadbGtidEvent(_header(pos, 42), pos, 0, seq, flags)


def mysql_gtid(pos: int, gno: int, anonymous: bool = False) -> GtidEvent:
    return GtidEvent(_header(pos, 79), pos, UUID, gno, None, anonymous, 1)


def query(pos: int, text: str, size: int = 70) -> QueryEvent:
    return QueryEvent(_header(pos, size), pos, 12, 0, "s", 0, QueryStatus(), text)


def table_map(pos: int) -> TableMapEvent:
    return TableMapEvent(_header(pos, 55), pos, TM)


def rows(pos: int) -> RowsEvent:
    return RowsEvent(_header(pos, 42), pos, "insert", 1, TM, 0, ((1,),))


def xid(pos: int) -> XidEvent:
    return XidEvent(_header(pos, 31), pos, 10)


def feed_all(tracker: TransactionTracker, events) -> list[tuple]:
    """(the event's position, what feeding it returned, the state after it), for each event."""
    return [(e.pos, tracker.feed(FILE, e), tracker.state) for e in events]


def test_a_mariadb_transaction_opens_at_its_gtid_and_ends_at_its_xid():
    tracker = TransactionTracker()
    steps = feed_all(tracker, [mariadb_gtid(389, 4), AnnotateRowsEvent(_header(431, 51), 431, "INSERT ..."),
                               table_map(482), rows(537), xid(579)])
    txn = Transaction("0-101-4", FILE, 389, standalone=False)
    assert steps == [
        (389, (TransactionStarted(txn),), TxnState.BEGUN),  # MariaDB writes no BEGIN: its GTID begins it
        (431, (), TxnState.BEGUN),
        (482, (), TxnState.BEGUN),
        (537, (), TxnState.BEGUN),
        (579, (TransactionCommitted(txn, FILE, 610),), TxnState.IDLE),
    ]
    assert txn.id == "0-101-4" and not tracker.in_transaction and tracker.current is None


def test_a_savepoint_after_the_rows_of_a_mariadb_transaction_does_not_end_it():
    tracker = TransactionTracker()
    feed_all(tracker, [mariadb_gtid(831, 6), table_map(924), rows(979)])
    (statement,) = tracker.feed(FILE, query(1021, "SAVEPOINT `b`"))
    assert isinstance(statement, Statement) and not statement.standalone and statement.gtid == "0-101-6"
    assert tracker.in_transaction and tracker.current == Transaction("0-101-6", FILE, 831)
    assert tracker.feed(FILE, rows(1203)) == ()
    assert tracker.feed(FILE, xid(1245)) == (TransactionCommitted(Transaction("0-101-6", FILE, 831), FILE, 1276),)


def test_a_mysql_transaction_opens_at_its_gtid_begins_at_begin_and_ends_at_its_xid():
    tracker = TransactionTracker()
    txn = Transaction(f"{UUID}:3", FILE, 791)
    steps = feed_all(tracker, [mysql_gtid(791, 3), query(870, "BEGIN"), table_map(950), rows(1077), xid(1120)])
    assert steps == [
        (791, (TransactionStarted(txn),), TxnState.OPEN),
        (870, (), TxnState.BEGUN),
        (950, (), TxnState.BEGUN),
        (1077, (), TxnState.BEGUN),
        (1120, (TransactionCommitted(txn, FILE, 1151),), TxnState.IDLE),
    ]
    assert txn.id == f"{UUID}:3"


def test_a_compressed_mysql_transaction_ends_with_its_payload_event():
    tracker = TransactionTracker()
    tracker.feed(FILE, mysql_gtid(791, 3))
    payload = TransactionPayloadEvent(_header(870, 300), 870, 0, 280, 500,
                                      (query(0, "BEGIN"), table_map(0), rows(0), xid(0)))
    assert tracker.feed(FILE, payload) == (TransactionCommitted(Transaction(f"{UUID}:3", FILE, 791), FILE, 1170),)


def test_a_query_commit_ends_a_transaction_on_a_non_transactional_table():
    tracker = TransactionTracker()
    txn = Transaction("0-101-7", FILE, 1276)
    steps = feed_all(tracker, [mariadb_gtid(1276, 7, flags=0x08), table_map(1369), rows(1424),
                               query(1466, "COMMIT", size=69)])
    assert steps[-2][2] is TxnState.BEGUN
    assert steps[-1] == (1466, (TransactionCommitted(txn, FILE, 1535),), TxnState.IDLE)


def test_a_mariadb_ddl_with_the_standalone_flag_is_a_transaction_of_its_own():
    tracker = TransactionTracker()
    (started,) = tracker.feed(FILE, mariadb_gtid(3945, 17, flags=0x29))
    txn = Transaction("0-101-17", FILE, 3945, standalone=True)
    assert started == TransactionStarted(txn)
    alter = query(3987, "ALTER TABLE x.t ADD COLUMN w INT", size=104)
    assert tracker.feed(FILE, alter) == (Statement(alter, txn, FILE, 3987, standalone=True),
                                         TransactionCommitted(txn, FILE, 4091))
    assert tracker.state is TxnState.IDLE


def test_a_mysql_ddl_after_its_gtid_is_a_transaction_of_its_own():
    tracker = TransactionTracker()
    tracker.feed(FILE, mysql_gtid(493, 2))
    create = query(572, "CREATE TABLE t (id INT PRIMARY KEY)", size=219)
    txn = Transaction(f"{UUID}:2", FILE, 493)
    assert tracker.feed(FILE, create) == (Statement(create, txn, FILE, 572, standalone=True),
                                          TransactionCommitted(txn, FILE, 791))
    assert not tracker.in_transaction


def test_mariadb_create_table_select_is_one_transaction_with_its_statement_inside():
    tracker = TransactionTracker()
    tracker.feed(FILE, mariadb_gtid(1794, 9, flags=0x28))       # no standalone flag
    create = query(1836, "CREATE TABLE `x`.`c` (...) SELECT", size=139)
    txn = Transaction("0-101-9", FILE, 1794)
    assert tracker.feed(FILE, create) == (Statement(create, txn, FILE, 1836, standalone=False),)
    assert feed_all(tracker, [table_map(2032), rows(2084), xid(2153)]) == [
        (2032, (), TxnState.BEGUN),
        (2084, (), TxnState.BEGUN),
        (2153, (TransactionCommitted(txn, FILE, 2184),), TxnState.IDLE),
    ]


def test_a_savepoint_before_any_row_of_a_mariadb_transaction_does_not_end_it():
    tracker = TransactionTracker()
    tracker.feed(FILE, mariadb_gtid(831, 6))
    (statement,) = tracker.feed(FILE, query(873, "SAVEPOINT `a`"))
    assert not statement.standalone and statement.gtid == "0-101-6" and tracker.in_transaction
    assert tracker.feed(FILE, rows(979)) == ()
    assert tracker.feed(FILE, xid(1021)) == (TransactionCommitted(Transaction("0-101-6", FILE, 831), FILE, 1052),)


def test_a_transaction_without_gtids_is_known_by_its_file_and_position():
    tracker = TransactionTracker()
    txn = Transaction(None, FILE, 120)
    steps = feed_all(tracker, [query(120, "BEGIN"), table_map(190), rows(245), xid(287)])
    assert steps[0] == (120, (TransactionStarted(txn),), TxnState.BEGUN)
    assert steps[-1] == (287, (TransactionCommitted(txn, FILE, 318),), TxnState.IDLE)
    assert txn.id == f"{FILE}:120"
    # an anonymous GTID (MySQL without GTIDs) opens it without a GTID, where it is
    (started,) = tracker.feed(FILE, mysql_gtid(318, 0, anonymous=True))
    assert started.transaction == Transaction(None, FILE, 318) and started.transaction.id == f"{FILE}:318"
    # a DDL without GTID: a statement of its own, no transaction opened for it
    drop = query(400, "DROP TABLE s.t")
    tracker.reset()
    assert tracker.feed(FILE, drop) == (Statement(drop, None, FILE, 400, standalone=True),
                                        TransactionCommitted(None, FILE, 470))


def test_an_xa_transaction_ends_at_its_prepare_and_its_commit_is_another():
    tracker = TransactionTracker()
    prepared = Transaction(f"{UUID}:8", FILE, 100)
    steps = feed_all(tracker, [mysql_gtid(100, 8), query(179, "XA START X'786131',X'',1"), table_map(260),
                               rows(315), query(357, "XA END X'786131',X'',1")])
    assert [state for _, _, state in steps] == [TxnState.OPEN] + [TxnState.BEGUN] * 4
    assert not steps[-1][1][0].standalone
    assert tracker.feed(FILE, XaPrepareEvent(_header(442, 39), 442, False, 1, b"xa1", b"")) == (
        TransactionCommitted(prepared, FILE, 481),)
    tracker.feed(FILE, mysql_gtid(481, 9))
    assert tracker.feed(FILE, query(560, "XA COMMIT X'786131',X'',1", size=88)) == (
        TransactionCommitted(Transaction(f"{UUID}:9", FILE, 481), FILE, 648),)


def test_a_stream_ending_inside_a_transaction_is_refused_and_a_new_stream_starts_clear():
    tracker = TransactionTracker()
    tracker.end_of_stream()                       # nothing read: a boundary
    feed_all(tracker, [mariadb_gtid(389, 4), table_map(482), rows(537)])
    with pytest.raises(TransactionCutShort, match="the server ended the stream inside a transaction") as info:
        tracker.end_of_stream()
    assert isinstance(info.value, ReplicationConnectionLost) and isinstance(info.value, ProviderError)
    assert info.value.hint == "resume from the last transaction boundary"
    tracker.reset()                               # read again from the last boundary
    assert tracker.state is TxnState.IDLE and tracker.current is None
    tracker.end_of_stream()
    # an end with nothing open is a boundary too
    assert tracker.feed(FILE, xid(579)) == (TransactionCommitted(None, FILE, 610),)
    tracker.end_of_stream()
