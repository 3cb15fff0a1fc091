"""Concurrent runs of the same load: two merges of the same stream never both commit (the
checkpoint store's run lock, then its compare-and-set), two dumps of the same range that
reach their publish step together take turns and publish one complete batch, a lock holder
that dies (SIGKILL) leaves no stale lock."""
from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from airflow_provider_binlog.checkpoints import (Checkpoint, CheckpointConflictError,
                                                CheckpointLockedError, FileCheckpointStore)
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.merge.options import MergeOptions
from airflow_provider_binlog.staging import load_manifest
from airflow_provider_binlog.common.tables import TableFilter
from tests.reliability import support as S
from tests.s3_server import s3_server  # noqa: F401

DB = "rel_conc"
HOLD = """
import sys, time
from airflow_provider_binlog.checkpoints import FileCheckpointStore
with FileCheckpointStore(sys.argv[1]).exclusive(sys.argv[2]):
    print("holding", flush=True)
    sys.stdin.readline()
"""


def holder(store_dir, key):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(store_dir), key], cwd=str(S.ROOT),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(S.ROOT)})
    assert proc.stdout.readline().strip() == "holding"
    return proc


@pytest.fixture()
def dumped(mariadb, tmp_path):
    S.create_tables(mariadb, DB)
    start = S.here(mariadb)
    S.workload(mariadb, DB, S.rng_for("conc"), 60)
    rc = S.replica(mariadb)
    try:
        result = run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=TableFilter([f"{DB}.*"]))
    finally:
        rc.close()
    return result.manifest, S.source_state(mariadb, DB)


def test_a_second_merge_of_the_same_stream_is_refused_while_one_runs(dumped, spark, tmp_path, record_trials):
    from airflow_provider_binlog.merge.errors import ConcurrentRunError
    from tests.merging import apply_manifests

    manifest, expected = dumped
    store = FileCheckpointStore(tmp_path / "store")
    store.save("conc", manifest.start)
    other = holder(tmp_path / "store", "conc")       # another process runs this load
    try:
        before = S.snapshot_ids(spark, "rel_conc", DB)
        with pytest.raises(ConcurrentRunError, match=rf"another run of 'conc' is in progress \(process {other.pid}"):
            apply_manifests(spark, [manifest], MergeOptions(namespace="rel_conc", checkpoint_store=store.root,
                                                            checkpoint_key="conc"))
        assert S.snapshot_ids(spark, "rel_conc", DB) == before
        assert store.load("conc") == manifest.start
        # another key (another load) is not blocked; its own lock is
        with FileCheckpointStore(tmp_path / "store").exclusive("other"):
            with pytest.raises(CheckpointLockedError):
                with FileCheckpointStore(tmp_path / "store").exclusive("other"):
                    pass
    finally:
        os.kill(other.pid, signal.SIGKILL)           # dies holding it: the kernel releases it
        other.wait()
    apply_manifests(spark, [manifest], MergeOptions(namespace="rel_conc", checkpoint_store=store.root,
                                                    checkpoint_key="conc"))
    got = S.iceberg_state(spark, "rel_conc", DB)
    assert {t: got[t] for t in ("items", "pairs")} == {t: expected[t] for t in ("items", "pairs")}
    S.changelog_matches(got["events"], [manifest], DB, "events")
    assert store.load("conc") == manifest.end
    record_trials("two merges of the same stream at once")


def _cas(args):
    root, key, start, i = args
    store = FileCheckpointStore(root)
    try:
        store.save(key, Checkpoint(file="mysql-bin.000002", position=4 + i), expected=Checkpoint.from_json(start))
        return True
    except CheckpointConflictError:
        return False


def test_compare_and_set_lets_exactly_one_of_many_processes_advance(tmp_path, record_trials):
    store = FileCheckpointStore(tmp_path / "store")
    start = Checkpoint(file="mysql-bin.000001", position=4)
    rounds = S.trials(3)
    for r in range(rounds):
        store.save("cas", start)
        # spawned, not forked: a forked pool of this process (which may hold a Spark session and
        # its threads by now) once hung with a worker blocked on the task queue's lock
        with multiprocessing.get_context("spawn").Pool(8) as pool:
            won = pool.map(_cas, [(str(tmp_path / "store"), "cas", start.to_json(), i) for i in range(16)])
        assert won.count(True) == 1, won
        assert store.load("cas").position == 4 + won.index(True)
    record_trials("compare-and-set raced by 16 processes", rounds)


