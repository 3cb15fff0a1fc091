"""SIGKILL of the dump at every stage (before the first row, mid-transaction, mid-Parquet-write,
after the Parquet files before the manifest, after the manifest, after the publish), then a
rerun: nothing half-written is ever published, the reruns chain without gap or overlap, the
staged changes replay to the source and the merged Iceberg tables equal it. Staging in a
local directory, and on an S3-API server (where the manifest is the one conditional write)."""
from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint, FileCheckpointStore
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.staging import load_manifest
from airflow_provider_binlog.common.tables import TableFilter
from tests.reliability import support as S
from tests.s3_server import s3_server  # noqa: F401

DB = "rel_dump"
POINTS = ["before_first_row", "mid_transaction", "mid_parquet_write", "before_manifest",
          "after_manifest", "after_publish"]


@pytest.fixture()
def source(mariadb):
    S.create_tables(mariadb, DB)
    return mariadb


class Staging:
    """A staging location of the test: a local directory, or a bucket prefix on ``s3_server``."""

    def __init__(self, tmp_path, server=None):
        self.server = server
        self.path = tmp_path / "staging"
        self.bucket = server.create_bucket() if server is not None else None
        self.location = f"s3://{self.bucket}/dumps" if server is not None else str(self.path)

    def published(self) -> list:
        if self.server is None:
            return sorted(p.parent.name for p in self.path.glob("*/manifest.json")
                          if not p.parent.name.startswith("."))
        found = self.server.client().list_objects_v2(Bucket=self.bucket, Prefix="dumps/").get("Contents", [])
        return sorted(o["Key"].split("/")[1] for o in found if o["Key"].endswith("/manifest.json"))

    def batch(self, name: str) -> str:
        return f"{self.location}/{name}"

    def publishing_points(self) -> tuple:
        """Kill points after which the batch is published (on an object store, writing the
        manifest is publishing it)."""
        return ("after_publish",) if self.server is None else ("after_manifest", "after_publish")


@pytest.fixture(params=["local", "s3"])
def staging(request, tmp_path, monkeypatch) -> Staging:
    if request.param == "local":
        return Staging(tmp_path)
    server = request.getfixturevalue("s3_server")
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    # a local work area of this test's own (the dumps' and the children's)
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return Staging(tmp_path, server)


def published(staging) -> list:
    return staging.published()


def killed_dump_then_rerun(server, staging, start: Checkpoint, kill: dict, tmp_path) -> tuple:
    """Run a dump that kills itself as ``kill`` says; check what it left; rerun it in this
    process. Returns (rerun manifest, whether the child was killed)."""
    before = published(staging)
    child = S.run_child("_dump_child.py", {
        "server": S.server_spec(server), "start": start.to_json(), "staging_dir": staging.location,
        "tables": [f"{DB}.*"], "row_group_rows": 40, "kill": kill, "out": str(tmp_path / "child.json")})
    if child.returncode not in (0, -9):
        raise AssertionError(child)
    after = published(staging)
    if child.killed and kill["point"] not in staging.publishing_points():
        assert after == before, f"a killed dump published something: {kill}"
    for name in set(after) - set(before):
        load_manifest(staging.batch(name))     # whatever is published is complete
    rc = S.replica(server)
    try:
        result = run_dump(rc, staging_dir=staging.location, start=start, tables=TableFilter([f"{DB}.*"]))
    finally:
        rc.close()
    assert result.start == start
    if child.result is not None:               # the child finished: the rerun is the same dump
        assert child.result["dump_id"] == result.manifest.dump_id
    # one published dump per range, stale work directories cleared
    assert published(staging).count(result.manifest.directory_ref.rsplit("/", 1)[1]) == 1
    return result.manifest, child.killed


def check_chain(manifests, server, spark=None, tmp_path=None, namespace=None):
    for prev, nxt in zip(manifests, manifests[1:]):
        assert prev.end == nxt.start, "the reruns do not chain"
    assert S.replay(manifests, DB) == S.source_state(server, DB)
    if spark is not None:
        from tests.merging import apply_manifests
        from airflow_provider_binlog.merge.options import MergeOptions
        store = FileCheckpointStore(tmp_path / "store")
        store.save("dump", manifests[0].start)
        apply_manifests(spark, manifests, MergeOptions(namespace=namespace, checkpoint_store=store.root,
                                                       checkpoint_key="dump"))
        got = S.iceberg_state(spark, namespace, DB)
        want = S.source_state(server, DB)
        assert {t: got[t] for t in ("items", "pairs")} == {t: want[t] for t in ("items", "pairs")}
        S.changelog_matches(got["events"], manifests, DB, "events")
        assert store.load("dump") == manifests[-1].end


def test_dump_killed_at_each_point_then_rerun(source, staging, tmp_path, record_trials):
    rng = S.rng_for("dump-points")
    start = S.here(source)
    manifests = []
    for point in POINTS:
        S.workload(source, DB, rng, 60)
        kill = {"point": point, "after": rng.randint(1, 8) if point == "mid_transaction" else 1}
        manifest, killed = killed_dump_then_rerun(source, staging, start, kill, tmp_path)
        assert killed, f"the dump was not killed at {point}"
        manifests.append(manifest)
        start = manifest.end
        record_trials(f"dump SIGKILL {point}" + (" (S3 staging)" if staging.server else ""))
    check_chain(manifests, source)
    if staging.server is None:
        assert not [p for p in staging.path.iterdir() if p.name.startswith(".") and p.is_dir()], \
            "work directories of killed dumps are left behind"
        return
    # the killed dumps' uploads, named by no manifest, go; every published batch stays whole
    from airflow_provider_binlog.staging.storage import ObjectStaging
    from airflow_provider_binlog.staging.remote import local_work_root
    from airflow_provider_binlog.staging.tidy import remove_stale_attempts

    removed = remove_stale_attempts(ObjectStaging(staging.location), older_than=0)
    assert len(removed) == 1  # the dump killed with its files uploaded, before its manifest
    for manifest in manifests:
        assert load_manifest(manifest.ref, verify=True).data == manifest.data
    assert not remove_stale_attempts(ObjectStaging(staging.location), older_than=0)
    assert not list(Path(local_work_root()).glob(".incomplete-*"))


@pytest.mark.reliability_full
def test_dump_killed_at_random_points_then_rerun(source, spark, tmp_path, record_trials):
    staging = Staging(tmp_path)
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
        start = manifest.end
        assert S.replay(manifests, DB) == S.source_state(source, DB), f"trial {trial}: {kill}"
    check_chain(manifests, source, spark, tmp_path, "rel_dump_random")
