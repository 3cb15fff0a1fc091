"""The merge job (airflow_provider_binlog.merge, run by merge/submit/merge_cdc.py): staged batches
applied to Iceberg with MERGE, exactly
once, compared value by value with a model of the source table (and with a live MariaDB)."""
from __future__ import annotations

import datetime as dt
import json
import os
import random
from decimal import Decimal
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.checkpoints import (Checkpoint, CheckpointConflictError,  # noqa: E402
                                                FileCheckpointStore)
from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.codec.events import (ABSENT, Column, EventHeader,  # noqa: E402
                                                  RowsEvent, TableMap)
from airflow_provider_binlog.staging import StagingWriter  # noqa: E402
from airflow_provider_binlog.merge.batches import plan_batches  # noqa: E402
from airflow_provider_binlog.merge.errors import BatchGapError, MergeJobError, SchemaEvolutionError  # noqa: E402
from airflow_provider_binlog.merge.spark import apply as merge_apply  # noqa: E402
from airflow_provider_binlog.merge.spark import engine as merge_engine  # noqa: E402
from airflow_provider_binlog.merge.spark import job as merge_job  # noqa: E402
from tests.merging import lake_of  # noqa: E402
from tests.merging import apply_manifests  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from tests.merging import applied_state, read_table_properties  # noqa: E402
from airflow_provider_binlog.merge.column_types import iceberg_schema_for  # noqa: E402
from airflow_provider_binlog.merge.spark.maintenance import run_maintenance  # noqa: E402
from airflow_provider_binlog.common.tables import iceberg_table_name  # noqa: E402

UTC = dt.timezone.utc


# --------------------------------------------------------------------------- synthetic binlog


def col(index, name, type_, meta=0, **kw):
    return Column(index, name, type_, meta, **kw)


def table_map(schema, table, columns, table_id=1):
    return TableMap(table_id, schema, table, tuple(columns))


class Binlog:
    """Synthetic binlog positions; stages rows events into batches with the real writer."""

    def __init__(self, root: Path, index: int = 1, staging=None):
        self.root = root
        self.staging = staging  # where batches are published (default: <root>/staging)
        self.file = f"mysql-bin.{index:06d}"
        self.pos = 4
        self.ts = 1_700_000_000
        self.writer = None
        self.start = None

    def here(self) -> Checkpoint:
        return Checkpoint(file=self.file, position=self.pos)

    def rotate(self) -> None:
        base, index = self.file.rsplit(".", 1)
        self.file, self.pos = f"{base}.{int(index) + 1:06d}", 4

    def begin(self) -> "Binlog":
        self.writer = StagingWriter(self.staging or self.root / "staging")
        self.start = self.here()
        return self

    def rows(self, tm: TableMap, kind: str, rows: list) -> None:
        header = EventHeader(self.ts, 30, 1, 100, self.pos + 100, 0)
        event = RowsEvent(header, self.pos, kind, tm.table_id, tm, 0, tuple(rows))
        self.writer.add_rows(event, binlog_file=self.file, gtid=None, txn=f"{self.file}:{self.pos}")
        self.pos += 100
        self.ts += 1

    def ddl(self, kind: str, tables: list, query: str) -> None:
        ops = [{"op": "reset", "table": t.split(".", 1)} for t in tables] if kind in ("truncate", "drop") else []
        self.writer.add_ddl({"file": self.file, "pos": self.pos, "gtid": None, "schema": "s",
                             "kind": kind, "tables": tables, "query": query, "ops": ops,
                             "ts": dt.datetime.fromtimestamp(self.ts, UTC).isoformat()})
        self.pos += 100
        self.ts += 1

    def publish(self):
        end = self.here()
        manifest = self.writer.publish(
            dump_id=f"{self.start.file}.{self.start.position}-{end.file}.{end.position}",
            start=self.start.to_json(), end=end.to_json(), server={"flavor": "mysql"})
        self.writer = None
        return manifest


def table_rows(spark, name, columns=None) -> dict:
    df = spark.table(name)
    rows = [r.asDict() for r in df.collect()]
    if columns:
        rows = [{c: r[c] for c in columns} for r in rows]
    return {r["id"]: r for r in rows}


def head(spark, name):
    return spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").collect()[0][0]


# --------------------------------------------------------------------------- pure functions


def test_table_names_are_readable_and_collision_free():
    assert iceberg_table_name("shop", "order_items") == "shop__order_items"
    names = {iceberg_table_name(s, t) for s, t in [
        ("a__b", "c"), ("a", "b__c"), ("a_", "b"), ("a", "_b"), ("Shop", "orders"),
        ("shop", "Orders"), ("shop", "orders"), ("sh op", "orders"), ("sh-op", "orders"),
        ("a", "b_c"), ("a_b", "c")]}
    assert len(names) == 11
    odd = iceberg_table_name("Shop", "Order Items")
    assert odd.startswith("shop__order_items__") and len(odd.split("__")[-1]) == 16
    assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyz0123456789_") for n in names)


def test_plan_batches_orders_and_refuses_gaps(tmp_path):
    log = Binlog(tmp_path)
    tm = table_map("s", "t", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True)])
    manifests = []
    for i in range(3):
        log.begin().rows(tm, "insert", [(i,)])
        if i == 0:
            log.rotate()    # a dump ending at the end of a file ends at the next file's start
        manifests.append(log.publish())
    ordered = plan_batches([manifests[2], manifests[0], manifests[1], manifests[0].path])
    assert [b.batch_id for b in ordered] == [m.dump_id for m in manifests]
    with pytest.raises(BatchGapError, match=r"ends at \[mysql-bin.000002:4\].*starts at \[mysql-bin.000002:104\]"):
        plan_batches([manifests[0], manifests[2]])


def test_arrow_to_iceberg_mapping():
    cols = [{"name": n, "arrow_type": a} for n, a in [
        ("a", "int8"), ("b", "int16"), ("c", "int32"), ("d", "int64"), ("e", "decimal128(20, 0)"),
        ("f", "float"), ("g", "double"), ("h", "date32[day]"), ("i", "timestamp[us]"),
        ("j", "timestamp[us, tz=UTC]"), ("k", "binary"), ("l", "string"),
        ("m", "list<item: float>")]]
    assert [t for _, t in iceberg_schema_for(cols)] == [
        "int", "int", "int", "bigint", "decimal(20,0)", "float", "double", "date", "timestamp_ntz",
        "timestamp", "binary", "string", "array<float>"]


