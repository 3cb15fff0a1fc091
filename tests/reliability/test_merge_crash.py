"""SIGKILL of the Spark merge job (driver and JVM) at every stage of a run over two batches
and three tables: after a CREATE/ALTER TABLE, before a table's commit, between two tables'
commits, before the ledger row, before / during / after the checkpoint store's update; then
the merge job's ``main`` again: the Iceberg tables equal the source exactly (no change lost, none
applied twice), the ledger holds each batch once and the store the last batch end."""
from __future__ import annotations

import json

import pytest

from airflow_provider_binlog.checkpoints import FileCheckpointStore
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.merge.options import MergeOptions
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.merge.spark import job as merge_job
from tests.merging import applied_state
from tests.reliability import support as S

DB = "rel_merge"
KEY = "rel"
POINTS = ["after_ddl", "before_commit", "after_commit", "before_ledger", "before_store",
          "mid_store_write", "after_store"]


@pytest.fixture(scope="module")
def batches(mariadb, tmp_path_factory):
    """Two contiguous dumps of three tables (the second after an ADD COLUMN ... DEFAULT) and
    the source state at the end of each."""
    staging = tmp_path_factory.mktemp("merge-staging")
    S.create_tables(mariadb, DB)
    rng = S.rng_for("merge-batches")
    start = S.here(mariadb)
    S.workload(mariadb, DB, rng, 80)
    rc = S.replica(mariadb)
    try:
        first = run_dump(rc, staging_dir=staging, start=start, tables=TableFilter([f"{DB}.*"]))
        at_first = S.source_state(mariadb, DB)
        mariadb.execute(f"ALTER TABLE {DB}.items ADD COLUMN extra INT DEFAULT 7 AFTER name")
        S.workload(mariadb, DB, rng, 60)
        mariadb.execute(f"UPDATE {DB}.items SET extra = id WHERE id % 3 = 0")
        second = run_dump(rc, staging_dir=staging, start=first.end, tables=TableFilter([f"{DB}.*"]))
    finally:
        rc.close()
    return [first.manifest, second.manifest], [at_first, S.source_state(mariadb, DB)]


def argv_for(spark_warehouse, namespace, store_dir, manifests, **more):
    options = MergeOptions(namespace=namespace, warehouse=spark_warehouse, checkpoint_store=str(store_dir),
                           checkpoint_key=KEY, **more)
    argv = ["--options", options.to_json_text()]
    for m in manifests:
        argv += ["--manifest", str(m.directory)]
    return argv


def check_exact(spark, namespace, manifests, expected, store):
    got = S.iceberg_state(spark, namespace, DB, refresh=True)  # committed by other processes too
    assert {t: got[t] for t in ("items", "pairs")} == {t: expected[t] for t in ("items", "pairs")}
    S.changelog_matches(got["events"], manifests, DB, "events")
    ledger = spark.sql(f"SELECT batch_id FROM lake.{namespace}._binlog_batches").collect()
    assert sorted(r[0] for r in ledger) == sorted(m.dump_id for m in manifests)
    assert store.load(KEY) == manifests[-1].end


