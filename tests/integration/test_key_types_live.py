"""The key-type matrix, live against MariaDB: a table keyed by each type that can be in a
primary key (tests/key_matrix.py), alone and in composite keys, loaded by both snapshot
methods, then changed through the binlog (values, key updates including keys that only the
collation calls equal, deletes and re-inserts) and merged by each path: direct commits, the
merge without Spark (Spark taking what it refuses, as the operator does), and Spark's MERGE.
After every step each Iceberg table equals its MariaDB table value by value, read by Spark
and by PyIceberg."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.capture.dump import run_dump  # noqa: E402
from airflow_provider_binlog.capture.snapshot import take_snapshot  # noqa: E402
from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot  # noqa: E402
from airflow_provider_binlog.checkpoints import FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.common.tables import TableFilter, iceberg_table_name  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from tests.merging import refresh  # noqa: E402
from airflow_provider_binlog.replica.schemas import InformationSchemaSource  # noqa: E402
from airflow_provider_binlog.merge.errors import SparkNeeded  # noqa: E402
from tests.merging import java_lake  # noqa: E402
from airflow_provider_binlog.spark.runtime import local_spark_conf  # noqa: E402
from tests.integration.test_dump_live import replica  # noqa: E402
from tests.integration.test_watermark_snapshot_live import arrow_url, replica_factory  # noqa: E402
from tests.key_matrix import BY_NAME, COMPOSITES, KEY_TYPES, normalize  # noqa: E402
from tests.pyiceberg_reader import PyIcebergReader  # noqa: E402

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]

DB = "keymatrix"
METHODS = ("consistent", "watermark")
PATHS = ("direct", "without-spark", "spark")


def _tables() -> dict[str, tuple]:
    """table name -> its key types (one, or two for a composite key)."""
    out = {k.name: (k,) for k in KEY_TYPES}
    out.update({name: (BY_NAME[a], BY_NAME[b]) for name, (a, b) in COMPOSITES})
    return out


TABLES = _tables()


def _key_columns(types: tuple) -> list[str]:
    return ["k"] if len(types) == 1 else ["k1", "k2"]


def _rows(types: tuple) -> list[tuple]:
    """The four keys of a table (as tuples)."""
    return [tuple(t.values[i] for t in types) for i in range(4)]


def _create(server) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
    server.execute(f"CREATE DATABASE {DB}")
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for name, types in TABLES.items():
            keys = _key_columns(types)
            cols = ", ".join(f"{c} {t.ddl} NOT NULL" for c, t in zip(keys, types))
            cur.execute(f"CREATE TABLE {DB}.{name} ({cols}, v INT, note VARCHAR(20), PRIMARY KEY ({', '.join(keys)}))")
            marks = ", ".join(["%s"] * len(keys))
            cur.executemany(f"INSERT INTO {DB}.{name} VALUES ({marks}, %s, %s)",
                            [(*key, i, f"row {i}") for i, key in enumerate(_rows(types))])
    conn.close()


def _where(types: tuple, key: tuple) -> tuple[str, list]:
    return " AND ".join(f"{c} = %s" for c in _key_columns(types)), list(key)


def _change(server, step: str) -> None:
    """One step of changes to every table, through the binlog."""
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for name, types in TABLES.items():
            rows = _rows(types)
            if step == "values":  # whole images, no key change: every path commits them
                cur.execute(f"UPDATE {DB}.{name} SET v = v + 100, note = CONCAT(note, ' changed')")
                cur.execute(f"DELETE FROM {DB}.{name} WHERE {_where(types, rows[3])[0]}", rows[3])
            elif step == "keys":  # key updates: Spark's MERGE
                where, args = _where(types, rows[0])
                keys = _key_columns(types)
                moved = tuple(t.moved_to for t in types)
                cur.execute(f"UPDATE {DB}.{name} SET {', '.join(f'{c} = %s' for c in keys)} WHERE {where}",
                            [*moved, *args])
                for i, t in enumerate(types):  # a key the collation calls equal: only its spelling changes
                    if t.equal_variant is not None:
                        where, args = _where(types, rows[1])
                        cur.execute(f"UPDATE {DB}.{name} SET {keys[i]} = %s WHERE {where}", [t.equal_variant[1], *args])
            else:  # deletes and re-inserts of the same keys in one batch
                where, args = _where(types, rows[2])
                cur.execute(f"SELECT {', '.join(_key_columns(types))} FROM {DB}.{name} WHERE {where}", args)
                current = cur.fetchone()
                if current is not None:
                    cur.execute(f"DELETE FROM {DB}.{name} WHERE {where}", args)
                    cur.execute(f"INSERT INTO {DB}.{name} VALUES ({', '.join(['%s'] * len(current))}, -2, 'again')",
                                list(current))
                cur.execute(f"INSERT INTO {DB}.{name} VALUES ({', '.join(['%s'] * len(types))}, -3, 'back')",
                            list(rows[3]))
    conn.close()


def _kinds(types: tuple) -> list[str]:
    return [t.kind for t in types]


def _source(server, name: str) -> dict:
    types = TABLES[name]
    kinds = _kinds(types)
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {', '.join(_key_columns(types))}, v, note FROM {DB}.{name}")
        rows = cur.fetchall()
    conn.close()
    return {tuple(normalize(k, v) for k, v in zip(kinds, r[:len(kinds)])): (r[-2], r[-1]) for r in rows}


def _iceberg(spark, namespace: str, name: str) -> dict:
    types = TABLES[name]
    kinds = _kinds(types)
    table = f"lake.{namespace}.{iceberg_table_name(DB, name)}"
    refresh(spark, table)
    rows = spark.sql(f"SELECT {', '.join(_key_columns(types))}, v, note FROM {table}").collect()
    return {tuple(normalize(k, v) for k, v in zip(kinds, r[:len(kinds)])): (r[-2], r[-1]) for r in rows}


def _pyiceberg(reader: PyIcebergReader, namespace: str, name: str) -> dict:
    types = TABLES[name]
    kinds, keys = _kinds(types), _key_columns(types)
    return {tuple(normalize(k, r[c]) for k, c in zip(kinds, keys)): (r["v"], r["note"])
            for r in reader.rows(namespace, iceberg_table_name(DB, name))}


@pytest.fixture(scope="module")
def lake(spark, spark_warehouse):
    jvm = java_lake(local_spark_conf(spark_warehouse, "lake"))
    try:
        yield jvm
    finally:
        jvm.stop()


def _merge(path: str, spark, lake, manifest, options: MergeOptions) -> set:
    """Merge ``manifest`` by ``path``; the engines that committed."""
    if path != "without-spark":
        apply_manifests(spark, [manifest], options)
        return {"spark"}
    try:
        apply_manifests(lake, [manifest], options)
        return {"iceberg-java"}
    except SparkNeeded:  # what the operator does: Spark applies what the engine refused
        apply_manifests(spark, [manifest], options)
        return {"iceberg-java", "spark"}


def test_every_key_type_alone_and_composite_is_loaded_and_merged_exactly_by_every_method_and_path(
        mariadb, spark, spark_warehouse, lake, tmp_path):
    _create(mariadb)
    staging = tmp_path / "staging"
    tables = TableFilter([f"{DB}.*"])
    server = {"server_id": mariadb.server_id}
    snapshots = {
        "consistent": take_snapshot(lambda: mariadb.connect(), staging_dir=staging, tables=tables, flavor="mariadb",
                                    server=server, chunk_rows=2),
        "watermark": take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb), staging_dir=staging,
                                             tables=tables, flavor="mariadb", server=server, chunk_rows=2,
                                             arrow_url=arrow_url(mariadb)),
    }
    reader = PyIcebergReader(warehouse=spark_warehouse)
    runs = {(m, p): (f"keys_{m}_{p.replace('-', '_')}", FileCheckpointStore(tmp_path / f"store_{m}_{p}"))
            for m in METHODS for p in PATHS}

    def options(run) -> MergeOptions:
        namespace, store = runs[run]
        return MergeOptions(namespace=namespace, checkpoint_store=store.root, checkpoint_key="k",
                            direct_max_bytes=0 if run[1] == "spark" else 32 << 20)

    def assert_equal(step: str) -> None:
        expected = {name: _source(mariadb, name) for name in TABLES}
        for run, (namespace, _store) in runs.items():
            for name in TABLES:
                got = _iceberg(spark, namespace, name)
                assert got == expected[name], (step, run, name)
                assert _pyiceberg(reader, namespace, name) == expected[name], (step, run, name, "pyiceberg")

    engines: dict = {}
    for run in runs:
        engines.setdefault(run[1], set()).update(_merge(run[1], spark, lake, snapshots[run[0]], options(run)))
    assert_equal("load")
    for step in ("values", "keys", "re-inserts"):
        _change(mariadb, step)
        batches = {}
        for run, (_namespace, store) in runs.items():
            start = store.load("k")
            if start not in batches:
                rc = replica(mariadb)
                batches[start] = run_dump(rc, staging_dir=staging, start=start, tables=tables,
                                          schemas=InformationSchemaSource(lambda: mariadb.connect())).manifest
                rc.close()
            engines[run[1]].update(_merge(run[1], spark, lake, batches[start], options(run)))
        assert_equal(step)
    assert engines == {"direct": {"spark"}, "without-spark": {"iceberg-java", "spark"}, "spark": {"spark"}}
