"""The factory's DAGs in a real Airflow deployment: ``airflow api-server``, ``scheduler``
(LocalExecutor), ``dag-processor`` and ``triggerer`` as separate processes on loopback, with an
SQLite metadata database in a private AIRFLOW_HOME (``tests/airflow_deployment.py``), driven
through the REST API only.

Two sources on the private MariaDB, one DAG file: ``cron`` every minute with the deferrable
sensor, ``event`` with ``schedule=OnNewBinlogData(poke_interval=2, min_interval=5)`` (the asset
watcher in the triggerer); both with the embedded catalog and a local Spark, tasks retried once
after 5 s. The backfill DAGs take the initial snapshots (triggered through the API), then the
incremental DAGs are unpaused while a writer thread changes both databases at about 30 rows/s;
meanwhile a column is added to a table of each database, one merge's Spark JVM is killed (its
retry must recover) and the triggerer is restarted while the cron source's sensor is deferred.
When both sources have loaded the final position: every DAG run succeeded, the killed merge
succeeded at try 2, Iceberg equals MariaDB row for row (PyIceberg), the event-driven DAG had at
least 2 runs and no more than the checkpoints it advanced + 2 (no run storm), and the Binlog CDC
view's JSON answers through the API server. The freshness of every writer commit (when it
became visible in Iceberg, from the tables' snapshots) is written to ``freshness.json`` in the
test's temporary directory and printed (p50/p95/max per source).

Skipped unless BINLOG_DEPLOYMENT_TESTS=1 (tests/conftest.py); takes 10 to 20 minutes.
"""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

pytest.importorskip("airflow")

from tests.airflow_conn import SECRET, USER, create_user  # noqa: E402
from tests.airflow_deployment import (  # noqa: E402
    ALTER, CRON, EVENT, SOURCES, Writer, create_schema, freshness, initial_load,
    make_deployment, server_seq, summary, table_differences, wait_loaded,
)

pytestmark = [pytest.mark.deployment, pytest.mark.spark, pytest.mark.slow]

ROWS_PER_SECOND = 30


def _require_spark() -> None:
    from airflow_provider_binlog.spark import SparkRuntimeError, find_java17_home, iceberg_runtime_jars

    try:
        import pyspark  # noqa: F401

        find_java17_home()
        iceberg_runtime_jars()
    except (ImportError, SparkRuntimeError) as exc:
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}:
            pytest.fail(f"embedded Spark runtime unavailable: {exc}", pytrace=False)
        pytest.skip(f"embedded Spark runtime unavailable: {exc}")


@pytest.fixture()
def deployment(mariadb, tmp_path):
    _require_spark()
    create_user(mariadb)
    dep, warehouse, store = make_deployment(tmp_path, mariadb, USER, SECRET)
    try:
        dep.start()
        yield dep, warehouse, store
    finally:
        dep.close()
        assert dep.processes() == [], "processes of the deployment left running"


def kill_one_merge_jvm(dep, source, *, timeout: float) -> tuple[str, int]:
    """Wait for a merge of ``source`` at its first try with its spark-submit JVM up; SIGKILL
    the JVM. The run's id and the JVM's pid."""
    def find():
        for run in dep.dag_runs(source.incremental):
            if run["state"] != "running":
                continue
            merge = dep.task_instances(source.incremental, run["dag_run_id"]).get("merge") or {}
            if merge.get("state") == "running" and merge.get("try_number") == 1:
                for pid in dep.spark_jvms(source.merge_app_name):
                    os.kill(pid, signal.SIGKILL)
                    dep.note(f"killed the Spark JVM {pid} of the merge of {run['dag_run_id']}")
                    return run["dag_run_id"], pid
        return None
    return dep.wait_until(f"a running merge of {source.incremental} to kill", find, timeout=timeout, interval=0.5)


def deferred_sensor(dep, source) -> str | None:
    for run in dep.dag_runs(source.incremental):
        if run["state"] == "running":
            wait = dep.task_instances(source.incremental, run["dag_run_id"]).get("wait_for_changes") or {}
            if wait.get("state") == "deferred":
                return run["dag_run_id"]
    return None