def killed_merges_then_rerun(spark, spark_warehouse, tmp_path, manifests, expected, namespace, kills):
    """Run the merge in child processes killed as ``kills`` say, one after the other (each
    one recovering from the crash of the one before), then in this process."""
    store_dir = tmp_path / f"store-{namespace}"
    store = FileCheckpointStore(store_dir)
    store.save(KEY, manifests[0].start)
    argv = argv_for(spark_warehouse, namespace, store_dir, manifests)
    ends = [manifests[0].start] + [m.end for m in manifests]
    children = []
    for i, kill in enumerate(kills):
        child = S.run_child("_merge_child.py", {"argv": argv, "kill": kill,
                                                "out": str(tmp_path / f"{namespace}-{i}.json")},
                            env=S.FAST_JVM)
        assert child.returncode in (0, -9), child
        children.append(child)
        if not child.killed:
            break  # it finished: nothing is left for the next ones to interrupt
        # what the crash left is consistent: the store holds a batch boundary, each table is
        # at one (or was never committed)
        assert store.load(KEY) in ends
        for name in S.snapshot_ids(spark, namespace, DB):
            full = f"lake.{namespace}.{name}"
            if spark.catalog.tableExists(full):
                spark.sql(f"REFRESH TABLE {full}")
                state = applied_state(spark, full)
                assert state.checkpoint is None or state.checkpoint in ends
    out = tmp_path / f"{namespace}-rerun.json"
    assert merge_job.main(argv + ["--output-json", str(out)]) == 0, out.read_text()
    check_exact(spark, namespace, manifests, expected, store)
    # and a second rerun changes nothing
    heads = S.snapshot_ids(spark, namespace, DB)
    assert merge_job.main(argv + ["--output-json", str(out)]) == 0
    assert [b["status"] for b in json.loads(out.read_text())["batches"]] == ["already-applied"] * len(manifests)
    assert S.snapshot_ids(spark, namespace, DB) == heads
    return children


def test_merge_killed_between_tables_then_before_the_store_then_rerun(
        batches, spark, spark_warehouse, tmp_path, record_trials):
    """The first run dies between the commits of two tables; the second, recovering, dies
    after every commit and the ledger but before the checkpoint store advances (one batch
    here, to keep the default run short; the full set runs both)."""
    manifests, expected = batches[0][:1], batches[1][0]
    kills = [{"point": "after_commit", "after": 1}, {"point": "before_store", "after": 1}]
    children = killed_merges_then_rerun(spark, spark_warehouse, tmp_path, manifests, expected,
                                        "rel_merge_default", kills)
    assert [c.killed for c in children] == [True, True], children
    for kill in kills:
        record_trials(f"merge SIGKILL {kill['point']}", 1)


@pytest.mark.reliability_full
def test_merge_killed_at_random_points_then_rerun(batches, spark, spark_warehouse, tmp_path, record_trials):
    manifests, expected = batches[0], batches[1][1]
    for trial in range(S.trials()):
        rng = S.rng_for("merge-random", trial)
        kills = []
        for k in range(1 if trial < len(POINTS) else rng.randint(1, 3)):
            point = POINTS[trial] if trial < len(POINTS) else rng.choice(POINTS + ["random"])
            kills.append({"point": point, "seconds": rng.uniform(4.0, 40.0), "after": rng.randint(
                1, 6 if point in ("after_ddl", "before_commit", "after_commit") else 2)})
        children = killed_merges_then_rerun(spark, spark_warehouse, tmp_path, manifests, expected,
                                            f"rel_merge_rnd_{trial}", kills)
        for kill, child in zip(kills, children):
            record_trials(f"merge SIGKILL {kill['point']}" if child.killed
                          else "merge not killed (finished before the point)")


DIRECT_DB = "rel_direct"
DIRECT_TABLES = [f"d{i}" for i in range(8)]


def direct_state(server) -> dict:
    return {t: {r[0]: (r[1], r[2]) for r in server.query(f"SELECT id, v, note FROM {DIRECT_DB}.{t}")}
            for t in DIRECT_TABLES}


