"""BinlogPositionSensor and BinlogPositionTrigger against a live MariaDB: waiting for new
data, the target position handed to the dump, lag, and purged binlogs."""
from __future__ import annotations

import asyncio
import importlib
import json
import time

import pytest

pytest.importorskip("airflow")

from airflow.sdk.exceptions import AirflowFailException, TaskDeferred  # noqa: E402

from airflow_provider_binlog.checkpoints import Checkpoint  # noqa: E402
from airflow_provider_binlog.hooks.binlog import BinlogHook  # noqa: E402
from airflow_provider_binlog.operators.dump import BinlogDumpOperator  # noqa: E402
from airflow_provider_binlog.replica import BinlogPurgedError, ReplicaError  # noqa: E402
from airflow_provider_binlog.sensors.position import BinlogPositionSensor, BinlogPurgedFailure  # noqa: E402
from airflow_provider_binlog.triggers.position import BinlogPositionTrigger  # noqa: E402
from tests.airflow_conn import SECRET, create_user, set_connection  # noqa: E402


@pytest.fixture()
def source(mariadb, monkeypatch, tmp_path):
    """(server, conn_id, hook) with the current position stored as the checkpoint."""
    create_user(mariadb)
    mariadb.execute("CREATE DATABASE IF NOT EXISTS sensedb")
    mariadb.execute("CREATE TABLE IF NOT EXISTS sensedb.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    conn_id = set_connection(monkeypatch, mariadb, extra={"checkpoint_store_uri": str(tmp_path / "cp")})
    hook = BinlogHook(conn_id)
    hook.checkpoint_store().save(conn_id, hook.current_position())
    return mariadb, conn_id, hook


def insert(server, n=1):
    for _ in range(n):
        server.execute("INSERT INTO sensedb.t (v) VALUES (1)")


def purge_to(server, name):
    """PURGE BINARY LOGS TO ``name``. MariaDB keeps a file until InnoDB has flushed the
    transactions in it (about a second with innodb_flush_log_at_trx_commit=2): retry."""
    deadline = time.monotonic() + 30
    while True:
        server.execute(f"PURGE BINARY LOGS TO '{name}'")
        if server.binlog_files()[0] == name:
            return
        assert time.monotonic() < deadline, f"the server kept {server.binlog_files()}"
        time.sleep(0.1)


def sensor(conn_id, **kwargs):
    kwargs.setdefault("poke_interval", 0.1)
    kwargs.setdefault("timeout", 30)
    return BinlogPositionSensor(task_id="wait_for_binlog", binlog_conn_id=conn_id, **kwargs)


def here(server) -> dict:
    file, pos = server.master_status()
    return {"file": file, "pos": pos, "gtid": server.query("SELECT @@gtid_binlog_pos")[0][0]}


# ---------------------------------------------------------------------- poke mode

def test_no_new_data_then_an_insert_gives_the_target_position(source):
    server, conn_id, hook = source
    task = sensor(conn_id)
    assert task.poke({}).is_done is False

    insert(server)
    result = task.poke({})
    assert result.is_done is True
    value = result.xcom_value
    now = here(server)
    assert {k: value["target"][k] for k in ("file", "pos", "gtid")} == now
    assert value["target"]["flavor"] == "mariadb" and value["target"]["server_id"] == server.server_id
    assert value["start"] == hook.stored_checkpoint().to_json()
    assert value["lag"]["transactions"] == 1 and value["lag"]["files"] == 0
    assert value["lag"]["bytes"] == now["pos"] - value["start"]["pos"]
    assert value["reason"] == "thresholds met" and value["has_new_data"] is True
    json.dumps(value)


def test_lag_in_seconds_is_the_source_time_of_the_oldest_change_not_loaded(source):
    server, conn_id, hook = source
    assert sensor(conn_id).poke({}).is_done is False
    assert hook.check_position().lag["seconds"] == 0.0          # nothing to load: no lag
    # the oldest change not loaded was made two minutes ago (its binlog timestamp), a newer one now
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET TIMESTAMP = UNIX_TIMESTAMP() - 120")
            cur.execute("INSERT INTO sensedb.t (v) VALUES (2)")
            cur.execute("SET TIMESTAMP = DEFAULT")
            cur.execute("INSERT INTO sensedb.t (v) VALUES (3)")
    finally:
        conn.close()
    value = sensor(conn_id).poke({}).xcom_value
    assert 119.0 <= value["lag"]["seconds"] < 150.0, value["lag"]
    assert "seconds" in hook.check_position().describe()


def insert_minutes_ago(server, minutes):
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET TIMESTAMP = UNIX_TIMESTAMP() - %s", (minutes * 60,))
            cur.execute("INSERT INTO sensedb.t (v) VALUES (4)")
    finally:
        conn.close()


def test_a_lag_past_max_lag_seconds_notifies_then_fails_or_goes_on(source):
    server, conn_id, hook = source
    calls = []
    within = sensor(conn_id, max_lag_seconds=600, lag_notifier=lambda ctx: calls.append(ctx))
    assert within.poke({}).is_done is False                   # nothing to load: no lag
    insert_minutes_ago(server, 3)
    assert within.poke({}).is_done is True and calls == []     # 3 min behind, within 10 min
    failing = sensor(conn_id, max_lag_seconds=60, on_max_lag="fail", lag_notifier=lambda ctx: calls.append(ctx))
    with pytest.raises(AirflowFailException, match="s of source time behind the server, more than "
                                                   "max_lag_seconds=60"):
        failing.poke({})
    assert len(calls) == 1 and calls[0]["binlog_lag"]["seconds"] >= 179
    # the default: notify and go on; a notifier that fails does not stop the load
    notifying = sensor(conn_id, max_lag_seconds=60, lag_notifier=lambda ctx: calls.append(ctx))
    assert notifying.poke({}).is_done is True and len(calls) == 2

    def broken(ctx):
        raise RuntimeError("the alerting service is down")
    assert sensor(conn_id, max_lag_seconds=60, lag_notifier=broken).poke({}).is_done is True
    assert sensor(conn_id, max_lag_seconds=60).poke({}).is_done is True   # a warning in the log only
    with pytest.raises(ValueError, match="on_max_lag is"):
        sensor(conn_id, max_lag_seconds=60, on_max_lag="page")
    with pytest.raises(ValueError, match="max_lag_seconds must be"):
        sensor(conn_id, max_lag_seconds=0)


def test_the_lag_read_does_not_displace_a_running_load_of_the_same_server_id(source):
    """The source time is read without registering as a replica: a load streaming with the
    connection's server id goes on receiving events."""
    import threading

    server, conn_id, hook = source
    received, stop = [], threading.Event()
    load = hook.get_replica()
    file, pos = server.master_status()

    def stream():
        try:
            for _file, event in load.stream(file, pos, non_block=False):
                received.append(type(event).__name__)
                if stop.is_set() and received.count("XidEvent") >= 2:
                    return
        except Exception as exc:  # a displaced replica's stream ends with an error
            received.append(f"error: {exc}")

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    time.sleep(1)
    insert(server)
    check = hook.check_position()                             # the same server id, at the same time
    assert check.lag["seconds"] is not None and check.lag["seconds"] >= 0
    stop.set()
    insert(server)                                            # still reaches the running load
    thread.join(30)
    assert not thread.is_alive() and not any(r.startswith("error") for r in received), received
    assert received.count("XidEvent") >= 2


def test_the_sensor_xcom_is_the_dump_stop(source, tmp_path):
    server, conn_id, hook = source
    insert(server, 2)
    value = sensor(conn_id).execute({})          # poke mode: returns the XCom value
    insert(server)                               # after the sensor: not in this dump
    result = hook.dump(staging=tmp_path / "staging", stop=value)
    assert (result["end"]["file"], result["end"]["pos"]) == (value["target"]["file"], value["target"]["pos"])
    assert result["rows"]["sensedb.t"]["insert"] == 2
    assert result["start"] == value["start"]


def test_thresholds_and_the_wait_that_waives_them(source):
    server, conn_id, _ = source
    insert(server)
    assert sensor(conn_id, min_transactions=3).poke({}).is_done is False
    assert sensor(conn_id, min_bytes=10**9).poke({}).is_done is False
    waived = sensor(conn_id, min_transactions=3, max_threshold_wait=0).poke({})
    assert waived.is_done and waived.xcom_value["reason"] == "max_threshold_wait elapsed"
    insert(server, 2)
    met = sensor(conn_id, min_transactions=3, min_bytes=100).poke({})
    assert met.is_done and met.xcom_value["lag"]["transactions"] == 3


def test_explicit_start_and_gtid_only_checkpoints(source):
    server, conn_id, _ = source
    gtid = server.query("SELECT @@gtid_binlog_pos")[0][0]
    insert(server, 2)
    by_gtid = sensor(conn_id, start=gtid).poke({})   # a MariaDB GTID position as text
    assert by_gtid.is_done and by_gtid.xcom_value["lag"]["transactions"] == 2
    assert by_gtid.xcom_value["lag"]["bytes"] is None
    now = here(server)
    caught_up = sensor(conn_id, start=f"{now['file']}:{now['pos']}").poke({})
    assert caught_up.is_done is False


def test_lag_across_binlog_files(source):
    server, conn_id, hook = source
    start = hook.stored_checkpoint()
    insert(server)
    server.flush_binary_logs()
    insert(server)
    server.flush_binary_logs()
    value = sensor(conn_id).poke({}).xcom_value
    assert value["lag"]["files"] == 2 and value["lag"]["transactions"] == 2
    sizes = dict((name, int(size)) for name, size in server.query("SHOW BINARY LOGS"))
    files = sorted(n for n in sizes if n >= start.file)
    # the current file as the sensor saw it: MariaDB may append a binlog checkpoint event to it
    # right after a rotation, later than the sensor's read
    assert value["target"]["file"] == files[2]
    expected = sizes[files[0]] - start.position + sizes[files[1]] + value["target"]["pos"]
    assert value["lag"]["bytes"] == expected


def test_a_flush_alone_is_no_new_data(source):
    server, conn_id, _ = source
    server.flush_binary_logs()
    result = sensor(conn_id).poke({})
    assert result.is_done is False


def test_purged_checkpoint_fails_with_the_remedy(source):
    server, conn_id, hook = source
    old = hook.stored_checkpoint()
    insert(server)
    server.flush_binary_logs()
    insert(server)
    current = server.flush_binary_logs()
    purge_to(server, current)

    with pytest.raises(BinlogPurgedFailure) as info:
        sensor(conn_id).poke({})
    message = str(info.value)
    assert f"binlog {old.file}" in message and f"oldest retained binlog is {current}" in message
    assert "new snapshot" in message
    assert isinstance(info.value, BinlogPurgedError) and isinstance(info.value, AirflowFailException)

    # a GTID-only checkpoint whose transactions were purged
    with pytest.raises(BinlogPurgedFailure, match="no longer on the server.*new snapshot"):
        sensor(conn_id, start=str(old.gtid)).poke({})
    assert SECRET not in message


def test_checkpoint_near_the_oldest_binlog_warns(source):
    server, conn_id, hook = source
    insert(server)
    first = server.flush_binary_logs()
    insert(server)
    server.flush_binary_logs()
    purge_to(server, first)
    start = Checkpoint(file=first, position=4, flavor="mariadb")
    value = sensor(conn_id, start=start.to_json(), retention_margin_files=2).poke({}).xcom_value
    assert value["files_of_headroom"] == 0 and value["oldest_binlog"] == first
    assert any("may be purged" in w for w in value["warnings"])
    value = sensor(conn_id, start=start.to_json(), retention_margin_files=0).poke({}).xcom_value
    assert value["warnings"] == []


def test_checkpoint_ahead_of_the_server_is_an_error(source):
    server, conn_id, _ = source
    file, pos = server.master_status()
    with pytest.raises(ReplicaError, match="ahead of the server's position"):
        sensor(conn_id, start=f"{file}:{pos + 1000}").poke({})


# ---------------------------------------------------------------------- deferrable

def test_trigger_serialises_and_round_trips(source):
    _, conn_id, hook = source
    trigger = BinlogPositionTrigger(conn_id, start=hook.stored_checkpoint(), checkpoint_key="k",
                                    min_bytes=10, min_transactions=2, thresholds_deadline=1.5e9,
                                    poke_interval=0.5, retention_margin_files=3)
    path, kwargs = trigger.serialize()
    assert path == "airflow_provider_binlog.triggers.position.BinlogPositionTrigger"
    assert json.loads(json.dumps(kwargs)) == kwargs
    module, _, name = path.rpartition(".")
    again = getattr(importlib.import_module(module), name)(**kwargs)
    assert again.serialize() == (path, kwargs)


async def _first_event(trigger, during=None):
    run = trigger.run()
    task = asyncio.ensure_future(run.__anext__())
    if during is not None:
        await asyncio.sleep(0.4)
        assert not task.done()
        await during()
    event = await asyncio.wait_for(task, 20)
    await run.aclose()
    return event.payload


def test_deferrable_sensor_defers_and_the_trigger_fires_on_new_data(source):
    server, conn_id, _ = source
    task = sensor(conn_id, deferrable=True, poke_interval=0.1)
    with pytest.raises(TaskDeferred) as info:
        task.execute({})
    deferred = info.value
    assert deferred.method_name == "execute_complete"
    trigger = deferred.trigger
    assert isinstance(trigger, BinlogPositionTrigger)

    async def write():
        await asyncio.to_thread(insert, server)

    payload = asyncio.run(_first_event(trigger, during=write))
    assert payload["status"] == "success"
    assert {k: payload["target"][k] for k in ("file", "pos", "gtid")} == here(server)
    assert payload["lag"]["transactions"] == 1 and payload["lag"]["seconds"] >= 0   # source time too
    json.dumps(payload)
    value = task.execute_complete({}, payload)
    assert value["target"] == payload["target"] and "status" not in value


def test_deferrable_sensor_returns_at_once_when_data_is_there(source):
    server, conn_id, _ = source
    insert(server)
    value = sensor(conn_id, deferrable=True).execute({})
    assert value["lag"]["transactions"] == 1


def test_trigger_error_events_and_execute_complete(source, monkeypatch):
    server, conn_id, hook = source
    old = hook.stored_checkpoint()
    insert(server)
    current = server.flush_binary_logs()
    purge_to(server, current)
    payload = asyncio.run(_first_event(BinlogPositionTrigger(conn_id, poke_interval=0.1)))
    assert payload["status"] == "error" and payload["error_type"] == "BinlogPurgedError"
    assert old.file in payload["message"] and "new snapshot" in payload["message"]
    with pytest.raises(BinlogPurgedFailure, match="new snapshot"):
        sensor(conn_id).execute_complete({}, payload)

    missing = asyncio.run(_first_event(BinlogPositionTrigger("no_such_binlog_conn")))
    assert missing["status"] == "error" and "no_such_binlog_conn" in missing["message"]
    with pytest.raises(ReplicaError, match="no_such_binlog_conn"):
        sensor(conn_id).execute_complete({}, missing)



# ---------------------------------------------------------------------- with the dump operator

def test_sensor_output_is_the_dump_operators_stop(source, tmp_path):
    server, conn_id, _ = source
    insert(server, 3)
    value = sensor(conn_id).execute({})
    insert(server)
    op = BinlogDumpOperator(
        task_id="dump",
        binlog_conn_id=conn_id,
        stop=value,
        tables=["sensedb.*"],
        staging=str(tmp_path),
    )
    result = op.execute({})
    assert result["rows"]["sensedb.t"]["insert"] == 3
    assert (result["end"]["file"], result["end"]["pos"]) == (value["target"]["file"], value["target"]["pos"])


def test_a_dag_with_the_sensor_and_the_dump_serialises():
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG("binlog_load", schedule=None) as dag:
        wait = BinlogPositionSensor(task_id="wait", binlog_conn_id="src", min_transactions=10,
                                    max_threshold_wait=600, deferrable=True, mode="reschedule")
        BinlogDumpOperator(
            task_id="dump",
            binlog_conn_id="src",
            stop=wait.output,
            tables=["shop.*"],
            staging="/data/staging/{{ ds }}",
        )
    data = DagSerialization.to_dict(dag)
    tasks = {t["__var"]["task_id"]: t["__var"] for t in data["dag"]["tasks"]}
    assert set(tasks) == {"wait", "dump"}
    assert tasks["dump"]["staging"] == {"location": "/data/staging/{{ ds }}", "conn_id": None}


# ---------------------------------------------------------------------- event-driven runs

def test_event_trigger_fires_once_per_checkpoint_and_again_when_a_run_advanced_it(source):
    """Without a run the trigger stays quiet after its event (no run storm); once the
    checkpoint moves and new data follows, it fires again (no lost wakeup)."""
    from airflow_provider_binlog.triggers.new_data import BinlogNewDataTrigger

    server, conn_id, hook = source
    trigger = BinlogNewDataTrigger(conn_id, poke_interval=0.1, min_interval=0)

    async def scenario():
        run = trigger.run()
        first = asyncio.ensure_future(run.__anext__())
        await asyncio.sleep(0.5)
        assert not first.done()  # nothing new yet
        await asyncio.to_thread(insert, server)
        event = (await asyncio.wait_for(first, 20)).payload
        second = asyncio.ensure_future(run.__anext__())
        await asyncio.to_thread(insert, server, 2)  # more data, but no run has loaded the first
        await asyncio.sleep(1.0)
        assert not second.done()
        # a run loads up to the target: the checkpoint advances, and the data after it wakes up again
        hook.checkpoint_store().save(conn_id, Checkpoint.from_json(event["target"]))
        await asyncio.to_thread(insert, server)
        again = (await asyncio.wait_for(second, 20)).payload
        await run.aclose()
        return event, again

    event, again = asyncio.run(scenario())
    assert event["status"] == "new_data" and event["lag"]["transactions"] == 1
    assert event["reason"] == "thresholds met"
    assert again["start"] == event["target"] and again["lag"]["transactions"] == 3
    json.dumps(event)


def test_event_trigger_fires_one_error_event_for_purged_binlogs_and_for_a_missing_connection(source):
    from airflow_provider_binlog.triggers.new_data import BinlogNewDataTrigger

    server, conn_id, hook = source
    insert(server)
    purge_to(server, server.flush_binary_logs())
    trigger = BinlogNewDataTrigger(conn_id, poke_interval=0.1)
    payload = asyncio.run(_first_event(trigger))
    assert payload["status"] == "error" and payload["error_type"] == "BinlogPurgedError"
    assert "new snapshot" in payload["message"]

    async def missing():
        run = BinlogNewDataTrigger("no_such_binlog_conn", poke_interval=0.1).run()
        first = await asyncio.wait_for(run.__anext__(), 20)  # after three failed checks
        task = asyncio.ensure_future(run.__anext__())
        await asyncio.sleep(0.8)
        assert not task.done()  # polled again, but no second event for the same error
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await run.aclose()
        return first.payload

    failed = asyncio.run(missing())
    assert failed["status"] == "error" and "no_such_binlog_conn" in failed["message"]
