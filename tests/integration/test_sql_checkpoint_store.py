"""The SQL checkpoint store, live on a private PostgreSQL and on SQLite: the file store's
semantics (compare-and-set, ABSENT, bounded history, the schema history saved with the
checkpoint), races between processes and threads, and the PostgreSQL run lock."""
from __future__ import annotations

import datetime as dt
import multiprocessing
import threading
import uuid

import pytest
import sqlalchemy as sa

from airflow_provider_binlog.checkpoints import (
    ABSENT,
    Checkpoint,
    CheckpointConflictError,
    CheckpointLockedError,
    CheckpointStoreError,
    FileCheckpointStore,
    open_checkpoint_store,
)
from airflow_provider_binlog.checkpoints.sql_store import SqlCheckpointStore, mask_url
from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (a fixture)

A = Checkpoint(file="mariadb-bin.000001", position=400)
B = Checkpoint(file="mariadb-bin.000001", position=900)
C = Checkpoint(file="mariadb-bin.000002", position=4)
HISTORY = {"format": 1, "tables": [{"schema": "s", "name": "t", "columns": [{"name": "id", "data_type": "int"}]}]}


def cp(pos: int) -> Checkpoint:
    return Checkpoint(file="mysql-bin.000001", position=pos)


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(seconds=1)
        return self.now


@pytest.fixture
def pg(request) -> PostgresServer:
    """The session's private PostgreSQL (``postgres_server``, imported above)."""
    return request.getfixturevalue("postgres_server")


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"])
def store_url(request, tmp_path) -> tuple[str, str]:
    """(url, table_prefix): a fresh set of tables for each test."""
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    if request.param == "postgresql":
        return request.getfixturevalue("pg").url(), prefix
    return f"sqlite:///{tmp_path / 'checkpoints.db'}", prefix


@pytest.fixture
def store(store_url) -> SqlCheckpointStore:
    url, prefix = store_url
    s = open_checkpoint_store(url, history_limit=3, table_prefix=prefix, clock=Clock())
    assert isinstance(s, SqlCheckpointStore)
    yield s
    s.dispose()


# ------------------------------------------------------------------ semantics

def test_round_trip_and_missing_key(store, store_url):
    assert store.load("orders") is None
    assert store.history("orders") == []
    store.save("orders", A)
    assert store.load("orders") == A
    other = SqlCheckpointStore(store_url[0], table_prefix=store_url[1])
    assert other.load("orders") == A
    other.dispose()


def test_compare_and_set_succeeds_when_expected_matches(store):
    store.save("k", A, expected=ABSENT)
    store.save("k", B, expected=A)
    assert store.load("k") == B


def test_compare_and_set_conflict_names_the_actual_value_and_changes_nothing(store):
    store.save("k", B)
    with pytest.raises(CheckpointConflictError) as info:
        store.save("k", C, expected=A)
    assert info.value.actual == B and info.value.expected == A
    assert "mariadb-bin.000001:900" in str(info.value)
    assert store.load("k") == B
    assert [h.checkpoint for h in store.history("k")] == [B]
    with pytest.raises(CheckpointConflictError) as info:
        store.save("other", C, expected=A)
    assert info.value.actual is None
    assert store.load("other") is None


def test_absent_inserts_once_then_conflicts(store):
    store.save("k", A, expected=ABSENT)
    with pytest.raises(CheckpointConflictError) as info:
        store.save("k", B, expected=ABSENT)
    assert info.value.actual == A and info.value.expected is ABSENT
    assert store.load("k") == A


def test_history_is_newest_first_and_bounded(store):
    for pos in (4, 100, 200, 300):
        store.save("orders", cp(pos))
    store.save("other", cp(7))
    hist = store.history("orders")
    assert [h.checkpoint.position for h in hist] == [300, 200, 100]
    assert [h.saved_at.second for h in hist] == [4, 3, 2]
    assert hist[0].saved_at.tzinfo is not None
    assert [h.checkpoint.position for h in store.history("orders", limit=1)] == [300]
    assert [h.checkpoint.position for h in store.history("other")] == [7]
    with store._get_engine().connect() as conn:  # trimmed in the table, not only when read
        rows = conn.execute(sa.select(sa.func.count()).select_from(store.history_table)
                            .where(store.history_table.c.key == "orders")).scalar()
    assert rows == 3