# --------------------------------------------------------------------------- randomised model


RCOLS = ["id", "name", "amount", "qty", "note"]
RMAP = table_map("s", "rnd", [
    col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
    col(1, "name", C.MYSQL_TYPE_VARCHAR, 160, text=True),
    col(2, "amount", C.MYSQL_TYPE_NEWDECIMAL, (10 << 8) | 2),
    col(3, "qty", C.MYSQL_TYPE_LONGLONG),
    col(4, "note", C.MYSQL_TYPE_BLOB, 2, text=True),
])


def random_batch(log: Binlog, rng: random.Random, model: dict, n: int, minimal: float) -> None:
    """Random changes (several per key, key changes, MINIMAL images) staged and applied to
    ``model`` ({id: row tuple})."""
    def value(i):
        return [None, f"n{rng.randint(0, 99)}é", Decimal(rng.randint(-99999, 99999)) / 100,
                rng.randint(-2**63, 2**63 - 1), rng.choice([None, "x" * rng.randint(0, 40)])][i]

    for _ in range(n):
        r = rng.random()
        partial = rng.random() < minimal
        free = [k for k in range(1, 60) if k not in model]
        if r < 0.3 or not model:
            keys = rng.sample(free, min(len(free), rng.randint(1, 3)))
            rows = [(k, *(value(i) for i in range(1, 5))) for k in keys]
            log.rows(RMAP, "insert", rows)
            model.update({row[0]: row for row in rows})
        elif r < 0.8:
            key = rng.choice(sorted(model))
            old = model[key]
            new = list(old)
            changed = rng.sample(range(1, 5), rng.randint(1, 3))
            for i in changed:
                new[i] = value(i)
            if rng.random() < 0.25 and free:
                new[0] = rng.choice(free)
                changed.append(0)
            if partial:
                before = (old[0],) + (ABSENT,) * 4
                after = tuple(new[i] if i in changed else ABSENT for i in range(5))
            else:
                before, after = old, tuple(new)
            log.rows(RMAP, "update", [(before, after)])
            del model[key]
            model[new[0]] = tuple(new)
        else:
            key = rng.choice(sorted(model))
            before = (key,) + (ABSENT,) * 4 if partial else model[key]
            log.rows(RMAP, "delete", [before])
            del model[key]


def test_random_changes_match_a_model_exactly_once(spark, tmp_path):
    rng = random.Random(7)
    log, model, manifests = Binlog(tmp_path), {}, []
    store = FileCheckpointStore(tmp_path / "store")
    name = "lake.mj_rnd.s__rnd"
    for i, minimal in enumerate([0.0, 0.5]):       # full row images, then half MINIMAL
        log.begin()
        random_batch(log, rng, model, 100, minimal)
        log.rotate()                                # the batch spans two binlog files
        random_batch(log, rng, model, 100, minimal)
        manifests.append(log.publish())
        result = apply_manifests(spark, [manifests[-1]], MergeOptions(namespace="mj_rnd", checkpoint_store=store.root,
                                                                      checkpoint_key="rnd"))
        assert result["batches"][0]["status"] == "applied"
        # MINIMAL key changes are folded in order on the driver, the rest by window functions
        assert result["batches"][0]["tables"][0]["key_change_chains"] == (minimal > 0)
        got = {k: tuple(r[c] for c in RCOLS) for k, r in table_rows(spark, name).items()}
        assert got == model, f"batch {i}"
        assert store.load("rnd") == log.here()
    summary = spark.sql(f"SELECT summary FROM {name}.snapshots").collect()[-1][0]
    assert json.loads(summary["binlog.checkpoint"])["pos"] == log.pos
    assert summary["binlog.batch_id"] == manifests[-1].dump_id

    # rerunning every batch is a no-op
    heads = (head(spark, name), head(spark, "lake.mj_rnd._binlog_batches"))
    again = apply_manifests(spark, manifests, MergeOptions(namespace="mj_rnd", checkpoint_store=store.root,
                                                           checkpoint_key="rnd"))
    assert [b["status"] for b in again["batches"]] == ["already-applied"] * 2
    assert (head(spark, name), head(spark, "lake.mj_rnd._binlog_batches")) == heads
    assert store.load("rnd") == log.here()


# --------------------------------------------------------------------------- types


TYPES_MAP = table_map("s", "types", [
    col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
    col(1, "ti", C.MYSQL_TYPE_TINY), col(2, "tu", C.MYSQL_TYPE_TINY, unsigned=True),
    col(3, "si", C.MYSQL_TYPE_SHORT), col(4, "su", C.MYSQL_TYPE_SHORT, unsigned=True),
    col(5, "mi", C.MYSQL_TYPE_INT24), col(6, "mu", C.MYSQL_TYPE_INT24, unsigned=True),
    col(7, "i", C.MYSQL_TYPE_LONG), col(8, "iu", C.MYSQL_TYPE_LONG, unsigned=True),
    col(9, "bi", C.MYSQL_TYPE_LONGLONG), col(10, "bu", C.MYSQL_TYPE_LONGLONG, unsigned=True),
    col(11, "d65", C.MYSQL_TYPE_NEWDECIMAL, (65 << 8) | 30),
    col(12, "d10", C.MYSQL_TYPE_NEWDECIMAL, (10 << 8) | 2),
    col(13, "f", C.MYSQL_TYPE_FLOAT, 4), col(14, "db", C.MYSQL_TYPE_DOUBLE, 8),
    col(15, "d", C.MYSQL_TYPE_DATE), col(16, "dtm", C.MYSQL_TYPE_DATETIME2, 6),
    col(17, "ts", C.MYSQL_TYPE_TIMESTAMP2, 6), col(18, "tm", C.MYSQL_TYPE_TIME2, 6),
    col(19, "yr", C.MYSQL_TYPE_YEAR), col(20, "bt", C.MYSQL_TYPE_BIT, (8 << 8)),
    col(21, "en", C.MYSQL_TYPE_ENUM, enum_values=("a", "b")),
    col(22, "st", C.MYSQL_TYPE_SET, set_values=("x", "y", "z")),
    col(23, "tx", C.MYSQL_TYPE_BLOB, 2, text=True), col(24, "bn", C.MYSQL_TYPE_VARCHAR, 16, text=False),
    col(25, "js", C.MYSQL_TYPE_JSON, 4), col(26, "geo", C.MYSQL_TYPE_GEOMETRY, 4),
    col(27, "vec", C.MYSQL_TYPE_VECTOR, 4),
])

