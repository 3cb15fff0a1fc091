"""The Binlog CDC view's data gathering and HTML page, without a web server, against live
MariaDB sources: a healthy one after a few loads, an unreachable one, and the red states."""
from __future__ import annotations

import datetime as dt
import json
import re
import socket
import time

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint, FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.plugins.page import render_page  # noqa: E402
from airflow_provider_binlog.plugins.sources import SOURCES_ENV, SourceConfig, discover_sources  # noqa: E402
from airflow_provider_binlog.plugins.status import collect_all, collect_source  # noqa: E402
from tests.airflow_conn import SECRET  # noqa: E402
from tests.ui_history import build_history  # noqa: E402

UTC = dt.timezone.utc


def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------- live sources

@pytest.fixture(scope="module")
def history(mariadb, tmp_path_factory):
    return build_history(mariadb, tmp_path_factory.mktemp("ui-history"), conn_id="shop_db", runs=4)


@pytest.fixture()
def sources(mariadb, history, monkeypatch):
    """The healthy source and one whose server port has nothing listening."""
    down = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": free_port(), "login": "binlog_hook",
            "password": SECRET, "extra": {"server_id": 7313, "checkpoint_store_uri": str(history.store_dir)}}
    env = {"AIRFLOW_CONN_SHOP_DB": json.dumps(history.connection(mariadb)),
           "AIRFLOW_CONN_DOWN_DB": json.dumps(down),
           SOURCES_ENV: json.dumps([history.ui_source(),
                                    {"conn_id": "down_db", "checkpoint_key": history.key,
                                     "staging_dir": str(history.staging_dir)}])}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def test_a_healthy_source_after_a_few_loads(mariadb, history, sources):
    found, warnings = discover_sources(sources, use_variable=False)
    config, conn = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    s = collect_source(config, conn)
    assert s["state"] == "ok", s["problems"]
    assert s["server"]["flavor"] == "mariadb" and s["server"]["version"] == mariadb.version
    file, pos = mariadb.master_status()
    assert (s["position"]["file"], s["position"]["pos"]) == (file, pos)
    merged_end = history.dumps[history.merged - 1]["end"]
    assert (s["checkpoint"]["file"], s["checkpoint"]["pos"]) == (merged_end["file"], merged_end["pos"])
    lag = s["lag"]
    assert lag["has_new_data"] and lag["bytes"] > 0 and lag["transactions"] > 0 and lag["files"] >= 0
    # source time: the oldest change not loaded was made during the history's last run
    assert 0 <= lag["seconds"] < 3600
    assert s["retention"]["oldest_binlog"] and s["retention"]["files_of_headroom"] >= 0
    # the dumps, newest first: the last one staged, not merged
    assert [d["dump_id"] for d in s["dumps"]] == [d["dump_id"] for d in reversed(history.dumps)]
    assert s["dumps"][0]["merged_at"] is None and all(d["merged_at"] for d in s["dumps"][1:])
    last = s["last_dump"]
    expected_rows = {op: sum(r.get(op, 0) for r in history.dumps[-1]["rows"].values())
                     for op in ("insert", "update", "delete")}
    assert last["rows"] == expected_rows and last["total_rows"] == sum(expected_rows.values()) > 0
    assert last["duration_seconds"] is not None and last["rows_per_second"] > 0
    assert last["transactions"] == history.dumps[-1]["transactions"]
    # the last merge is the advance to the end of the last merged dump, with its rows
    merge = s["last_merge"]
    merged_rows = {op: sum(r.get(op, 0) for r in history.dumps[history.merged - 1]["rows"].values())
                   for op in ("insert", "update", "delete")}
    assert merge["rows"] == merged_rows and merge["dump_id"] == history.dumps[history.merged - 1]["dump_id"]
    assert len(s["advances"]) == history.merged + 1  # plus the initial checkpoint
    # tables: row counts summed over the dumps
    tables = {t["table"]: t for t in s["tables"]}
    assert sorted(tables) == [f"{history.database}.customers", f"{history.database}.orders"]
    for name, t in tables.items():
        assert t["total"] == sum(sum(d["rows"].get(name, {}).values()) for d in history.dumps)
    # the lag history: one point per dump, then now
    assert len(s["lag_history"]) == len(history.dumps) + 1 and s["lag_history"][-1]["now"]
    assert s["lag_history"][-1]["bytes"] == lag["bytes"]
    json.dumps(s)  # JSON-able as it is
    assert SECRET not in json.dumps(s) and str(history.store_dir) not in json.dumps(s)


