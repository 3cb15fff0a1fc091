"""Security: the password and the connection extras never show up in logs, XCom values,
manifests or exceptions; TLS to a server that requires it (a self-signed CA made here with
openssl); source identifiers with backticks, dots, quotes, spaces and unicode are quoted in
every statement (MySQL side: snapshot, information_schema; Spark side: DDL, MERGE), end to
end; the checkpoint store and the staging files are private (0600 files, 0700 directories)."""
from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess

import pytest

from airflow_provider_binlog.checkpoints import FileCheckpointStore
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.replica import ReplicaConnection, ReplicaError
from airflow_provider_binlog.common.tables import TableFilter
from tests.reliability import support as S

#: A distinctive value in a connection extra (not a setting the hook knows).
EXTRA_SECRET = "xtra-T0ken-5d1e9a"


# --------------------------------------------------------------------------- secrets


def test_password_and_extras_never_leak(mariadb, monkeypatch, tmp_path, caplog, capfd, record_trials):
    conn_mod = pytest.importorskip("tests.airflow_conn")
    from airflow_provider_binlog.hooks.binlog import BinlogHook
    from airflow_provider_binlog.operators.dump import BinlogDumpOperator
    from airflow_provider_binlog.sensors.position import BinlogPositionSensor

    caplog.set_level(logging.DEBUG)
    secret = conn_mod.SECRET
    conn_mod.create_user(mariadb)
    S.create_tables(mariadb, "rel_sec", ["items"])
    extra = {"checkpoint_store_uri": str(tmp_path / "cp"), "api_token": EXTRA_SECRET}
    conn_id = conn_mod.set_connection(monkeypatch, mariadb, extra=extra)
    hook = BinlogHook(conn_id)
    start = hook.current_position()
    hook.checkpoint_store().save(conn_id, start)
    S.workload(mariadb, "rel_sec", S.rng_for("sec"), 20, tables=("items",))
    texts = []

    # the sensor's XCom, the dump operator's XCom, the manifest, the staged files' names
    poke = BinlogPositionSensor(task_id="wait", binlog_conn_id=conn_id, poke_interval=0.1, timeout=10).poke({})
    assert poke.is_done
    texts.append(json.dumps(poke.xcom_value, default=str))
    xcom = BinlogDumpOperator(
        task_id="dump",
        binlog_conn_id=conn_id,
        tables=["rel_sec.*"],
        staging=str(tmp_path / "staging"),
    ).execute({})
    texts.append(json.dumps(xcom, default=str))
    for path in (tmp_path / "staging").rglob("*"):
        texts.append(str(path))
        if path.is_file() and path.suffix == ".json":
            texts.append(path.read_text())
    for path in (tmp_path / "cp").rglob("*"):
        if path.is_file():
            texts.append(path.read_text(errors="replace"))

    # the merge job's output and log (it is handed the manifest, never the connection)
    merge = subprocess.run(
        [str(S.ROOT / ".venv/bin/python") if (S.ROOT / ".venv/bin/python").exists() else "python",
         "-c", "import sys; from airflow_provider_binlog.merge.batches import plan_batches; "
               "plan_batches(sys.argv[1:]); print('planned')",
         xcom["manifest"]],
        cwd=str(S.ROOT), capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(S.ROOT)})
    assert merge.returncode == 0, merge.stderr
    texts += [merge.stdout, merge.stderr]

    # errors: a wrong password, a server that is down, binlogs that are gone, TLS refused
    failures = [
        (conn_mod.set_connection(monkeypatch, mariadb, password=secret + "-wrong", extra=extra), {}),
        (conn_mod.set_connection(monkeypatch, mariadb, port=1, extra=extra), {}),
        (conn_id, {"start": {"file": "mariadb-bin.000000", "pos": 4}}),
        (conn_mod.set_connection(monkeypatch, mariadb,
                                 extra={**extra, "ssl": True, "ssl_ca": "/nonexistent/ca.pem"}), {}),
    ]
    for failing, kwargs in failures:
        with pytest.raises(Exception) as info:
            BinlogHook(failing).dump(staging=tmp_path / "staging-fail", **kwargs)
        texts += [str(info.value), repr(info.value), str(info.value.__cause__ or ""),
                  str(info.value.__context__ or "")]
        if not kwargs:
            ok, message = BinlogHook(failing).test_connection()
            assert not ok
            texts.append(message)
    out_text, err_text = capfd.readouterr()
    texts += [caplog.text, out_text, err_text, repr(hook), repr(hook.get_replica())]
    for text in texts:
        assert secret not in text, text[:2000]
        assert EXTRA_SECRET not in text, text[:2000]
    record_trials("password and extras in logs, XCom, manifests, exceptions", len(texts))