TYPES_EXPECTED = {
    "id": "int", "ti": "int", "tu": "int", "si": "int", "su": "int", "mi": "int", "mu": "int",
    "i": "int", "iu": "bigint", "bi": "bigint", "bu": "decimal(20,0)", "d65": "string",
    "d10": "decimal(10,2)", "f": "float", "db": "double", "d": "date", "dtm": "timestamp_ntz",
    "ts": "timestamp", "tm": "bigint", "yr": "int", "bt": "decimal(20,0)", "en": "string", "st": "string",
    "tx": "string", "bn": "binary", "js": "string", "geo": "binary", "vec": "array<float>",
}

D65 = Decimal("12345678901234567890123456789012345.123456789012345678901234567891")
GEOMETRY = bytes(4) + bytes.fromhex("0101000000000000000000f03f0000000000000040")


def test_every_staged_type_round_trips(spark, tmp_path):
    rows = [
        (1, -128, 255, -32768, 65535, -8388608, 16777215, -2**31, 2**32 - 1, -2**63, 2**64 - 1,
         D65, Decimal("-12345678.90"), 1.5, -2.25e300, dt.date(1000, 1, 1),
         dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(2038, 1, 19, 3, 14, 7, 123456, UTC),
         -dt.timedelta(hours=838, minutes=59, seconds=59), 2155, 2**64 - 1, "b", "x,z",
         "ünïcødé ☃", b"\x00\xff\x10", {"k": [1, 2.5, None, "é"]}, GEOMETRY, [0.5, -1.25]),
        (2, 127, 0, 32767, 0, 8388607, 0, 2**31 - 1, 0, 2**63 - 1, 2**63,
         Decimal("-0.000000000000000000000000000001"), Decimal("99999999.99"), -0.0, 5e-324,
         dt.date(2024, 2, 29), dt.datetime(2000, 1, 1), dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
         dt.timedelta(microseconds=1), 1901, 1, "a", "", "", b"", [], b"", []),
        (3,) + (None,) * 27,
    ]
    nulls = (2,) + (None,) * 27
    log = Binlog(tmp_path).begin()
    log.rows(TYPES_MAP, "insert", [rows[0], nulls, rows[2]])     # appended to the new table
    manifest = log.publish()
    log.begin()
    log.rows(TYPES_MAP, "update", [(nulls, rows[1])])            # MERGE: matched
    log.rows(TYPES_MAP, "insert", [(4,) + rows[0][1:]])          # MERGE: not matched
    apply_manifests(spark, [manifest, log.publish()], MergeOptions(namespace="mj_types"))
    name = "lake.mj_types.s__types"
    types = {f.name: f.dataType.simpleString() for f in spark.table(name).schema.fields}
    assert types == TYPES_EXPECTED
    assert dict(iceberg_schema_for(manifest.tables[0]["columns"])) == TYPES_EXPECTED
    got = table_rows(spark, name)
    micros = dict(spark.sql(f"SELECT id, unix_micros(ts) FROM {name}").collect())
    expected = {
        1: dict(zip(TYPES_EXPECTED, (
            1, -128, 255, -32768, 65535, -8388608, 16777215, -2**31, 2**32 - 1, -2**63,
            Decimal(2**64 - 1), format(D65, "f"), Decimal("-12345678.90"), 1.5, -2.25e300,
            dt.date(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None,
            -(838 * 3600 + 59 * 60 + 59) * 10**6, 2155, Decimal(2**64 - 1), "b", "x,z", "ünïcødé ☃",
            bytearray(b"\x00\xff\x10"), '{"k": [1, 2.5, null, "é"]}', bytearray(GEOMETRY),
            [0.5, -1.25]))),
        2: dict(zip(TYPES_EXPECTED, (
            2, 127, 0, 32767, 0, 8388607, 0, 2**31 - 1, 0, 2**63 - 1, Decimal(2**63),
            "-0.000000000000000000000000000001", Decimal("99999999.99"), -0.0, 5e-324,
            dt.date(2024, 2, 29), dt.datetime(2000, 1, 1), None, 1, 1901, Decimal(1), "a", "", "",
            bytearray(b""), "[]", bytearray(b""), []))),
        3: {c: (3 if c == "id" else None) for c in TYPES_EXPECTED},
    }
    expected[4] = {**expected[1], "id": 4}
    for row in got.values():
        row["ts"] = None
    assert got == expected
    assert micros == {1: 2147483647123456, 2: 1000000, 3: None, 4: 2147483647123456}


# --------------------------------------------------------------------------- schema evolution


def test_add_and_drop_columns_mid_stream(spark, tmp_path):
    v1 = table_map("s", "evo", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                col(1, "a", C.MYSQL_TYPE_LONG), col(2, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True)])
    # ALTER TABLE evo DROP b, ADD c BIGINT, MODIFY a BIGINT
    v2 = table_map("s", "evo", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                col(1, "a", C.MYSQL_TYPE_LONGLONG), col(2, "c", C.MYSQL_TYPE_LONGLONG)])
    other = table_map("s", "other", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True)], table_id=2)
    log = Binlog(tmp_path).begin()
    log.rows(v1, "insert", [(1, 10, "one"), (2, 20, "two"), (3, 30, "three")])
    first = log.publish()
    log.begin()
    log.rows(v1, "update", [((2, 20, "two"), (2, 21, "TWO"))])
    log.rows(v2, "update", [((1, 10, None), (1, 2**40, 7))])
    log.rows(v2, "insert", [(4, 40, 8)])
    second = log.publish()
    result = apply_manifests(spark, [first, second], MergeOptions(namespace="mj_evo"))
    name = "lake.mj_evo.s__evo"
    assert [(f.name, f.dataType.simpleString()) for f in spark.table(name).schema.fields] == [
        ("id", "int"), ("a", "bigint"), ("c", "bigint")]
    assert table_rows(spark, name) == {1: {"id": 1, "a": 2**40, "c": 7}, 2: {"id": 2, "a": 21, "c": None},
                                       3: {"id": 3, "a": 30, "c": None}, 4: {"id": 4, "a": 40, "c": 8}}
    changes = result["batches"][1]["tables"][0]["schema_changes"]
    assert any("DROP COLUMN `b`" in s for s in changes) and any("ADD COLUMN `c` bigint AFTER `a`" in s for s in changes)

    # a change Iceberg cannot express: nothing of the batch is committed, for any table
    v3 = table_map("s", "evo", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                col(1, "a", C.MYSQL_TYPE_VARCHAR, 40, text=True), col(2, "c", C.MYSQL_TYPE_LONGLONG)])
    log.begin()
    log.rows(other, "insert", [(1,)])
    log.rows(v3, "update", [((1, None, 7), (1, "many", 7))])
    third = log.publish()
    heads = head(spark, name), head(spark, "lake.mj_evo._binlog_batches")
    with pytest.raises(SchemaEvolutionError, match=r"'a' changed from bigint to string"):
        apply_manifests(spark, [third], MergeOptions(namespace="mj_evo"))
    assert (head(spark, name), head(spark, "lake.mj_evo._binlog_batches")) == heads
    assert not spark.catalog.tableExists("lake.mj_evo.s__other")


