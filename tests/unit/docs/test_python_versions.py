"""The Python versions the README, docs/ and pyproject.toml claim are the one the tests run on,
or the claim says the package "installs on" them (``requires-python``). The support matrix is
docs/support.md; CONTRIBUTING.md says which Python the tests run on."""
from __future__ import annotations

import re
import sys
import tomllib

import pytest

from tests.conftest import _in_ci
from tests.unit.docs.pages import ROOT, manual, name, parse, table

_RANGE = re.compile(r"\b3\.(\d+)\s+(?:to\s+3\.(\d+)|or\s+newer)\b")


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


SUPPORT = ROOT / "docs" / "support.md"


def python_of_the_tests() -> str:
    """The Python the support matrix says everything is tested with."""
    rows = table(SUPPORT.read_text(), "component")
    cell = next(row[2] for row in rows if row[0] == "Python")
    match = re.match(r"(3\.\d+) \(everything\)", cell)
    assert match, cell
    return match.group(1)


@pytest.mark.parametrize("page", manual(), ids=name)
def test_a_range_of_python_versions_is_claimed_only_as_installs_on(page):
    text = parse(page).text
    claims = [f"{name(page)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in _RANGE.finditer(text)
              if re.search(r"\bPython\b", text[max(0, m.start() - 60):m.start()])
              and not re.search(r"installs\s+on\s+(?:Python\s+)?$", text[max(0, m.start() - 20):m.start()])]
    assert claims == []


@pytest.mark.parametrize("page", [ROOT / "README.md", SUPPORT], ids=name)
def test_the_installs_on_range_starts_at_requires_python(page):
    text = page.read_text()
    lowest = re.fullmatch(r">=3\.(\d+)", project()["requires-python"]).group(1)
    starts = {m.group(1) for m in re.finditer(r"installs\s+on\s+(?:Python\s+)?3\.(\d+)\s+to\s+3\.\d+", text)}
    assert starts == {lowest}


def test_the_readme_names_the_tested_python():
    assert re.search(rf"tested\s+on\s+{re.escape(python_of_the_tests())}\b", (ROOT / "README.md").read_text())


def test_the_classifiers_name_only_the_python_the_tests_run_on():
    versions = {c.rsplit("::", 1)[1].strip() for c in project()["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert versions == {python_of_the_tests()}


def test_the_tests_run_on_the_python_the_readme_says_they_do():
    if not _in_ci():
        pytest.skip("what CI runs on; elsewhere any interpreter may run the tests")
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == python_of_the_tests()
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert re.search(rf"The\s+tests\s+run\s+on\s+Python\s+{re.escape(python_of_the_tests())}\.", contributing)