@pytest.fixture(scope="module")
def direct_batches(mariadb, tmp_path_factory):
    """Two contiguous dumps of eight tables: the first creates them, the second changes each
    with whole images and no key change (what the merge commits directly)."""
    staging = tmp_path_factory.mktemp("direct-staging")
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {DIRECT_DB}")
    for t in DIRECT_TABLES:
        mariadb.execute(f"DROP TABLE IF EXISTS {DIRECT_DB}.{t}")
        mariadb.execute(f"CREATE TABLE {DIRECT_DB}.{t} (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
    start = S.here(mariadb)
    for t in DIRECT_TABLES:
        mariadb.execute(f"INSERT INTO {DIRECT_DB}.{t} VALUES " + ", ".join(f"({i}, {i}, 'r{i}')" for i in range(1, 21)))
    rc = S.replica(mariadb)
    try:
        first = run_dump(rc, staging_dir=staging, start=start, tables=TableFilter([f"{DIRECT_DB}.*"]))
        rng = S.rng_for("direct-batches")
        for t in DIRECT_TABLES:
            for _ in range(6):
                key = rng.randint(1, 30)
                mariadb.execute(f"INSERT INTO {DIRECT_DB}.{t} VALUES ({key}, {-key}, 'new') "
                                f"ON DUPLICATE KEY UPDATE v = v + 100, note = 'updated'")
                mariadb.execute(f"DELETE FROM {DIRECT_DB}.{t} WHERE id = {rng.randint(1, 30)}")
        second = run_dump(rc, staging_dir=staging, start=first.end, tables=TableFilter([f"{DIRECT_DB}.*"]))
    finally:
        rc.close()
    return [first.manifest, second.manifest], direct_state(mariadb)


def test_direct_commits_of_parallel_tables_killed_mid_batch_then_rerun(
        direct_batches, spark, spark_warehouse, tmp_path, record_trials):
    """The second batch's tables are committed directly, three at a time from driver threads;
    the run is killed after the third commit: each table is at one batch end or the other and
    the store at the first; the rerun commits the rest once and equals the source."""
    manifests, expected = direct_batches
    namespace = "rel_direct_kill"
    store_dir = tmp_path / "store-direct"
    store = FileCheckpointStore(store_dir)
    first_end, second_end = (m.end for m in manifests)
    assert merge_job.main(argv_for(spark_warehouse, namespace, store_dir, manifests[:1])) == 0
    argv = argv_for(spark_warehouse, namespace, store_dir, manifests, parallel_tables=3)
    child = S.run_child("_merge_child.py", {"argv": argv, "kill": {"point": "after_commit", "after": 3},
                                            "out": str(tmp_path / "direct-killed.json")}, env=S.FAST_JVM)
    assert child.killed, child
    assert store.load(KEY) == first_end
    names = [f"lake.{namespace}.{DIRECT_DB}__{t}" for t in DIRECT_TABLES]
    at = []
    for name in names:
        spark.sql(f"REFRESH TABLE {name}")
        at.append(applied_state(spark, name).checkpoint)
    assert set(at) <= {first_end, second_end}
    assert 3 <= at.count(second_end) < len(names), at  # killed in the middle of the batch
    out = tmp_path / "direct-rerun.json"
    assert merge_job.main(argv + ["--output-json", str(out)]) == 0, out.read_text()
    batches = json.loads(out.read_text())["batches"]
    assert [b["status"] for b in batches] == ["already-applied", "applied"]
    tables = batches[1]["tables"]
    assert [t["status"] for t in tables] == ["already-applied" if a == second_end else "committed" for a in at]
    assert all(t["direct"] for t in tables if t["status"] == "committed")
    for t, name in zip(DIRECT_TABLES, names):
        spark.sql(f"REFRESH TABLE {name}")
        assert {r[0]: (r[1], r[2]) for r in spark.sql(f"SELECT id, v, note FROM {name}").collect()} == expected[t], t
    ledger = spark.sql(f"SELECT batch_id FROM lake.{namespace}._binlog_batches").collect()
    assert sorted(r[0] for r in ledger) == sorted(m.dump_id for m in manifests)
    assert store.load(KEY) == second_end
    heads = [applied_state(spark, name).head for name in names]
    assert merge_job.main(argv + ["--output-json", str(out)]) == 0
    assert [b["status"] for b in json.loads(out.read_text())["batches"]] == ["already-applied"] * 2
    assert [applied_state(spark, name).head for name in names] == heads
    record_trials("merge SIGKILL between direct commits of parallel tables", 1)