# --------------------------------------------------------------------------- MINIMAL, TRUNCATE, no PK


def test_minimal_images_keep_absent_columns(spark, tmp_path):
    tm = table_map("s", "mini", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                 col(1, "a", C.MYSQL_TYPE_LONG), col(2, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True)])
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 10, "x"), (2, 20, "y"), (3, 30, "z")])
    first = log.publish()
    log.begin()
    log.rows(tm, "update", [((1, ABSENT, ABSENT), (ABSENT, 11, ABSENT))])   # SET a = 11
    log.rows(tm, "update", [((2, ABSENT, ABSENT), (5, ABSENT, ABSENT))])    # SET id = 5
    log.rows(tm, "update", [((5, ABSENT, ABSENT), (ABSENT, ABSENT, "Y"))])  # SET b = 'Y'
    log.rows(tm, "insert", [(2, None, "new")])                               # old key reused
    log.rows(tm, "insert", [(6, 60, ABSENT)])
    log.rows(tm, "update", [((6, ABSENT, ABSENT), (ABSENT, 61, ABSENT))])
    second = log.publish()
    apply_manifests(spark, [first, second], MergeOptions(namespace="mj_mini"))
    got = {k: (r["a"], r["b"]) for k, r in table_rows(spark, "lake.mj_mini.s__mini").items()}
    assert got == {1: (11, "x"), 2: (None, "new"), 3: (30, "z"), 5: (20, "Y"), 6: (61, None)}


def test_truncate_empties_the_table_at_its_position(spark, tmp_path):
    tm = table_map("s", "trunc", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                  col(1, "a", C.MYSQL_TYPE_LONG)])
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 1), (2, 2)])
    first = log.publish()
    log.begin()
    log.rows(tm, "insert", [(3, 3)])
    log.ddl("truncate", ["s.trunc"], "TRUNCATE TABLE trunc")
    log.rows(tm, "insert", [(4, 4), (5, 5)])
    log.rows(tm, "update", [((4, 4), (4, 40))])
    log.rows(tm, "delete", [(5, 5)])
    second = log.publish()
    log.begin()
    log.ddl("truncate", ["s.trunc"], "TRUNCATE trunc")   # a batch with only the TRUNCATE
    third = log.publish()
    name = "lake.mj_trunc.s__trunc"
    apply_manifests(spark, [first, second], MergeOptions(namespace="mj_trunc"))
    assert table_rows(spark, name) == {4: {"id": 4, "a": 40}}
    result = apply_manifests(spark, [third], MergeOptions(namespace="mj_trunc"))
    assert result["batches"][0]["tables"][0]["status"] == "committed"
    assert table_rows(spark, name) == {}


def test_table_without_primary_key_becomes_a_change_log(spark, tmp_path, monkeypatch):
    tm = table_map("s", "nopk", [col(0, "k", C.MYSQL_TYPE_LONG), col(1, "v", C.MYSQL_TYPE_VARCHAR, 40, text=True)])
    kv = table_map("s", "z_kv", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True)], table_id=2)
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, "a"), (1, "a")])                 # duplicates are legal here
    log.rows(tm, "update", [((1, "a"), (1, "b"))])
    log.rows(tm, "delete", [(1, "a")])
    log.ddl("truncate", ["s.nopk"], "TRUNCATE TABLE nopk")
    log.rows(kv, "insert", [(1,), (2,)])
    manifest = log.publish()
    name, store = "lake.mj_nopk.s__nopk", FileCheckpointStore(tmp_path / "store")

    # killed between the commit of the change log and that of the next table
    def killed(*args, **kwargs):
        raise RuntimeError("killed")

    with monkeypatch.context() as m:
        m.setattr(merge_engine, "apply_merge_table", killed)
        with pytest.raises(RuntimeError, match="killed"):
            apply_manifests(spark, [manifest], MergeOptions(namespace="mj_nopk", checkpoint_store=store.root,
                                                            checkpoint_key="nopk"))
    assert store.load("nopk") is None
    first = head(spark, name)
    result = apply_manifests(spark, [manifest], MergeOptions(namespace="mj_nopk", checkpoint_store=store.root,
                                                             checkpoint_key="nopk"))
    assert [(t["source"], t["status"]) for t in result["batches"][0]["tables"]] == [
        ("s.nopk", "already-applied"), ("s.z_kv", "committed")]
    assert head(spark, name) == first and store.load("nopk") == log.here()
    assert sorted(table_rows(spark, "lake.mj_nopk.s__z_kv")) == [1, 2]
    again = apply_manifests(spark, [manifest], MergeOptions(namespace="mj_nopk", checkpoint_store=store.root,
                                                            checkpoint_key="nopk"))
    assert again["batches"][0]["status"] == "already-applied" and head(spark, name) == first

    rows = spark.sql(f"SELECT _op, _binlog_pos, _row, k, v, _batch_id FROM {name} "
                     f"ORDER BY _binlog_seq, _binlog_pos, _row").collect()
    assert [tuple(r)[:5] for r in rows] == [("insert", 4, 0, 1, "a"), ("insert", 4, 1, 1, "a"),
                                           ("update", 104, 0, 1, "b"), ("delete", 204, 0, 1, "a"),
                                           ("truncate", 304, 0, None, None)]
    assert {r["_batch_id"] for r in rows} == {manifest.dump_id}
    assert spark.sql(f"SHOW TBLPROPERTIES {name} ('binlog.mode')").collect()[0][1] == "changelog"


