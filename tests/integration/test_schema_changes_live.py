"""Schema changes followed through the binlog, live: a private MariaDB per binlog
configuration, the hook's dumps with the schema history kept next to the checkpoint, the merge
job into Iceberg; after every round Iceberg equals MariaDB value by value.

Covers ALTERs inside a batch and between runs (ADD with defaults, DROP, the same-type drop and
add, MODIFY, RENAME COLUMN), a gh-ost style cut-over (shadow LIKE the table, rows copied by
INSERT ... SELECT, changes replayed, RENAME swap) and the real pt-online-schema-change while a
writer keeps writing.
"""
from __future__ import annotations

from airflow_provider_binlog.staging.storage import read_parquet
import itertools
import os
import shutil
import subprocess
import threading

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint, FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.hooks.binlog import BinlogHook  # noqa: E402
from airflow_provider_binlog.schema_history import SeedConflictError  # noqa: E402
from airflow_provider_binlog.staging import load_manifest  # noqa: E402
from airflow_provider_binlog.common.tables import iceberg_table_name  # noqa: E402
from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.all_types import ALL_TYPES, all_types_row as _all_types_row, normalize as _normalize  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

_names = itertools.count(1)

#: binlog settings each load is tried under (row metadata, row image, checksum, compression)
CONFIGS = {
    "metadata-minimal": {"binlog_row_metadata": "MINIMAL"},
    "metadata-full": {"binlog_row_metadata": "FULL", "binlog_checksum": "NONE"},
    "image-minimal": {"binlog_row_metadata": "MINIMAL", "binlog_row_image": "MINIMAL"},
    "image-noblob-compressed": {"binlog_row_metadata": "FULL", "binlog_row_image": "NOBLOB",
                                "log_bin_compress": "ON", "log_bin_compress_min_len": "10"},
}


class Load:
    """One source table loaded round by round: dump through the hook, merge into Iceberg."""

    def __init__(self, server, spark, monkeypatch, tmp_path, db: str, tables: list[str]) -> None:
        self.server, self.spark, self.db = server, spark, db
        self.key = f"sch{next(_names)}"
        self.namespace = f"schema_{self.key}"
        self.staging = tmp_path / "staging"
        self.store = FileCheckpointStore(tmp_path / "store")
        create_user(server)
        conn_id = set_connection(monkeypatch, server, extra={"checkpoint_store_uri": str(tmp_path / "store")})
        self.hook = BinlogHook(conn_id)
        self.patterns = [f"{db}.{t}" for t in tables]

    def merge(self, manifest_path: str) -> dict:
        from tests.merging import apply_manifests
        from airflow_provider_binlog.merge.options import MergeOptions
        return apply_manifests(self.spark, [load_manifest(manifest_path)], MergeOptions(namespace=self.namespace,
                                                                                        checkpoint_store=self.store.root,
                                                                                        checkpoint_key=self.key))

    def snapshot(self) -> None:
        result = self.hook.snapshot(self.staging, tables=self.patterns)
        self.merge(result["manifest"])

    def round(self) -> dict:
        result = self.hook.dump(staging=self.staging, checkpoint_key=self.key, tables=self.patterns)
        result["merge"] = self.merge(result["manifest"])
        return result

    def assert_equal(self, table: str, key: str = "id") -> None:
        columns = [r[0] for r in self.server.query(f"SHOW COLUMNS FROM `{self.db}`.`{table}`")]
        source = [tuple(r) for r in self.server.query(
            f"SELECT {', '.join(f'`{c}`' for c in columns)} FROM `{self.db}`.`{table}` ORDER BY `{key}`")]
        name = f"lake.{self.namespace}.{iceberg_table_name(self.db, table)}"
        self.spark.sql(f"REFRESH TABLE {name}")
        iceberg = self.spark.table(name)
        assert iceberg.columns == columns
        rows = [tuple(r) for r in iceberg.orderBy(key).collect()]
        assert rows == source


@pytest.fixture(params=sorted(CONFIGS))
def server(request, mariadb_factory):
    return mariadb_factory(**CONFIGS[request.param])


def _minimal_db(mariadb_factory, table: str):
    """A server with MINIMAL row metadata (the default of MySQL 8 and MariaDB), a new database
    and one table in it (``table``: its name and definition)."""
    server = mariadb_factory(binlog_row_metadata="MINIMAL")
    db = _db(server)
    server.execute(f"CREATE TABLE {db}.{table}")
    return server, db


def _hook(server, monkeypatch, **extra) -> BinlogHook:
    create_user(server)
    return BinlogHook(set_connection(monkeypatch, server, **extra))


