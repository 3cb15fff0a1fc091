"""Staging in worker processes (``StagingWriter(workers=N)``): the same rows as staging in
the dump's own process, the files of each layout in order, a worker's error raised in the
dump's process with its position, and no worker outliving a dump that was killed."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.codec import CorruptEventError, read_binlog_file
from airflow_provider_binlog.codec.decoder import EventDecoder
from airflow_provider_binlog.codec.events import RowsEvent
from airflow_provider_binlog.codec.rows import DeferredRows
from airflow_provider_binlog.capture.dump import default_workers
from airflow_provider_binlog.staging import StagingWriter
from tests.corpus import CORPUS, corpus_file

SAKILA = "osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.sakila"  # 1374 rows events, 16 tables
MSMP = "shortishly__msmp/test/binlog.000001"  # 7056 rows events

if not corpus_file(SAKILA).exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)


def rows_events(name: str):
    decoder = EventDecoder(name, defer_rows=True)
    return [e for e in read_binlog_file(corpus_file(name), decoder=decoder)
            if isinstance(e, RowsEvent) and e.deferred is not None]


def stage(directory, events, workers: int, **options):
    writer = StagingWriter(directory, workers=workers, **options)
    try:
        for event in events:
            writer.add_rows(event, binlog_file="mysql-bin.000007", gtid=None, txn=f"t{event.pos}")
        return writer.publish(dump_id="d", start={}, end={}, server={})
    except BaseException:
        writer.abort()
        raise


def table_contents(manifest) -> dict:
    out = {}
    for table in manifest.tables:
        data = pa.concat_tables([read_parquet(p) for p in manifest.files(table)])
        out[(table["schema"], table["table"])] = (
            table["rows"], table["fingerprint"],
            data.sort_by([("_binlog_pos", "ascending"), ("_row", "ascending")]).to_pylist())
    return out


@pytest.mark.parametrize("name", [SAKILA, MSMP])
@pytest.mark.parametrize("workers", [1, 3])
def test_workers_stage_the_same_rows_as_the_dump_process(name, workers, tmp_path):
    events = rows_events(name)
    alone = stage(tmp_path / "alone", events, 0)
    shared = stage(tmp_path / "shared", events, workers, row_group_rows=300)
    assert table_contents(shared) == table_contents(alone)
    assert shared.data["invalid_temporals"] == alone.data["invalid_temporals"]
    for table in shared.tables:
        names = [f["path"].rsplit("/", 1)[1] for f in table["files"]]
        assert names == sorted(names)  # generation, then worker
        assert {n.rsplit("-", 1)[1] for n in names} <= {f"{w}.parquet" for w in range(workers)}
        assert sum(f["rows"] for f in table["files"]) == sum(table["rows"].values())


def test_workers_report_their_memory_and_use_an_allocator_that_returns_memory(tmp_path):
    writer = StagingWriter(tmp_path, workers=2)
    for event in rows_events(SAKILA)[:300]:
        writer.add_rows(event, binlog_file="mysql-bin.000007", gtid=None, txn="t")
    writer.publish(dump_id="d", start={}, end={}, server={})
    result = writer.workers_result
    assert len(result.peak_rss_mb) == 2 and all(mb > 10 for mb in result.peak_rss_mb)
    assert set(result.allocators) <= {"jemalloc", "system"} and len(result.allocators) == 2


def test_files_of_a_new_layout_follow_those_of_the_previous_one(tmp_path):
    events = [e for e in rows_events(SAKILA) if e.table_map.table == "payment"]
    assert len(events) >= 20
    # from the middle on, the last column is renamed (same bytes, a new layout generation)
    tm = events[0].table_map
    renamed = dataclasses.replace(tm, columns=tm.columns[:-1] + (
        dataclasses.replace(tm.columns[-1], name="changed_at"),))
    half = len(events) // 2
    for i, event in enumerate(events[half:], half):
        d = event.deferred
        events[i] = dataclasses.replace(event, table_map=renamed, deferred=DeferredRows.rebuild(
            renamed, d.data, d.start, d.end, d.present, d.present_after, d.flavor, d.source,
            d.pos, {}))
    manifest = stage(tmp_path / "s", events, 2, row_group_rows=50)
    [table] = manifest.tables
    generations = [f["path"].rsplit("/", 1)[1].split("-")[1] for f in table["files"]]
    assert generations == sorted(generations) and set(generations) == {"00000", "00001"}
    layouts = [pq.read_schema(p).field("_after").type[len(tm.columns) - 1].name
               for p in manifest.files(table)]
    assert layouts == [tm.columns[-1].name if g == "00000" else "changed_at" for g in generations]
    assert [c["name"] for c in table["columns"]][-1] == "changed_at"


def test_a_worker_error_is_raised_by_the_dump_with_its_position(tmp_path):
    events = rows_events(SAKILA)
    victim = events[len(events) // 2]
    d = victim.deferred
    cut = DeferredRows.rebuild(d.table_map, d.data, d.start, d.end - 1, d.present, d.present_after,
                               d.flavor, d.source, d.pos, {})
    events[len(events) // 2] = dataclasses.replace(victim, deferred=cut)
    writer = StagingWriter(tmp_path, workers=2)
    pids = [p.pid for p in writer._pool._procs]
    with pytest.raises(CorruptEventError) as info:
        for event in events:
            writer.add_rows(event, binlog_file="mysql-bin.000007", gtid=None, txn="t")
        writer.publish(dump_id="d", start={}, end={}, server={})
    writer.abort()
    assert (info.value.source, info.value.offset) == (SAKILA, victim.pos)
    assert "does not match its TABLE_MAP" in str(info.value) or "row data of" in str(info.value)
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".publish")]
    assert not [p for p in pids if _alive(p)], "staging workers left running"


def test_workers_exit_when_the_dump_process_is_killed(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from tests.unit.staging.test_staging_workers import rows_events, SAKILA
        from airflow_provider_binlog.staging import StagingWriter
        writer = StagingWriter({str(tmp_path)!r}, workers=2)
        for event in rows_events(SAKILA)[:200]:
            writer.add_rows(event, binlog_file="mysql-bin.000007", gtid=None, txn="t")
        print(" ".join(str(p.pid) for p in writer._pool._procs), flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "a staging worker outlived its dump"
    # its work directory is a dead dump's: the next writer removes it
    StagingWriter(tmp_path).abort()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".incomplete-")]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_default_workers_follow_the_cores_and_the_environment(monkeypatch):
    monkeypatch.setenv("AIRFLOW__BINLOG__DUMP_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.setenv("AIRFLOW__BINLOG__DUMP_WORKERS", "0")
    assert default_workers() == 0
    monkeypatch.delenv("AIRFLOW__BINLOG__DUMP_WORKERS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0})
    assert default_workers() == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(16)))
    assert default_workers() == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1})
    assert default_workers() == 2


def test_a_daemonic_process_stages_in_its_own_process(tmp_path, monkeypatch, caplog):
    from types import SimpleNamespace

    from airflow_provider_binlog.staging import writer as writer_module

    monkeypatch.setattr(writer_module.multiprocessing, "current_process",
                        lambda: SimpleNamespace(daemon=True))
    events = rows_events(SAKILA)[:50]
    with caplog.at_level("WARNING"):
        manifest = stage(tmp_path / "s", events, 2)
    assert "cannot start 2 staging workers" in caplog.text
    names = [f["path"].rsplit("/", 1)[1] for t in manifest.tables for f in t["files"]]
    assert names and all(n == "part-00000.parquet" for n in names)
    assert table_contents(manifest) == table_contents(stage(tmp_path / "alone", events, 0))