def test_both_paths_in_a_real_deployment(deployment, mariadb, tmp_path):
    dep, warehouse, store = deployment
    server = mariadb
    dep.wait_dags([d for s in SOURCES for d in (s.incremental, s.backfill)])
    create_schema(server, [s.database for s in SOURCES])
    writer = Writer(server, [s.database for s in SOURCES], rows_per_second=ROWS_PER_SECOND)
    writer.seed()

    # the initial snapshots, through the REST API
    initial_load(dep, SOURCES)
    for s in SOURCES:
        assert table_differences(server, warehouse, s) == [], dep.report()

    # the incremental DAGs under a steady writer
    for s in SOURCES:
        dep.set_paused(s.incremental, False)
    writer.start()
    try:
        time.sleep(45)
        for s in SOURCES:  # a schema change mid-run
            writer.alter(ALTER.format(db=s.database))
        dep.note("added a column to customers of both databases")

        killed_run, _pid = kill_one_merge_jvm(dep, CRON, timeout=420)

        # the triggerer restarted while the cron source's sensor waits in it (and the watcher runs)
        writer.pause()
        dep.note("writer paused")
        deferred_run = dep.wait_until("the cron sensor deferred", lambda: deferred_sensor(dep, CRON), timeout=420)
        dep.restart("triggerer")
        restarted_at = time.time()
        writer.resume()
        dep.note("writer resumed")
        time.sleep(60)
    finally:
        writer.stop()
    dep.note(f"writer stopped after {len(writer.commits)} commits")
    final = server_seq(server)
    wait_loaded(dep, SOURCES, store, final, timeout=900)
    dep.settle([s.incremental for s in SOURCES], timeout=600)

    # every DAG run succeeded
    runs = {s.incremental: dep.dag_runs(s.incremental) for s in SOURCES}
    for s in SOURCES:
        runs[s.backfill] = dep.dag_runs(s.backfill)
    states = {dag: [(r["dag_run_id"], r["state"]) for r in rs] for dag, rs in runs.items()}
    assert all(state == "success" for rs in states.values() for _, state in rs), (states, dep.report())

    # the killed merge recovered at its retry
    merge = dep.task_instances(CRON.incremental, killed_run)["merge"]
    assert (merge["state"], merge["try_number"]) == ("success", 2), (merge, dep.report())
    tries = {t["try_number"]: t["state"] for t in dep.tries(CRON.incremental, killed_run, "merge")}
    assert tries == {1: "failed", 2: "success"}, tries

    # the deferred sensor finished in the restarted triggerer; the watcher fired again after it
    wait = dep.task_instances(CRON.incremental, deferred_run)["wait_for_changes"]
    assert wait["state"] == "success", (wait, dep.report())
    after_restart = [r for r in runs[EVENT.incremental]
                     if r["run_type"] == "asset_triggered" and _epoch(r["queued_at"]) > restarted_at]
    assert after_restart, (runs[EVENT.incremental], dep.report())

    # Iceberg equals MariaDB, every row and column (the added column too)
    for s in SOURCES:
        assert table_differences(server, warehouse, s) == [], dep.report()

    # the event-driven DAG: at least 2 runs, at most one per checkpoint advanced + 2
    from airflow_provider_binlog.checkpoints import open_checkpoint_store

    history = open_checkpoint_store(str(store)).history(EVENT.source_id)
    advanced = len(history) - 1  # the entries after the snapshot's
    assert len(history) < 100, "the history is cut at 100 entries"
    event_runs = runs[EVENT.incremental]
    assert all(r["run_type"] == "asset_triggered" for r in event_runs), event_runs
    assert 2 <= len(event_runs) <= advanced + 2, (len(event_runs), advanced)

    # the Binlog CDC view's JSON, through the API server
    status, data = dep.request("GET", "/binlog-cdc/status.json", timeout=120)
    assert status == 200, data
    found = {src["conn_id"]: (src["state"], src["checkpoint_key"]) for src in data["sources"]}
    assert found == {s.conn_id: ("ok", s.source_id) for s in SOURCES}, data
    assert SECRET not in json.dumps(data)

    # freshness of every writer commit
    figures = {}
    for s in SOURCES:
        values, missing = freshness(writer.commits, s, warehouse)
        assert not missing, f"{len(missing)} commits of {s.source_id} never visible in Iceberg: {missing[:3]}"
        assert values and min(values) > 0, s.source_id
        figures[s.source_id] = summary(values)
    figures["cron_runs"] = len(runs[CRON.incremental])
    figures["event_runs"], figures["event_checkpoints_advanced"] = len(event_runs), advanced
    (tmp_path / "freshness.json").write_text(json.dumps(figures, indent=2))
    print("\nfreshness (seconds from commit to Iceberg snapshot):")
    for s in SOURCES:
        f = figures[s.source_id]
        print(f"  {s.source_id:6s} commits {f['commits']:5d}  p50 {f['p50']:6.1f}  p95 {f['p95']:6.1f}  "
              f"max {f['max']:6.1f}")
    print(f"  runs: cron {figures['cron_runs']}, event {len(event_runs)} for {advanced} checkpoints")
    print("\n".join(dep.events))
    for s in SOURCES:  # loose: the kill and the restart are in these figures
        assert figures[s.source_id]["max"] < 900, figures


def _epoch(text: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