def _db(server) -> str:
    name = f"sch_{next(_names)}"
    server.execute(f"CREATE DATABASE {name}")
    return name


def test_alters_inside_a_batch_and_between_runs_keep_iceberg_equal_to_the_source(
        server, spark, monkeypatch, tmp_path):
    db = _db(server)
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b INT, s VARCHAR(20) DEFAULT 'x')")
    server.execute(f"INSERT INTO {db}.t VALUES (1, 10, 100, 'one'), (2, 20, 200, 'two'), (3, 30, 300, NULL)")
    load = Load(server, spark, monkeypatch, tmp_path, db, ["t"])
    load.snapshot()
    load.assert_equal("t")

    # inside one batch: the same-type drop and add (INT a dropped, INT c added), a NOT NULL
    # column with a default the existing rows get, rows on both sides of each ALTER
    server.execute(f"UPDATE {db}.t SET a = 11 WHERE id = 1")
    server.execute(f"ALTER TABLE {db}.t DROP COLUMN a")
    server.execute(f"INSERT INTO {db}.t (id, b, s) VALUES (4, 400, 'four')")
    server.execute(f"ALTER TABLE {db}.t ADD COLUMN c INT NOT NULL DEFAULT 7 AFTER b")
    server.execute(f"INSERT INTO {db}.t (id, b, c) VALUES (5, 500, 55)")
    server.execute(f"UPDATE {db}.t SET c = c + 1 WHERE id = 2")
    load.round()
    load.assert_equal("t")

    # between runs: an ALTER alone in its batch, then rows in the next one
    server.execute(f"ALTER TABLE {db}.t ADD COLUMN d VARCHAR(5) NOT NULL DEFAULT 'zz'")
    load.round()
    load.assert_equal("t")
    server.execute(f"INSERT INTO {db}.t (id, b, c, d) VALUES (6, 600, 66, 'six')")
    server.execute(f"UPDATE {db}.t SET d = 'upd' WHERE id = 3")
    server.execute(f"DELETE FROM {db}.t WHERE id = 4")
    load.round()
    load.assert_equal("t")

    # a widening MODIFY and a column rename
    server.execute(f"ALTER TABLE {db}.t MODIFY COLUMN b BIGINT")
    server.execute(f"UPDATE {db}.t SET b = 5000000000 WHERE id = 5")
    server.execute(f"ALTER TABLE {db}.t RENAME COLUMN s TO label")
    server.execute(f"UPDATE {db}.t SET label = 'renamed' WHERE id = 1")
    load.round()
    load.assert_equal("t")


def test_a_history_read_after_a_same_type_drop_and_add_is_detected_not_mislabelled(
        mariadb_factory, monkeypatch, tmp_path):
    server, db = _minimal_db(mariadb_factory, "t (id INT PRIMARY KEY, a INT, b INT)")
    hook = _hook(server, monkeypatch)
    start = hook.current_position()
    server.execute(f"INSERT INTO {db}.t VALUES (1, 10, 100)")
    server.execute(f"ALTER TABLE {db}.t DROP COLUMN a, ADD COLUMN c INT")  # same types, new names
    server.execute(f"INSERT INTO {db}.t VALUES (2, 200, 2000)")
    with pytest.raises(SeedConflictError, match=rf"rows of {db}\.t before this schema change"):
        hook.dump(staging=tmp_path, start=start, tables=[f"{db}.t"])
    assert not list(tmp_path.glob("*/manifest.json"))  # nothing published


def test_gh_ost_style_cut_over_carries_the_table_on(mariadb_factory, spark, monkeypatch, tmp_path):
    server, db = _minimal_db(mariadb_factory, "t (id INT PRIMARY KEY, a INT, note VARCHAR(10))")
    server.execute(f"INSERT INTO {db}.t VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c')")
    load = Load(server, spark, monkeypatch, tmp_path, db, ["t"])
    load.snapshot()
    # the shadow: created LIKE the table, altered, rows copied, changes replayed, swapped in
    server.execute(f"CREATE TABLE {db}._t_gho LIKE {db}.t")
    server.execute(f"ALTER TABLE {db}._t_gho ADD COLUMN flag INT NOT NULL DEFAULT 5, DROP COLUMN a")
    server.execute(f"INSERT INTO {db}._t_gho (id, note) SELECT id, note FROM {db}.t")
    server.execute(f"UPDATE {db}.t SET note = 'b2' WHERE id = 2")
    server.execute(f"UPDATE {db}._t_gho SET note = 'b2' WHERE id = 2")
    server.execute(f"RENAME TABLE {db}.t TO {db}._t_del, {db}._t_gho TO {db}.t")
    server.execute(f"DROP TABLE {db}._t_del")
    server.execute(f"INSERT INTO {db}.t (id, note, flag) VALUES (4, 'd', 9)")
    load.round()
    load.assert_equal("t")