def test_two_dumps_of_the_same_range_at_once_publish_one_complete_batch(mariadb, tmp_path, record_trials):
    """Both dumps reach their publish step while another publisher holds the staging
    directory's publish lock: both wait (their manifests written, nothing published); once it
    is free one publishes and the other finds the same batch there and discards its copy. In
    the next round the batch is there already: both discard theirs, the published one stays."""
    S.create_tables(mariadb, DB)
    start = S.here(mariadb)
    S.workload(mariadb, DB, S.rng_for("conc-dumps"), 150)
    stop = S.here(mariadb)
    staging = tmp_path / "staging"
    rounds = S.trials(2)
    kept = None          # the published batch's creation time, from the first round on
    for r in range(rounds):
        staging.mkdir(exist_ok=True)
        before = sorted(p.name for p in staging.iterdir() if not p.name.startswith("."))
        lock_fd = os.open(staging / ".publish.lock", os.O_RDWR | os.O_CREAT, 0o600)
        procs = []
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            for i in range(2):
                spec = {"server": S.server_spec(mariadb), "start": start.to_json(), "stop": stop.to_json(),
                        "staging_dir": str(staging), "tables": [f"{DB}.*"], "server_id": 6200 + i,
                        "out": str(tmp_path / f"dump-{r}-{i}.json")}
                procs.append(subprocess.Popen([sys.executable, str(S.HERE / "_dump_child.py"), json.dumps(spec)],
                                              cwd=str(S.ROOT), env={**os.environ, "PYTHONPATH": str(S.ROOT)},
                                              stderr=subprocess.PIPE, text=True))
            # both finish writing, then wait for the lock: two complete work directories
            deadline = time.monotonic() + 120
            while len(waiting := sorted(staging.glob(".incomplete-*/manifest.json"))) < 2:
                assert all(p.poll() is None for p in procs), \
                    ("a dump finished while the publish lock was held",
                     [(p.returncode, p.communicate()[1][-2000:]) for p in procs if p.poll() is not None])
                assert time.monotonic() < deadline, "the two dumps never both reached their publish step"
                time.sleep(0.05)
            time.sleep(0.5)
            assert [p.poll() for p in procs] == [None, None], "a dump finished while the publish lock was held"
            assert sorted(p.name for p in staging.iterdir() if not p.name.startswith(".")) == before, \
                "a dump published while the publish lock was held"
            written = {json.loads(m.read_text())["created_at"] for m in waiting}
            assert len(written) == 2, written
        except BaseException:
            for proc in procs:
                proc.kill()
                proc.wait()
            raise
        finally:
            os.close(lock_fd)                        # the other publisher is done
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        results = [json.loads((tmp_path / f"dump-{r}-{i}.json").read_text()) for i in range(2)]
        assert results[0]["dump_id"] == results[1]["dump_id"]
        published = [p for p in staging.iterdir() if not p.name.startswith(".")]
        assert [p.name for p in published] == [results[0]["dump_id"]]
        # one copy was published, the other discarded: no work or replaced directory is left
        assert sorted(p.name for p in staging.iterdir() if p.name != ".publish.lock") == [results[0]["dump_id"]]
        manifest = load_manifest(published[0], verify=True)
        if kept is None:
            assert manifest.data["created_at"] in written
            kept = manifest.data["created_at"]
        else:
            assert manifest.data["created_at"] == kept, "a published batch was replaced by a copy of itself"
        assert S.replay([manifest], DB) == S.source_state(mariadb, DB)
    record_trials("two dumps of the same range at once", rounds)


