"""What the merge job refuses, and what it does at its limits, on batches staged by the real
writer from synthetic rows events: an Iceberg table that belongs to another source table or
to nobody, a table that lost its primary key, two manifests of one dump id with different
ranges, ``max_key_change_rows`` exceeded (nothing is committed in each case); the MERGE's
key filter given up above its limit; DROP TABLE emptying the Iceberg table."""
from __future__ import annotations

import datetime as dt
import functools
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.checkpoints import Checkpoint, FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.codec.events import ABSENT, Column, EventHeader, RowsEvent, TableMap  # noqa: E402
from airflow_provider_binlog.staging import StagingWriter  # noqa: E402
from airflow_provider_binlog.merge.spark import apply as merge_apply  # noqa: E402
from airflow_provider_binlog.merge.spark import job as merge_job  # noqa: E402
from airflow_provider_binlog.merge.errors import MergeJobError  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.merge.batches import plan_batches  # noqa: E402

UTC = dt.timezone.utc

PK = [Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True, nullable=False),
      Column(1, "a", C.MYSQL_TYPE_LONG, 0),
      Column(2, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True)]
NO_PK = [Column(0, "id", C.MYSQL_TYPE_LONG, 0), Column(1, "a", C.MYSQL_TYPE_LONG, 0),
         Column(2, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True)]


def tmap(table, columns=PK, schema="s", table_id=1):
    return TableMap(table_id, schema, table, tuple(columns))


class Binlog:
    """Synthetic binlog positions; stages rows events and DDL records into batches with the
    real staging writer."""

    def __init__(self, root: Path):
        self.root, self.file, self.pos, self.ts = root, "mysql-bin.000001", 4, 1_700_000_000
        self.writer = self.start = None

    def here(self) -> Checkpoint:
        return Checkpoint(file=self.file, position=self.pos)

    def begin(self) -> "Binlog":
        self.writer, self.start = StagingWriter(self.root / "staging", workers=0), self.here()
        return self

    def rows(self, tm: TableMap, kind: str, rows: list) -> "Binlog":
        header = EventHeader(self.ts, 30, 1, 100, self.pos + 100, 0)
        event = RowsEvent(header, self.pos, kind, tm.table_id, tm, 0, tuple(rows))
        self.writer.add_rows(event, binlog_file=self.file, gtid=None, txn=f"{self.file}:{self.pos}")
        self.pos, self.ts = self.pos + 100, self.ts + 1
        return self

    def ddl(self, kind: str, table: str, query: str) -> "Binlog":
        self.writer.add_ddl({"file": self.file, "pos": self.pos, "gtid": None, "schema": "s", "kind": kind,
                             "tables": [table], "table_names": [table.split(".", 1)], "query": query,
                             "ops": [{"op": "reset", "table": table.split(".", 1)}],
                             "ts": dt.datetime.fromtimestamp(self.ts, UTC).isoformat()})
        self.pos, self.ts = self.pos + 100, self.ts + 1
        return self

    def publish(self):
        end = self.here()
        manifest = self.writer.publish(dump_id=f"{self.start.file}.{self.start.position}-{end.file}.{end.position}",
                                       start=self.start.to_json(), end=end.to_json(), server={"flavor": "mysql"})
        self.writer = None
        return manifest


def snapshots(spark, name) -> list:
    spark.sql(f"REFRESH TABLE {name}")
    return sorted(r[0] for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect())


def rows_of(spark, name) -> dict:
    spark.sql(f"REFRESH TABLE {name}")
    return {r["id"]: (r["a"], r["b"]) for r in spark.table(name).collect()}


def store_at(tmp_path, manifest):
    store = FileCheckpointStore(tmp_path / "store")
    store.save("k", manifest.start)
    return store


# ---------------------------------------------------------------------- tables the job does not own