def test_pt_online_schema_change_with_a_writer_running(mariadb_factory, spark, monkeypatch, tmp_path):
    if shutil.which("pt-online-schema-change") is None:
        reason = "pt-online-schema-change not installed (Debian package percona-toolkit)"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}:
            pytest.fail(f"{reason}; CI must install it (.ci/run does)", pytrace=False)
        pytest.skip(reason)
    server, db = _minimal_db(mariadb_factory, "t (id INT PRIMARY KEY, a INT NOT NULL, note VARCHAR(20))")
    for i in range(1, 201):
        server.execute(f"INSERT INTO {db}.t VALUES (%s, %s, %s)", (i, i, f"n{i}"))
    load = Load(server, spark, monkeypatch, tmp_path, db, ["t"])
    load.snapshot()
    stop = threading.Event()
    writes = itertools.count(1000)

    def writer():
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    i = next(writes)
                    cur.execute(f"INSERT INTO {db}.t (id, a, note) VALUES (%s, %s, 'w')", (i, i))
                    cur.execute(f"UPDATE {db}.t SET note = CONCAT('u', id) WHERE id = %s", (i % 200 + 1,))
                    cur.execute(f"DELETE FROM {db}.t WHERE id = %s", (i - 3,))
        finally:
            conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        done = subprocess.run(
            ["pt-online-schema-change", "--alter", "ADD COLUMN flag INT NOT NULL DEFAULT 3",
             f"h=127.0.0.1,P={server.port},u={server.user},D={db},t=t", "--execute",
             "--no-check-replication-filters", "--recursion-method=none", "--chunk-size=50"],
            capture_output=True, text=True, timeout=300)
    finally:
        stop.set()
        thread.join()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    load.round()
    load.assert_equal("t")
    server.execute(f"INSERT INTO {db}.t (id, a, note, flag) VALUES (5000, 1, 'after', 8)")
    load.round()
    load.assert_equal("t")


def test_renames_between_captured_tables_carry_their_iceberg_tables(mariadb_factory, spark, monkeypatch, tmp_path):
    server, db = _minimal_db(mariadb_factory, "a (id INT PRIMARY KEY, v VARCHAR(10))")
    server.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY, w INT, x INT)")
    server.execute(f"INSERT INTO {db}.a VALUES (1, 'a1'), (2, 'a2')")
    server.execute(f"INSERT INTO {db}.b VALUES (10, 1, 2), (11, 3, 4), (12, 5, 6)")
    load = Load(server, spark, monkeypatch, tmp_path, db, ["a", "b", "c"])
    load.snapshot()
    server.execute(f"UPDATE {db}.a SET v = 'a2u' WHERE id = 2")
    server.execute(f"DELETE FROM {db}.b WHERE id = 12")
    # a swap through a name that is not captured: a gets b's rows and columns, b gets a's
    server.execute(f"RENAME TABLE {db}.a TO {db}.tmp_x, {db}.b TO {db}.a, {db}.tmp_x TO {db}.b")
    server.execute(f"INSERT INTO {db}.a VALUES (13, 7, 8)")
    server.execute(f"INSERT INTO {db}.b VALUES (3, 'b3')")
    first = load.round()     # ends right after the rename
    assert [m["status"] for m in first["merge"]["batches"][0]["moves"]] == ["moved", "moved"]
    assert first["end"]["pos"] < server.master_status()[1]
    load.round()
    load.assert_equal("a")
    load.assert_equal("b")
    # a plain rename to a captured name that had no table
    server.execute(f"RENAME TABLE {db}.b TO {db}.c")
    server.execute(f"UPDATE {db}.c SET v = 'c1' WHERE id = 1")
    load.round()
    load.round()
    load.assert_equal("c")
    b = f"lake.{load.namespace}.{iceberg_table_name(db, 'b')}"
    spark.sql(f"REFRESH TABLE {b}")
    assert spark.table(b).count() == 0  # the name b holds no table in the source any more
    # a rerun of the last batches changes nothing
    assert load.round()["rows"] == {}
    load.assert_equal("c")


