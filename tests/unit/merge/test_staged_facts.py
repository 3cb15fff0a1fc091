"""What a table's staged changes say, read with pyarrow (merge.staged_facts): key changes,
updates whose after image lacks a column, and the first key column's values; written by the
real staging writer, no Spark."""
from decimal import Decimal

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import ABSENT, Column, EventHeader, RowsEvent, TableMap
from airflow_provider_binlog.merge.staged_facts import staged_facts
from airflow_provider_binlog.staging import StagingWriter

TM = TableMap(1, "s", "t", (Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True, nullable=False),
                            Column(1, "a", C.MYSQL_TYPE_LONG, 0),
                            Column(2, "d", C.MYSQL_TYPE_NEWDECIMAL, (10 << 8) | 2)))
COLUMNS = ["id", "a", "d"]


def staged(tmp_path, *changes):
    """The staged files of ``s.t`` after ``changes`` ((kind, rows), ...)."""
    writer = StagingWriter(tmp_path / "staging")
    pos = 4
    for kind, rows in changes:
        event = RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, pos + 100, 0), pos, kind, 1, TM, 0, tuple(rows))
        writer.add_rows(event, binlog_file="mysql-bin.000001", gtid=None, txn=f"t{pos}")
        pos += 100
    manifest = writer.publish(dump_id="d", start={"file": "mysql-bin.000001", "pos": 4},
                              end={"file": "mysql-bin.000001", "pos": pos}, server={"flavor": "mysql"})
    return [str(p) for p in manifest.files(manifest.tables[0])]


def test_full_images_without_key_changes_have_neither_and_list_every_key(tmp_path):
    files = staged(tmp_path, ("insert", [(1, 10, Decimal("1.50")), (2, 20, None)]),
                   ("update", [((1, 10, Decimal("1.50")), (1, 11, Decimal("1.50")))]),
                   ("delete", [(2, 20, None)]))
    facts = staged_facts(files, ["id"], COLUMNS)
    assert (facts.key_changes, facts.partial_updates, facts.first_key_values) == (False, False, [1, 2])


def test_an_update_of_the_key_is_a_key_change_and_both_keys_are_listed(tmp_path):
    files = staged(tmp_path, ("update", [((5, 1, None), (7, 1, None))]))
    facts = staged_facts(files, ["id"], COLUMNS)
    assert facts.key_changes and not facts.partial_updates and facts.first_key_values == [5, 7]


def test_minimal_images_are_partial_but_an_absent_key_is_no_key_change(tmp_path):
    files = staged(tmp_path, ("update", [((3, ABSENT, ABSENT), (ABSENT, 4, ABSENT))]))
    facts = staged_facts(files, ["id"], COLUMNS)
    assert not facts.key_changes and facts.partial_updates and facts.first_key_values == [3]


def test_a_column_the_files_do_not_hold_makes_the_updates_partial(tmp_path):
    files = staged(tmp_path, ("update", [((1, 1, None), (1, 2, None))]))
    assert staged_facts(files, ["id"], COLUMNS + ["added_later"]).partial_updates


def test_a_renamed_key_is_read_under_its_staged_name(tmp_path):
    files = staged(tmp_path, ("update", [((1, 1, None), (2, 1, None))]))
    facts = staged_facts(files, ["ident"], ["ident", "a", "d"], [{"ident": "id"}])
    assert facts.key_changes and facts.first_key_values == [1, 2]


def test_large_staged_files_and_unknown_keys_are_left_to_spark(tmp_path):
    files = staged(tmp_path, ("insert", [(1, 1, None)]))
    assert staged_facts(files, ["id"], COLUMNS, max_bytes=10) is None
    assert staged_facts(files, ["nope"], COLUMNS) is None
    assert staged_facts(files, [], COLUMNS) is None


def test_key_values_beyond_what_a_key_filter_takes_are_cut_to_one_more_than_the_limit(tmp_path):
    files = staged(tmp_path, ("insert", [(i, i, None) for i in range(1, 11)]))
    assert staged_facts(files, ["id"], COLUMNS, max_key_values=10).first_key_values == list(range(1, 11))
    cut = staged_facts(files, ["id"], COLUMNS, max_key_values=3).first_key_values
    assert len(cut) == 4 and set(cut) <= set(range(1, 11))


def test_once_there_are_more_keys_than_a_filter_takes_the_rest_of_the_batches_are_not_deduplicated_again(
        tmp_path, monkeypatch):
    from airflow_provider_binlog.merge import staged_facts as sf

    monkeypatch.setattr(sf, "FACT_BATCH_ROWS", 10)
    files = staged(tmp_path, ("insert", [(i, i, None) for i in range(1, 2001)]))  # 200 batches of 10 rows
    calls = []
    distinct = sf._distinct
    monkeypatch.setattr(sf, "_distinct", lambda arrays: calls.append(1) or distinct(arrays))
    cut = staged_facts(files, ["id"], COLUMNS, max_key_values=5).first_key_values
    assert len(cut) == 6 and set(cut) <= set(range(1, 2001))
    assert len(calls) == 2  # once when there were more than 4 x 5, once for the result


def test_a_key_column_whose_name_holds_a_dot_is_read(tmp_path):
    dotted = TableMap(1, "s", "t", (Column(0, "k.x", C.MYSQL_TYPE_LONG, 0, primary_key=True, nullable=False),
                                    Column(1, "a", C.MYSQL_TYPE_LONG, 0)))
    writer = StagingWriter(tmp_path / "staging")
    event = RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, 104, 0), 4, "update", 1, dotted, 0,
                      (((1, 1), (2, 1)),))
    writer.add_rows(event, binlog_file="mysql-bin.000001", gtid=None, txn="t4")
    manifest = writer.publish(dump_id="d", start={"file": "mysql-bin.000001", "pos": 4},
                              end={"file": "mysql-bin.000001", "pos": 104}, server={"flavor": "mysql"})
    facts = staged_facts([str(p) for p in manifest.files(manifest.tables[0])], ["k.x"], ["k.x", "a"])
    assert facts.key_changes and facts.first_key_values == [1, 2]


def test_an_insert_image_lacking_a_column_is_a_partial_insert_and_whole_ones_are_not(tmp_path):
    whole = staged(tmp_path / "whole", ("insert", [(1, 10, Decimal("1.50"))]))
    assert not staged_facts(whole, ["id"], COLUMNS).partial_inserts
    minimal = staged(tmp_path / "minimal", ("insert", [(2, ABSENT, Decimal("2.00"))]))
    facts = staged_facts(minimal, ["id"], COLUMNS)
    assert facts.partial_inserts and not facts.partial_updates