@pytest.mark.parametrize("owner", ["other", "none"])
def test_a_table_of_another_source_or_of_nobody_is_refused(spark, tmp_path, owner):
    namespace = f"mr_owner_{owner}"
    name = f"lake.{namespace}.s__t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{namespace}")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    props = "TBLPROPERTIES ('binlog.source' = '[\"s\", \"other\"]')" if owner == "other" else ""
    spark.sql(f"CREATE TABLE {name} (id INT, a INT, b STRING) USING iceberg {props}")
    spark.sql(f"INSERT INTO {name} VALUES (100, 1, 'theirs')")
    before = snapshots(spark, name)
    manifest = Binlog(tmp_path).begin().rows(tmap("t"), "insert", [(1, 10, "x")]).publish()
    store = store_at(tmp_path, manifest)
    expected = ("holds source table [\"s\", \"other\"], not s.t" if owner == "other"
                else "exists but was not created by the merge job (no binlog.source property)")
    with pytest.raises(MergeJobError, match=r"refusing to write into it") as info:
        apply_manifests(spark, [manifest], MergeOptions(namespace=namespace, checkpoint_store=store.root,
                                                        checkpoint_key="k"))
    assert expected in str(info.value) and name in str(info.value)
    assert snapshots(spark, name) == before and rows_of(spark, name) == {100: (1, "theirs")}
    assert store.load("k") == manifest.start


def test_a_table_that_lost_its_primary_key_is_refused(spark, tmp_path):
    log = Binlog(tmp_path)
    first = log.begin().rows(tmap("lost"), "insert", [(1, 10, "x"), (2, 20, "y")]).publish()
    store = store_at(tmp_path, first)
    apply_manifests(spark, [first], MergeOptions(namespace="mr_pk", checkpoint_store=store.root, checkpoint_key="k"))
    name = "lake.mr_pk.s__lost"
    before = snapshots(spark, name)
    # ALTER TABLE lost DROP PRIMARY KEY: the next rows come without a key
    second = log.begin().rows(tmap("lost", NO_PK), "insert", [(3, 30, "z")]).publish()
    assert second.tables[0]["primary_key"] == []
    with pytest.raises(MergeJobError) as info:
        apply_manifests(spark, [second], MergeOptions(namespace="mr_pk", checkpoint_store=store.root,
                                                      checkpoint_key="k"))
    assert "s.lost has no primary key any more" in str(info.value)
    assert "give the table a primary key again" in str(info.value)
    assert snapshots(spark, name) == before and rows_of(spark, name) == {1: (10, "x"), 2: (20, "y")}
    assert store.load("k") == first.end


def test_two_manifests_of_one_dump_id_with_different_ranges_are_refused(tmp_path):
    log = Binlog(tmp_path)
    manifest = log.begin().rows(tmap("t"), "insert", [(1, 10, "x")]).rows(tmap("t"), "insert", [(2, 20, "y")]).publish()
    copy = tmp_path / "copy"
    shutil.copytree(manifest.directory, copy)
    data = json.loads((copy / "manifest.json").read_text())
    data["end"] = {**data["end"], "pos": data["end"]["pos"] - 100}      # same dump id, shorter range
    (copy / "manifest.json").write_text(json.dumps(data))
    assert plan_batches([manifest.directory, manifest.directory])        # the same one twice: fine
    with pytest.raises(MergeJobError, match=rf"two manifests with dump id '{manifest.dump_id}' cover different ranges"):
        plan_batches([manifest.directory, copy])


def test_max_key_change_rows_exceeded_fails_the_job_and_commits_nothing(spark, spark_warehouse, tmp_path):
    log = Binlog(tmp_path)
    first = log.begin().rows(tmap("kc"), "insert", [(i, 10 * i, f"r{i}") for i in range(1, 6)]).publish()
    store = store_at(tmp_path, first)
    apply_manifests(spark, [first], MergeOptions(namespace="mr_kc", checkpoint_store=store.root, checkpoint_key="k"))
    name = "lake.mr_kc.s__kc"
    before = snapshots(spark, name)
    # MINIMAL images: key changes whose after image lacks the other columns
    log.begin()
    for i in range(1, 4):
        log.rows(tmap("kc"), "update", [((i, ABSENT, ABSENT), (i + 100, ABSENT, ABSENT))])
    second = log.publish()

    def argv(limit):
        options = MergeOptions(namespace="mr_kc", warehouse=spark_warehouse, checkpoint_store=str(tmp_path / "store"),
                               checkpoint_key="k", max_key_change_rows=limit)
        return ["--options", options.to_json_text(), "--manifest", str(second.directory),
                "--output-json", str(tmp_path / "out.json")]

    assert merge_job.main(argv(5)) == 1
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["error_type"] == "MergeJobError", out
    assert "limited to 5 (the merge option max_key_change_rows)" in out["error"], out
    assert snapshots(spark, name) == before and store.load("k") == first.end
    # within the limit the same batch applies
    assert merge_job.main(argv(1000)) == 0
    assert rows_of(spark, name) == {101: (10, "r1"), 102: (20, "r2"), 103: (30, "r3"), 4: (40, "r4"), 5: (50, "r5")}