def test_a_swap_interrupted_between_its_two_moves_completes_on_the_rerun(mariadb_factory, spark, monkeypatch,
                                                                          tmp_path):
    from airflow_provider_binlog.merge.iceberg_contract import SUMMARY_MOVE
    from airflow_provider_binlog.spark import runtime

    server, db = _minimal_db(mariadb_factory, "a (id INT PRIMARY KEY, v VARCHAR(10))")
    server.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY, w INT)")
    server.execute(f"INSERT INTO {db}.a VALUES (1, 'a1'), (2, 'a2')")
    server.execute(f"INSERT INTO {db}.b VALUES (10, 1)")
    load = Load(server, spark, monkeypatch, tmp_path, db, ["a", "b"])
    load.snapshot()
    server.execute(f"RENAME TABLE {db}.a TO {db}.t_tmp, {db}.b TO {db}.a, {db}.t_tmp TO {db}.b")
    result = load.hook.dump(staging=load.staging, checkpoint_key=load.key, tables=load.patterns)
    original = runtime.run_with_commit_properties
    moves_committed = []

    def dies_at_the_second_move(spark_, props, fn):
        if SUMMARY_MOVE in props:
            if moves_committed:
                raise RuntimeError("killed between the two moves")
            moves_committed.append(props)
        return original(spark_, props, fn)

    monkeypatch.setattr(runtime, "run_with_commit_properties", dies_at_the_second_move)
    with pytest.raises(RuntimeError, match="killed between"):
        load.merge(result["manifest"])
    end = load_manifest(result["manifest"]).end
    assert load.store.load(load.key) != end  # the store did not advance
    monkeypatch.setattr(runtime, "run_with_commit_properties", original)
    again = load.merge(result["manifest"])
    assert sorted(m["status"] for m in again["batches"][0]["moves"]) == ["already-applied", "moved"]
    assert load.store.load(load.key) == end
    load.assert_equal("a")
    load.assert_equal("b")


def test_a_schema_change_missing_from_the_binlog_is_a_divergence_with_both_column_lists(
        mariadb_factory, monkeypatch, tmp_path):
    from airflow_provider_binlog.schema_history import SchemaDivergenceError

    server, db = _minimal_db(mariadb_factory, "t (id INT PRIMARY KEY, a INT)")
    store = FileCheckpointStore(tmp_path / "store")
    hook = _hook(server, monkeypatch, extra={"checkpoint_store_uri": str(tmp_path / "store")})
    first = hook.dump(staging=tmp_path / "staging", start=hook.current_position(), tables=[f"{db}.t"])
    # what the merge does: the checkpoint advances with the history at the dump's end
    store.save(hook.binlog_conn_id, Checkpoint.from_json(first["end"]),
               schema_history=load_manifest(first["manifest"]).schema_history_json)
    conn = server.connect()
    try:
        with conn.cursor() as cur:  # an ALTER the binlog never sees
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"ALTER TABLE {db}.t ADD COLUMN z VARCHAR(3)")
    finally:
        conn.close()
    server.execute(f"INSERT INTO {db}.t VALUES (1, 2, 'x')")
    with pytest.raises(SchemaDivergenceError) as info:
        hook.dump(staging=tmp_path / "staging", tables=[f"{db}.t"])
    message = str(info.value)
    assert f"table {db}.t: the binlog has 3 columns (LONG, LONG, VARCHAR) but the supplied schema has 2 " \
        "(id int, a int): the table's schema history does not match the binlog" in message
    assert "take a new snapshot" in message
    assert info.value.position.startswith("mariadb-bin.")
    assert [p.parent.name for p in (tmp_path / "staging").glob("*/manifest.json")] == [first["dump_id"]]


def test_mariadb_uuid_and_inet6_are_staged_as_text_with_full_row_metadata(mariadb_factory, monkeypatch, tmp_path):

    server = mariadb_factory(binlog_row_metadata="FULL")
    db = _db(server)
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, u UUID, ip INET6)")
    hook = _hook(server, monkeypatch)
    start = hook.current_position()
    server.execute(f"INSERT INTO {db}.t VALUES (1, '123e4567-e89b-12d3-a456-426655440000', '::ffff:1.2.3.4')")
    result = hook.dump(staging=tmp_path, start=start, tables=[f"{db}.t"])
    manifest = load_manifest(result["manifest"])
    (entry,) = manifest.tables
    (row,) = read_parquet(manifest.files(entry)[0]).to_pylist()
    assert (row["_after"]["u"], row["_after"]["ip"]) == ("123e4567-e89b-12d3-a456-426655440000", "::ffff:1.2.3.4")


