"""Direct commits (merge.spark.direct_commit): tables whose staged changes are simple get their
collapsed changes as a position-delete file (or, as an option, an equality-delete file) and a
data file written with pyarrow and committed through Iceberg's Java API, without a Spark job;
compared with the Spark MERGE of the same batches, with a model of the source, and with what
PyIceberg (a reader without a JVM) reads."""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.checkpoints import Checkpoint, FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.merge.errors import MergeJobError  # noqa: E402
from airflow_provider_binlog.merge.lake import direct_commit  # noqa: E402
from tests.merging import lake_of  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from tests.merging import applied_state, iceberg_table  # noqa: E402
from airflow_provider_binlog.merge.spark.maintenance import run_maintenance  # noqa: E402
from tests.integration.test_merge_job import (  # noqa: E402
    LAYOUT_MAP,
    Binlog,
    col,
    delete_file_count,
    expected_after_few_changes,
    few_changes,
    head,
    summary,
    table_map,
    table_rows,
    two_file_table,
)
from tests.pyiceberg_reader import PyIcebergReader, assert_polars_reads_as_pyiceberg  # noqa: E402
from tests.object_stores import azure_env, azure_server, gcs_env, gcs_server  # noqa: E402,F401
from tests.s3_server import s3_env, s3_server  # noqa: E402,F401

UTC = dt.timezone.utc
WIDE = table_map("s", "wide", [
    col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
    col(1, "name", C.MYSQL_TYPE_VARCHAR, 160, text=True),
    col(2, "amount", C.MYSQL_TYPE_NEWDECIMAL, (10 << 8) | 2),
    col(3, "big", C.MYSQL_TYPE_LONGLONG, unsigned=True),
    col(4, "ratio", C.MYSQL_TYPE_DOUBLE, 8),
    col(5, "at", C.MYSQL_TYPE_DATETIME2, 6),
    col(6, "ts", C.MYSQL_TYPE_TIMESTAMP2, 6),
    col(7, "day", C.MYSQL_TYPE_DATE),
    col(8, "raw", C.MYSQL_TYPE_VARCHAR, 16, text=False),
], table_id=1)
WIDE_COLS = ["id", "name", "amount", "big", "ratio", "at", "ts", "day", "raw"]
PAIR = table_map("s", "pair", [
    col(0, "a", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
    col(1, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True, primary_key=True, nullable=False),
    col(2, "v", C.MYSQL_TYPE_LONG),
], table_id=2)


def wide_row(rng: random.Random, key: int) -> tuple:
    return (key, rng.choice([None, f"n{rng.randint(0, 99)}é"]), Decimal(rng.randint(-99999, 99999)) / 100,
            rng.choice([None, rng.randint(0, 2**64 - 1)]), rng.choice([None, rng.uniform(-1e9, 1e9)]),
            dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**14)),
            rng.choice([None, dt.datetime(2021, 6, 1, tzinfo=UTC) + dt.timedelta(seconds=rng.randint(0, 10**8))]),
            dt.date(1990, 1, 1) + dt.timedelta(days=rng.randint(0, 20000)),
            rng.choice([None, bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 16)))]))


def random_changes(log: Binlog, rng: random.Random, wide: dict, pairs: dict, n: int) -> None:
    """Inserts, updates and deletes with whole images and no key change, several per key."""
    for _ in range(n):
        r = rng.random()
        free = [k for k in range(1, 40) if k not in wide]
        if r < 0.35 or not wide:
            key = rng.choice(free)
            wide[key] = wide_row(rng, key)
            log.rows(WIDE, "insert", [wide[key]])
        elif r < 0.8:
            key = rng.choice(sorted(wide))
            new = wide_row(rng, key)
            log.rows(WIDE, "update", [(wide[key], new)])
            wide[key] = new
        else:
            key = rng.choice(sorted(wide))
            log.rows(WIDE, "delete", [wide.pop(key)])
        pk = (rng.randint(1, 4), rng.choice(["x", "y", "ü"]))
        if pk in pairs and rng.random() < 0.3:
            log.rows(PAIR, "delete", [(*pk, pairs.pop(pk))])
        elif pk in pairs:
            log.rows(PAIR, "update", [((*pk, pairs[pk]), (*pk, pairs[pk] + 1))])
            pairs[pk] += 1
        else:
            pairs[pk] = rng.randint(0, 9)
            log.rows(PAIR, "insert", [(*pk, pairs[pk])])


