"""Checkpoints (binlog coordinates / GTID state) and the file checkpoint store."""
from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import stat

import pytest

from airflow_provider_binlog.checkpoints import (
    ABSENT,
    Checkpoint,
    CheckpointConflictError,
    CheckpointStoreError,
    FileCheckpointStore,
    key_to_file_stem,
    open_checkpoint_store,
)
from airflow_provider_binlog.codec.gtid import MariadbGtidPosition, MysqlGtidSet

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4d22eb58-82db-22f2-8f44-d91bb9530673"


def cp(file: str, pos: int) -> Checkpoint:
    return Checkpoint(file=file, position=pos)


# ------------------------------------------------------------------ values

def test_order_uses_numeric_file_suffix_then_position():
    assert cp("mysql-bin.000010", 4) > cp("mysql-bin.000009", 999999)
    assert cp("mysql-bin.1000000", 4) > cp("mysql-bin.999999", 4)
    assert cp("mysql-bin.000003", 120) < cp("mysql-bin.000003", 4000)
    assert cp("mysql-bin.000003", 120) <= cp("mysql-bin.000003", 120)
    assert cp("mysql-bin.000003", 120) >= cp("mysql-bin.3", 120)
    ordered = sorted([cp("b.000002", 4), cp("b.1000000", 4), cp("b.999999", 8), cp("b.000002", 3000)])
    assert [str(c) for c in ordered] == ["b.000002:4", "b.000002:3000", "b.999999:8", "b.1000000:4"]


def test_ordering_different_basenames_raises():
    with pytest.raises(ValueError, match="different series"):
        _ = cp("mysql-bin.000002", 4) < cp("relay-bin.000001", 4)


def test_coordinates_and_a_gtid_state_alone_cannot_be_ordered():
    from airflow_provider_binlog.checkpoints import CheckpointOrderError

    with pytest.raises(CheckpointOrderError, match="need binlog coordinates or GTID states"):
        _ = cp("mysql-bin.000002", 4) < Checkpoint(gtid=MysqlGtidSet(f"{U1}:1"))


def test_gtid_states_order_by_containment_for_both_kinds():
    from airflow_provider_binlog.checkpoints import CheckpointOrderError
    from airflow_provider_binlog.codec.gtid import MariadbGtidPosition

    older, newer = Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-5")), Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-9"))
    assert (older.compare(newer), newer.compare(older), older.compare(older)) == (-1, 1, 0)
    assert older < newer
    m_old = Checkpoint(gtid=MariadbGtidPosition("0-1-5,1-2-3"))
    m_new = Checkpoint(gtid=MariadbGtidPosition("0-1-7,1-2-3"))
    assert (m_old.compare(m_new), m_new.compare(m_old)) == (-1, 1)
    apart = Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-5,{U2}:1")), Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-6"))
    with pytest.raises(CheckpointOrderError, match="of which one contains the other"):
        apart[0].compare(apart[1])


def test_file_index_and_basename():
    c = cp("my.host-bin.000042", 4)
    assert (c.file_basename, c.file_index) == ("my.host-bin", 42)


@pytest.mark.parametrize("kwargs, message", [
    ({"file": "mysql-bin.000001"}, "both file and position"),
    ({"position": 4}, "both file and position"),
    ({"file": "mysql-bin.000001", "position": 3}, ">= 4"),
    ({"file": "mysql-bin", "position": 4}, "basename.number"),
    ({"file": "../etc/mysql-bin.000001", "position": 4}, "basename.number"),
    ({}, "file:position or a GTID"),
    ({"gtid": MysqlGtidSet(), "flavor": "mariadb"}, "does not match"),
    ({"file": "b.000001", "position": 4, "flavor": "oracle"}, "flavor must be one of"),
])
def test_invalid_checkpoints_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Checkpoint(**kwargs)


def test_flavor_is_inferred_from_gtid_type():
    assert Checkpoint(gtid=MysqlGtidSet(f"{U1}:1")).flavor == "mysql"
    assert Checkpoint(gtid=MariadbGtidPosition("0-1-5")).flavor == "mariadb"


def test_to_json_has_stable_keys():
    c = Checkpoint(file="mysql-bin.000003", position=154, gtid=MysqlGtidSet(f"{U1}:3-4:1-2"),
                   server_id=7)
    assert c.to_json() == {"file": "mysql-bin.000003", "pos": 154, "gtid": f"{U1}:1-4",
                           "flavor": "mysql", "server_id": 7, "server_uuid": None}
    assert Checkpoint(gtid=MariadbGtidPosition("1-2-5,0-1-100")).to_json() == {
        "file": None, "pos": None, "gtid": "0-1-100,1-2-5", "flavor": "mariadb",
        "server_id": None, "server_uuid": None}
    # the flavor is written as the text it always was
    assert json.dumps(Checkpoint(gtid=MariadbGtidPosition("0-1-5")).to_json()["flavor"]) == '"mariadb"'
    assert json.dumps(c.to_json()["flavor"]) == '"mysql"'


