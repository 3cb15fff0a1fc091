"""Transactions larger than any limit (100k+ rows; multi-MB LONGBLOB rows) with a small
``max_rows``: the dump stages each whole, in bounded memory. DDL in the middle of a window
(ADD COLUMN with a default, DROP COLUMN, TRUNCATE, RENAME TABLE): the merged Iceberg tables
equal the source."""
from __future__ import annotations

import hashlib

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint, FileCheckpointStore
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.common.tables import TableFilter
from tests.reliability import support as S

DB = "rel_big"
#: Peak RSS allowed for a dump process (Python, pyarrow and pymysql take ~90 MB alone).
RSS_LIMIT_MB = 300


def child_dump(server, tmp_path, start, name, **spec):
    child = S.run_child("_dump_child.py", {
        "server": S.server_spec(server), "start": start.to_json(), "staging_dir": str(tmp_path / "staging"),
        "tables": [f"{DB}.*"], "out": str(tmp_path / f"{name}.json"), **spec})
    assert child.returncode == 0, child
    return child.result


def test_huge_transactions_are_staged_whole_in_bounded_memory(mariadb, tmp_path, record_trials):
    server = mariadb
    server.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
    server.execute(f"DROP TABLE IF EXISTS {DB}.many")
    server.execute(f"DROP TABLE IF EXISTS {DB}.blobs")
    server.execute(f"CREATE TABLE {DB}.many (id INT PRIMARY KEY, a VARCHAR(40), b BIGINT, c DECIMAL(10,2))")
    server.execute(f"CREATE TABLE {DB}.blobs (id INT PRIMARY KEY, body LONGBLOB, digest CHAR(32))")
    start = S.here(server)
    rows, blob_rows, blob_mb = 120_000, 16, 6
    server.execute(f"INSERT INTO {DB}.many SELECT seq, CONCAT('row-', seq), seq * 7, seq / 100 "
                   f"FROM {DB}.seq_1_to_{rows}")
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            conn.begin()
            for i in range(blob_rows):
                cur.execute(f"INSERT INTO {DB}.blobs VALUES (%s, REPEAT(MD5(%s), %s), '')",
                            (i, i, blob_mb * 1024 * 1024 // 32))
            cur.execute(f"UPDATE {DB}.blobs SET digest = MD5(body)")
            conn.commit()
    finally:
        conn.close()

    first = child_dump(server, tmp_path, start, "first", max_rows=10)
    assert first["rows"] == {f"{DB}.many": {"insert": rows, "update": 0, "delete": 0}}
    assert first["transactions"] == 1
    second = child_dump(server, tmp_path, Checkpoint.from_json(first["end"]), "second", max_rows=10)
    assert second["rows"] == {f"{DB}.blobs": {"insert": blob_rows, "update": blob_rows, "delete": 0}}
    assert second["transactions"] == 1
    for result in (first, second):
        assert result["peak_rss_kb"] / 1024 < RSS_LIMIT_MB, f"peak RSS {result['peak_rss_kb'] // 1024} MB"

    from airflow_provider_binlog.staging import load_manifest
    manifests = [load_manifest(first["manifest"]), load_manifest(second["manifest"])]
    changes = S.staged_changes(manifests)
    assert len(changes[(DB, "many")]) == rows
    final = {}
    for r in changes[(DB, "blobs")]:
        final[r["_after"]["id"]] = r["_after"]
    assert sorted(final) == list(range(blob_rows))
    for row in final.values():
        assert len(row["body"]) == blob_mb * 1024 * 1024
        assert hashlib.md5(row["body"]).hexdigest() == row["digest"]
    record_trials("transaction of 120k rows with max_rows=10", peak_rss_mb=first["peak_rss_kb"] // 1024)
    record_trials(f"transaction of {blob_rows} x {blob_mb} MB LONGBLOB rows with max_rows=10",
                  peak_rss_mb=second["peak_rss_kb"] // 1024)


DDL_DB = "rel_ddl"


def ddl_tables(server):
    server.execute(f"CREATE DATABASE IF NOT EXISTS {DDL_DB}")
    for t in ("docs", "docs2", "kv"):
        server.execute(f"DROP TABLE IF EXISTS {DDL_DB}.{t}")
    server.execute(f"CREATE TABLE {DDL_DB}.docs (id INT PRIMARY KEY, a INT, b VARCHAR(20), c INT)")
    server.execute(f"CREATE TABLE {DDL_DB}.kv (k INT PRIMARY KEY, v VARCHAR(10))")


def docs_work(server, table, rng, n):
    for _ in range(n):
        key = rng.randint(1, 40)
        r = rng.random()
        if r < 0.5:
            server.execute(f"INSERT INTO {DDL_DB}.{table} (id, a) VALUES (%s, %s) "
                           f"ON DUPLICATE KEY UPDATE a = a + 1", (key, rng.randint(0, 9)))
        elif r < 0.8:
            server.execute(f"UPDATE {DDL_DB}.{table} SET a = a * 2 WHERE id = %s", (key,))
        else:
            server.execute(f"DELETE FROM {DDL_DB}.{table} WHERE id = %s", (key,))
        server.execute(f"REPLACE INTO {DDL_DB}.kv VALUES (%s, %s)", (rng.randint(1, 20), f"v{rng.randint(0, 9)}"))


def test_ddl_in_the_middle_of_the_window_merges_to_the_source(mariadb, spark, tmp_path, record_trials):
    from airflow_provider_binlog.merge.errors import SchemaEvolutionError
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    from airflow_provider_binlog.capture.snapshot import take_snapshot

    server = mariadb
    ddl_tables(server)
    for table, keys in (("docs", ("id",)), ("docs2", ("id",)), ("kv", ("k",))):
        S.KEYS.setdefault(table, keys)
    captured = TableFilter([f"{DDL_DB}.docs", f"{DDL_DB}.docs2", f"{DDL_DB}.kv"])
    store = FileCheckpointStore(tmp_path / "store")
    rng = S.rng_for("ddl")

    def dump_and_merge(start):
        rc = S.replica(server)
        try:
            result = run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=captured)
        finally:
            rc.close()
        before = (S.snapshot_ids(spark, "rel_ddl", DDL_DB, ["docs", "docs2", "kv"]), store.load("ddl"))
        try:
            apply_manifests(spark, [result.manifest], MergeOptions(namespace="rel_ddl", checkpoint_store=store.root,
                                                                   checkpoint_key="ddl"))
        except SchemaEvolutionError:
            # nothing committed: neither a table nor the ledger nor the store moved
            assert (S.snapshot_ids(spark, "rel_ddl", DDL_DB, ["docs", "docs2", "kv"]), store.load("ddl")) == before
            raise
        return result.end

    def check(*tables):
        want = S.source_state(server, DDL_DB, [t for t in tables if t != "docs" or server.query(
            "SHOW TABLES IN rel_ddl LIKE 'docs'")])
        want.setdefault("docs", {})
        assert S.iceberg_state(spark, "rel_ddl", DDL_DB, tables) == {t: want.get(t, {}) for t in tables}

    # 1. ADD COLUMN (a default and an implicit NOT NULL default the binlog does not carry),
    # DROP COLUMN and TRUNCATE in the middle of one window
    start = S.here(server)
    store.save("ddl", start)
    docs_work(server, "docs", rng, 40)
    server.execute(f"ALTER TABLE {DDL_DB}.docs ADD COLUMN d INT NOT NULL DEFAULT 9, "
                   f"ADD COLUMN e VARCHAR(5) NOT NULL DEFAULT 'it''s'")
    docs_work(server, "docs", rng, 30)
    server.execute(f"ALTER TABLE {DDL_DB}.docs DROP COLUMN c")
    docs_work(server, "docs", rng, 30)
    server.execute(f"TRUNCATE TABLE {DDL_DB}.kv")
    docs_work(server, "docs", rng, 30)
    end = dump_and_merge(start)
    check("docs", "kv")

    # 2. a captured table renamed away (not captured under its new name): emptied, like a DROP
    docs_work(server, "docs", rng, 20)
    server.execute(f"RENAME TABLE {DDL_DB}.docs TO {DDL_DB}.docs_old")
    server.execute(f"REPLACE INTO {DDL_DB}.kv VALUES (99, 'after')")
    end = dump_and_merge(end)
    check("docs", "kv")

    # 3. a rename onto a captured table: its rows are not in the binlog; a typed error, nothing
    # committed; a new snapshot is the remedy
    server.execute(f"RENAME TABLE {DDL_DB}.docs_old TO {DDL_DB}.docs2")
    docs_work(server, "docs2", rng, 10)
    with pytest.raises(SchemaEvolutionError, match="renames .*docs_old to the captured table .*docs2.*snapshot"):
        dump_and_merge(end)
    snap = take_snapshot(lambda: server.connect(), staging_dir=tmp_path / "staging", tables=captured,
                         flavor="mariadb", server={"server_id": server.server_id})
    apply_manifests(spark, [snap], MergeOptions(namespace="rel_ddl", checkpoint_store=store.root, checkpoint_key="ddl"))
    check("docs2", "kv")
    server.execute(f"DROP TABLE IF EXISTS {DDL_DB}.docs2")
    record_trials("DDL mid-window: ADD COLUMN with defaults, DROP COLUMN, TRUNCATE")
    record_trials("DDL mid-window: RENAME TABLE (away: emptied; onto a captured table: typed error, snapshot)")