def wide_state(spark, name) -> dict:
    return {k: tuple(r[c] for c in WIDE_COLS) for k, r in table_rows(spark, name).items()}


def expected_wide(model: dict) -> dict:
    def seen(row):
        out = list(row)
        out[3] = None if row[3] is None else Decimal(row[3])
        out[6] = None if row[6] is None else row[6].astimezone(UTC).replace(tzinfo=None)  # the session is UTC
        out[8] = None if row[8] is None else bytearray(row[8])
        return tuple(out)
    return {k: seen(v) for k, v in model.items()}


def pair_state(spark, name) -> dict:
    return {(r["a"], r["b"]): r["v"] for r in spark.table(name).collect()}


def pyiceberg_wide(reader, namespace) -> dict:
    rows = {r["id"]: tuple(r[c] for c in WIDE_COLS) for r in reader.rows(namespace, "s__wide")}
    return {k: (*v[:6], None if v[6] is None else v[6].replace(tzinfo=None), v[7],
                None if v[8] is None else bytearray(v[8])) for k, v in rows.items()}


def test_random_simple_changes_are_committed_directly_and_equal_the_spark_merge_and_the_source(
        spark, spark_warehouse, tmp_path):
    reader = PyIcebergReader(warehouse=spark_warehouse)
    rng = random.Random(5)
    log, wide, pairs, manifests = Binlog(tmp_path), {}, {}, []
    for _ in range(4):
        log.begin()
        random_changes(log, rng, wide, pairs, 60)
        manifests.append(log.publish())
        for namespace, direct_bytes in (("dc_direct", 1 << 24), ("dc_spark", 0)):
            result = apply_manifests(spark, [manifests[-1]], MergeOptions(namespace=namespace,
                                                                          direct_max_bytes=direct_bytes))
            tables = result["batches"][0]["tables"]
            # the first batch creates the tables (Spark); the next are direct unless turned off
            assert [t.get("direct", False) for t in tables] == [len(manifests) > 1 and direct_bytes > 0] * 2
            assert wide_state(spark, f"lake.{namespace}.s__wide") == expected_wide(wide)
            assert pair_state(spark, f"lake.{namespace}.s__pair") == pairs
            # readers without a JVM read the same rows: no equality delete anywhere
            assert pyiceberg_wide(reader, namespace) == expected_wide(wide)
            assert {(r["a"], r["b"]): r["v"] for r in reader.rows(namespace, "s__pair")} == pairs
            assert reader.equality_delete_files(namespace, "s__wide") == 0
            assert assert_polars_reads_as_pyiceberg(reader, namespace, "s__wide") == len(wide)
            assert assert_polars_reads_as_pyiceberg(reader, namespace, "s__pair") == len(pairs)
    name = "lake.dc_direct.s__wide"
    s = summary(spark, name)
    assert int(s["added-position-delete-files"]) == 1 and int(s["added-data-files"]) == 1
    assert "added-equality-delete-files" not in s
    assert Checkpoint.from_json(s["binlog.checkpoint"]) == manifests[-1].end
    assert s["binlog.batch_id"] == manifests[-1].dump_id
    assert applied_state(spark, name).checkpoint == log.here()
    ledger = spark.sql("SELECT batch_id, tables, staged_rows FROM lake.dc_direct._binlog_batches").collect()
    assert sorted(r[0] for r in ledger) == sorted(m.dump_id for m in manifests)
    assert all(sorted(r[1]) == ["lake.dc_direct.s__pair", "lake.dc_direct.s__wide"] and r[2] > 0 for r in ledger)
    # applied again: nothing is committed
    heads = (head(spark, name), head(spark, "lake.dc_direct._binlog_batches"))
    again = apply_manifests(spark, manifests, MergeOptions(namespace="dc_direct"))
    assert [b["status"] for b in again["batches"]] == ["already-applied"] * 4
    assert (head(spark, name), head(spark, "lake.dc_direct._binlog_batches")) == heads


