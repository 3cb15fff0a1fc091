"""The Spark driver's class-data-sharing archive: written once, checked, then mapped."""
from __future__ import annotations

import os
import subprocess

import pytest

from airflow_provider_binlog.spark import class_archive as ca
from airflow_provider_binlog.spark.runtime import find_java17_home


@pytest.fixture(scope="module")
def java_home() -> str:
    try:
        return find_java17_home()
    except Exception:  # noqa: BLE001
        pytest.skip("no Java 17 here")


def _run_java(java_home: str, options: str) -> None:
    """A JVM run with ``options`` as a driver gets them (here: just ``-version``)."""
    subprocess.run([os.path.join(java_home, "bin", "java"), *options.split(), "-version"],
                   check=True, capture_output=True)


def test_the_first_run_writes_the_archive_and_the_next_maps_it(tmp_path, java_home):
    first = ca.prepare_archive({}, java_home, str(tmp_path))
    assert first is not None and first.writing is not None
    assert first.options.startswith(f"-XX:ArchiveClassesAtExit={first.writing} ")
    _run_java(java_home, first.options)
    assert first.finish(succeeded=True) is True
    assert os.path.isfile(first.path) and not os.path.exists(first.writing)

    second = ca.prepare_archive({}, java_home, str(tmp_path))
    assert second is not None and second.writing is None and second.path == first.path
    assert second.options.startswith(f"-XX:SharedArchiveFile={first.path} ")
    assert second.finish(succeeded=True) is False  # nothing written, nothing to keep
    assert os.path.isfile(first.path)


def test_a_truncated_archive_is_not_kept_since_a_jvm_mapping_it_crashes_and_leaves_no_crash_report(
        tmp_path, java_home, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    archive = ca.prepare_archive({}, java_home, str(tmp_path))
    _run_java(java_home, archive.options)
    with open(archive.writing, "rb") as f:
        head = f.read(os.path.getsize(archive.writing) // 2)
    with open(archive.writing, "wb") as f:
        f.write(head)
    assert archive.finish(succeeded=True) is False
    assert not os.path.exists(archive.path) and not os.path.exists(archive.writing)
    assert os.listdir(cwd) == []  # the checking JVM's hs_err file went with its scratch directory


def test_the_archive_of_a_failed_run_is_deleted(tmp_path, java_home):
    archive = ca.prepare_archive({}, java_home, str(tmp_path))
    _run_java(java_home, archive.options)
    assert archive.finish(succeeded=False) is False
    assert os.listdir(tmp_path) == []


def test_other_jars_get_another_archive_and_the_drivers_own_sharing_options_are_kept(tmp_path, java_home):
    plain = ca.archive_name(java_home, {})
    assert ca.archive_name(java_home, {"spark.jars": "/x/iceberg.jar"}) != plain
    assert ca.archive_name(java_home, {"spark.driver.extraClassPath": "/x"}) != plain
    assert ca.archive_name(java_home, {"spark.executor.memory": "2g"}) == plain
    assert ca.archive_name(java_home, {}, prefix="iceberg-jvm-").startswith("iceberg-jvm-")
    mine = {ca.DRIVER_OPTIONS: "-Xshare:off"}
    assert ca.prepare_archive(mine, java_home, str(tmp_path)) is None
    assert ca.with_archive(mine, None) == mine
    archive = ca.prepare_archive({ca.DRIVER_OPTIONS: "-Xmx2g"}, java_home, str(tmp_path))
    merged = ca.with_archive({ca.DRIVER_OPTIONS: "-Xmx2g"}, archive)[ca.DRIVER_OPTIONS]
    assert merged == f"-Xmx2g {archive.options}"


def test_no_java_no_archive(tmp_path):
    assert ca.prepare_archive({}, None, str(tmp_path)) is None
    assert ca.prepare_archive({}, str(tmp_path), str(tmp_path)) is None


def test_a_cache_directory_that_cannot_be_made_gives_no_archive(tmp_path, java_home):
    (tmp_path / "file").write_text("x")
    assert ca.prepare_archive({}, java_home, str(tmp_path / "file" / "cache")) is None


def test_archives_left_by_dead_writers_are_swept_after_an_hour(tmp_path, java_home):
    name = ca.archive_name(java_home, {})
    stale, fresh = tmp_path / f"{name}.aaaa.tmp", tmp_path / f"{name}.bbbb.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (0, 0))
    ca.prepare_archive({}, java_home, str(tmp_path))
    assert not stale.exists() and fresh.exists()
