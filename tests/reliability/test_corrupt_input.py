"""Corrupted input of every kind gives a typed error naming what is wrong, and nothing is
committed: bytes flipped in a binlog file (read from disk, or served by the server), binlog
files truncated anywhere, the corpus' negative samples, a malformed manifest, a manifest
pointing at a missing Parquet file, a staged Parquet file with a flipped byte, a damaged
checkpoint store file. "Nothing committed": the Iceberg snapshot ids, the ledger and the
checkpoint store are unchanged."""
from __future__ import annotations

import json
import shutil

import pytest

from airflow_provider_binlog.checkpoints import (CheckpointStoreError,
                                                FileCheckpointStore)
from airflow_provider_binlog.codec import BinlogError, TruncatedEventError, read_binlog_file
from airflow_provider_binlog.codec.events import RowsEvent
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.merge.options import MergeOptions
from airflow_provider_binlog.replica import ReplicaError
from airflow_provider_binlog.staging import ManifestError, load_manifest
from airflow_provider_binlog.common.tables import TableFilter
from tests.reliability import support as S
from tests.s3_server import s3_server  # noqa: F401

DB = "rel_corrupt"


# --------------------------------------------------------------------------- binlog files


@pytest.fixture(scope="module")
def binlog_file(mariadb, tmp_path_factory):
    """A copy of a closed binlog file of the shared server holding a workload."""
    S.create_tables(mariadb, DB)
    mariadb.flush_binary_logs()
    S.workload(mariadb, DB, S.rng_for("corrupt-file"), 60)
    name = mariadb.master_status()[0]
    mariadb.flush_binary_logs()
    copy = tmp_path_factory.mktemp("binlog") / name
    shutil.copyfile(mariadb.binlog_path(name), copy)
    return copy


def events_of(path):
    return [(e.pos, e.header.event_size, type(e).__name__) for e in read_binlog_file(path)]


def decode_all(path):
    return sum(len(e.rows) for e in read_binlog_file(path) if isinstance(e, RowsEvent))


def test_flipped_bytes_in_a_binlog_file_are_typed_errors(binlog_file, tmp_path, record_trials):
    data = binlog_file.read_bytes()
    events = events_of(binlog_file)
    rng = S.rng_for("flip-file")
    trials = 200 * (S.TRIALS if S.FULL else 1)
    for trial in range(trials):
        pos, size, kind = rng.choice(events[1:])  # past the FORMAT_DESCRIPTION
        offset = pos + rng.randrange(size)
        bad = bytearray(data)
        bad[offset] ^= 1 << rng.randrange(8)
        path = tmp_path / binlog_file.name
        path.write_bytes(bad)
        # CRC32 detects every single-bit flip: the file never decodes as if it were intact
        with pytest.raises(BinlogError) as info:
            decode_all(path)
        assert info.value.source == path.name and info.value.offset is not None, (trial, offset, kind)
    record_trials("bit flipped in a binlog file (read from disk)", trials)


def test_truncated_binlog_files_are_typed_errors(binlog_file, tmp_path, record_trials):
    data = binlog_file.read_bytes()
    boundaries = {pos for pos, _, _ in events_of(binlog_file)} | {len(data)}
    rng = S.rng_for("truncate-file")
    cuts = rng.sample(range(5, len(data)), min(len(data) - 5, 150 * (S.TRIALS if S.FULL else 1)))
    for cut in cuts:
        path = tmp_path / binlog_file.name
        path.write_bytes(data[:cut])
        if cut in boundaries:
            decode_all(path)      # cut between two events: a shorter, valid file
            continue
        # the error names the event the cut fell into (its start) and how much of it is there
        start = max(b for b in boundaries if b < cut)
        with pytest.raises(TruncatedEventError) as info:
            decode_all(path)
        assert type(info.value) is TruncatedEventError, (cut, info.value)
        assert (info.value.source, info.value.offset) == (path.name, start), (cut, str(info.value))
        assert f"input ends {cut - start} bytes into " in str(info.value), (cut, str(info.value))
    record_trials("binlog file truncated at a random offset", len(cuts))