def test_changes_larger_than_direct_max_bytes_are_folded_by_key_range_and_committed_at_once(
        spark, spark_warehouse, tmp_path):
    reader = PyIcebergReader(warehouse=spark_warehouse)
    rng = random.Random(11)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 40)
    apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_parts"))  # creates the tables
    for _ in range(2):
        log.begin()
        random_changes(log, rng, wide, pairs, 60)
        manifest = log.publish()
        entry = next(t for t in manifest.tables if t["table"] == "wide")
        size = sum(f["bytes"] for f in entry["files"])
        before = spark.sql("SELECT count(*) FROM lake.dc_parts.s__wide.snapshots").collect()[0][0]
        # a third of the wide table's staged bytes: its changes are folded in three key ranges
        result = apply_manifests(spark, [manifest], MergeOptions(namespace="dc_parts",
                                                                 direct_max_bytes=size // 3 + 1))
        assert [t.get("direct", False) for t in result["batches"][0]["tables"]] == [True, True]
        s = summary(spark, "lake.dc_parts.s__wide")
        assert int(s["added-data-files"]) == 3 and int(s["added-position-delete-files"]) >= 2
        assert s["binlog.batch_id"] == manifest.dump_id
        # one commit for the three parts
        assert spark.sql("SELECT count(*) FROM lake.dc_parts.s__wide.snapshots").collect()[0][0] == before + 1
        assert wide_state(spark, "lake.dc_parts.s__wide") == expected_wide(wide)
        assert pair_state(spark, "lake.dc_parts.s__pair") == pairs
        assert pyiceberg_wide(reader, "dc_parts") == expected_wide(wide)


def test_a_key_with_most_of_a_large_batchs_changes_sends_the_table_to_the_merge(spark, tmp_path):
    rng = random.Random(12)
    log, wide, pairs = Binlog(tmp_path), {}, {}
    log.begin()
    random_changes(log, rng, wide, pairs, 20)
    apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_hot"))  # creates the tables
    key = sorted(wide)[0]
    log.begin()
    for _ in range(300):  # one key changed over and over: no key range can split its changes
        new = wide_row(rng, key)
        log.rows(WIDE, "update", [(wide[key], new)])
        wide[key] = new
    manifest = log.publish()
    entry = next(t for t in manifest.tables if t["table"] == "wide")
    size = sum(f["bytes"] for f in entry["files"])
    result = apply_manifests(spark, [manifest], MergeOptions(namespace="dc_hot", direct_max_bytes=size // 3 + 1))
    assert [t.get("direct", False) for t in result["batches"][0]["tables"]] == [False]
    assert wide_state(spark, "lake.dc_hot.s__wide") == expected_wide(wide)


def three_file_table(spark, log: Binlog, namespace: str) -> str:
    """``two_file_table`` and a third data file of ids 100..130, whose keys no change of
    ``few_changes`` touches and which lie outside their range."""
    name = two_file_table(spark, log, namespace)
    log.begin().rows(LAYOUT_MAP, "insert", [(i, 10 * i, f"r{i}") for i in range(100, 131)])
    apply_manifests(spark, [log.publish()], MergeOptions(namespace=namespace, direct_max_bytes=0))
    return name


def test_a_few_changes_become_one_position_delete_file_and_one_data_file_read_only_where_keys_may_be(
        spark, spark_warehouse, tmp_path, monkeypatch):
    from airflow_provider_binlog.merge import position_deletes

    reader = PyIcebergReader(warehouse=spark_warehouse)
    log = Binlog(tmp_path)
    name = three_file_table(spark, log, "dc_pos")
    read = []
    real_key_row_groups = position_deletes.key_row_groups
    monkeypatch.setattr(position_deletes, "key_row_groups", lambda source, *a: read.append(source) or
                        real_key_row_groups(source, *a))
    result = apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="dc_pos"))
    assert result["batches"][0]["tables"][0]["direct"] is True
    assert len(read) == 2  # the two files whose key bounds overlap 3..61, not the one of 100..130
    s = summary(spark, name)
    assert s["added-position-deletes"] == "3"        # the rows of keys 3, 40 and 50 (61 is new)
    assert s["added-records"] == "3"                 # the new rows of 3, 40 and 61
    assert s.get("deleted-data-files", "0") == "0" and "added-equality-deletes" not in s
    import glob

    import pyarrow as pa
    import pyarrow.parquet as pq

    written = glob.glob(f"{spark_warehouse}/dc_pos/s__mor/data/binlog-pos-deletes-*.parquet")
    assert len(written) == 1  # its paths a plain string column, as the spec has it (no Arrow dictionary)
    assert pq.read_schema(written[0]).field("file_path").type == pa.string()
    rows = {**expected_after_few_changes(), **{i: (10 * i, f"r{i}") for i in range(100, 131)}}
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == rows
    assert {r["id"]: (r["a"], r["b"]) for r in reader.rows("dc_pos", "s__mor")} == rows
    assert {r["id"]: (r["a"], r["b"]) for r in reader.polars_rows("dc_pos", "s__mor")} == rows
    # key 3 again, and 61 (in the last commit's data file): the row deleted before is not
    # deleted twice, the live ones are
    log.begin().rows(LAYOUT_MAP, "update", [((3, 33, "changed"), (3, 34, "again"))])
    log.rows(LAYOUT_MAP, "delete", [(61, 610, "r61")])
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_pos"))
    assert result["batches"][0]["tables"][0]["direct"] is True
    assert summary(spark, name)["added-position-deletes"] == "2"
    rows[3] = (34, "again")
    del rows[61]
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == rows
    assert {r["id"]: (r["a"], r["b"]) for r in reader.rows("dc_pos", "s__mor")} == rows
    assert {r["id"]: (r["a"], r["b"]) for r in reader.polars_rows("dc_pos", "s__mor")} == rows
    # a batch that only deletes keys the table does not hold commits nothing
    before = head(spark, name)
    log.begin().rows(LAYOUT_MAP, "delete", [(500, 1, "never there")])
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_pos"))
    assert head(spark, name) == before and reader.equality_delete_files("dc_pos", "s__mor") == 0


def test_equality_deletes_as_an_option_then_the_merge_takes_the_table_until_maintenance_folds_them(
        spark, spark_warehouse, tmp_path, monkeypatch):
    reader = PyIcebergReader(warehouse=spark_warehouse)
    log = Binlog(tmp_path)
    name = three_file_table(spark, log, "dc_few")
    result = apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="dc_few", direct_deletes="equality"))
    assert result["batches"][0]["tables"][0]["direct"] is True
    s = summary(spark, name)
    assert s["added-equality-deletes"] == "4"        # keys 3, 40, 50 and 61
    assert s["added-records"] == "3"                 # the new rows of 3, 40 and 61
    assert s.get("deleted-data-files", "0") == "0" and "added-position-deletes" not in s
    rows = {**expected_after_few_changes(), **{i: (10 * i, f"r{i}") for i in range(100, 131)}}
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == rows
    assert reader.equality_delete_files("dc_few", "s__mor") == 1
    with pytest.raises(ValueError, match="equality deletes"):
        reader.rows("dc_few", "s__mor")
    # by default, a simple batch on a table holding equality deletes goes through the MERGE
    # (position deletes must know which rows the equality deletes already dropped)
    log.begin().rows(LAYOUT_MAP, "update", [((40, 404, "r40"), (40, 405, "r40"))])
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_few"))
    assert "direct" not in result["batches"][0]["tables"][0]
    rows[40] = (405, "r40")
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == rows
    # the next batch goes through a Spark MERGE (a key change) on top of the equality deletes
    log.begin().rows(LAYOUT_MAP, "update", [((3, 33, "changed"), (70, 33, "moved"))])
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_few"))
    assert "direct" not in result["batches"][0]["tables"][0]
    rows[70] = rows.pop(3)[0], "moved"
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == rows
    # maintenance folds every delete file into the data files, the equality deletes too (every
    # data file is rewritten: one older than an equality delete would keep it)
    statements = []
    real_sql = spark.sql
    monkeypatch.setattr(spark, "sql", lambda text, *a, **k: statements.append(text) or real_sql(text, *a, **k))
    run_maintenance(spark, lake_of(spark), "lake", "dc_few", [name], older_than_days=0, retain_last=1)
    (rewrite,) = [t for t in statements if "rewrite_data_files" in t]
    assert "'rewrite-all', 'true'" in rewrite  # an older data file outside the deleted keys would keep them
    assert delete_file_count(spark, name) == 0
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == rows
    assert {r["id"]: (r["a"], r["b"]) for r in reader.rows("dc_few", "s__mor")} == rows
    assert applied_state(spark, name).checkpoint == log.here()


