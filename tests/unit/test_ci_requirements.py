"""In CI (the environment variable CI true, which ``.ci/run`` sets), a missing MariaDB server,
Java 17 or Chromium fails the tests that need it instead of skipping them: a broken install
cannot pass as green. Elsewhere those tests are skipped."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import tests.conftest as conftest

ROOT = Path(__file__).resolve().parents[2]


def _outcome(require) -> str:
    try:
        require()
    except pytest.skip.Exception:
        return "skipped"
    except pytest.fail.Exception:
        return "failed"
    return "ran"


@pytest.fixture(params=["", "true"], ids=["local", "ci"])
def ci(request, monkeypatch):
    monkeypatch.setenv("CI", request.param)
    return "failed" if request.param else "skipped"


def test_a_missing_mariadb_server(monkeypatch, ci):
    monkeypatch.setattr(conftest, "mariadb_binaries", lambda *a, **k: (None, None))
    assert _outcome(conftest._require_mariadb) == ci


def test_a_missing_java_17(monkeypatch, ci):
    import airflow_provider_binlog.spark as spark_pkg
    from airflow_provider_binlog.spark import SparkRuntimeError

    def none():
        raise SparkRuntimeError("no Java 17 found")

    monkeypatch.setattr(spark_pkg, "find_java17_home", none)
    assert _outcome(conftest._require_spark) == ci


def test_a_missing_browser(monkeypatch, ci):
    browser = pytest.importorskip("tests.e2e.test_ui_browser")
    monkeypatch.setattr(browser, "_find", lambda *names: None)
    assert _outcome(browser._require_browser) == ci


@pytest.mark.parametrize("value, in_ci", [("true", True), ("1", True), ("yes", True), ("", False),
                                          ("false", False), ("0", False)])
def test_what_counts_as_ci(monkeypatch, value, in_ci):
    monkeypatch.setenv("CI", value)
    assert conftest._in_ci() is in_ci


def test_the_ci_script_runs_pytest_with_ci_set():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    exported = [i for i, line in enumerate(lines) if re.fullmatch(r'\s*export CI="\$\{CI:-true\}"\s*', line)]
    runs = [i for i, line in enumerate(lines)
            if re.search(r"-m pytest\b", line) and not line.lstrip().startswith(("#", "log"))]
    assert exported and runs and exported[0] < runs[0], (exported, runs)


def test_the_quickstart_setup_installs_what_the_quickstart_needs_and_runs_no_test():
    """README's first command: ``bash quickstart.sh`` installs the quickstart's Debian packages
    and the project's runtime extras, then runs the quickstart; the test suite is not run."""
    import subprocess

    script = (ROOT / "quickstart.sh").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "quickstart.sh")]).returncode == 0
    assert "pytest" not in script and "[test" not in script
    for package in ("mariadb-server", "openjdk-17-jre-headless", "python3-venv"):
        assert package in script
    assert "-c constraints.txt -e '.[spark,arrow-snapshots]' pyiceberg" in script
    assert script.rstrip().endswith('exec .venv/bin/python -m airflow_provider_binlog quickstart "$@"')
    readme = (ROOT / "README.md").read_text()
    assert "    bash quickstart.sh " in readme and "    bash .ci/run " in readme
    # both scripts share the install steps
    for path in (ROOT / "quickstart.sh", ROOT / ".ci" / "run"):
        assert ". .ci/lib.sh" in path.read_text()