def test_an_unreachable_source_fails_alone_and_fast(history, sources):
    found, _ = discover_sources(sources, use_variable=False)
    began = time.monotonic()
    statuses = {s["conn_id"]: s for s in collect_all(found)}
    assert time.monotonic() - began < 10
    down, healthy = statuses["down_db"], statuses["shop_db"]
    assert healthy["state"] == "ok"
    assert down["state"] == "error" and down["lag"] is None and down["position"] is None
    assert any("cannot connect" in p["message"] for p in down["problems"])
    # what does not need the server is still shown
    assert down["checkpoint"] is not None and len(down["dumps"]) == len(history.dumps)
    html = render_page({"generated_at": dt.datetime.now(UTC).isoformat(), "sources": list(statuses.values()),
                        "warnings": []})
    assert re.search(r'data-conn-id="down_db"[^>]*data-state="error"', html)
    assert re.search(r'data-conn-id="shop_db"[^>]*data-state="ok"', html)
    assert html.count('class="chart lag-chart"') == 2 and html.count('class="chart rows-chart"') == 2


def test_stalled_when_behind_and_the_checkpoint_did_not_move(history, sources):
    found, _ = discover_sources(sources, use_variable=False)
    config, conn = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    later = dt.datetime.now(UTC) + dt.timedelta(hours=3)
    s = collect_source(config, conn, now=later)
    assert s["state"] == "stalled"
    assert "has not advanced for 3 h" in s["problems"][-1]["message"]
    quick = collect_source(SourceConfig("shop_db", history.key, stall_after_seconds=10 ** 6), conn, now=later)
    assert quick["state"] == "ok"
    html = render_page({"generated_at": later.isoformat(), "sources": [s], "warnings": []})
    assert "STALLED" in html and "state-stalled" in html


def test_purged_when_the_checkpoint_binlog_is_gone(mariadb, history, sources, tmp_path):
    from airflow.models.connection import Connection

    store = FileCheckpointStore(tmp_path / "store")
    base = mariadb.master_status()[0].rsplit(".", 1)[0]
    store.save("gone", Checkpoint(file=f"{base}.000000", position=4, flavor="mariadb"))
    doc = history.connection(mariadb, checkpoint_store_uri=str(tmp_path / "store"))
    conn = Connection.from_json(json.dumps(doc), conn_id="gone_db")
    s = collect_source(SourceConfig("gone_db", "gone"), conn)
    assert s["state"] == "purged" and "no longer on the server" in s["problems"][0]["message"]
    assert s["position"] is not None  # the server part is still shown


def test_store_errors_never_show_the_store_path_or_the_password(mariadb, history, tmp_path):
    from airflow.models.connection import Connection

    root = tmp_path / "secret-store-location"
    root.mkdir()
    (root / "shop_db.json").write_text("{corrupt")
    doc = history.connection(mariadb, checkpoint_store_uri=f"file://{root}", ssl_key="")
    doc["extra"]["custom_token"] = "tok-0123456789"
    conn = Connection.from_json(json.dumps(doc), conn_id="shop_db")
    s = collect_source(SourceConfig("shop_db"), conn)
    assert s["state"] == "error"
    message = " ".join(p["message"] for p in s["problems"])
    assert "checkpoint store" in message and "***" in message
    html = render_page({"generated_at": dt.datetime.now(UTC).isoformat(), "sources": [s], "warnings": []})
    for text in (html, json.dumps(s)):
        assert SECRET not in text and str(root) not in text and "tok-0123456789" not in text


