"""Verification, live: MariaDB loaded into Iceberg by a watermark snapshot and incremental
merges (with the data contract's change columns and soft deletes), then Iceberg changed behind
the load's back while a writer keeps writing to MariaDB: rows deleted, altered and added with
Spark SQL, and a staged batch with rows removed before its merge. The verification names
exactly those key ranges and no others (the writer's keys are checked again after each merge);
a whole-table repair through the watermark snapshot makes them equal."""
from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyiceberg")

from airflow_provider_binlog.capture.dump import run_dump  # noqa: E402
from airflow_provider_binlog.capture.snapshot import table_map_from_information_schema  # noqa: E402
from airflow_provider_binlog.capture.verify.source import source_table  # noqa: E402
from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot  # noqa: E402
from airflow_provider_binlog.checkpoints import FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.common.tables import TableFilter  # noqa: E402
from airflow_provider_binlog.merge.contract import DataContract  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.merge.verify.iceberg import CatalogSpec, load_table, pin  # noqa: E402
from airflow_provider_binlog.merge.verify.report import CHANGED, EXTRA, MISSING  # noqa: E402
from airflow_provider_binlog.merge.verify.run import Settings, TableVerifier  # noqa: E402
from airflow_provider_binlog.replica.schemas import InformationSchemaSource  # noqa: E402
from airflow_provider_binlog.staging.manifest import file_sha256  # noqa: E402
from tests.integration.test_dump_live import replica  # noqa: E402
from tests.integration.test_watermark_snapshot_live import arrow_url, replica_factory  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]

DB, NS = "verify_live", "verify_live"
ROWS = 20_000
HOT = range(15_001, 15_101)  # the writer's updates and deletes
CONTRACT = DataContract.parse({"default": {"change_columns": True, "soft_delete": True}})


def _fill(mariadb) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    mariadb.execute(f"CREATE TABLE {DB}.items (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(40), "
                    f"amount DECIMAL(12,2), at DATETIME(6), f DOUBLE) DEFAULT CHARSET=utf8mb4")
    mariadb.execute(f"INSERT INTO {DB}.items SELECT seq, seq * 3, CONCAT('item ', seq), seq / 100, "
                    f"TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, seq / 7 FROM {DB}.seq_1_to_{ROWS}")
    mariadb.execute(f"CREATE TABLE {DB}.pairs (a INT, b SMALLINT, n INT, PRIMARY KEY (a, b))")
    mariadb.execute(f"INSERT INTO {DB}.pairs SELECT seq DIV 10, seq MOD 10, seq FROM {DB}.seq_1_to_3000")


class Writer(threading.Thread):
    """Updates, deletes and re-inserts hot keys and inserts new ones (from 30001) until stopped."""

    def __init__(self, mariadb) -> None:
        super().__init__(daemon=True)
        self.conn = mariadb.connect()
        self.stop = threading.Event()
        self.writes = 0

    def run(self) -> None:
        rng, new = random.Random(7), 30_001
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                key = rng.choice(HOT)
                op = rng.random()
                if op < 0.6:
                    cur.execute(f"UPDATE {DB}.items SET v = v + 1, s = %s WHERE id = %s", (f"w{self.writes}", key))
                elif op < 0.8:
                    cur.execute(f"DELETE FROM {DB}.items WHERE id = %s", (key,))
                    cur.execute(f"INSERT INTO {DB}.items VALUES (%s, 1, 'again', 1.5, NOW(6), 0.25)", (key,))
                else:
                    cur.execute(f"INSERT INTO {DB}.items VALUES (%s, 2, 'new', 2.5, NOW(6), 0.5)", (new,))
                    new += 1
                self.writes += 1
                time.sleep(0.004)
        self.conn.close()


def _drop_staged_rows(manifest, table: str, ids: set) -> int:
    """Remove the staged changes of ``ids`` from a batch's files of ``table`` (the manifest's
    sizes, checksums and counts made to match): a batch damaged before its merge."""
    path = Path(manifest.ref)
    data = json.loads(path.read_text())
    entry = next(t for t in data["tables"] if t["table"] == table)
    dropped = 0
    for f in entry["files"]:
        file = path.parent / f["path"]
        rows = pq.read_table(file)
        keep = pc.invert(pc.is_in(pc.struct_field(rows.column("_after"), "id"), pa.array(sorted(ids), pa.int32())))
        kept = rows.filter(pc.fill_null(keep, True))
        dropped += rows.num_rows - kept.num_rows
        pq.write_table(kept, file)
        f.update(rows=kept.num_rows, bytes=file.stat().st_size, sha256=file_sha256(file))
    entry["rows"]["update"] = entry["rows"].get("update", 0) - dropped
    path.write_text(json.dumps(data))
    return dropped