@pytest.mark.parametrize("checkpoint", [
    Checkpoint(file="mysql-bin.000003", position=4),
    Checkpoint(file="mysql-bin.000003", position=4, gtid=MysqlGtidSet(f"{U1}:1-9:t:3"), server_uuid=U1),
    Checkpoint(gtid=MysqlGtidSet()),
    Checkpoint(gtid=MariadbGtidPosition("0-1-100,1-2-5"), server_id=3),
    Checkpoint(gtid=MariadbGtidPosition()),
])
def test_json_round_trip(checkpoint):
    assert Checkpoint.from_json(checkpoint.to_json()) == checkpoint
    assert Checkpoint.from_json(json.dumps(checkpoint.to_json())) == checkpoint


def test_from_json_rejects_unknown_keys_naming_known_ones():
    with pytest.raises(ValueError, match="unknown checkpoint key.*postion.*known keys: file, pos"):
        Checkpoint.from_json({"file": "mysql-bin.000001", "postion": 4})


def test_from_json_empty_gtid_needs_flavor():
    with pytest.raises(ValueError, match="needs 'flavor'"):
        Checkpoint.from_json({"gtid": ""})


@pytest.mark.parametrize("text, expected", [
    ("mysql-bin.000003:4", Checkpoint(file="mysql-bin.000003", position=4)),
    ("  mysql-bin.000003:4 \n", Checkpoint(file="mysql-bin.000003", position=4)),
    ("mysql-bin.000003: 120", Checkpoint(file="mysql-bin.000003", position=120)),
    ('{"file": "mysql-bin.000003", "pos": 4}', Checkpoint(file="mysql-bin.000003", position=4)),
    ('{"file": "mysql-bin.000003", "position": "4"}', Checkpoint(file="mysql-bin.000003", position=4)),
    (f"{U1.upper()}:1-5,\n{U1}:7", Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-5:7"))),
    ("0-1-100,1-2-5", Checkpoint(gtid=MariadbGtidPosition([]).add("0-1-100").add("1-2-5"))),
    ('{"gtid": "0-1-100", "flavor": "mariadb"}', Checkpoint(gtid=MariadbGtidPosition("0-1-100"))),
])
def test_parse_accepts_user_forms(text, expected):
    assert Checkpoint.parse(text) == expected


@pytest.mark.parametrize("text", [
    "", "   ", "mysql-bin.000003", "mysql-bin.000003:", "mysql-bin.000003:abc", "mysql-bin.000003:2",
    "{not json", '["mysql-bin.000003", 4]', f"{U1}:0", "0-1-100,0-2-5", "hello",
])
def test_parse_errors_list_accepted_forms(text):
    with pytest.raises(ValueError, match="accepted forms: file:position"):
        Checkpoint.parse(text)


def test_checkpoint_is_hashable_value():
    a = Checkpoint.parse("mysql-bin.000003:4")
    assert a == cp("mysql-bin.000003", 4) and hash(a) == hash(cp("mysql-bin.000003", 4))
    with pytest.raises(AttributeError):
        a.position = 5  # type: ignore[misc]


# ------------------------------------------------------------------ store

class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(seconds=1)
        return self.now


@pytest.fixture
def store(tmp_path):
    return FileCheckpointStore(tmp_path / "ckpt", history_limit=3, clock=Clock())


def test_store_round_trip_and_missing_key(store):
    assert store.load("orders") is None
    c = Checkpoint(file="mysql-bin.000003", position=154, gtid=MysqlGtidSet(f"{U1}:1-9"))
    store.save("orders", c)
    assert store.load("orders") == c
    assert FileCheckpointStore(store.root).load("orders") == c


def test_store_history_is_newest_first_and_bounded(store):
    for pos in (4, 100, 200, 300):
        store.save("orders", cp("mysql-bin.000001", pos))
    hist = store.history("orders")
    assert [h.checkpoint.position for h in hist] == [300, 200, 100]
    assert [h.saved_at.second for h in hist] == [4, 3, 2]
    assert hist[0].saved_at.tzinfo is not None
    assert [h.checkpoint.position for h in store.history("orders", limit=1)] == [300]
    assert store.history("never-saved") == []


def test_compare_and_set_succeeds_when_expected_matches(store):
    first = cp("mysql-bin.000001", 4)
    store.save("k", first, expected=ABSENT)
    store.save("k", cp("mysql-bin.000001", 500), expected=first)
    assert store.load("k") == cp("mysql-bin.000001", 500)


def test_compare_and_set_conflict_leaves_value_unchanged(store):
    store.save("k", cp("mysql-bin.000001", 500))
    with pytest.raises(CheckpointConflictError) as info:
        store.save("k", cp("mysql-bin.000002", 4), expected=cp("mysql-bin.000001", 4))
    assert info.value.actual == cp("mysql-bin.000001", 500)
    assert "mysql-bin.000001:500" in str(info.value)
    with pytest.raises(CheckpointConflictError):
        store.save("k", cp("mysql-bin.000002", 4), expected=ABSENT)
    with pytest.raises(CheckpointConflictError):
        store.save("other", cp("mysql-bin.000002", 4), expected=cp("mysql-bin.000001", 4))
    assert store.load("k") == cp("mysql-bin.000001", 500)
    assert store.load("other") is None


def test_leftover_temp_file_from_crash_does_not_corrupt_current(store):
    store.save("orders", cp("mysql-bin.000001", 4))
    stem = key_to_file_stem("orders")
    leftover = os.path.join(store.root, f".{stem}.json~crash1.tmp")
    with open(leftover, "w") as f:
        f.write('{"format": 1, "key": "orders", "current": {"file": "mysql-bi')  # torn write
    assert store.load("orders") == cp("mysql-bin.000001", 4)
    store.save("orders", cp("mysql-bin.000001", 8))
    assert store.load("orders") == cp("mysql-bin.000001", 8)
    assert not os.path.exists(leftover)


def test_failed_rename_keeps_previous_value_and_removes_temp(store, monkeypatch):
    store.save("orders", cp("mysql-bin.000001", 4))

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        store.save("orders", cp("mysql-bin.000009", 4))
    monkeypatch.undo()
    assert store.load("orders") == cp("mysql-bin.000001", 4)
    assert sorted(os.listdir(store.root)) == ["orders.json", "orders.lock"]


def test_store_files_are_private(store):
    store.save("orders", cp("mysql-bin.000001", 4))
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    for name in ("orders.json", "orders.lock"):
        assert stat.S_IMODE(os.stat(os.path.join(store.root, name)).st_mode) == 0o600


def test_keys_are_sanitised_into_distinct_safe_names(store):
    keys = ["db/prod:orders", "db_prod_orders", "../escape", "ünïcode key", "." * 3]
    for i, key in enumerate(keys):
        store.save(key, cp("mysql-bin.000001", 4 + i))
    for i, key in enumerate(keys):
        assert store.load(key) == cp("mysql-bin.000001", 4 + i)
    names = os.listdir(store.root)
    assert all("/" not in n and not n.startswith("..") for n in names)
    assert len([n for n in names if n.endswith(".json")]) == len(keys)
    assert not os.path.exists(os.path.join(os.path.dirname(store.root), "escape.json"))
    with pytest.raises(ValueError):
        key_to_file_stem("")


def test_corrupt_store_file_raises_clear_error(store):
    store.save("orders", cp("mysql-bin.000001", 4))
    with open(os.path.join(store.root, "orders.json"), "w") as f:
        f.write("{garbage")
    with pytest.raises(CheckpointStoreError, match="cannot read checkpoint file"):
        store.load("orders")


def _increment_worker(root: str, rounds: int) -> None:
    s = FileCheckpointStore(root)
    done = 0
    while done < rounds:
        current = s.load("counter")
        try:
            s.save("counter", cp("mysql-bin.000001", current.position + 1), expected=current)
            done += 1
        except CheckpointConflictError:
            continue


def test_concurrent_compare_and_set_never_loses_an_update(tmp_path):
    root = str(tmp_path / "shared")
    FileCheckpointStore(root).save("counter", cp("mysql-bin.000001", 4))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_increment_worker, args=(root, 25)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert FileCheckpointStore(root).load("counter").position == 4 + 75


# ------------------------------------------------------------------ factory

def test_open_store_from_plain_path_and_file_uris(tmp_path):
    plain = open_checkpoint_store(str(tmp_path / "a"))
    assert isinstance(plain, FileCheckpointStore) and plain.root == str(tmp_path / "a")
    assert open_checkpoint_store(f"file://{tmp_path}/b").root == f"{tmp_path}/b"
    assert open_checkpoint_store(f"file://localhost{tmp_path}/c").root == f"{tmp_path}/c"
    assert open_checkpoint_store(f"file://{tmp_path}/with%20space").root == f"{tmp_path}/with space"
    assert open_checkpoint_store(tmp_path / "d", history_limit=5).history_limit == 5


def test_open_store_rejects_unsupported_scheme_naming_supported():
    with pytest.raises(ValueError, match=r"unsupported checkpoint store scheme 's3'.*file://"):
        open_checkpoint_store("s3://bucket/path")


def test_open_store_rejects_remote_file_host():
    with pytest.raises(ValueError, match="only local paths"):
        open_checkpoint_store("file://fileserver/share/ckpt")