def test_schema_history_is_saved_with_the_checkpoint_and_dropped_without_one(store):
    assert store.load_schema_history("k") is None
    store.save("k", A, expected=ABSENT, schema_history=HISTORY)
    assert store.load_schema_history("k") == (A, HISTORY)
    with pytest.raises(CheckpointConflictError):
        store.save("k", B, expected=B, schema_history={"format": 1, "tables": []})
    assert store.load_schema_history("k") == (A, HISTORY)
    store.save("k", B, expected=A)
    assert store.load("k") == B
    assert store.load_schema_history("k") is None
    store.save("k", C, schema_history=HISTORY)
    assert store.load_schema_history("k") == (C, HISTORY)
    store.save("k", A)
    assert store.load_schema_history("k") is None


def test_gtid_checkpoints_and_odd_keys(store):
    from airflow_provider_binlog.codec.gtid import MariadbGtidPosition

    g = Checkpoint(file="mariadb-bin.000003", position=154, gtid=MariadbGtidPosition("0-1-100"), server_id=7)
    keys = ["db/prod:orders", "ünïcode key", "x" * 300]
    for key in keys:
        store.save(key, g, expected=ABSENT)
        assert store.load(key) == g
    with pytest.raises(ValueError):
        store.save("", g)


def test_schema_and_prefix_from_the_url(store_url):
    url, _ = store_url
    sep = "&" if "?" in url else "?"
    prefix = f"q{uuid.uuid4().hex[:8]}_"
    s = open_checkpoint_store(f"{url}{sep}checkpoint_table_prefix={prefix}")
    assert s.checkpoints.name == f"{prefix}binlog_checkpoints" and "checkpoint_" not in str(s.url)
    s.save("k", A)
    assert SqlCheckpointStore(url, table_prefix=prefix).load("k") == A
    assert SqlCheckpointStore(url).load("k") is None
    s.dispose()
    if url.startswith("postgresql"):
        with sa.create_engine(url).begin() as conn:
            conn.execute(sa.text("CREATE SCHEMA IF NOT EXISTS binlog"))
        s = open_checkpoint_store(f"{url}?checkpoint_schema=binlog")
        s.save("k", B)
        assert sa.inspect(s._get_engine()).has_table("binlog_checkpoints", schema="binlog")
        assert SqlCheckpointStore(url, schema="binlog").load("k") == B
        s.dispose()


def test_tables_have_the_documented_names(store_url):
    url, _ = store_url
    s = SqlCheckpointStore(url)
    s.save(f"k-{uuid.uuid4().hex}", A)
    names = set(sa.inspect(s._get_engine()).get_table_names())
    assert {"binlog_checkpoints", "binlog_checkpoint_history"} <= names
    s.dispose()


# ------------------------------------------------------------------ races

def _race_worker(url, prefix, key, pos, barrier, results) -> None:
    s = SqlCheckpointStore(url, table_prefix=prefix)
    s.load(key)  # connected and tables seen before the race starts
    barrier.wait(30)
    try:
        s.save(key, cp(pos), expected=cp(4))
        results.put(("won", pos, None))
    except CheckpointConflictError as exc:
        results.put(("conflict", pos, exc.actual.position if exc.actual else None))
    except Exception as exc:  # reported, so that the test shows it
        results.put(("error", pos, repr(exc)))
    finally:
        s.dispose()