def test_airflow_runs_add_durations_and_snapshot_ids(mariadb, history, sources):
    """Task instances of the merge operator (as read through the REST API) give the
    merge's duration and the Iceberg snapshot ids of its tables."""
    found, _ = discover_sources(sources, use_variable=False)
    config, conn = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    merged = history.dumps[history.merged - 1]
    table = f"{history.database}.orders"
    runs = [
        {"kind": "merge", "dag_id": "binlog_shop", "run_id": "r2", "task_id": "merge", "state": "success",
         "start_date": None, "end_date": None, "duration": 4.0,
         "value": {"end_checkpoint": merged["end"],
                   "tables": {table: {"iceberg_table": "lake.shop.orders", "snapshot_id": 81234567}}}},
        {"kind": "dump", "dag_id": "binlog_shop", "run_id": "r3", "task_id": "dump", "state": "success",
         "duration": 1.5, "value": {"dump_id": history.dumps[-1]["dump_id"]}},
    ]
    s = collect_source(config, conn, airflow_runs=runs)
    merge = s["last_merge"]
    assert merge["duration_seconds"] == 4.0 and merge["rows_per_second"] == round(merge["total_rows"] / 4.0, 1)
    assert merge["airflow"]["run_id"] == "r2"
    tables = {t["table"]: t for t in s["tables"]}
    assert tables[table]["snapshot_id"] == 81234567 and tables[table]["iceberg_table"] == "lake.shop.orders"
    assert s["last_dump"]["airflow"]["run_id"] == "r3"
    assert "81234567" in render_page({"generated_at": s["checked_at"], "sources": [s], "warnings": []})


# ---------------------------------------------------------------------- more red states and settings