# --------------------------------------------------------------------------- table layout, merge-on-read


LAYOUT_MAP = table_map("s", "mor", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True),
                                    col(1, "a", C.MYSQL_TYPE_LONG),
                                    col(2, "b", C.MYSQL_TYPE_VARCHAR, 40, text=True)])


def data_files(spark, name) -> set:
    return {r[0] for r in spark.sql(f"SELECT file_path FROM {name}.files WHERE content = 0").collect()}


def snapshot_ids(spark, name) -> set:
    return {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()}


def delete_file_count(spark, name) -> int:
    return spark.sql(f"SELECT count(*) FROM {name}.delete_files").collect()[0][0]


def summary(spark, name) -> dict:
    from airflow_provider_binlog.spark.runtime import snapshot_summary
    return snapshot_summary(spark, name)


def two_file_table(spark, log: Binlog, namespace: str, table_properties=None) -> str:
    """``s.mor`` with ids 1..60 (a = 10 * id, b = 'r<id>'), in two data files (Spark appends)."""
    name = f"lake.{namespace}.s__mor"
    for low in (1, 31):
        log.begin().rows(LAYOUT_MAP, "insert", [(i, 10 * i, f"r{i}") for i in range(low, low + 30)])
        apply_manifests(spark, [log.publish()], MergeOptions(namespace=namespace, direct_max_bytes=0,
                                                             table_properties=table_properties or {}))
    assert len(data_files(spark, name)) == 2
    return name


def few_changes(log: Binlog):
    """Updates of ids 3 and 40 (one in each data file), a delete of 50, an insert of 61."""
    log.begin()
    log.rows(LAYOUT_MAP, "update", [((3, 30, "r3"), (3, 33, "changed"))])
    log.rows(LAYOUT_MAP, "update", [((40, 400, "r40"), (40, 404, "r40"))])
    log.rows(LAYOUT_MAP, "delete", [(50, 500, "r50")])
    log.rows(LAYOUT_MAP, "insert", [(61, 610, "r61")])
    return log.publish()


def expected_after_few_changes() -> dict:
    rows = {i: (10 * i, f"r{i}") for i in range(1, 62) if i != 50}
    rows.update({3: (33, "changed"), 40: (404, "r40")})
    return rows


def test_created_tables_are_merge_on_read_v2_and_sorted_by_key(spark, tmp_path):
    log = Binlog(tmp_path).begin()
    log.rows(LAYOUT_MAP, "insert", [(1, 10, "r1")])
    apply_manifests(spark, [log.publish()], MergeOptions(namespace="mj_layout"))
    props = read_table_properties(spark, "lake.mj_layout.s__mor")
    assert props["format-version"] == "2"
    assert (props["write.merge.mode"], props["write.update.mode"], props["write.delete.mode"]) == \
        ("merge-on-read",) * 3
    assert props["write.delete.granularity"] == "partition"
    assert props["sort-order"] == "id ASC NULLS FIRST"
    assert props["binlog.primary-key"] == '["id"]'


def test_merge_of_a_few_changes_adds_delete_files_and_keeps_the_data_files(spark, tmp_path):
    log = Binlog(tmp_path)
    name = two_file_table(spark, log, "mj_mor")
    before = data_files(spark, name)
    apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="mj_mor", direct_max_bytes=0))
    s = summary(spark, name)
    assert s.get("deleted-data-files", "0") == "0"           # no data file is rewritten
    assert s["added-position-deletes"] == "3"                  # rows 3, 40 and 50
    assert int(s["added-delete-files"]) >= 1
    assert s["added-records"] == "3"                           # the new rows 3, 40 and 61
    assert before < data_files(spark, name)
    assert delete_file_count(spark, name) == int(s["added-delete-files"])
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == expected_after_few_changes()
    assert json.loads(s["binlog.checkpoint"])["pos"] == log.pos


def test_table_properties_given_override_the_merge_on_read_default(spark, tmp_path):
    log = Binlog(tmp_path)
    cow = {"write.merge.mode": "copy-on-write"}
    name = two_file_table(spark, log, "mj_cow", table_properties=cow)
    assert read_table_properties(spark, name)["write.merge.mode"] == "copy-on-write"
    before = data_files(spark, name)
    apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="mj_cow", direct_max_bytes=0))
    s = summary(spark, name)
    assert s["deleted-data-files"] == "2" and delete_file_count(spark, name) == 0
    assert not before & data_files(spark, name)
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == expected_after_few_changes()


