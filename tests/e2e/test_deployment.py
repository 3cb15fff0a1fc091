"""The factory's DAGs in a real Airflow deployment: ``airflow api-server``, ``scheduler``
(LocalExecutor), ``dag-processor`` and ``triggerer`` as separate processes on loopback, with an
SQLite metadata database in a private AIRFLOW_HOME (``tests/airflow_deployment.py``), driven
through the REST API only (the one exception: which triggerer runs the watcher, read from the
SQLite database).

Two sources on the private MariaDB, one DAG file: ``cron`` every minute with the deferrable
sensor, ``event`` with ``schedule=OnNewBinlogData(poke_interval=2, min_interval=5)`` (the asset
watcher in the triggerer); both with the embedded catalog and a local Spark, tasks retried once
after 5 s. The backfill DAGs take the initial snapshots (triggered through the API), then the
incremental DAGs are unpaused while a writer thread changes both databases at about 30 rows/s;
meanwhile:

- a column is added to a table of each database;
- one merge's driver is killed (spark-submit's JVM or the job's process of a merge without Spark; its
  retry must recover);
- the cron source's backfill DAG (mode ``snapshot``) is triggered while an incremental dump or
  merge is under way, nothing paused: the backfill's ``wait_for_incremental`` lets it finish,
  incremental dumps and merges that start during the backfill are skipped, none fails, and the
  incremental runs go on after it;
- with the writer paused, the event source idle and the cron sensor deferred, the scheduler is
  stopped, one transaction is committed on the event source's database, the watcher fires for
  the stored checkpoint (its state, the checkpoint and the time, in the watched asset's state
  store, read through the REST API), and the triggerer is restarted with the writer resumed:
  the restarted watcher reads that state and fires no second event for the same checkpoint
  (the scheduler being stopped, no run could advance it meanwhile), the deferred sensor
  finishes in the restarted triggerer; then the scheduler is started again.

When both sources have loaded the final position: every DAG run succeeded, the killed merge
succeeded at try 2, the backfill took turns with the incremental runs (the task times of the
REST API), Iceberg equals MariaDB row for row (PyIceberg), the watched asset's events each
name a different checkpoint (one event per checkpoint across the restart), the event fired
before the restart started exactly one run, the stored state is the last event's, the
event-driven DAG had at least 2 runs and no more than the checkpoints it advanced + 2 (no run
storm), and the Binlog CDC view's JSON answers through the API server. The freshness of every
writer commit (when it became visible in Iceberg, from the tables' snapshots) is written to
``freshness.json`` in the test's temporary directory and printed (p50/p95/max per source).

Skipped unless BINLOG_DEPLOYMENT_TESTS=1 (tests/conftest.py); takes 10 to 20 minutes.
"""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.dags import LOADING_TASKS, UNFINISHED_STATES  # noqa: E402

from tests.airflow_conn import SECRET, USER, create_user  # noqa: E402
from tests.airflow_deployment import (  # noqa: E402
    ALTER, CRON, EVENT, SOURCES, TABLES, Writer, create_schema, epoch, freshness, initial_load,
    make_deployment, server_seq, stored_seq, summary, table_differences, wait_loaded,
)

pytestmark = [pytest.mark.deployment, pytest.mark.spark, pytest.mark.slow]

ROWS_PER_SECOND = 30
#: The incremental DAG's tasks that load (the backfill takes turns with them).
LOADS = tuple(LOADING_TASKS)


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


def kill_one_merge_driver(dep, source, *, timeout: float) -> tuple[str, int]:
    """Wait for a merge of ``source`` at its first try with its driver up (spark-submit's JVM,
    or the job's process of a merge without Spark); SIGKILL it. The run's id and the pid."""
    def find():
        for run in dep.dag_runs(source.incremental):
            if run["state"] != "running":
                continue
            merge = dep.task_instances(source.incremental, run["dag_run_id"]).get("merge") or {}
            if merge.get("state") == "running" and merge.get("try_number") == 1:
                for pid in dep.merge_drivers(source.merge_app_name):
                    os.kill(pid, signal.SIGKILL)
                    dep.note(f"killed the merge driver {pid} of {run['dag_run_id']}")
                    return run["dag_run_id"], pid
        return None
    return dep.wait_until(f"a running merge of {source.incremental} to kill", find, timeout=timeout, interval=0.5)


def deferred_sensor(dep, source, *, fresh: float | None = None) -> str | None:
    """A running run of ``source`` whose sensor is deferred (deferred less than ``fresh``
    seconds ago, when given: its trigger's timeout is far enough)."""
    for run in dep.dag_runs(source.incremental):
        if run["state"] == "running":
            wait = dep.task_instances(source.incremental, run["dag_run_id"]).get("wait_for_changes") or {}
            if wait.get("state") != "deferred":
                continue
            since = (wait.get("trigger") or {}).get("created_date") or wait.get("start_date")
            if fresh is None or (since and time.time() - epoch(since) < fresh):
                return run["dag_run_id"]
    return None


