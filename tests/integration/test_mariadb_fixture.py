"""The live MariaDB fixture itself: configuration, binlog on disk, isolation."""

from __future__ import annotations

import os

import pymysql
import pytest

from airflow_provider_binlog.local.mariadb import MariaDBServer

pytestmark = pytest.mark.mariadb

BINLOG_MAGIC = b"\xfebin"

CUSTOM = {
    "binlog_checksum": "NONE",
    "log_bin_compress": "ON",
    "binlog_row_image": "MINIMAL",
    "binlog_row_metadata": "MINIMAL",
}


def global_variables(srv: MariaDBServer, names) -> dict[str, str]:
    rows = srv.query("SHOW GLOBAL VARIABLES")
    wanted = set(names)
    return {name: value for name, value in rows if name in wanted}


def test_default_server_configuration(mariadb: MariaDBServer) -> None:
    got = global_variables(
        mariadb,
        ["log_bin", "binlog_format", "server_id", "binlog_checksum",
         "binlog_row_image", "binlog_row_metadata", "port", "datadir"],
    )
    assert got["log_bin"] == "ON"
    assert got["binlog_format"] == "ROW"
    assert int(got["server_id"]) == mariadb.server_id
    assert got["binlog_checksum"] == "CRC32"
    assert got["binlog_row_image"] == "FULL"
    assert got["binlog_row_metadata"] == "FULL"
    assert int(got["port"]) == mariadb.port != 3306
    assert got["datadir"].rstrip("/") == str(mariadb.datadir)
    assert mariadb.version.startswith(("10.", "11.")) and "MariaDB" in mariadb.version


def test_factory_caches_one_server_per_configuration(mariadb_factory, mariadb) -> None:
    assert mariadb_factory() is mariadb
    assert mariadb_factory(binlog_checksum="CRC32") is mariadb
    assert mariadb_factory(**CUSTOM) is mariadb_factory(**CUSTOM)
    assert mariadb_factory(**CUSTOM) is not mariadb


def test_custom_server_reports_its_options(mariadb_factory) -> None:
    srv = mariadb_factory(**CUSTOM)
    got = global_variables(srv, [*CUSTOM, "log_bin", "binlog_format", "server_id"])
    assert got == {
        **CUSTOM,
        "log_bin": "ON",
        "binlog_format": "ROW",
        "server_id": str(srv.server_id),
    }


def test_accounts_and_test_database(mariadb: MariaDBServer) -> None:
    assert ("test",) in mariadb.query("SHOW DATABASES")
    conn = mariadb.connect(user="repl", password="replpass")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            assert cur.fetchall()
            cur.execute("SHOW GRANTS")
            grants = " ".join(row[0] for row in cur.fetchall())
    finally:
        conn.close()
    assert "REPLICATION SLAVE" in grants
    assert "SELECT" in grants
    with pytest.raises(pymysql.err.OperationalError):
        mariadb.connect(user="repl", password="wrong")


@pytest.mark.parametrize("options", [{}, CUSTOM], ids=["default", "custom"])
def test_insert_advances_binlog_on_disk(mariadb_factory, options) -> None:
    srv = mariadb_factory(**options)
    srv.execute("CREATE TABLE IF NOT EXISTS test.fixture_t (id INT PRIMARY KEY, v VARCHAR(20))")
    file0, pos0 = srv.master_status()
    srv.execute("INSERT INTO test.fixture_t (id, v) VALUES (%s, %s)", (pos0, "x" * 20))
    file1, pos1 = srv.master_status()
    assert (file1, pos1) > (file0, pos0)
    assert file1 in srv.binlog_files()
    path = srv.binlog_path(file1)
    assert path.parent == srv.datadir
    assert path.is_file()
    data = path.read_bytes()
    assert data[:4] == BINLOG_MAGIC
    assert len(data) >= pos1
    assert srv.query("SELECT v FROM test.fixture_t WHERE id = %s", (pos0,)) == [("x" * 20,)]


def test_flush_binary_logs_rotates(mariadb: MariaDBServer) -> None:
    before = mariadb.binlog_files()
    new = mariadb.flush_binary_logs()
    after = mariadb.binlog_files()
    assert new not in before and after[-1] == new
    assert mariadb.master_status()[0] == new
    assert mariadb.binlog_path(new).read_bytes()[:4] == BINLOG_MAGIC


