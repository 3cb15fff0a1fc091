"""The consistent snapshot stages every row of a table whatever its key's type, and counts: a
table whose staged rows differ from its ``COUNT(*)`` in the same transaction is not
published."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.capture import snapshot as snapshot_module
from airflow_provider_binlog.capture.snapshot import SnapshotError, take_snapshot
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.staging.storage import read_parquet

pytestmark = pytest.mark.mariadb

# labels declared out of alphabetical order: the server orders ENUM and SET by their index,
# but compares them with a string as strings
LABELS = ["zulu", "alpha", "mike", "bravo", "yankee", "charlie", "xray", "delta"]


def _staged(manifest, table: str) -> list[dict]:
    (entry,) = [e for e in manifest.tables if e["table"] == table]
    return [r for p in manifest.files(entry) for r in read_parquet(p).to_pylist()]


@pytest.mark.parametrize("kind", ["ENUM", "SET"])
def test_a_consistent_snapshot_stages_every_row_of_a_table_keyed_by_an_enum_or_set(mariadb, tmp_path, kind):
    db = "snapkeys_" + kind.lower()
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    mariadb.execute(f"DROP TABLE IF EXISTS {db}.t")
    labels = ", ".join(f"'{label}'" for label in LABELS)
    mariadb.execute(f"CREATE TABLE {db}.t (k {kind}({labels}) NOT NULL, n INT NOT NULL, v INT, "
                    "PRIMARY KEY (k, n))")
    rows = [(label, n, n * 10) for label in LABELS for n in range(5)]
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {db}.t VALUES (%s, %s, %s)", rows)
    snap = take_snapshot(lambda: mariadb.connect(), staging_dir=tmp_path, flavor="mariadb",
                         tables=TableFilter([f"{db}.t"]), server={"server_id": mariadb.server_id},
                         chunk_rows=3)
    staged = sorted((r["_after"]["k"], r["_after"]["n"]) for r in _staged(snap, "t"))
    assert staged == sorted((label, n) for label, n, _ in rows)


def test_a_consistent_snapshot_whose_staged_rows_differ_from_the_tables_count_is_refused_with_both(
        mariadb, tmp_path, monkeypatch):
    mariadb.execute("CREATE DATABASE IF NOT EXISTS snapcount")
    mariadb.execute("DROP TABLE IF EXISTS snapcount.t")
    mariadb.execute("CREATE TABLE snapcount.t (id INT PRIMARY KEY, v INT)")
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO snapcount.t VALUES (%s, %s)", [(i, i) for i in range(50)])
    real = snapshot_module.StagingWriter.add_snapshot_rows

    def lose_the_first_chunk(self, tm, rows, **kw):  # a reader that misses rows
        return real(self, tm, rows if kw["first_index"] else rows[:-1], **kw)

    monkeypatch.setattr(snapshot_module.StagingWriter, "add_snapshot_rows", lose_the_first_chunk)
    with pytest.raises(SnapshotError, match=r"snapcount\.t.*49 rows.*COUNT\(\*\) is 50"):
        take_snapshot(lambda: mariadb.connect(), staging_dir=tmp_path / "staging", flavor="mariadb",
                      tables=TableFilter(["snapcount.t"]), server={"server_id": mariadb.server_id},
                      chunk_rows=20)
    assert not list((tmp_path / "staging").rglob("manifest.json"))  # nothing published