def test_corpus_negative_samples_are_typed_errors(record_trials):
    corpus = pytest.importorskip("tests.unit.codec.test_codec_corpus")
    for name, (error_type, offset) in sorted(corpus.NEGATIVE.items()):
        path = corpus.CORPUS / name
        assert path.is_file(), f"negative sample {name} is missing from the corpus"
        with pytest.raises(error_type) as info:
            decode_all(path)
        assert type(info.value) is error_type, (name, info.value)
        assert (info.value.source, info.value.offset) == (path.name, offset), (name, str(info.value))
    record_trials("corpus negative samples", len(corpus.NEGATIVE))


@pytest.fixture(scope="module")
def damaged_server(mariadb_factory):
    """A server of this module only: its binlog files get damaged."""
    return mariadb_factory(binlog_cache_size=1048576)


def rows_event_offsets(path):
    return [(e.pos, e.header.event_size) for e in read_binlog_file(path) if isinstance(e, RowsEvent)]


@pytest.mark.parametrize("damage", ["flip_body", "flip_length", "truncate"])
def test_damaged_binlog_on_the_server_fails_the_dump_with_a_typed_error(damaged_server, tmp_path, damage,
                                                                       record_trials):
    server = damaged_server
    S.create_tables(server, DB)
    start = S.here(server)
    S.workload(server, DB, S.rng_for(f"server-{damage}"), 40)
    name = server.master_status()[0]
    server.flush_binary_logs()
    S.workload(server, DB, S.rng_for(f"server-{damage}-2"), 10)
    path = server.binlog_path(name)
    original = path.read_bytes()
    pos, size = rows_event_offsets(path)[len(rows_event_offsets(path)) // 2]
    bad = bytearray(original)
    if damage == "flip_body":
        bad[pos + 19 + (size - 23) // 2] ^= 0x10
    elif damage == "flip_length":
        bad[pos + 9 + 2] ^= 0x01     # the event length: +64 KiB
    else:
        bad = bad[:pos + size // 2]
    path.write_bytes(bytes(bad))
    staging = tmp_path / "staging"
    try:
        rc = S.replica(server)
        try:
            with pytest.raises((BinlogError, ReplicaError)) as info:
                run_dump(rc, staging_dir=staging, start=start, tables=TableFilter([f"{DB}.*"]))
        finally:
            rc.close()
    finally:
        path.write_bytes(original)
    message = str(info.value)
    assert "purged" not in message, f"a damaged binlog is not a purged one: {message}"
    assert name in message, message
    assert not [p for p in staging.iterdir()], "a failed dump left files behind"
    record_trials(f"binlog damaged on the server ({damage.replace('_', ' ')})")


# --------------------------------------------------------------------------- staged batches


def two_batches(mariadb, staging, seed: str) -> tuple:
    """Two contiguous dumps of the workload's tables into ``staging`` (a path or a URI)."""
    S.create_tables(mariadb, DB)
    rng = S.rng_for(seed)
    start = S.here(mariadb)
    S.workload(mariadb, DB, rng, 30, tables=("items", "pairs"))
    rc = S.replica(mariadb)
    try:
        first = run_dump(rc, staging_dir=staging, start=start, tables=TableFilter([f"{DB}.*"]))
        S.workload(mariadb, DB, rng, 30, tables=("items", "pairs"))
        second = run_dump(rc, staging_dir=staging, start=first.end, tables=TableFilter([f"{DB}.*"]))
    finally:
        rc.close()
    return first.manifest, second.manifest


@pytest.fixture()
def batch(mariadb, tmp_path):
    """A merged first batch (the table exists, the store is at its end) and a second staged
    batch, not merged yet."""
    return two_batches(mariadb, tmp_path / "staging", "staged")


def argv(spark_warehouse, tmp_path, namespace, manifest):
    options = MergeOptions(namespace=namespace, warehouse=spark_warehouse,
                           checkpoint_store=str(tmp_path / "store"), checkpoint_key="k")
    return ["--options", options.to_json_text(), "--manifest", str(manifest),
            "--output-json", str(tmp_path / "out.json")]


def test_bad_staged_batches_are_refused_and_nothing_is_committed(batch, spark, spark_warehouse, tmp_path,
                                                                  record_trials):
    from airflow_provider_binlog.merge.spark import job as merge_job

    first, second = batch
    namespace = "rel_corrupt_staged"
    store = FileCheckpointStore(tmp_path / "store")
    store.save("k", first.start)
    assert merge_job.main(argv(spark_warehouse, tmp_path, namespace, first.directory)) == 0
    good = second.directory
    (entry, *_) = second.tables
    part = entry["files"][0]["path"]

    def damaged(kind):
        target = tmp_path / f"bad-{kind}"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(good, target)
        manifest = target / "manifest.json"
        if kind == "malformed manifest":
            text = manifest.read_text()
            manifest.write_text(text[: len(text) // 2])
        elif kind == "manifest of another format":
            data = json.loads(manifest.read_text())
            data["format"] = "something-else"
            manifest.write_text(json.dumps(data))
        elif kind == "manifest without its tables":
            data = json.loads(manifest.read_text())
            del data["tables"]
            manifest.write_text(json.dumps(data))
        elif kind == "manifest with a bad checkpoint":
            data = json.loads(manifest.read_text())
            data["end"] = {"file": "mariadb-bin", "pos": -3}
            manifest.write_text(json.dumps(data))
        elif kind == "missing Parquet file":
            (target / part).unlink()
        elif kind == "truncated Parquet file":
            data = (target / part).read_bytes()
            (target / part).write_bytes(data[: len(data) // 2])
        elif kind == "Parquet file with a flipped byte":
            data = bytearray((target / part).read_bytes())
            data[len(data) // 3] ^= 0x04
            (target / part).write_bytes(bytes(data))
        elif kind == "damaged checkpoint store":
            path = tmp_path / "store" / "k.json"
            saved = path.read_bytes()
            path.write_bytes(saved[: len(saved) // 2])
            return target, saved
        return target, None

    kinds = ["malformed manifest", "manifest of another format", "manifest without its tables",
             "manifest with a bad checkpoint", "missing Parquet file", "truncated Parquet file",
             "Parquet file with a flipped byte", "damaged checkpoint store"]
    for kind in kinds:
        before = S.snapshot_ids(spark, namespace, DB), store.load("k")
        target, saved = damaged(kind)
        code = None
        try:
            code = merge_job.main(argv(spark_warehouse, tmp_path, namespace, target))
        except CheckpointStoreError as exc:
            assert kind == "damaged checkpoint store" and "k.json" in str(exc)
        finally:
            if saved is not None:
                (tmp_path / "store" / "k.json").write_bytes(saved)
        out = json.loads((tmp_path / "out.json").read_text())
        assert code in (None, 1), (kind, out)
        assert out.get("error"), (kind, out)
        if kind != "damaged checkpoint store":
            assert out["error_type"] in ("ManifestError", "MergeJobError"), (kind, out)
            assert "manifest.json" in out["error"] or part in out["error"], (kind, out)
        assert (S.snapshot_ids(spark, namespace, DB), store.load("k")) == before, kind
        record_trials(f"bad staged input: {kind}")
    # the intact batch still applies
    assert merge_job.main(argv(spark_warehouse, tmp_path, namespace, good)) == 0
    assert store.load("k") == second.end
    with pytest.raises(ManifestError, match="sha256|checksum"):
        damaged("Parquet file with a flipped byte")
        load_manifest(tmp_path / "bad-Parquet file with a flipped byte", verify=True)


def test_bad_staged_batches_on_s3_are_refused_and_nothing_is_committed(mariadb, s3_server, spark, spark_warehouse,  # noqa: F811
                                                                        tmp_path, monkeypatch, record_trials):
    """The same damage to a batch staged on an S3-API server: a manifest cut in half, a Parquet
    object missing, truncated, or with a flipped byte (same size): a typed error naming it, and
    nothing committed; once repaired, the batch applies."""
    from airflow_provider_binlog.merge.spark import job as merge_job

    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_server.create_bucket()
    first, second = two_batches(mariadb, f"s3://{bucket}/stage", "staged-s3")
    namespace = "rel_corrupt_staged_s3"
    store = FileCheckpointStore(tmp_path / "store")
    store.save("k", first.start)
    assert merge_job.main(argv(spark_warehouse, tmp_path, namespace, first.ref)) == 0
    client = s3_server.client()
    batch_key = second.ref.split(f"s3://{bucket}/", 1)[1].rsplit("/", 1)[0]
    part = second.tables[0]["files"][0]["path"]
    keys = {"manifest": f"{batch_key}/manifest.json", "part": f"{batch_key}/{part}"}
    for kind, which, damage in (
            ("malformed manifest", "manifest", lambda b: b[: len(b) // 2]),
            ("missing Parquet object", "part", None),
            ("truncated Parquet object", "part", lambda b: b[: len(b) // 2]),
            ("Parquet object with a flipped byte", "part",
             lambda b: b[: len(b) // 3] + bytes([b[len(b) // 3] ^ 0x04]) + b[len(b) // 3 + 1:])):
        before = S.snapshot_ids(spark, namespace, DB), store.load("k")
        saved = client.get_object(Bucket=bucket, Key=keys[which])["Body"].read()
        if damage is None:
            client.delete_object(Bucket=bucket, Key=keys[which])
        else:
            client.put_object(Bucket=bucket, Key=keys[which], Body=damage(saved))
        try:
            code = merge_job.main(argv(spark_warehouse, tmp_path, namespace, second.ref))
        finally:
            client.put_object(Bucket=bucket, Key=keys[which], Body=saved)
        out = json.loads((tmp_path / "out.json").read_text())
        assert code == 1 and out["error_type"] == "ManifestError", (kind, out)
        assert "manifest.json" in out["error"] or part in out["error"], (kind, out)
        assert (S.snapshot_ids(spark, namespace, DB), store.load("k")) == before, kind
        record_trials(f"bad staged input on S3: {kind}")
    assert merge_job.main(argv(spark_warehouse, tmp_path, namespace, second.ref)) == 0
    assert store.load("k") == second.end


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, prefix + (i,))


def test_mutated_manifests_are_typed_errors(batch, tmp_path, record_trials):
    """Any key deleted or any value replaced by one of another type: the merge job's planning
    (which reads and checks the manifest) raises ManifestError or MergeJobError, or accepts
    a harmless change; never another exception."""
    from airflow_provider_binlog.merge.batches import plan_batches
    from airflow_provider_binlog.merge.errors import MergeJobError

    _, second = batch
    original = json.loads((second.directory / "manifest.json").read_text())
    paths = [p for p in _paths(original) if p]
    rng = S.rng_for("manifest-mutations")
    target = tmp_path / "mutated"
    shutil.copytree(second.directory, target)
    trials = 150 * (S.TRIALS if S.FULL else 1)
    outcomes = {"refused": 0, "accepted": 0}
    for trial in range(trials):
        data = json.loads(json.dumps(original))
        path = rng.choice(paths)
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.3:
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice([None, "x", -1, 0, 2**70, 1.5, True, [], {}, [1], {"a": 1}])
        (target / "manifest.json").write_text(json.dumps(data))
        try:
            plan_batches([target])
            outcomes["accepted"] += 1   # a field the merge does not use (a column's description)
        except (ManifestError, MergeJobError):
            outcomes["refused"] += 1
        except Exception as exc:  # pragma: no cover - what the test is for
            raise AssertionError(f"trial {trial}: {path} -> "
                                 f"{parent.get(path[-1], '<deleted>') if isinstance(parent, dict) else '?'}: "
                                 f"untyped {type(exc).__name__}: {exc}") from exc
    record_trials("manifest with a random key deleted or value replaced", trials, **outcomes)