def _check_one_winner(outcomes: list[tuple[str, int, object]], store, key: str, n: int) -> None:
    assert len(outcomes) == n
    assert not [o for o in outcomes if o[0] == "error"], outcomes
    winners = [pos for what, pos, _ in outcomes if what == "won"]
    assert len(winners) == 1, outcomes
    assert {actual for what, _, actual in outcomes if what == "conflict"} == {winners[0]}
    assert store.load(key) == cp(winners[0])
    assert [h.checkpoint.position for h in store.history(key)] == [winners[0], 4]


def test_processes_racing_the_same_compare_and_set_one_wins(store, store_url):
    url, prefix = store_url
    n = 6
    store.save("race", cp(4), expected=ABSENT)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race_worker, args=(url, prefix, "race", 100 + i, barrier, results))
             for i in range(n)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    _check_one_winner(outcomes, store, "race", n)


def test_threads_racing_the_same_compare_and_set_one_wins(store):
    import queue

    n = 8
    store.save("race", cp(4), expected=ABSENT)
    barrier, results = threading.Barrier(n), queue.Queue()

    def worker(pos: int) -> None:
        barrier.wait(30)
        try:
            store.save("race", cp(pos), expected=cp(4))
            results.put(("won", pos, None))
        except CheckpointConflictError as exc:
            results.put(("conflict", pos, exc.actual.position if exc.actual else None))
        except Exception as exc:
            results.put(("error", pos, repr(exc)))

    threads = [threading.Thread(target=worker, args=(200 + i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    _check_one_winner([results.get_nowait() for _ in threads], store, "race", n)


def _absent_worker(url, prefix, pos, barrier, results) -> None:
    s = SqlCheckpointStore(url, table_prefix=prefix)
    s.load("new")
    barrier.wait(30)
    try:
        s.save("new", cp(pos), expected=ABSENT)
        results.put(("won", pos, None))
    except CheckpointConflictError as exc:
        results.put(("conflict", pos, exc.actual.position if exc.actual else None))
    except Exception as exc:
        results.put(("error", pos, repr(exc)))
    finally:
        s.dispose()


def test_processes_racing_to_create_a_key_one_wins(store, store_url):
    url, prefix = store_url
    n = 5
    store.load("new")  # the tables exist
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_absent_worker, args=(url, prefix, 10 + i, barrier, results)) for i in range(n)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert not [o for o in outcomes if o[0] == "error"], outcomes
    winners = [pos for what, pos, _ in outcomes if what == "won"]
    assert len(winners) == 1, outcomes
    assert {actual for what, _, actual in outcomes if what == "conflict"} == {winners[0]}


def _increment_worker(url, prefix, rounds) -> None:
    s = SqlCheckpointStore(url, table_prefix=prefix, history_limit=1000)
    done = 0
    while done < rounds:
        current = s.load("counter")
        try:
            s.save("counter", cp(current.position + 1), expected=current)
            done += 1
        except CheckpointConflictError:
            continue
    s.dispose()


def test_concurrent_compare_and_set_never_loses_an_update(store, store_url):
    url, prefix = store_url
    store.save("counter", cp(4))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_increment_worker, args=(url, prefix, 15)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert store.load("counter") == cp(4 + 45)


# ------------------------------------------------------------------ run lock

def _hold_lock(url, prefix, key, held, release, results) -> None:
    s = SqlCheckpointStore(url, table_prefix=prefix)
    try:
        with s.exclusive(key):
            held.set()
            release.wait(60)
        results.put("released")
    except CheckpointLockedError:
        results.put("locked")
        held.set()


def test_exclusive_held_by_one_process_refuses_another_at_once(store, store_url):
    url, prefix = store_url
    ctx = multiprocessing.get_context("fork")
    held, release, results = ctx.Event(), ctx.Event(), ctx.Queue()
    holder = ctx.Process(target=_hold_lock, args=(url, prefix, "orders", held, release, results))
    holder.start()
    try:
        assert held.wait(60)
        import time

        started = time.monotonic()
        with pytest.raises(CheckpointLockedError, match="orders"):
            with store.exclusive("orders"):
                pass
        assert time.monotonic() - started < 5
        with store.exclusive("customers"):  # another key is free
            pass
    finally:
        release.set()
        holder.join(30)
    assert results.get(timeout=10) == "released"
    with store.exclusive("orders"):  # released at the holder's exit
        with pytest.raises(CheckpointLockedError):
            with store.exclusive("orders"):
                pass
    # released at the exit of the block, while this process (and its connection pool) lives on
    held, release, results = ctx.Event(), ctx.Event(), ctx.Queue()
    release.set()
    other = ctx.Process(target=_hold_lock, args=(url, prefix, "orders", held, release, results))
    other.start()
    other.join(60)
    assert results.get(timeout=10) == "released"


@pytest.mark.postgres
def test_postgres_lock_is_released_when_the_holder_dies(pg):
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    url = pg.url()
    ctx = multiprocessing.get_context("fork")
    held, release, results = ctx.Event(), ctx.Event(), ctx.Queue()
    holder = ctx.Process(target=_hold_lock, args=(url, prefix, "orders", held, release, results))
    holder.start()
    assert held.wait(60)
    s = SqlCheckpointStore(url, table_prefix=prefix)
    with pytest.raises(CheckpointLockedError):
        with s.exclusive("orders"):
            pass
    holder.kill()
    holder.join(30)
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            with s.exclusive("orders"):
                break
        except CheckpointLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    s.dispose()


def test_sqlite_lock_row_of_a_dead_process_is_taken_over(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    ctx = multiprocessing.get_context("fork")
    held, release, results = ctx.Event(), ctx.Event(), ctx.Queue()
    holder = ctx.Process(target=_hold_lock, args=(url, "", "orders", held, release, results))
    holder.start()
    assert held.wait(60)
    s = SqlCheckpointStore(url)
    with pytest.raises(CheckpointLockedError):
        with s.exclusive("orders"):
            pass
    holder.kill()
    holder.join(30)
    with s.exclusive("orders"):
        pass


# ------------------------------------------------------------------ URLs and errors

@pytest.mark.postgres
def test_urls_select_the_store(tmp_path, pg):
    assert isinstance(open_checkpoint_store(str(tmp_path / "files")), FileCheckpointStore)
    assert isinstance(open_checkpoint_store(f"file://{tmp_path}/files"), FileCheckpointStore)
    lite = open_checkpoint_store(f"sqlite:///{tmp_path}/c.db", history_limit=7)
    assert isinstance(lite, SqlCheckpointStore) and lite.history_limit == 7
    for driver in ("postgresql", "postgresql+psycopg"):
        s = open_checkpoint_store(pg.url(driver=driver))
        assert isinstance(s, SqlCheckpointStore) and s.url.drivername == "postgresql+psycopg"
        s.save(f"k-{uuid.uuid4().hex}", A)
        s.dispose()
    with pytest.raises(ValueError, match="unsupported checkpoint store scheme 'mysql'") as info:
        open_checkpoint_store("mysql://u:hunter2@db/x")
    assert "hunter2" not in str(info.value)


def test_the_password_appears_in_no_message(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there
    url = f"postgresql://loader:s3cr%40t-hunter2@127.0.0.1:{port}/db"
    s = open_checkpoint_store(url, timeout=2)
    assert "hunter2" not in repr(s)
    for action in (lambda: s.load("k"), lambda: s.save("k", A), lambda: s.exclusive("k").__enter__()):
        with pytest.raises(CheckpointStoreError) as info:
            action()
        assert "hunter2" not in str(info.value) and "s3cr" not in str(info.value)
        assert "***" in str(info.value)
    driver_error = Exception("FATAL: password authentication failed (s3cr@t-hunter2)")  # a driver's message
    assert "hunter2" not in str(s._error("connect", driver_error))
    assert mask_url("postgresql://u:p%40ss@h:1/d") == "postgresql://u:***@h:1/d"
    with pytest.raises(ValueError) as info:
        SqlCheckpointStore("postgresql://u:hunter2@h:notaport/d")
    assert "hunter2" not in str(info.value)
