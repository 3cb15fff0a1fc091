"""The run lock of the SQL checkpoint store is a lease in a table, renewed while the run lives
and verified before each commit phase: it holds behind a transaction pooler (PgBouncer), when
the server ends a session, and a run that stopped renewing it loses it and commits nothing."""
from __future__ import annotations

import time
import uuid

import pytest
import sqlalchemy as sa

from airflow_provider_binlog.checkpoints import CheckpointLockedError, CheckpointLockLostError
from airflow_provider_binlog.checkpoints.sql_store import SqlCheckpointStore
from tests.pgbouncer import PgBouncer, pgbouncer_server  # noqa: F401  (a fixture)
from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (a fixture)


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres),
                        pytest.param("pgbouncer", marks=pytest.mark.postgres), "sqlite"])
def url(request, tmp_path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_server").url()
    if request.param == "pgbouncer":
        return request.getfixturevalue("pgbouncer_server").url()
    return f"sqlite:///{tmp_path / 'checkpoints.db'}"


def _store(url: str, prefix: str, **kw) -> SqlCheckpointStore:
    return SqlCheckpointStore(url, table_prefix=prefix, **kw)


def test_a_second_run_is_refused_while_one_holds_the_lock_also_behind_a_transaction_pooler(url):
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    first, second = _store(url, prefix), _store(url, prefix)
    try:
        with first.exclusive("orders"):
            for _ in range(3):  # whichever server connection the pooler hands out
                with pytest.raises(CheckpointLockedError, match="orders"):
                    with second.exclusive("orders"):
                        pass
            with second.exclusive("customers"):
                pass
        with second.exclusive("orders"):  # released at the holder's exit
            pass
    finally:
        first.dispose()
        second.dispose()


@pytest.mark.postgres
def test_the_lock_outlives_the_holders_database_sessions(postgres_server):  # noqa: F811
    url = postgres_server.url()
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    holder, other = _store(url, prefix), _store(url, prefix)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with holder.exclusive("orders") as lock:
            with admin.connect() as conn:  # idle_session_timeout, a failover, pg_terminate_backend
                conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     "WHERE pid <> pg_backend_pid() AND datname = current_database()"))
            with pytest.raises(CheckpointLockedError, match="orders"):
                with other.exclusive("orders"):
                    pass
            lock.verify()  # still this run's
    finally:
        holder.dispose()
        other.dispose()
        admin.dispose()


def test_a_run_that_stopped_renewing_its_lease_loses_it_to_the_next_run_and_says_so(url):
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    stuck, next_run = _store(url, prefix, lease_seconds=2), _store(url, prefix, lease_seconds=2)
    try:
        with stuck.exclusive("orders") as lock:
            lock.pause_renewal()  # a process stopped (a paused VM, a stuck call) past its lease
            with pytest.raises(CheckpointLockedError):
                with next_run.exclusive("orders"):
                    pass
            time.sleep(2.5)
            with next_run.exclusive("orders"):
                with pytest.raises(CheckpointLockLostError, match="orders"):
                    lock.verify()
    finally:
        stuck.dispose()
        next_run.dispose()


def test_a_live_run_keeps_its_lease_past_its_length(url):
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    holder, other = _store(url, prefix, lease_seconds=2), _store(url, prefix, lease_seconds=2)
    try:
        with holder.exclusive("orders") as lock:
            time.sleep(3.5)  # renewed meanwhile
            lock.verify()
            with pytest.raises(CheckpointLockedError):
                with other.exclusive("orders"):
                    pass
    finally:
        holder.dispose()
        other.dispose()


@pytest.mark.spark
def test_a_merge_whose_lease_was_taken_by_another_run_commits_nothing(spark, tmp_path, monkeypatch):
    import random

    from airflow_provider_binlog.merge.errors import ConcurrentRunError
    from airflow_provider_binlog.merge.options import MergeOptions
    from airflow_provider_binlog.merge.lake import batch as batch_module
    from tests.merging import apply_manifests
    from tests.merging import head_snapshot
    from tests.integration.test_direct_commit import random_changes
    from tests.integration.test_merge_job import Binlog

    url = f"sqlite:///{tmp_path / 'checkpoints.db'}?checkpoint_lease_seconds=2"
    options = MergeOptions(namespace="lease_lost", checkpoint_store=url, checkpoint_key="k")
    rng, log, wide, pairs = random.Random(3), Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 20)
    apply_manifests(spark, [log.publish()], options)
    log.begin()
    random_changes(log, rng, wide, pairs, 20)
    manifest = log.publish()
    names = ["lake.lease_lost.s__wide", "lake.lease_lost.s__pair"]
    heads = [head_snapshot(spark, n) for n in names]
    real_exclusive = SqlCheckpointStore.exclusive
    real_plan = batch_module.plan_tables

    def stuck_past_the_lease_after_planning(*args, **kwargs):
        out = real_plan(*args, **kwargs)
        if not stolen:
            held[0].pause_renewal()
            time.sleep(2.5)
            other = SqlCheckpointStore(url)
            stolen.append(other.exclusive("k"))
            stolen[0].__enter__()  # the next run takes the lease
        return out

    held: list = []
    stolen: list = []

    def remembering(self, key):
        cm = real_exclusive(self, key)

        class Remember:
            def __enter__(self_inner):
                lock = cm.__enter__()
                held.append(lock)
                return lock

            def __exit__(self_inner, *exc):
                return cm.__exit__(*exc)
        return Remember()

    monkeypatch.setattr(SqlCheckpointStore, "exclusive", remembering)
    monkeypatch.setattr(batch_module, "plan_tables", stuck_past_the_lease_after_planning)
    with pytest.raises(ConcurrentRunError, match="taken by another run"):
        apply_manifests(spark, [manifest], options)
    assert [head_snapshot(spark, n) for n in names] == heads  # nothing of the batch committed
    assert SqlCheckpointStore(url).load("k") == manifest.start
    stolen[0].__exit__(None, None, None)