def unfinished_load(dep, source, tasks=LOADS, states=UNFINISHED_STATES) -> tuple[str, str, str] | None:
    """An incremental load task of ``source`` (``tasks``) in one of ``states``: (run id, task
    id, state)."""
    for run in dep.dag_runs(source.incremental):
        if run["state"] not in ("queued", "running"):
            continue
        tis = dep.task_instances(source.incremental, run["dag_run_id"])
        for task in tasks:
            state = (tis.get(task) or {}).get("state")
            if state in states:
                return run["dag_run_id"], task, state
    return None


def merging(dep, source) -> tuple[str, str, str] | None:
    """An incremental merge of ``source`` running with its driver up (so past its check for a
    running backfill): (run id, "merge", "running")."""
    found = unfinished_load(dep, source, ("merge",), ("running",))
    return found if found and dep.merge_drivers(source.merge_app_name) else None


def guard_pokes(dep, source, backfill_run: str) -> list[tuple[float, bool]]:
    """The pokes of the backfill's ``wait_for_incremental``, from its task log: (when it
    answered, whether it waited), oldest first."""
    out = []
    for path in (dep.home / "logs").glob(f"dag_id={source.backfill}/run_id={backfill_run}/"
                                         "task_id=wait_for_incremental/*.log"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
                event, at = str(record.get("event", "")), epoch(record["timestamp"])
            except (ValueError, KeyError, TypeError):
                continue
            if "to finish loading" in event:
                out.append((at, True))
            elif event.startswith("Success criteria met"):
                out.append((at, False))
    return sorted(out)


def source_idle(dep, server, store, source) -> bool:
    """``source`` has loaded the server's position, has no active run and no queued asset event."""
    return ((stored_seq(store, source.source_id) or 0) >= server_seq(server) and dep.ended(source.incremental)
            and dep.queued_asset_events(source.incremental) == 0)


def watcher_triggerer(dep) -> tuple[int | None, int | None]:
    """(the triggerer job running the watcher, the newest running triggerer job), from the
    metadata database (the REST API shows the triggers of task instances only)."""
    assigned = dep.db_rows('SELECT triggerer_id FROM "trigger" WHERE classpath LIKE ?', ("%.BinlogNewDataTrigger",))
    newest = dep.db_rows("SELECT max(id) FROM job WHERE job_type = 'TriggererJob' AND state = 'running'")
    return (assigned[0][0] if len(assigned) == 1 else None), (newest[0][0] if newest else None)


def _t(text: str | None) -> float | None:
    return epoch(text) if text else None


def check_turns(dep, source, backfill_run: str, loading: tuple[str, str, str]) -> dict:
    """The backfill run ``backfill_run`` of ``source`` and the incremental runs took turns:
    the backfill succeeded; its ``wait_for_incremental`` waited for ``loading`` (the
    incremental task running when it was triggered) unless that had ended when the guard
    first looked; no incremental dump or merge of a run overlapping it failed or was retried;
    no successful one was running when the guard ended or ended while the backfill loaded
    (the guard waits for them, and those that start while the backfill runs are skipped); a
    successful merge started after it. Figures for the report."""
    run = dep.dag_run(source.backfill, backfill_run)
    tis = dep.task_instances(source.backfill, backfill_run)
    states = {t: ti["state"] for t, ti in tis.items()}
    assert states == {"wait_for_incremental": "success", "plan": "success", "choose": "success",
                      "snapshot": "success", "dump": "skipped", "merge": "success"}, (states, dep.report())
    b_start, b_end = epoch(run["start_date"]), epoch(run["end_date"])
    guard_end = epoch(tis["wait_for_incremental"]["end_date"])
    pokes = guard_pokes(dep, source, backfill_run)
    assert pokes and not pokes[-1][1], ("the guard's pokes not in its log", pokes)
    observed = dep.task_instances(source.incremental, loading[0])[loading[1]]
    if not pokes[0][1]:  # it did not wait: the task had ended when it looked
        assert observed["end_date"] and epoch(observed["end_date"]) <= pokes[0][0], \
            ("the backfill went on while an incremental load was running", observed, pokes)
    overlapping, yielded, after = [], [], []
    for r in dep.dag_runs(source.incremental):
        r_start, r_end = _t(r.get("start_date")), _t(r.get("end_date"))
        overlaps = r_start is not None and r_start < b_end and (r_end is None or r_end > b_start)
        run_tis = dep.task_instances(source.incremental, r["dag_run_id"])
        for task in LOADS:
            ti = run_tis.get(task)
            if ti is None:
                continue
            start, end, where = _t(ti["start_date"]), _t(ti["end_date"]), (r["dag_run_id"], task, ti["state"])
            if overlaps:
                overlapping.append(where)
                assert ti["state"] in ("success", "skipped") and ti["try_number"] <= 1, \
                    ("an incremental load failed or was retried during the backfill", ti, dep.report())
            if ti["state"] == "success":
                assert not (start < guard_end < end), \
                    ("an incremental load was running when the backfill's guard let it through", ti, run)
                assert not (guard_end < end < b_end), \
                    ("an incremental load ended while the backfill loaded", ti, run)
                if task == "merge" and start > b_end:
                    after.append(where)
            elif ti["state"] == "skipped" and start is not None and b_start <= start <= b_end:
                yielded.append(where)
    assert after, ("no incremental merge after the backfill", dep.report())
    return {"seconds": round(b_end - b_start, 1), "triggered_during": f"{loading[1]} {observed['state']}",
            "guard_waits": sum(waited for _, waited in pokes),
            "incremental_loads_overlapping": len(overlapping), "skipped_during": len(yielded),
            "merges_after": len(after)}


def test_both_paths_in_a_real_deployment(deployment, mariadb, tmp_path):
    from airflow_provider_binlog.checkpoints import open_checkpoint_store
    from airflow_provider_binlog.dags import changes_asset_uri
    from airflow_provider_binlog.triggers.new_data import GATE_STATE_KEY

    dep, warehouse, store = deployment
    server = mariadb
    dep.wait_dags([d for s in SOURCES for d in (s.incremental, s.backfill, f"binlog_verify__{s.source_id}")])
    create_schema(server, [s.database for s in SOURCES])
    writer = Writer(server, [s.database for s in SOURCES], rows_per_second=ROWS_PER_SECOND)
    writer.seed()

    # the initial snapshots, through the REST API
    initial_load(dep, SOURCES)
    for s in SOURCES:
        assert table_differences(server, warehouse, s) == [], dep.report()
    watched = dep.asset_id(changes_asset_uri(EVENT.source_id))

    # the incremental DAGs under a steady writer
    for s in SOURCES:
        dep.set_paused(s.incremental, False)
    writer.start()
    try:
        time.sleep(45)
        for s in SOURCES:  # a schema change mid-run
            writer.alter(ALTER.format(db=s.database))
        dep.note("added a column to customers of both databases")

        killed_run, _pid = kill_one_merge_driver(dep, CRON, timeout=420)
        dep.wait_run(CRON.incremental, killed_run, timeout=600)

        # a backfill of the cron source while its schedule goes on, nothing paused: triggered
        # while an incremental merge runs its Spark job
        loading = dep.wait_until("an incremental merge of cron in its Spark job", lambda: merging(dep, CRON),
                                 timeout=420, interval=1)
        backfill_run = dep.trigger(CRON.backfill, {"mode": "snapshot"})
        dep.note(f"the backfill triggered while {loading[1]} of {loading[0]} was {loading[2]}")
        ended = dep.wait_run(CRON.backfill, backfill_run, timeout=900)
        assert ended["state"] == "success", (dep.task_instances(CRON.backfill, backfill_run), dep.report())

        # the watcher's state across a triggerer restart: with the writer paused and the event
        # source idle, the scheduler stopped (no run can advance the checkpoint), one commit;
        # the watcher fires for the stored checkpoint and keeps that in the asset's state store
        writer.pause()
        dep.note("writer paused")
        dep.wait_until("the event source loaded and idle", lambda: source_idle(dep, server, store, EVENT),
                       timeout=600, interval=3)
        deferred_run = dep.wait_until("a cron sensor deferred", lambda: deferred_sensor(dep, CRON, fresh=45),
                                      timeout=420, interval=1)
        dep.stop_process("scheduler")
        checkpoint = open_checkpoint_store(str(store)).load(EVENT.source_id).to_json()
        before = dep.asset_events(watched)
        commit = writer.commit_one(EVENT.database)
        dep.note(f"one commit on {EVENT.database} (GTID sequence {commit.seq}), the scheduler stopped")
        fired = dep.wait_until("the watcher's event for it", lambda: dep.asset_events(watched)[len(before):],
                               timeout=300)
        assert len(fired) == 1 and fired[0]["extra"]["payload"]["start"] == checkpoint, (fired, checkpoint)
        fired_for = json.dumps(checkpoint, sort_keys=True)
        def stored_state():
            st = dep.asset_state(watched, GATE_STATE_KEY)
            return st if st and st["value"].get("fired_for") == fired_for else None
        state = dep.wait_until("the watcher's state stored", stored_state, timeout=120)
        assert (state["last_updated_by"] or {}).get("kind") == "watcher", state
        assert isinstance(state["value"]["fired_at"], (int, float)), state
        old_triggerer = watcher_triggerer(dep)[0]

        # the triggerer restarted while the cron sensor waits in it and the watcher runs
        dep.restart("triggerer")
        restarted_at = time.time()
        dep.wait_component("triggerer", since=restarted_at)
        writer.resume()
        dep.note("writer resumed")
        dep.wait_until("the deferred cron sensor's trigger fired in the restarted triggerer", lambda: (
            dep.task_instances(CRON.incremental, deferred_run)["wait_for_changes"]["state"] != "deferred"),
            timeout=300)
        def watcher_moved():
            running_in, newest = watcher_triggerer(dep)
            return running_in is not None and running_in == newest and running_in != old_triggerer
        dep.wait_until("the watcher in the restarted triggerer", watcher_moved, timeout=300)
        time.sleep(20)  # the restarted watcher checks every 2 s: new data after the same checkpoint
        assert [e["id"] for e in dep.asset_events(watched)] == [e["id"] for e in before + fired], \
            ("the restarted watcher fired again for the same checkpoint", dep.asset_events(watched), dep.report())
        assert dep.asset_state(watched, GATE_STATE_KEY)["value"] == state["value"]
        dep.start_process("scheduler")
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

    # the backfill took turns with the incremental runs
    turns = check_turns(dep, CRON, backfill_run, loading)

    # the deferred sensor finished in the restarted triggerer
    wait = dep.task_instances(CRON.incremental, deferred_run)["wait_for_changes"]
    assert wait["state"] == "success", (wait, dep.report())

    # the watcher: one event per checkpoint (the restart included), the one fired before the
    # restart started one run, it fired again after the restart, its state is the last event's
    events = dep.asset_events(watched)
    assert all(e["extra"].get("from_trigger") and e["extra"]["payload"]["status"] == "new_data"
               for e in events), events
    starts = [json.dumps(e["extra"]["payload"]["start"], sort_keys=True) for e in events]
    assert len(set(starts)) == len(starts), ("two events for one checkpoint", starts)
    first = next(e for e in events if e["id"] == fired[0]["id"])
    assert len(first["created_dagruns"]) == 1, first
    assert any(epoch(e["timestamp"]) > restarted_at for e in events), (events, dep.report())
    final_state = dep.asset_state(watched, GATE_STATE_KEY)
    assert final_state["value"]["fired_for"] == starts[-1], (final_state, starts[-1])

    # Iceberg equals MariaDB, every row and column (the added column too)
    for s in SOURCES:
        assert table_differences(server, warehouse, s) == [], dep.report()

    # the verify DAG of each source, run by the scheduler: every table verified equal, and so
    # shown by the Binlog CDC view (below)
    from airflow_provider_binlog.operators.verify_dag import verify_dag_id

    for s in SOURCES:
        dep.set_paused(verify_dag_id(s.source_id), False)
        verify_run = dep.wait_run(verify_dag_id(s.source_id), dep.trigger(verify_dag_id(s.source_id)), timeout=600)
        assert verify_run["state"] == "success", (verify_run, dep.report())

    # the event-driven DAG: at least 2 runs, at most one per checkpoint advanced + 2
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
    verified = {src["conn_id"]: {t: r["status"] for t, r in (src.get("verified") or {}).get("tables", {}).items()}
                for src in data["sources"]}
    assert verified == {s.conn_id: {f"{s.database}.{t}": "equal" for t in TABLES} for s in SOURCES}, verified
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
    figures["event_watcher_events"] = len(events)
    figures["backfill"] = turns
    (tmp_path / "freshness.json").write_text(json.dumps(figures, indent=2))
    print("\nfreshness (seconds from commit to Iceberg snapshot):")
    for s in SOURCES:
        f = figures[s.source_id]
        print(f"  {s.source_id:6s} commits {f['commits']:5d}  p50 {f['p50']:6.1f}  p95 {f['p95']:6.1f}  "
              f"max {f['max']:6.1f}")
    print(f"  runs: cron {figures['cron_runs']}, event {len(event_runs)} for {advanced} checkpoints "
          f"({len(events)} watcher events)")
    print(f"  backfill of cron: {turns}")
    print("\n".join(dep.events))
    for s in SOURCES:  # loose: the kill, the backfill and the restarts are in these figures
        assert figures[s.source_id]["max"] < 900, figures