# --------------------------------------------------------------------------- TLS


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca_and_server_cert(directory):
    """A CA and a server certificate for 127.0.0.1 / localhost signed by it."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=reliability test CA",
            "-keyout", "ca-key.pem", "-out", "ca.pem", cwd=directory)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server-key.pem",
            "-out", "server.csr", cwd=directory)
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "server.pem", cwd=directory)
    for name in ("ca-key.pem", "server-key.pem"):
        os.chmod(directory / name, 0o600)
    return directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"


@pytest.fixture(scope="module")
def tls_server(mariadb_factory, tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    certs = tmp_path_factory.mktemp("certs")
    ca, cert, key = make_ca_and_server_cert(certs)
    server = mariadb_factory(ssl_ca=str(ca), ssl_cert=str(cert), ssl_key=str(key))
    # the fixture checks readiness over plain TCP: require TLS from now on
    server.execute("SET GLOBAL require_secure_transport = ON")
    server.ca = ca
    other = tmp_path_factory.mktemp("other-ca")
    server.other_ca = make_ca_and_server_cert(other)[0]
    return server


def test_dump_over_tls_to_a_server_that_requires_it(tls_server, tmp_path, monkeypatch, record_trials):
    server = tls_server
    tls = {"ca": str(server.ca), "check_hostname": True, "verify_mode": True}
    S.create_tables(server, "rel_tls", ["items"])
    start = S.here(server)
    S.workload(server, "rel_tls", S.rng_for("tls"), 30, tables=("items",))

    # plain TCP is refused by the server (MariaDB says "access denied"; pymysql would
    # otherwise try TLS unverified); an
    # unknown CA by the client
    with pytest.raises(ReplicaError, match="Access denied.*TLS settings"):
        ReplicaConnection(server.host, server.port, server.user, server.password, server_id=5301,
                          ssl_disabled=True).connect()
    with pytest.raises(ReplicaError, match="certificate verify failed|CERTIFICATE_VERIFY_FAILED"):
        ReplicaConnection(server.host, server.port, server.user, server.password, server_id=5301,
                          ssl={**tls, "ca": str(server.other_ca)}).connect()

    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=5301, ssl=tls)
    rc.connect()
    with rc.conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert cur.fetchone()[1].startswith("TLS")
    result = run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=TableFilter(["rel_tls.*"]))
    rc.close()
    assert S.replay([result.manifest], "rel_tls", ["items"]) == S.source_state(server, "rel_tls", ["items"])

    # the same through the Airflow connection's TLS extras
    conn_mod = pytest.importorskip("tests.airflow_conn")
    from airflow_provider_binlog.hooks.binlog import BinlogHook
    conn_mod.create_user(server)
    conn_id = conn_mod.set_connection(monkeypatch, server, extra={"ssl_ca": str(server.ca)})
    out = BinlogHook(conn_id).dump(staging=tmp_path / "hook", start=start, tables=["rel_tls.*"])
    assert out["rows"] == result.rows
    record_trials("TLS with require_secure_transport=ON (verified CA, refused plain and unknown CA)")


# --------------------------------------------------------------------------- identifiers

WEIRD_DB = 'rel.wé"ird'
WEIRD_TABLE = 'we`ird.t"a b'
WEIRD_COLUMNS = ("c`o l", "ñ", "sp ace, (x)", "dot.ted")


def q(name):
    return S.quote(name)


def test_odd_identifiers_end_to_end(mariadb, spark, tmp_path, record_trials):
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    from airflow_provider_binlog.capture.snapshot import take_snapshot

    server = mariadb
    table = f"{q(WEIRD_DB)}.{q(WEIRD_TABLE)}"
    server.execute(f"CREATE DATABASE IF NOT EXISTS {q(WEIRD_DB)}")
    server.execute(f"DROP TABLE IF EXISTS {table}")
    c = [q(n) for n in WEIRD_COLUMNS]
    server.execute(f"CREATE TABLE {table} ({c[0]} INT PRIMARY KEY, {c[1]} VARCHAR(10), {c[2]} TEXT, "
                   f"{c[3]} DECIMAL(6,2)) DEFAULT CHARSET=utf8mb4")
    server.execute(f"INSERT INTO {table} VALUES (1, 'ä', 'x`y', 1.5), (2, NULL, '\"', 2.25), (3, 'ö', '', 0)")
    S.KEYS[WEIRD_TABLE] = (WEIRD_COLUMNS[0],)
    captured = TableFilter([f"{WEIRD_DB}.*"])
    staging = tmp_path / "staging"

    # the initial snapshot reads it (information_schema, SELECT ... ORDER BY the key, keyset)
    snap = take_snapshot(lambda: server.connect(), staging_dir=staging, tables=captured, flavor="mariadb",
                         server={"server_id": server.server_id}, chunk_rows=2)
    store = FileCheckpointStore(tmp_path / "store")
    apply_manifests(spark, [snap], MergeOptions(namespace="rel_weird", checkpoint_store=store.root,
                                                checkpoint_key="weird"))
    want = S.source_state(server, WEIRD_DB, [WEIRD_TABLE])
    assert S.iceberg_state(spark, "rel_weird", WEIRD_DB, [WEIRD_TABLE]) == want

    # then the binlog: updates, a key change, a delete, an ADD COLUMN with an odd name and a
    # default, a TRUNCATE and rows after it
    start = store.load("weird")
    server.execute(f"UPDATE {table} SET {c[1]} = 'é', {c[3]} = {c[3]} + 1 WHERE {c[0]} = 1")
    server.execute(f"UPDATE {table} SET {c[0]} = 10 WHERE {c[0]} = 2")
    server.execute(f"DELETE FROM {table} WHERE {c[0]} = 3")
    server.execute(f"ALTER TABLE {table} ADD COLUMN {q('n`e w')} INT NOT NULL DEFAULT 4")
    server.execute(f"INSERT INTO {table} ({c[0]}, {c[2]}) VALUES (4, 'new')")
    rc = S.replica(server)
    try:
        first = run_dump(rc, staging_dir=staging, start=start, tables=captured)
    finally:
        rc.close()
    apply_manifests(spark, [first.manifest], MergeOptions(namespace="rel_weird", checkpoint_store=store.root,
                                                          checkpoint_key="weird"))
    want = S.source_state(server, WEIRD_DB, [WEIRD_TABLE])
    assert S.iceberg_state(spark, "rel_weird", WEIRD_DB, [WEIRD_TABLE]) == want

    server.execute(f"TRUNCATE TABLE {table}")
    server.execute(f"INSERT INTO {table} ({c[0]}, {c[1]}) VALUES (7, 'after')")
    rc = S.replica(server)
    try:
        second = run_dump(rc, staging_dir=staging, start=first.end, tables=captured)
    finally:
        rc.close()
    assert [d["kind"] for d in second.manifest.data["ddl"]] == ["truncate"]
    apply_manifests(spark, [second.manifest], MergeOptions(namespace="rel_weird", checkpoint_store=store.root,
                                                           checkpoint_key="weird"))
    want = S.source_state(server, WEIRD_DB, [WEIRD_TABLE])
    assert S.iceberg_state(spark, "rel_weird", WEIRD_DB, [WEIRD_TABLE]) == want
    assert list(want[WEIRD_TABLE]) == [(7,)]

    # a batch with nothing but the TRUNCATE
    server.execute(f"TRUNCATE TABLE {table}")
    rc = S.replica(server)
    try:
        third = run_dump(rc, staging_dir=staging, start=second.end, tables=captured)
    finally:
        rc.close()
    assert third.manifest.tables == []
    apply_manifests(spark, [third.manifest], MergeOptions(namespace="rel_weird", checkpoint_store=store.root,
                                                          checkpoint_key="weird"))
    assert S.iceberg_state(spark, "rel_weird", WEIRD_DB, [WEIRD_TABLE]) == {WEIRD_TABLE: {}}
    server.execute(f"DROP DATABASE {q(WEIRD_DB)}")
    record_trials("odd identifiers (backticks, dots, quotes, spaces, unicode) end to end")


# --------------------------------------------------------------------------- permissions


def test_store_and_staging_are_private(mariadb, spark, tmp_path, record_trials):
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    old_umask = os.umask(0o022)      # a usual umask: what we create must still be private
    try:
        S.create_tables(mariadb, "rel_perm", ["items"])
        start = S.here(mariadb)
        S.workload(mariadb, "rel_perm", S.rng_for("perm"), 10, tables=("items",))
        rc = S.replica(mariadb)
        try:
            result = run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=TableFilter(["rel_perm.*"]))
        finally:
            rc.close()
        store = FileCheckpointStore(tmp_path / "store")
        store.save("perm", start)
        apply_manifests(spark, [result.manifest], MergeOptions(namespace="rel_perm", checkpoint_store=store.root,
                                                               checkpoint_key="perm"))
    finally:
        os.umask(old_umask)
    checked = 0
    for root in (tmp_path / "staging", tmp_path / "store"):
        for path in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            if path.is_dir():
                assert mode == 0o700, f"{path}: {oct(mode)}"
            else:
                assert mode & 0o077 == 0, f"{path}: {oct(mode)}"
            checked += 1
    record_trials("file permissions of the store and the staging files", checked)
