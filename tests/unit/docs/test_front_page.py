"""The README is a front page: short, the release state before the first install command, what
the quickstart needs; the contributor material is in CONTRIBUTING.md."""
from __future__ import annotations

import re

from tests.unit.docs.pages import ROOT, parse

README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"


def test_the_readme_stays_short():
    assert len(README.read_text().splitlines()) <= 150


def test_contributing_holds_the_test_command():
    text = CONTRIBUTING.read_text()
    assert "    bash .ci/run\n" in text
    assert "    .venv/bin/python -m pytest\n" in text


def test_the_readme_says_there_is_no_release_before_its_first_install_command():
    text = README.read_text()
    first_install = text.index("pip install")
    assert re.search(r"No\s+release\s+is\s+published", text[:first_install])
    assert "python -m build" in text[:first_install]
    assert re.search(r"pip install '?dist/airflow_provider_binlog-\S+\.whl\[", text)


def test_the_readme_says_what_the_quickstart_needs():
    text = " ".join(README.read_text().split())
    assert "bash quickstart.sh" in text
    assert re.search(r"needs Debian.{0,120}root or passwordless `sudo`", text)


def test_the_readme_names_each_merge_engine_in_its_choices():
    rows = [line for line in README.read_text().splitlines() if line.startswith("|")]
    for engine in ("`auto`", "`spark`", "`iceberg-java`"):
        assert any(engine in row for row in rows), engine
    assert "iceberg-java+spark" in README.read_text()


def test_the_long_development_material_is_not_in_the_readme():
    text = README.read_text()
    assert "## Development" not in text and "mariadb_factory" not in text
    assert parse(CONTRIBUTING).anchors >= {"running-the-tests", "tests-by-layer", "fixtures"}