def test_maintenance_folds_the_delete_files_into_the_data_files(spark, tmp_path, monkeypatch):
    log = Binlog(tmp_path)
    name = two_file_table(spark, log, "mj_maint")
    loads, before = snapshot_ids(spark, name), data_files(spark, name)
    changes = few_changes(log)
    statements = []
    real_sql = spark.sql
    monkeypatch.setattr(spark, "sql", lambda text, *a, **k: statements.append(text) or real_sql(text, *a, **k))
    result = apply_manifests(spark, [changes], MergeOptions(namespace="mj_maint", maintenance=True,
                                                            expire_older_than_days=0, retain_last=1,
                                                            direct_max_bytes=0))
    monkeypatch.undo()
    assert all("rewrite-all" not in t for t in statements if "rewrite_data_files" in t)  # no equality deletes
    assert delete_file_count(spark, name) == 0
    assert len(data_files(spark, name)) == 1                 # sorted into one file
    assert {k: (r["a"], r["b"]) for k, r in table_rows(spark, name).items()} == expected_after_few_changes()
    done = {m["table"]: m for m in result["maintenance"]}[name]
    assert done["rewrite"]["rewritten_data_files_count"] == 3
    assert done["rewrite"]["added_data_files_count"] == 1
    # the loads' snapshots are expired (the two loads, and the empty one the first was staged
    # on); the merge's (the newest with a checkpoint) is kept, and with it every data file:
    # none can go yet
    assert not loads & snapshot_ids(spark, name)
    assert done["expire"]["deleted_manifest_lists_count"] == len(loads) == 3
    assert done["expire"]["deleted_data_files_count"] == 0
    assert done["expire"]["deleted_position_delete_files_count"] == 0
    # the applied position survives, and the next batch merges (and reruns) as before
    state = applied_state(spark, name)
    assert state.checkpoint == log.here() and state.batch_id == changes.dump_id
    log.begin().rows(LAYOUT_MAP, "delete", [(1, 10, "r1")])
    following = log.publish()
    apply_manifests(spark, [following], MergeOptions(namespace="mj_maint", direct_max_bytes=0))
    assert summary(spark, name)["added-position-deletes"] == "1" and delete_file_count(spark, name) >= 1
    assert sorted(table_rows(spark, name))[:2] == [2, 3]
    again = apply_manifests(spark, [changes, following], MergeOptions(namespace="mj_maint"))
    assert [b["status"] for b in again["batches"]] == ["already-applied"] * 2
    # the next maintenance expires everything before the following batch's snapshot: the two
    # loaded data files, the merge's data file and its delete file are referenced by nothing
    # kept any more and are deleted from storage; the files of the kept snapshots stay
    kept = {r[0] for r in spark.sql(f"SELECT file_path FROM {name}.files").collect()}
    every = {(r[0], r[1]) for r in spark.sql(f"SELECT content, file_path FROM {name}.all_files").collect()}
    gone = {content: {p for c, p in every if c == content and p not in kept} for content in (0, 1)}
    assert len(gone[0]) == 3 and len(gone[1]) == 1 and before < gone[0], gone
    (second,) = run_maintenance(spark, lake_of(spark), "lake", "mj_maint", [name], older_than_days=0, retain_last=1)
    assert second["expire"]["deleted_data_files_count"] == 3
    assert second["expire"]["deleted_position_delete_files_count"] == 1
    assert not [p for p in gone[0] | gone[1] if os.path.exists(p.removeprefix("file:"))]
    assert all(os.path.exists(p.removeprefix("file:")) for p in kept)
    assert applied_state(spark, name).checkpoint == log.here()
    assert sorted(table_rows(spark, name))[:2] == [2, 3]


def test_merge_reads_target_columns_only_when_an_image_lacks_columns(spark, tmp_path, monkeypatch):
    statements = []
    build = merge_apply.merge_statement

    def recording(*args, **kwargs):
        statements.append(build(*args, **kwargs))
        return statements[-1]

    monkeypatch.setattr(merge_apply, "merge_statement", recording)
    log = Binlog(tmp_path)
    name = two_file_table(spark, log, "mj_proj")
    apply_manifests(spark, [few_changes(log)], MergeOptions(namespace="mj_proj", direct_max_bytes=0))
    full = statements[-1]
    # full images: the target's non-key columns are not read; its rows are filtered by key
    assert "THEN t.`" not in full and "SET t.`a` = CASE WHEN s.h1 THEN s.v1" in full
    assert "t.`id` IN (3, 40, 50, 61)" in full
    log.begin().rows(LAYOUT_MAP, "update", [((5, ABSENT, ABSENT), (ABSENT, 55, ABSENT))])
    apply_manifests(spark, [log.publish()], MergeOptions(namespace="mj_proj", direct_max_bytes=0))
    assert "WHEN s._self THEN t.`b`" in statements[-1]
    got = table_rows(spark, name)
    assert (got[5]["a"], got[5]["b"]) == (55, "r5")


@pytest.mark.parametrize("value, data_type", [
    (7, "int"), (-2**63, "bigint"), ("it's a \\ 'quote' é", "string"),
    (Decimal("-12345.60"), "decimal(9,2)"), (dt.date(1, 1, 1), "date"), (dt.date(2024, 2, 29), "date")])
def test_key_filter_literals_round_trip(spark, value, data_type):
    import pyarrow as pa
    arrow = {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string(), "decimal(9,2)": pa.decimal128(9, 2),
             "date": pa.date32()}[data_type]
    literal = merge_apply.sql_literal(value, arrow)
    row = spark.sql(f"SELECT {literal} AS v, typeof({literal}) AS t").collect()[0]
    assert row["v"] == value and row["t"] == data_type


# --------------------------------------------------------------------------- gaps and the store


def test_gaps_are_refused_and_the_store_advances_with_cas(spark, tmp_path):
    tm = table_map("s", "cas", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True)])
    log, batches = Binlog(tmp_path), []
    for i in range(3):
        log.begin().rows(tm, "insert", [(i,)])
        batches.append(log.publish())
    store = FileCheckpointStore(tmp_path / "store")
    store.save("cas", batches[0].start)
    apply_manifests(spark, [batches[0]], MergeOptions(namespace="mj_cas", checkpoint_store=store.root,
                                                      checkpoint_key="cas"))
    assert store.load("cas") == batches[0].end

    with pytest.raises(BatchGapError, match=r"starts at \[mysql-bin.000001:204\] but checkpoint "
                                            r"store key 'cas' is at \[mysql-bin.000001:104\]"):
        apply_manifests(spark, [batches[2]], MergeOptions(namespace="mj_cas", checkpoint_store=store.root,
                                                          checkpoint_key="cas"))
    with pytest.raises(BatchGapError, match=r"starts at \[mysql-bin.000001:204\] but ledger"):
        # no store: the ledger knows
        apply_manifests(spark, [batches[2]], MergeOptions(namespace="mj_cas", stream="cas"))

    class RacingStore(FileCheckpointStore):
        """Another run advances the key between our read and our compare-and-set."""

        def load(self, key):
            current = super().load(key)
            FileCheckpointStore(self.root).save(key, Checkpoint(file="mysql-bin.000009", position=4))
            return current

    with pytest.raises(CheckpointConflictError):
        apply_manifests(spark, [batches[1]], MergeOptions(namespace="mj_cas", checkpoint_store=str(tmp_path / "store"),
                                                          checkpoint_key="cas"), store=RacingStore(tmp_path / "store"))
    assert store.load("cas") == Checkpoint(file="mysql-bin.000009", position=4)
    # the table holds batch 1 exactly once, whatever the store says
    assert sorted(table_rows(spark, "lake.mj_cas.s__cas")) == [0, 1]