def test_two_configurations_run_at_once(mariadb_factory) -> None:
    a = mariadb_factory()
    b = mariadb_factory(**CUSTOM)
    assert a.running and b.running
    assert a.port != b.port
    assert a.server_id != b.server_id
    assert a.datadir != b.datadir
    a.execute("CREATE TABLE IF NOT EXISTS test.only_on_a (id INT)")
    b.execute("DROP TABLE IF EXISTS test.only_on_a")
    assert a.query("SHOW TABLES FROM test LIKE 'only_on_a'") == [("only_on_a",)]
    assert a.variable("binlog_checksum") == "CRC32"
    assert b.variable("binlog_checksum") == "NONE"


def test_standalone_server_stops_and_cleans_up() -> None:
    from tests.conftest import _require_mariadb

    _require_mariadb()
    with MariaDBServer({"binlog_checksum": "NONE"}, server_id=4242) as srv:
        assert srv.variable("server_id") == "4242"
        basedir, pid = srv.basedir, srv.pid
        assert basedir is not None and basedir.is_dir()
    assert not srv.running
    assert not basedir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_halt_and_start_again_keep_data_and_port() -> None:
    from tests.conftest import _require_mariadb

    _require_mariadb()
    with MariaDBServer() as srv:
        srv.execute("CREATE TABLE test.kept (id INT PRIMARY KEY)")
        srv.execute("INSERT INTO test.kept VALUES (1)")
        port, basedir, files = srv.port, srv.basedir, srv.binlog_files()
        for crash in (False, True):
            pid = srv.pid
            srv.halt(crash=crash)
            assert not srv.running and srv.halted and srv.pid is None
            assert not _alive(pid)
            assert srv.binlog_path(files[0]).is_file()
            srv.start()
            assert srv.running and not srv.halted and srv.port == port and srv.basedir == basedir
            assert srv.query("SELECT id FROM test.kept") == [(1,)]
            assert srv.binlog_files()[:len(files)] == files
        srv.halt()
    assert not srv.halted and not basedir.exists()


def test_normalize_options() -> None:
    from airflow_provider_binlog.local.mariadb_command import normalize_options

    assert normalize_options({"--Binlog-Checksum": "NONE", "log_bin_compress": True,
                              "skip-slave-start": None, "max_connections": 20}) == {
        "binlog_checksum": "NONE", "log_bin_compress": "ON",
        "skip_slave_start": None, "max_connections": "20"}
    assert normalize_options(None) == {}


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


_CHILD = """
import atexit, sys, time
import pymysql
before = atexit._ncallbacks()
from airflow_provider_binlog.local import mariadb
assert atexit._ncallbacks() == before  # importing registers nothing
if sys.argv[1] == "exit":
    halted = mariadb.MariaDBServer()
    halted.halt()
    assert atexit._ncallbacks() == before + 1  # stop_all, on the first start only
    running = mariadb.MariaDBServer()
    assert atexit._ncallbacks() == before + 1
    print(halted.basedir, running.basedir, running.pid, flush=True)
    sys.exit(0)
srv = mariadb.MariaDBServer()
print(srv.basedir, srv.pid, flush=True)
time.sleep(600)
"""


def _wait_gone(paths, pids, timeout: float = 60) -> None:
    import time

    deadline = time.monotonic() + timeout
    while any(os.path.exists(p) for p in paths) or any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, (
            [p for p in paths if os.path.exists(p)], [p for p in pids if _alive(p)])
        time.sleep(0.1)


def test_servers_are_stopped_at_interpreter_exit() -> None:
    """Importing the module registers nothing with atexit; the first server registers
    ``stop_all``, which stops running and halted servers alike."""
    import subprocess
    import sys

    from tests.conftest import _require_mariadb

    _require_mariadb()
    done = subprocess.run([sys.executable, "-c", _CHILD, "exit"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    halted, running, pid = done.stdout.split()
    # stop_all ran before the interpreter exited: nothing left to wait for
    assert not os.path.exists(halted) and not os.path.exists(running) and not _alive(int(pid))


def test_watchdog_stops_the_server_of_a_killed_process() -> None:
    import signal
    import subprocess
    import sys

    from tests.conftest import _require_mariadb

    _require_mariadb()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, "kill"], stdout=subprocess.PIPE,
                             text=True)
    try:
        basedir, pid = child.stdout.readline().split()
        assert os.path.isdir(basedir) and _alive(int(pid))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    _wait_gone([basedir], [int(pid)])