def test_a_copy_on_write_table_gets_no_delete_file(spark, tmp_path):
    log = Binlog(tmp_path)
    name = two_file_table(spark, log, "dc_cow", {"write.merge.mode": "copy-on-write"})
    result = apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="dc_cow"))
    assert "direct" not in result["batches"][0]["tables"][0]
    assert delete_file_count(spark, name) == 0
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == expected_after_few_changes()


def test_a_truncate_in_the_batch_replaces_the_content_with_the_rows_after_it(spark, tmp_path):
    log = Binlog(tmp_path)
    name = two_file_table(spark, log, "dc_trunc")
    log.begin().rows(LAYOUT_MAP, "update", [((1, 10, "r1"), (1, 11, "r1"))])
    log.ddl("truncate", ["s.mor"], "TRUNCATE TABLE mor")
    log.rows(LAYOUT_MAP, "insert", [(5, 50, "new"), (6, 60, "gone")])
    log.rows(LAYOUT_MAP, "delete", [(6, 60, "gone")])
    result = apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_trunc"))
    info = result["batches"][0]["tables"][0]
    assert (info["direct"], info["truncated"]) == (True, True)
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == {5: (50, "new")}


def test_a_commit_by_another_writer_after_planning_fails_the_direct_commit_and_a_rerun_applies(
        spark, tmp_path, monkeypatch):
    log = Binlog(tmp_path)
    store = FileCheckpointStore(tmp_path / "store")
    name = two_file_table(spark, log, "dc_race")
    changes = few_changes(log)
    real = direct_commit.collapse_staged

    def with_a_concurrent_commit(*args, **kwargs):
        spark.sql(f"INSERT INTO {name} VALUES (99, 990, 'other writer')")
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(direct_commit, "collapse_staged", with_a_concurrent_commit)
        with pytest.raises(Exception, match="another merge committed to lake.dc_race"):
            apply_manifests(spark, [changes], MergeOptions(namespace="dc_race", checkpoint_store=store.root,
                                                           checkpoint_key="race"))
    assert store.load("race") is None
    # the files the failed commit wrote are deleted again
    location = iceberg_table(spark, name).location().removeprefix("file:")
    assert not list(Path(location).rglob("binlog-*.parquet"))
    rows = {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()}
    assert rows[3] == (30, "r3") and rows[99] == (990, "other writer")  # the batch is not in
    result = apply_manifests(spark, [changes], MergeOptions(namespace="dc_race", checkpoint_store=store.root,
                                                            checkpoint_key="race"))
    assert result["batches"][0]["tables"][0]["direct"] is True
    expected = expected_after_few_changes()
    expected[99] = (990, "other writer")
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == expected
    assert store.load("race") == log.here()