def test_a_batch_cut_differently_resumes_after_each_table_checkpoint(spark, tmp_path):
    tm = table_map("s", "recut", [col(0, "k", C.MYSQL_TYPE_LONG)])   # a change log: duplicates show
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1,)])
    log.rows(tm, "insert", [(2,)])
    short = log.publish()                                # [4, 204)
    log.pos = 4
    log.begin()
    for k in (1, 2, 3):
        log.rows(tm, "insert", [(k,)])
    longer = log.publish()                               # [4, 304): the same start, cut later

    class CrashingStore(FileCheckpointStore):
        def save(self, key, checkpoint, *, expected=None, **kw):
            raise RuntimeError("killed before the store was advanced")

    FileCheckpointStore(tmp_path / "store").save("recut", Checkpoint(file=log.file, position=4))
    with pytest.raises(RuntimeError, match="killed"):
        apply_manifests(spark, [short], MergeOptions(namespace="mj_recut", checkpoint_store=str(tmp_path / "store"),
                                                     checkpoint_key="recut"), store=CrashingStore(tmp_path / "store"))
    result = apply_manifests(spark, [longer], MergeOptions(namespace="mj_recut",
                                                           checkpoint_store=str(tmp_path / "store"),
                                                           checkpoint_key="recut"))
    assert result["batches"][0]["tables"][0]["status"] == "committed"
    keys = [r[0] for r in spark.sql("SELECT k FROM lake.mj_recut.s__recut ORDER BY _binlog_pos").collect()]
    assert keys == [1, 2, 3]


# --------------------------------------------------------------------------- live MariaDB


def test_live_dumps_merged_by_the_command_line(mariadb, spark, spark_warehouse, tmp_path):
    from airflow_provider_binlog.capture.dump import run_dump
    from airflow_provider_binlog.common.tables import TableFilter
    from tests.integration.test_dump_live import COLUMNS, here, replica, source_rows, workload

    mariadb.execute("CREATE DATABASE IF NOT EXISTS dumpdb")
    mariadb.execute("DROP TABLE IF EXISTS dumpdb.merged")
    mariadb.execute("CREATE TABLE dumpdb.merged (id INT PRIMARY KEY, name VARCHAR(40), "
                    "price DECIMAL(9,2), qty INT UNSIGNED, seen DATETIME(6), flag ENUM('a','b','c'), "
                    "doc JSON, big BIGINT UNSIGNED) DEFAULT CHARSET=utf8mb4")
    start = here(mariadb)
    rng = random.Random(11)
    workload(mariadb, "merged", rng, 150)
    rc = replica(mariadb)
    first = run_dump(rc, staging_dir=tmp_path / "staging", start=start, tables=TableFilter(["dumpdb.merged"]))
    workload(mariadb, "merged", rng, 100)
    mariadb.flush_binary_logs()
    workload(mariadb, "merged", rng, 50)
    second = run_dump(rc, staging_dir=tmp_path / "staging", start=first.end, tables=TableFilter(["dumpdb.merged"]))
    rc.close()
    store = FileCheckpointStore(tmp_path / "store")
    store.save("live", start)
    out = tmp_path / "result.json"
    options = MergeOptions(catalog="lake", namespace="mj_live", warehouse=spark_warehouse,
                           checkpoint_store=str(tmp_path / "store"), checkpoint_key="live",
                           maintenance=True, retain_last=1, expire_older_than_days=0)
    argv = ["--manifest", str(second.manifest.directory), "--manifest", str(first.manifest.path),
            "--options", options.to_json_text(), "--output-json", str(out)]
    assert merge_job.main(argv) == 0
    result = json.loads(out.read_text())
    assert [b["batch_id"] for b in result["batches"]] == [first.manifest.dump_id, second.manifest.dump_id]
    assert store.load("live") == second.end
    got = spark.sql(f"SELECT {', '.join(COLUMNS)} FROM lake.mj_live.dumpdb__merged").collect()
    assert {r[0]: tuple(r) for r in got} == source_rows(mariadb, "merged")
    # expiry keeps the snapshot holding the applied checkpoint (and what follows it)
    expired = {m["table"]: m["expire"]["deleted_manifest_lists_count"] for m in result["maintenance"]}
    assert expired["lake.mj_live.dumpdb__merged"] >= 1
    state = applied_state(spark, "lake.mj_live.dumpdb__merged")
    assert state.checkpoint == second.manifest.end
    assert state.batch_id == second.manifest.dump_id
    assert merge_job.main(argv) == 0      # a rerun is a no-op
    assert json.loads(out.read_text())["batches"][0]["status"] == "already-applied"


def test_a_batch_committed_from_another_session_is_seen_as_applied(spark, tmp_path):
    """Iceberg's caching catalog keeps loaded tables: a long-lived session must still see
    the commits another process made since, before it decides what to apply."""
    rng = random.Random(11)
    log, model, manifests = Binlog(tmp_path), {}, []
    store = FileCheckpointStore(tmp_path / "store")
    for _ in range(2):
        log.begin()
        random_batch(log, rng, model, 40, 0.0)
        manifests.append(log.publish())
    assert apply_manifests(spark, manifests[:1], MergeOptions(namespace="mj_stale", checkpoint_store=store.root,
                                                              checkpoint_key="st"))["batches"][0]["status"] == "applied"
    name = "lake.mj_stale.s__rnd"
    assert table_rows(spark, name)  # loaded (and cached) by this session's catalog
    # the same warehouse through a second catalog: its own cache, like another process
    prefix = "spark.sql.catalog.lake"
    for key in ("", ".type", ".warehouse"):
        spark.conf.set(f"{prefix}_other{key}", spark.conf.get(prefix + key))
    other = apply_manifests(spark, manifests[1:], MergeOptions(catalog="lake_other", namespace="mj_stale",
                                                               checkpoint_store=store.root, checkpoint_key="st"))
    assert other["batches"][0]["status"] == "applied"
    again = apply_manifests(spark, manifests, MergeOptions(namespace="mj_stale", checkpoint_store=store.root,
                                                           checkpoint_key="st"))
    assert [b["status"] for b in again["batches"]] == ["already-applied"] * 2
    spark.sql(f"REFRESH TABLE {name}")
    got = {k: tuple(r[c] for c in RCOLS) for k, r in table_rows(spark, name).items()}
    assert got == model
    ledger = spark.sql("SELECT batch_id FROM lake.mj_stale._binlog_batches").collect()
    assert sorted(r[0] for r in ledger) == sorted(m.dump_id for m in manifests)


