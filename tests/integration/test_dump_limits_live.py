"""What the dump promises beyond its happy path, against the live MariaDB: the ``max_bytes``
and ``max_seconds`` limits (checked at transaction boundaries), an INCIDENT event failing the
dump, a rows event without its TABLE_MAP, ``ServerUnavailableError`` once the retries run out,
and the preflight refusing a server without ``log_bin``. A failed dump publishes nothing."""
from __future__ import annotations

import socket
import time

import pytest

from airflow_provider_binlog.capture import dump as dump_mod
from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.codec import MissingTableMapError, read_binlog_file
from airflow_provider_binlog.codec.events import IncidentEvent, XidEvent
from airflow_provider_binlog.capture.dump import DumpError, run_dump
from airflow_provider_binlog.replica import ReplicaConnection, ServerUnavailableError
from airflow_provider_binlog.replica.preflight import PreflightError, preflight
from airflow_provider_binlog.common.tables import TableFilter
from tests.corpus import CORPUS
from tests.cutting_proxy import CuttingProxy

DB = "limitsdb"


def replica(server, port=None, **kwargs):
    rc = ReplicaConnection(server.host, port or server.port, server.user, server.password, server_id=4343, **kwargs)
    rc.connect()
    return rc


def here(server) -> Checkpoint:
    file, pos = server.master_status()
    return Checkpoint(file=file, position=pos, flavor="mariadb")