# ---------------------------------------------------------------------- at the limits

def test_the_key_filter_is_given_up_above_its_limit(spark, tmp_path, monkeypatch):
    statements = []
    build = merge_apply.merge_statement

    def recording(*args, **kwargs):
        statements.append(kwargs.get("key_filter"))
        return build(*args, **kwargs)

    monkeypatch.setattr(merge_apply, "merge_statement", recording)
    from airflow_provider_binlog.merge.spark import engine as merge_engine

    monkeypatch.setattr(merge_engine, "apply_merge_table",
                        functools.partial(merge_apply.apply_merge_table, max_filter_keys=3))
    log = Binlog(tmp_path)
    apply_manifests(spark, [log.begin().rows(tmap("kf"), "insert", [(i, i, "r") for i in range(1, 11)]).publish()],
                    MergeOptions(namespace="mr_kf"))
    name = "lake.mr_kf.s__kf"
    # three changed keys: listed
    apply_manifests(spark, [log.begin().rows(tmap("kf"), "update", [((i, i, "r"), (i, -i, "r")) for i in (2, 4, 6)])
                            .publish()], MergeOptions(namespace="mr_kf", direct_max_bytes=0))
    assert statements[-1] == "t.`id` IN (2, 4, 6)"
    # four: more than the limit, no filter; the MERGE is still right
    apply_manifests(spark, [log.begin().rows(tmap("kf"), "update", [((i, i, "r"), (i, -i, "r")) for i in (1, 3, 5)])
                            .rows(tmap("kf"), "delete", [(7, 7, "r")]).publish()], MergeOptions(namespace="mr_kf",
                                                                                                direct_max_bytes=0))
    assert statements[-1] is None
    assert rows_of(spark, name) == {i: (-i if i <= 6 else i, "r") for i in range(1, 11) if i != 7}


def test_drop_table_empties_the_iceberg_table(spark, tmp_path):
    log = Binlog(tmp_path)
    first = log.begin().rows(tmap("dropped"), "insert", [(1, 10, "x"), (2, 20, "y")]).publish()
    store = store_at(tmp_path, first)
    apply_manifests(spark, [first], MergeOptions(namespace="mr_drop", checkpoint_store=store.root, checkpoint_key="k"))
    name = "lake.mr_drop.s__dropped"
    assert rows_of(spark, name) == {1: (10, "x"), 2: (20, "y")}
    second = (log.begin().rows(tmap("dropped"), "insert", [(3, 30, "z")])
              .ddl("drop", "s.dropped", "DROP TABLE dropped").publish())
    result = apply_manifests(spark, [second], MergeOptions(namespace="mr_drop", checkpoint_store=store.root,
                                                           checkpoint_key="k"))
    assert result["batches"][0]["tables"][0]["status"] == "committed"
    assert rows_of(spark, name) == {}
    assert store.load("k") == second.end
    # the table is there (empty): CREATE TABLE again and new rows go on in it
    third = log.begin().rows(tmap("dropped"), "insert", [(9, 90, "new")]).publish()
    apply_manifests(spark, [third], MergeOptions(namespace="mr_drop", checkpoint_store=store.root, checkpoint_key="k"))
    assert rows_of(spark, name) == {9: (90, "new")}