def test_a_schema_statement_the_history_cannot_follow_stops_the_dump_with_position_sql_and_remedy(
        mariadb_factory, monkeypatch, tmp_path):
    from airflow_provider_binlog.schema_history import DdlSyntaxError

    server, db = _minimal_db(mariadb_factory, "t (id INT PRIMARY KEY, a INT)")
    hook = _hook(server, monkeypatch)
    start = hook.current_position()
    server.execute(f"ALTER TABLE {db}.t ADD SYSTEM VERSIONING")
    server.execute(f"INSERT INTO {db}.t VALUES (1, 2)")
    with pytest.raises(DdlSyntaxError) as info:
        hook.dump(staging=tmp_path, start=start, tables=[f"{db}.t"])
    message = str(info.value)
    assert "ADD SYSTEM VERSIONING" in message
    assert f"the statement: 'ALTER TABLE {db}.t ADD SYSTEM VERSIONING'" in message
    assert info.value.position.startswith("mariadb-bin.") and "docs/schema-changes.md" in message
    assert not list(tmp_path.glob("*/manifest.json"))


def test_create_table_select_is_followed_from_the_columns_the_server_logs(mariadb_factory, monkeypatch, tmp_path):
    server, db = _minimal_db(mariadb_factory, "src (id INT PRIMARY KEY, v VARCHAR(5))")
    server.execute(f"INSERT INTO {db}.src VALUES (1, 'a'), (2, 'b')")
    hook = _hook(server, monkeypatch)
    start = hook.current_position()
    server.execute(f"CREATE TABLE {db}.copy (extra INT DEFAULT 3) SELECT id, v FROM {db}.src")
    result = hook.dump(staging=tmp_path, start=start, tables=[f"{db}.copy"])
    assert result["rows"] == {f"{db}.copy": {"insert": 2, "update": 0, "delete": 0}}
    history = load_manifest(result["manifest"]).schema_history_json
    (copy,) = [t for t in history["tables"] if t["name"] == "copy"]
    assert [c["name"] for c in copy["columns"]] == ["extra", "id", "v"]


def test_every_type_survives_alters_under_each_binlog_configuration(server, spark, monkeypatch, tmp_path):
    db = _db(server)
    server.execute(f"CREATE TABLE {db}.a ({ALL_TYPES})")
    insert = f"INSERT INTO {db}.a VALUES ({', '.join(['%s'] * len(_all_types_row(1)))})"
    for i in (1, 2, 3):
        server.execute(insert, _all_types_row(i))
    load = Load(server, spark, monkeypatch, tmp_path, db, ["a"])
    load.snapshot()

    def check():
        columns = [r[0] for r in server.query(f"SHOW COLUMNS FROM `{db}`.a")]
        bits = {r[0] for r in server.query(f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE "
                                           f"TABLE_SCHEMA = '{db}' AND DATA_TYPE = 'bit'")}
        select = ", ".join(f"CAST(`{c}` AS UNSIGNED)" if c in bits else f"`{c}`" for c in columns)
        source = [tuple(_normalize(v) for v in r) for r in server.query(f"SELECT {select} FROM `{db}`.a ORDER BY id")]
        name = f"lake.{load.namespace}.{iceberg_table_name(db, 'a')}"
        spark.sql(f"REFRESH TABLE {name}")
        table = spark.table(name)
        assert table.columns == columns
        got = [tuple(_normalize(v) for v in r) for r in table.orderBy("id").collect()]
        for want_row, got_row in zip(source, got):
            assert dict(zip(columns, got_row)) == dict(zip(columns, want_row))
        assert len(got) == len(source)

    check()
    server.execute(insert, _all_types_row(4))
    server.execute(f"UPDATE {db}.a SET tx = 'changed', bl = NULL, st = 'x,y,z', ip = '::1' WHERE id = 2")
    server.execute(f"ALTER TABLE {db}.a ADD COLUMN added DECIMAL(5,2) NOT NULL DEFAULT 1.50 AFTER ti, DROP COLUMN f")
    server.execute(f"UPDATE {db}.a SET added = 9.99, e = 'c' WHERE id = 3")
    server.execute(f"DELETE FROM {db}.a WHERE id = 1")
    load.round()
    check()
    server.execute(f"ALTER TABLE {db}.a MODIFY COLUMN mi INT, ADD COLUMN note VARCHAR(10) DEFAULT 'n'")
    load.round()
    check()
    server.execute(f"INSERT INTO {db}.a (id, ti, added, vc, note) VALUES (9, 1, 2.25, 'only a few', 'x')")
    server.execute(f"UPDATE {db}.a SET mi = 2147483647 WHERE id = 4")
    load.round()
    check()