class _Time:
    """The dump module's ``time`` with some functions replaced (the rest of the process keeps
    the real clock)."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(time, name)


def nothing_published(staging) -> bool:
    return not staging.exists() or [p.name for p in staging.iterdir() if p.name != ".publish.lock"] == []


@pytest.fixture()
def table(mariadb, request):
    name = request.node.name.split("[")[0][5:45]
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
    mariadb.execute(f"DROP TABLE IF EXISTS {DB}.{name}")
    mariadb.execute(f"CREATE TABLE {DB}.{name} (id INT PRIMARY KEY, v VARCHAR(200))")
    return name


@pytest.fixture()
def five_transactions(mariadb, table):
    """Five transactions of 20 rows each; the binlog position before and after each."""
    points = [here(mariadb)]
    for t in range(5):
        mariadb.execute(f"INSERT INTO {DB}.{table} VALUES " +
                        ",".join(f"({t * 20 + i}, '{'x' * 100}')" for i in range(20)))
        points.append(here(mariadb))
    return points


# ---------------------------------------------------------------------- max_bytes / max_seconds

def test_max_bytes_stops_at_the_first_transaction_boundary_at_or_after_the_limit(mariadb, table,
                                                                                five_transactions, tmp_path):
    p = five_transactions
    sizes = [b.position - a.position for a, b in zip(p, p[1:])]
    assert all(s > 0 for s in sizes) and all(a.file == p[0].file for a in p)
    tables = TableFilter([f"{DB}.{table}"])
    rc = replica(mariadb)
    try:
        cases = {
            1: 1,                                   # one byte: the first transaction, whole
            sizes[0] + sizes[1]: 2,                 # exactly two transactions' bytes: at that boundary
            sizes[0] + sizes[1] - 1: 2,             # a byte less: still the second boundary
            sizes[0] + sizes[1] + 1: 3,             # a byte more: the third
        }
        for i, (limit, transactions) in enumerate(cases.items()):
            result = run_dump(rc, staging_dir=tmp_path / f"s{i}", start=p[0], stop=p[-1], tables=tables,
                              max_bytes=limit)
            assert result.end.position == p[transactions].position, (limit, result.end)
            assert result.manifest.binlog_bytes == p[transactions].position - p[0].position
            assert result.rows[f"{DB}.{table}"]["insert"] == 20 * transactions, limit
        # the next dump goes on from there: every row exactly once
        first = run_dump(rc, staging_dir=tmp_path / "next", start=p[0], stop=p[-1], tables=tables, max_bytes=1)
        rest = run_dump(rc, staging_dir=tmp_path / "next", start=first.end, stop=p[-1], tables=tables)
        assert rest.end.position == p[-1].position and rest.rows[f"{DB}.{table}"]["insert"] == 80
    finally:
        rc.close()


def test_max_seconds_stops_at_the_first_transaction_boundary_after_the_time(mariadb, table, five_transactions,
                                                                            tmp_path, monkeypatch):
    p = five_transactions
    tables = TableFilter([f"{DB}.{table}"])
    # a clock that moves 10 s at each transaction boundary (the dump reads it there)
    clock = [1000.0]
    boundary = dump_mod.BoundedDump._boundary

    def ticking_boundary(self, file, next_pos):
        boundary(self, file, next_pos)
        clock[0] += 10.0

    monkeypatch.setattr(dump_mod.BoundedDump, "_boundary", ticking_boundary)
    monkeypatch.setattr(dump_mod, "time", _Time(monotonic=lambda: clock[0]))
    rc = replica(mariadb)
    try:
        result = run_dump(rc, staging_dir=tmp_path / "a", start=p[0], stop=p[-1], tables=tables, max_seconds=25)
        assert result.end.position == p[3].position                       # 30 s >= 25 s after three
        assert result.rows[f"{DB}.{table}"]["insert"] == 60
        result = run_dump(rc, staging_dir=tmp_path / "b", start=p[0], stop=p[-1], tables=tables, max_seconds=0)
        assert result.end.position == p[1].position                       # the first one, whole
        result = run_dump(rc, staging_dir=tmp_path / "c", start=p[0], stop=p[-1], tables=tables, max_seconds=3600)
        assert result.end.position == p[-1].position
    finally:
        rc.close()


# ---------------------------------------------------------------------- failures

INCIDENT_FILE = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/bug40482-bin.000001"
INCIDENT_POS = 106      # where the event is in that file


class _WithIncident:
    """The live replica, with an INCIDENT event (taken from a real MySQL binlog) sent after the
    first transaction."""

    def __init__(self, rc):
        self.rc = rc
        (self.incident,) = [e for e in read_binlog_file(INCIDENT_FILE) if isinstance(e, IncidentEvent)]

    def __getattr__(self, name):
        return getattr(self.rc, name)

    def stream(self, *args, **kwargs):
        sent = False
        for file, event in self.rc.stream(*args, **kwargs):
            yield file, event
            if isinstance(event, XidEvent) and not sent:
                sent = True
                yield file, self.incident


@pytest.mark.skipif(not INCIDENT_FILE.exists(), reason=f"binlog corpus not found at {CORPUS}")
def test_an_incident_event_fails_the_dump_and_nothing_is_published(mariadb, table, five_transactions, tmp_path):
    p = five_transactions
    rc = replica(mariadb)
    try:
        with pytest.raises(DumpError) as info:
            run_dump(_WithIncident(rc), staging_dir=tmp_path / "staging", start=p[0], stop=p[-1],
                     tables=TableFilter([f"{DB}.{table}"]))
    finally:
        rc.close()
    message = str(info.value)
    assert f"incident event at {p[0].file}:{INCIDENT_POS}" in message, message
    assert "take a new snapshot" in message
    assert nothing_published(tmp_path / "staging"), list((tmp_path / "staging").iterdir())


def test_a_rows_event_without_its_table_map_is_a_typed_error(mariadb, table, tmp_path):
    start = here(mariadb)
    mariadb.execute(f"INSERT INTO {DB}.{table} VALUES (1, 'a'), (2, 'b')")
    events = mariadb.query(f"SHOW BINLOG EVENTS IN '{start.file}' FROM {start.position}")
    rows_pos = next(row[1] for row in events if row[2].startswith("Write_rows"))
    # from the server: a dump started at the rows event, inside the transaction
    rc = replica(mariadb)
    try:
        with pytest.raises(MissingTableMapError) as info:
            run_dump(rc, staging_dir=tmp_path / "staging", start=Checkpoint(file=start.file, position=rows_pos,
                                                                             flavor="mariadb"),
                     tables=TableFilter([f"{DB}.{table}"]))
    finally:
        rc.close()
    assert info.value.offset == rows_pos and "without a TABLE_MAP" in str(info.value)
    assert "transaction boundary" in info.value.hint
    assert nothing_published(tmp_path / "staging")
    # from a binlog file: decoding from that offset
    mariadb.flush_binary_logs()
    with pytest.raises(MissingTableMapError) as info:
        for _ in read_binlog_file(mariadb.binlog_path(start.file), start_position=rows_pos):
            pass
    assert (info.value.source, info.value.offset) == (start.file, rows_pos)


def test_server_unavailable_once_the_retries_run_out(mariadb, table, five_transactions, tmp_path, monkeypatch):
    """The server goes away after the dump connected: each retry fails to connect; after the
    last one the dump raises ServerUnavailableError and publishes nothing."""
    p = five_transactions
    proxy = CuttingProxy(mariadb.host, mariadb.port, cut_after=10 ** 12, cuts=0)
    rc = replica(mariadb, port=proxy.port)
    proxy.listener.shutdown(socket.SHUT_RDWR)   # nothing listens there any more
    proxy.close()
    rc.conn.close()         # and the session is gone
    rc.conn = None
    delays = []
    monkeypatch.setattr(dump_mod, "time", _Time(sleep=delays.append))
    try:
        with pytest.raises(ServerUnavailableError) as info:
            run_dump(rc, staging_dir=tmp_path / "staging", start=p[0], stop=p[-1],
                     tables=TableFilter([f"{DB}.{table}"]), retries=3, backoff_seconds=0.5)
    finally:
        rc.close()
    assert f"cannot connect to {mariadb.host}:{proxy.port}" in str(info.value)
    assert delays == [0.5, 1.0, 2.0]          # three retries with backoff, then the error
    assert nothing_published(tmp_path / "staging")


def test_preflight_refuses_a_server_without_log_bin(mariadb_factory):
    server = mariadb_factory(skip_log_bin=None)
    assert server.query("SELECT @@log_bin")[0][0] == 0
    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=5152)
    try:
        with pytest.raises(PreflightError) as info:
            preflight(rc)
    finally:
        rc.close()
    assert "binary logging is off (log_bin=OFF)" in str(info.value)
    assert "log_bin" in info.value.hint and "binlog_format=ROW" in info.value.hint