def test_two_dumps_of_the_same_range_racing_to_publish_on_s3_publish_one_batch(
        mariadb, s3_server, tmp_path, monkeypatch, record_trials):  # noqa: F811
    """On an object store there is no lock: both dumps upload their files, wait until both
    have, then race to create the manifest. One creates it; the other finds the same batch,
    deletes its uploads and returns the published one. Only the winner's files are named and
    left."""
    from airflow_provider_binlog.staging.storage import ObjectStaging
    from airflow_provider_binlog.staging.tidy import remove_stale_attempts

    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    S.create_tables(mariadb, DB)
    start = S.here(mariadb)
    S.workload(mariadb, DB, S.rng_for("conc-dumps-s3"), 150)
    stop = S.here(mariadb)
    rounds = S.trials(2)
    for r in range(rounds):
        bucket = s3_server.create_bucket()
        location = f"s3://{bucket}/dumps"
        barrier = tmp_path / f"barrier-{r}"
        barrier.mkdir()
        procs = []
        for i in range(2):
            spec = {"server": S.server_spec(mariadb), "start": start.to_json(), "stop": stop.to_json(),
                    "staging_dir": location, "tables": [f"{DB}.*"], "server_id": 6300 + i,
                    "barrier": {"dir": str(barrier), "parties": 2}, "out": str(tmp_path / f"s3-dump-{r}-{i}.json")}
            procs.append(subprocess.Popen([sys.executable, str(S.HERE / "_dump_child.py"), json.dumps(spec)],
                                          cwd=str(S.ROOT), env={**os.environ, "PYTHONPATH": str(S.ROOT)},
                                          stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
        assert len(list(barrier.iterdir())) == 2          # both reached the conditional write
        results = [json.loads((tmp_path / f"s3-dump-{r}-{i}.json").read_text()) for i in range(2)]
        assert results[0]["dump_id"] == results[1]["dump_id"] and results[0]["manifest"] == results[1]["manifest"]
        keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert [k for k in keys if k.endswith("manifest.json")] == [f"dumps/{results[0]['dump_id']}/manifest.json"]
        manifest = load_manifest(results[0]["manifest"], verify=True)
        attempts = {f["path"].split("/")[0] for t in manifest.tables for f in t["files"]}
        assert len(attempts) == 1                          # the winner's files only
        assert {k.split("/")[2] for k in keys if k.count("/") >= 3} == attempts  # the loser's are gone
        assert remove_stale_attempts(ObjectStaging(location), older_than=0) == []
        assert S.replay([manifest], DB) == S.source_state(mariadb, DB)
    record_trials("two dumps of the same range racing to publish on S3", rounds)


@pytest.mark.reliability_full
def test_two_merge_processes_at_once(dumped, spark, spark_warehouse, tmp_path, record_trials):
    """Two real merge jobs (each its own Spark) on the same stream: the one that starts second
    while the first is inside its lock fails at once; the first completes; the tables are
    exact."""
    manifest, expected = dumped
    store = FileCheckpointStore(tmp_path / "store")
    store.save("conc2", manifest.start)
    options = MergeOptions(namespace="rel_conc2", warehouse=spark_warehouse,
                           checkpoint_store=str(tmp_path / "store"), checkpoint_key="conc2")
    argv = ["--options", options.to_json_text(), "--manifest", str(manifest.directory)]
    go = tmp_path / "go"
    first_out = tmp_path / "first.json"
    env = {**os.environ, **S.FAST_JVM, "PYTHONPATH": str(S.ROOT)}
    first = subprocess.Popen([sys.executable, str(S.HERE / "_merge_child.py"),
                              json.dumps({"argv": argv, "out": str(first_out), "hold_lock": str(go)})],
                             cwd=str(S.ROOT), env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(str(first_out) + ".inside"):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    second = S.run_child("_merge_child.py", {"argv": argv, "out": str(tmp_path / "second.json")}, env=S.FAST_JVM)
    assert second.returncode == 1, second
    assert second.result["error_type"] == "ConcurrentRunError"
    go.touch()
    assert first.wait(timeout=300) == 0
    S.wait_group_gone(first.pid)
    got = S.iceberg_state(spark, "rel_conc2", DB, refresh=True)
    assert {t: got[t] for t in ("items", "pairs")} == {t: expected[t] for t in ("items", "pairs")}
    S.changelog_matches(got["events"], [manifest], DB, "events")
    assert store.load("conc2") == manifest.end
    record_trials("two merge jobs (Spark) of the same stream at once")
