"""The concurrency torture (long set): merges of one source started several at once, some
killed at a random moment, round after round, with the file store, with the PostgreSQL store
directly and behind PgBouncer in transaction pooling, and without a store. Each run applies
what it can or is refused with a clear error; after every round no key is in Iceberg twice
and no change is logged twice, and at the end every table equals the source.

``BINLOG_TORTURE_ROUNDS`` sets the rounds per store (default 4); the figures go to the
trials record (docs/reliability.md)."""
from __future__ import annotations

import os
import random
import threading
import uuid

import pytest

from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.checkpoints import open_checkpoint_store
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.merge.options import MergeOptions
from tests.pgbouncer import pgbouncer_server  # noqa: F401  (a fixture)
from tests.postgres import postgres_server  # noqa: F401  (a fixture)
from tests.reliability import support as S

pytestmark = [pytest.mark.long, pytest.mark.mariadb, pytest.mark.spark]

DB = "torture"
BATCHES = 5
AT_ONCE = 3
#: what a run that did not apply everything may say: another run holds the lock or committed first
REFUSALS = ("ConcurrentRunError", "ConcurrentCommitError", "CheckpointConflictError", "BatchGapError")


@pytest.fixture(scope="module")
def batches(mariadb, tmp_path_factory):
    """Five staged batches of the source's changes, and the source's state after them."""
    S.create_tables(mariadb, DB)
    staging = tmp_path_factory.mktemp("torture") / "staging"
    start, manifests = S.here(mariadb), []
    rng = S.rng_for("torture")
    for _ in range(BATCHES):
        S.workload(mariadb, DB, rng, 25)
        rc = S.replica(mariadb)
        try:
            result = run_dump(rc, staging_dir=staging, start=start, tables=TableFilter([f"{DB}.*"]))
        finally:
            rc.close()
        manifests.append(result.manifest)
        start = result.end
    return manifests, S.source_state(mariadb, DB)


def _store_url(mode: str, request, tmp_path) -> str | None:
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    if mode == "file":
        return str(tmp_path / "store")
    if mode == "postgresql":
        return request.getfixturevalue("postgres_server").url() + f"?checkpoint_table_prefix={prefix}"
    if mode == "pgbouncer":
        return request.getfixturevalue("pgbouncer_server").url() + f"?checkpoint_table_prefix={prefix}"
    return None


def _check_no_doubles(spark, namespace: str, manifests) -> None:
    from airflow_provider_binlog.common.tables import iceberg_table_name

    for table, keys in (("items", "id"), ("pairs", "a, b")):
        name = f"lake.{namespace}.{iceberg_table_name(DB, table)}"
        if spark.catalog.tableExists(name):
            spark.sql(f"REFRESH TABLE {name}")
            twice = spark.sql(f"SELECT {keys}, count(*) n FROM {name} GROUP BY {keys} HAVING n > 1").collect()
            assert twice == [], f"{name}: keys twice: {twice[:5]}"
    S.iceberg_state(spark, namespace, DB, ("events",), refresh=True)  # asserts no change logged twice
    ledger = f"lake.{namespace}._binlog_batches"
    if spark.catalog.tableExists(ledger):
        spark.sql(f"REFRESH TABLE {ledger}")
        ids = [r[0] for r in spark.sql(f"SELECT batch_id FROM {ledger}").collect()]
        assert len(ids) == len(set(ids)), f"a batch in the ledger twice: {ids}"


@pytest.mark.parametrize("mode", ["file", "postgresql", "pgbouncer", "none"])
def test_merges_started_at_once_and_killed_at_random_apply_every_batch_once(
        batches, spark, spark_warehouse, tmp_path, request, record_trials, mode):
    manifests, expected = batches
    namespace = f"torture_{mode}"
    url = _store_url(mode, request, tmp_path)
    options = MergeOptions(namespace=namespace, warehouse=spark_warehouse, checkpoint_store=url,
                           checkpoint_key="torture" if url else None).to_json_text()
    if url is not None:  # the source's load starts where the first batch does
        open_checkpoint_store(url).save("torture", manifests[0].start)
    rng = random.Random(f"torture-{mode}")
    rounds = int(os.environ.get("BINLOG_TORTURE_ROUNDS", "4"))
    counts = {"runs": 0, "applied": 0, "killed": 0, "refused": 0}
    for r in range(rounds + 1):
        last = r == rounds  # a round without kills ends the torture
        results: list = [None] * AT_ONCE

        def run(i: int, last: bool = last, r: int = r) -> None:
            engine = ["--engine", "iceberg"] if r > 0 and i % 2 else []  # tables exist after round 0
            kill = {} if last or rng.random() < 0.4 else {"point": "random", "seconds": rng.uniform(2, 14)}
            argv = [*engine, *[a for m in manifests for a in ("--manifest", str(m.path))], "--options", options]
            results[i] = S.run_child("_merge_child.py", {"argv": argv, "kill": kill,
                                                         "out": str(tmp_path / f"out-{r}-{i}.json")},
                                     env=S.FAST_JVM, timeout=900)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(AT_ONCE if not last else 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for res in filter(None, results):
            counts["runs"] += 1
            error = (res.result or {}).get("error_type")
            if res.killed:
                counts["killed"] += 1
            elif res.returncode == 0 or res.returncode == 3:  # 3: Spark needed, the operator's fallback
                counts["applied"] += 1
            else:
                assert error in REFUSALS, f"round {r}: an unclear failure: {res}"
                counts["refused"] += 1
        _check_no_doubles(spark, namespace, manifests)
    assert results[0] is not None and results[0].returncode == 0, results[0]  # the last run applies the rest
    got = S.iceberg_state(spark, namespace, DB, refresh=True)
    assert {t: got[t] for t in ("items", "pairs")} == {t: expected[t] for t in ("items", "pairs")}
    S.changelog_matches(got["events"], manifests, DB, "events")
    if url is not None:
        assert open_checkpoint_store(url).load("torture") == manifests[-1].end
    print(f"merge torture, store {mode}: {counts}")
    record_trials(f"merge torture, store {mode} (runs; killed, refused, applied in the facts)", counts["runs"],
                  **{k: v for k, v in counts.items() if k != "runs"}, duplicate_keys=0, rows_lost=0)