@pytest.fixture()
def silent_server():
    """A loopback port whose listener accepts connections and never sends a byte (a hung
    server, a black-holing proxy): the port of an ``accept``-ing socket."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_server_that_accepts_and_never_answers_fails_alone_within_the_timeouts(history, sources, silent_server):
    from airflow.models.connection import Connection

    port, accepted = silent_server
    doc = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": port, "login": "binlog_hook",
           "password": SECRET, "extra": {"server_id": 7314, "checkpoint_store_uri": str(history.store_dir)}}
    hung = (SourceConfig("hung_db", history.key, (str(history.staging_dir),)),
            Connection.from_json(json.dumps(doc), conn_id="hung_db"))
    found, _ = discover_sources(sources, use_variable=False)
    healthy = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    import threading

    result = []
    began = time.monotonic()
    worker = threading.Thread(target=lambda: result.extend(collect_all([hung, healthy], timeout=2)), daemon=True)
    worker.start()
    worker.join(20)         # a status that never returns fails here (closing the sockets ends it)
    elapsed = time.monotonic() - began
    assert not worker.is_alive(), "the status of a silent server never returned"
    statuses = {s["conn_id"]: s for s in result}
    assert accepted, "the status never connected to the silent server"
    assert elapsed < 8, f"a silent server held the status for {elapsed:.1f} s (timeouts of 2 s)"
    assert statuses["shop_db"]["state"] == "ok"
    s = statuses["hung_db"]
    assert s["state"] == "error" and s["position"] is None and s["lag"] is None
    assert any(p["message"].startswith("server: ") and "timed out" in p["message"] for p in s["problems"]), \
        s["problems"]
    # what does not need the server is still shown
    assert s["checkpoint"] is not None and len(s["dumps"]) == len(history.dumps)


def test_without_probes_the_servers_are_not_contacted_and_the_rest_still_shows(history, sources, silent_server,
                                                                               monkeypatch):
    """``[binlog] ui_probe_sources = False``: no session to any source server (a silent one is
    never even connected to), the checkpoint and the staged dumps still shown, never red for
    the server."""
    from airflow.models.connection import Connection

    from airflow_provider_binlog.plugins.status import PROBE_ENV, gather

    port, accepted = silent_server
    doc = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": port, "login": "binlog_hook",
           "password": SECRET, "extra": {"server_id": 7315, "checkpoint_store_uri": str(history.store_dir)}}
    hung = (SourceConfig("hung_db", history.key, (str(history.staging_dir),)),
            Connection.from_json(json.dumps(doc), conn_id="hung_db"))
    began = time.monotonic()
    (s,) = collect_all([hung], timeout=2, probe=False)
    assert time.monotonic() - began < 2 and not accepted
    assert s["state"] == "ok" and s["probed"] is False, s["problems"]
    assert s["position"] is None and s["lag"] is None and s["retention"] is None
    assert s["checkpoint"] is not None and len(s["dumps"]) == len(history.dumps)
    # the setting, through the whole gathering: the healthy source is not probed either
    monkeypatch.setenv(PROBE_ENV, "false")
    data = gather(use_variable=False)
    shop = next(x for x in data["sources"] if x["conn_id"] == "shop_db")
    assert shop["probed"] is False and shop["position"] is None and shop["state"] == "ok"
    assert shop["last_merge"] is not None and shop["last_dump"] is not None
    monkeypatch.setenv(PROBE_ENV, "true")
    probed = next(x for x in gather(use_variable=False)["sources"] if x["conn_id"] == "shop_db")
    assert probed["probed"] is True and probed["position"] is not None and probed["lag"]["bytes"] > 0


def test_binlog_ui_stall_seconds_sets_the_default_threshold(history, sources, monkeypatch):
    from airflow_provider_binlog.plugins.sources import STALL_ENV, default_stall_seconds

    found, _ = discover_sources(sources, use_variable=False)
    conn = next(conn for c, conn in found if c.conn_id == "shop_db")
    config = SourceConfig("shop_db", history.key)      # no stall_after_seconds of its own
    later = dt.datetime.now(UTC) + dt.timedelta(minutes=30)
    monkeypatch.delenv(STALL_ENV, raising=False)
    assert default_stall_seconds() == 3600
    assert collect_source(config, conn, now=later)["state"] == "ok"           # 30 min < 1 h
    monkeypatch.setenv(STALL_ENV, "600")
    s = collect_source(config, conn, now=later)
    assert s["state"] == "stalled" and s["stall_after_seconds"] == 600
    assert "threshold 10 min" in s["problems"][-1]["message"], s["problems"]
    # a source's own stall_after_seconds wins over the environment
    own = collect_source(SourceConfig("shop_db", history.key, stall_after_seconds=7200), conn, now=later)
    assert own["state"] == "ok" and own["stall_after_seconds"] == 7200
    for bad in ("0", "-5", "soon"):
        monkeypatch.setenv(STALL_ENV, bad)
        assert default_stall_seconds() == 3600


def test_a_checkpoint_ahead_of_the_server_is_an_error(mariadb, history, tmp_path):
    from airflow.models.connection import Connection

    file, pos = mariadb.master_status()
    store = FileCheckpointStore(tmp_path / "store")
    store.save("ahead", Checkpoint(file=file, position=pos + 10_000, flavor="mariadb"))
    doc = history.connection(mariadb, checkpoint_store_uri=str(tmp_path / "store"))
    conn = Connection.from_json(json.dumps(doc), conn_id="ahead_db")
    s = collect_source(SourceConfig("ahead_db", "ahead"), conn)
    assert s["state"] == "error", s
    (problem,) = [p for p in s["problems"] if p["state"] == "error"]
    assert problem["message"].startswith("checkpoint: ") and "is ahead of the server's position" in problem["message"]
    assert s["position"]["pos"] >= pos and s["lag"] is None          # the server part is still shown
    html = render_page({"generated_at": dt.datetime.now(UTC).isoformat(), "sources": [s], "warnings": []})
    assert re.search(r'data-conn-id="ahead_db"[^>]*data-state="error"', html) and "is ahead of the server" in html
