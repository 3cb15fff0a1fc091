"""SIGKILL of the dump at every stage (before the first row, mid-transaction, mid-Parquet-write,
after the Parquet files before the manifest, after the manifest, after the publish), then a
rerun: nothing half-written is ever published, the reruns chain without gap or overlap, the
staged changes replay to the source and the merged Iceberg tables equal it."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.checkpoint import Checkpoint, FileCheckpointStore
from airflow_provider_binlog.dump import run_dump
from airflow_provider_binlog.staging import load_manifest
from airflow_provider_binlog.tables import TableFilter
from tests.reliability import support as S

DB = "rel_dump"
POINTS = ["before_first_row", "mid_transaction", "mid_parquet_write", "before_manifest",
          "after_manifest", "after_publish"]


@pytest.fixture()
def source(mariadb):
    S.create_tables(mariadb, DB)
    return mariadb


def published(staging) -> list:
    return sorted(p.parent.name for p in staging.glob("*/manifest.json") if not p.parent.name.startswith("."))


def killed_dump_then_rerun(server, staging, start: Checkpoint, kill: dict, tmp_path) -> tuple:
    """Run a dump that kills itself as ``kill`` says; check what it left; rerun it in this
    process. Returns (rerun manifest, whether the child was killed)."""
    before = published(staging)
    child = S.run_child("_dump_child.py", {
        "server": S.server_spec(server), "start": start.to_json(), "staging_dir": str(staging),
        "tables": [f"{DB}.*"], "row_group_rows": 40, "kill": kill, "out": str(tmp_path / "child.json")})
    if child.returncode not in (0, -9):
        raise AssertionError(child)
    after = published(staging)
    if child.killed and kill["point"] != "after_publish":
        assert after == before, f"a killed dump published something: {kill}"
    for name in set(after) - set(before):
        load_manifest(staging / name)          # whatever is published is complete
    rc = S.replica(server)
    try:
        result = run_dump(rc, staging_dir=staging, start=start, tables=TableFilter([f"{DB}.*"]))
    finally:
        rc.close()
    assert result.start == start
    if child.result is not None:               # the child finished: the rerun is the same dump
        assert child.result["dump_id"] == result.manifest.dump_id
    # one published dump per range, stale work directories cleared
    assert published(staging).count(result.manifest.directory.name) == 1
    return result.manifest, child.killed


def check_chain(manifests, server, spark=None, tmp_path=None, namespace=None):
    for prev, nxt in zip(manifests, manifests[1:]):
        assert prev.end == nxt.start, "the reruns do not chain"
    assert S.replay(manifests, DB) == S.source_state(server, DB)
    if spark is not None:
        from airflow_provider_binlog.merge.spark.batch import apply_manifests
        store = FileCheckpointStore(tmp_path / "store")
        store.save("dump", Checkpoint.from_json(manifests[0].start))
        apply_manifests(spark, manifests, "lake", namespace, store, "dump")
        got = S.iceberg_state(spark, namespace, DB)
        want = S.source_state(server, DB)
        assert {t: got[t] for t in ("items", "pairs")} == {t: want[t] for t in ("items", "pairs")}
        S.changelog_matches(got["events"], manifests, DB, "events")
        assert store.load("dump") == Checkpoint.from_json(manifests[-1].end)


def test_dump_killed_at_each_point_then_rerun(source, tmp_path, record_trials):
    rng = S.rng_for("dump-points")
    staging = tmp_path / "staging"
    start = S.here(source)
    manifests = []
    for point in POINTS:
        S.workload(source, DB, rng, 60)
        kill = {"point": point, "after": rng.randint(1, 8) if point == "mid_transaction" else 1}
        manifest, killed = killed_dump_then_rerun(source, staging, start, kill, tmp_path)
        assert killed, f"the dump was not killed at {point}"
        manifests.append(manifest)
        start = Checkpoint.from_json(manifest.end)
        record_trials(f"dump SIGKILL {point}")
    check_chain(manifests, source)
    assert not [p for p in staging.iterdir() if p.name.startswith(".") and p.is_dir()], \
        "work directories of killed dumps are left behind"


@pytest.mark.reliability_full
def test_dump_killed_at_random_points_then_rerun(source, spark, tmp_path, record_trials):
    staging = tmp_path / "staging"
    start = S.here(source)
    manifests = []
    for trial in range(S.trials()):
        rng = S.rng_for("dump-random", trial)
        transactions = rng.randint(1, 300)
        S.workload(source, DB, rng, transactions, max_statements=rng.randint(1, 8))
        point = rng.choice(POINTS + ["random"] * 3 + ["timer"])
        after = {"mid_transaction": transactions, "mid_parquet_write": 2, "random": 4 * transactions}
        kill = {"point": point, "after": rng.randint(1, after.get(point, 1)), "seconds": rng.uniform(0.0, 0.4)}
        manifest, killed = killed_dump_then_rerun(source, staging, start, kill, tmp_path)
        record_trials(f"dump SIGKILL {point}" if killed else "dump not killed (finished before the point)")
        manifests.append(manifest)
        start = Checkpoint.from_json(manifest.end)
        assert S.replay(manifests, DB) == S.source_state(source, DB), f"trial {trial}: {kill}"
    check_chain(manifests, source, spark, tmp_path, "rel_dump_random")