def test_a_partitioned_table_goes_through_the_merge(spark, tmp_path):
    from airflow_provider_binlog.merge.layout import TableLayouts

    layouts = TableLayouts.parse('{"tables": {"s.mor": {"partition_by": ["bucket(4, id)"]}}}')
    log = Binlog(tmp_path)
    log.begin().rows(LAYOUT_MAP, "insert", [(i, 10 * i, f"r{i}") for i in range(1, 61)])
    apply_manifests(spark, [log.publish()], MergeOptions(namespace="dc_part", table_layout=layouts))
    result = apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="dc_part", table_layout=layouts))
    info = result["batches"][0]["tables"][0]
    assert info["status"] == "committed" and "direct" not in info
    name = "lake.dc_part.s__mor"
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == expected_after_few_changes()
    assert "added-equality-deletes" not in summary(spark, name)


@pytest.fixture(params=["s3", "gcs", "azure"])
def store_location(request) -> str:
    """A fresh bucket (container) of S3, GCS or Azure on loopback, the environment pointed at it."""
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('s3_env')}"
    if request.param == "gcs":
        return f"gs://{request.getfixturevalue('gcs_env')}"
    return request.getfixturevalue("azure_env")


def test_batches_staged_on_an_object_store_merge_directly_and_through_spark_like_local_ones(
        spark, spark_warehouse, tmp_path, store_location):
    """The merge reads staging on S3, GCS or Azure without a Hadoop filesystem for it: the
    driver through pyarrow (direct commits), the executors through pyarrow too (the Spark
    MERGE), with the options the driver resolved (the executors' environment was set before)."""
    reader = PyIcebergReader(warehouse=spark_warehouse)
    rng = random.Random(11)
    store = store_location.split(":", 1)[0]
    log, wide, pairs = Binlog(tmp_path, staging=f"{store_location}/stage"), {}, {}
    for round_no in range(3):
        log.begin()
        random_changes(log, rng, wide, pairs, 40)
        manifest = log.publish()
        assert manifest.ref.startswith(f"{store_location}/stage/")
        for namespace, direct_bytes in ((f"{store}_direct", 1 << 24), (f"{store}_spark", 0)):
            result = apply_manifests(spark, [manifest.ref], MergeOptions(namespace=namespace,
                                                                         direct_max_bytes=direct_bytes))
            tables = result["batches"][0]["tables"]
            assert [t.get("direct", False) for t in tables] == [round_no > 0 and direct_bytes > 0] * 2
            assert wide_state(spark, f"lake.{namespace}.s__wide") == expected_wide(wide)
            assert pair_state(spark, f"lake.{namespace}.s__pair") == pairs
            assert pyiceberg_wide(reader, namespace) == expected_wide(wide)