# --------------------------------------------------------------------------- many tables


def test_a_batch_of_many_tables_is_committed_from_several_threads_each_commit_holding_the_batch_end(
        spark, tmp_path):
    maps = [table_map("s", f"m{t:02d}", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
                                         col(1, "v", C.MYSQL_TYPE_LONG)], table_id=t + 1)
            for t in range(12)]
    log, store = Binlog(tmp_path), FileCheckpointStore(tmp_path / "store")
    log.begin()
    for t, tm in enumerate(maps):
        log.rows(tm, "insert", [(i, t * 100 + i) for i in range(1, 6)])
    first = log.publish()
    log.begin()
    for t, tm in enumerate(maps):
        log.rows(tm, "update", [((1, t * 100 + 1), (1, -t))])
        log.rows(tm, "delete", [(2, t * 100 + 2)])
    second = log.publish()
    result = apply_manifests(spark, [first, second], MergeOptions(namespace="mj_many", checkpoint_store=store.root,
                                                                  checkpoint_key="many", parallel_tables=4))
    for batch, manifest in zip(result["batches"], (first, second)):
        assert [t["status"] for t in batch["tables"]] == ["committed"] * 12
        # listed in table order, whatever order the threads finished in
        assert [t["source"] for t in batch["tables"]] == [f"s.m{t:02d}" for t in range(12)]
        for t in range(12):  # each thread's commit carries its batch's end (a per-thread property)
            snap = spark.sql(f"SELECT summary FROM lake.mj_many.s__m{t:02d}.snapshots "
                             f"WHERE snapshot_id = {batch['tables'][t]['snapshot_id']}").collect()[0][0]
            assert snap["binlog.batch_id"] == manifest.dump_id
            assert json.loads(snap["binlog.checkpoint"]) == manifest.end.to_json()
    for t in range(12):
        assert {k: r["v"] for k, r in table_rows(spark, f"lake.mj_many.s__m{t:02d}").items()} == \
            {1: -t, 3: t * 100 + 3, 4: t * 100 + 4, 5: t * 100 + 5}
    assert store.load("many") == log.here()


def test_a_table_failing_in_a_parallel_batch_leaves_the_store_and_the_rerun_completes(spark, tmp_path,
                                                                                      monkeypatch):
    maps = [table_map("s", f"f{t}", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
                                     col(1, "v", C.MYSQL_TYPE_LONG)], table_id=t + 1) for t in range(6)]
    log, store = Binlog(tmp_path), FileCheckpointStore(tmp_path / "store")
    log.begin()
    for t, tm in enumerate(maps):
        log.rows(tm, "insert", [(1, t)])
    manifest = log.publish()
    real = merge_engine.apply_merge_table

    def fails_on_f3(spark_, work, *args, **kwargs):
        if work.table == "f3":
            raise RuntimeError("f3 failed")
        return real(spark_, work, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(merge_engine, "apply_merge_table", fails_on_f3)
        with pytest.raises(RuntimeError, match="f3 failed"):
            apply_manifests(spark, [manifest], MergeOptions(namespace="mj_pfail", checkpoint_store=store.root,
                                                            checkpoint_key="pfail", parallel_tables=3))
    assert store.load("pfail") is None  # neither the ledger row nor the store moved
    assert spark.table("lake.mj_pfail._binlog_batches").count() == 0
    again = apply_manifests(spark, [manifest], MergeOptions(namespace="mj_pfail", checkpoint_store=store.root,
                                                            checkpoint_key="pfail", parallel_tables=3))
    statuses = {t["source"]: t["status"] for t in again["batches"][0]["tables"]}
    assert statuses["s.f3"] == "committed"
    assert set(statuses.values()) <= {"committed", "already-applied"}
    for t in range(6):
        assert {k: r["v"] for k, r in table_rows(spark, f"lake.mj_pfail.s__f{t}").items()} == {1: t}
    assert store.load("pfail") == log.here()


def test_parallel_tables_below_one_is_refused(spark, tmp_path):
    with pytest.raises(MergeJobError, match="parallel_tables must be a whole number of at least 1, not 0"):
        apply_manifests(spark, [], MergeOptions(namespace="mj_zero", parallel_tables=0))


def test_applied_state_read_through_the_java_api_equals_the_metadata_tables(spark, tmp_path, monkeypatch):
    from tests import merging as merge_catalog

    tm = table_map("s", "st", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False)])
    log, store = Binlog(tmp_path), FileCheckpointStore(tmp_path / "store")
    for k in range(3):
        log.begin()
        log.rows(tm, "insert", [(k,)])
        apply_manifests(spark, [log.publish()], MergeOptions(namespace="mj_state", checkpoint_store=store.root,
                                                             checkpoint_key="st"))
    name, ledger = "lake.mj_state.s__st", "lake.mj_state._binlog_batches"
    spark.sql(f"DELETE FROM {name} WHERE id = 0")  # a commit without a checkpoint on top

    def read():
        return (applied_state(spark, name), applied_state(spark, ledger, "st"), applied_state(spark, ledger, "other"),
                merge_catalog.head_snapshot(spark, name))

    via_java = read()
    monkeypatch.setattr(merge_catalog, "iceberg_table", lambda spark_, table: None)
    assert read() == via_java
    state, in_ledger, other_stream, head_id = via_java
    assert state.checkpoint == log.here() and in_ledger.checkpoint == log.here()
    assert state.head == head_id and state.snapshot_id != head_id  # the DELETE on top holds no checkpoint
    assert state.committed_at_micros > 0
    assert other_stream.checkpoint is None and other_stream.head == in_ledger.head