@pytest.fixture
def lake(mariadb, spark, spark_warehouse, tmp_path):
    _fill(mariadb)
    staging = tmp_path / "staging"
    store = FileCheckpointStore(tmp_path / "store")
    options = MergeOptions(namespace=NS, checkpoint_store=str(store.root), checkpoint_key="k",
                           data_contract=CONTRACT)
    for name in ("items", "pairs"):
        spark.sql(f"DROP TABLE IF EXISTS lake.{NS}.{DB}__{name}")
    tables = TableFilter([f"{DB}.*"])
    snapshot = take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb), staging_dir=staging,
                                       tables=tables, flavor="mariadb", server={"server_id": mariadb.server_id},
                                       chunk_rows=4_000, arrow_url=arrow_url(mariadb))
    apply_manifests(spark, [snapshot], options)

    def merge(damage=None) -> None:
        """An incremental run: a dump from the stored checkpoint, merged."""
        rc = replica(mariadb)
        try:
            manifest = run_dump(rc, staging_dir=staging, start=store.load("k"), tables=tables,
                                schemas=InformationSchemaSource(lambda: mariadb.connect())).manifest
        finally:
            rc.close()
        if damage is not None:
            damage(manifest)
        apply_manifests(spark, [manifest], options)

    spec = CatalogSpec(type="hadoop", warehouse=spark_warehouse)
    return staging, merge, spec, tables


def _verifier(mariadb, spec, table: str, *, merge=None, tries: int = 3) -> TableVerifier:
    conn = mariadb.connect()
    try:
        st = source_table(conn, table_map_from_information_schema(conn, DB, table, "mariadb"))
    finally:
        conn.close()
    name = f"{DB}__{table}"

    def open_pinned():
        return pin(load_table(spec, NS, name))

    def after_merge(_pinned):
        if merge is None:
            return None
        merge()
        return open_pinned()

    return TableVerifier(lambda: mariadb.connect(), replica_factory(mariadb), "mariadb", st, f"{NS}.{name}",
                         open_pinned, after_merge, Settings(chunk_rows=2_000, segment_chunks=3, tries=tries,
                                                            soft_delete="_cdc_deleted"))


def test_verify_names_exactly_the_ranges_changed_behind_the_loads_back_and_repair_makes_them_equal(
        mariadb, spark, lake, tmp_path):
    staging, merge, spec, tables = lake
    writer = Writer(mariadb)
    writer.start()
    try:
        # a staged batch with two of five changed rows removed before its merge
        mariadb.execute(f"UPDATE {DB}.items SET v = -v, s = 'changed' WHERE id BETWEEN 7000 AND 7004")
        merge(damage=lambda m: _drop_staged_rows(m, "items", {7002, 7003}))
        # behind the load's back: deleted, altered, added (soft deletes: a deleted row stays flagged)
        items = f"lake.{NS}.{DB}__items"
        spark.sql(f"DELETE FROM {items} WHERE id BETWEEN 100 AND 109")
        spark.sql(f"UPDATE {items} SET s = 'altered' WHERE id BETWEEN 500 AND 504")
        spark.sql(f"UPDATE {items} SET amount = amount + 0.01 WHERE id = 12345")
        spark.sql(f"INSERT INTO {items} SELECT 25000, 1, 'extra', 1.00, TIMESTAMP_NTZ'2024-01-01 00:00:00', 1.0, "
                  f"{', '.join(['NULL'] * 6)}, false, NULL")
        spark.sql(f"DELETE FROM lake.{NS}.{DB}__pairs WHERE a = 50 AND b = 3")
        merge()
        time.sleep(0.5)
        report = _verifier(mariadb, spec, "items", merge=merge).run()
        pairs = _verifier(mariadb, spec, "pairs", merge=merge).run()
    finally:
        writer.stop.set()
        writer.join()
    assert writer.writes > 100
    assert report.error is None, report.error
    assert [(r.first, r.last, r.how) for r in report.differing] == [
        ([100], [109], MISSING), ([500], [504], CHANGED), ([7002], [7003], CHANGED), ([12345], [12345], CHANGED),
        ([25000], [25000], EXTRA)], report.lines()
    assert report.chunks == ROWS // 2_000 + 1 and report.differing_chunks == 4  # 100..109 and 500..504 share one
    assert report.equal == report.chunks - 4  # every chunk compared at once: the keys the writer changed left out
    assert report.rows >= ROWS - len(HOT) and report.tries >= 1
    assert [(r.first, r.last, r.how) for r in pairs.differing] == [([50, 3], [50, 3], MISSING)], pairs.lines()
    # the repair: the table reloaded through the watermark snapshot, alongside the incremental load
    merge()
    repair = take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb), staging_dir=staging,
                                     tables=TableFilter([f"{DB}.items", f"{DB}.pairs"]), flavor="mariadb",
                                     server={"server_id": mariadb.server_id}, chunk_rows=4_000,
                                     arrow_url=arrow_url(mariadb))
    apply_manifests(spark, [repair], MergeOptions(namespace=NS, stream="k.partial", data_contract=CONTRACT))
    merge()
    after = _verifier(mariadb, spec, "items", tries=1).run()
    assert (after.differing, after.not_verifiable, after.error) == ([], [], None), after.lines()
    assert after.equal == after.chunks >= ROWS // 2_000 + 1 and after.rows >= ROWS - len(HOT)
    assert _verifier(mariadb, spec, "pairs", tries=1).run().verified_equal