def test_spark_can_read_staged_objects_through_its_own_filesystem_and_says_when_it_has_none(
        spark, tmp_path, gcs_env, monkeypatch):  # noqa: F811
    """``spark.binlog.staging.reader=spark`` hands the staged objects to Spark's Hadoop
    filesystem: with none for ``gs://`` here, the merge stops naming the object and the way back."""
    from airflow_provider_binlog.merge.spark.collapse import STAGING_READER_CONF

    log = Binlog(tmp_path, staging=f"gs://{gcs_env}/stage")
    log.begin().rows(PAIR, "insert", [(1, "x", 10)])
    manifest = log.publish()
    spark.conf.set(STAGING_READER_CONF, "spark")
    try:
        with pytest.raises(MergeJobError, match="Spark cannot read the staged object") as caught:
            apply_manifests(spark, [manifest.ref], MergeOptions(namespace="hadoop_read", direct_max_bytes=0))
        assert str(caught.value).startswith(f"gs://{gcs_env}/stage/") and STAGING_READER_CONF in caught.value.hint
        spark.conf.set(STAGING_READER_CONF, "arrow")
        with pytest.raises(MergeJobError, match="is not a staging reader"):
            apply_manifests(spark, [manifest.ref], MergeOptions(namespace="hadoop_read", direct_max_bytes=0))
    finally:
        spark.conf.unset(STAGING_READER_CONF)
    apply_manifests(spark, [manifest.ref], MergeOptions(namespace="hadoop_read", direct_max_bytes=0))
    assert pair_state(spark, "lake.hadoop_read.s__pair") == {(1, "x"): 10}
