"""Every relative link of the README, the changelog and docs/ reaches a file, and its
``#anchor`` a heading of that page (GitHub's anchors); every docs page the package's messages
and docstrings name exists, with its anchor."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional
from urllib.parse import unquote

import pytest

from tests.unit.docs.pages import ROOT, manual, name, pages, parse, slug

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def broken(page: Path, target: str) -> Optional[str]:
    """Why a link of ``page`` leads nowhere, or None (links to other sites are not followed)."""
    if not target or _SCHEME.match(target):
        return None if target else "an empty link"
    path, _, anchor = target.partition("#")
    destination = (page.parent / unquote(path)).resolve() if path else page
    if ROOT not in destination.parents and destination != ROOT:
        return "outside the repository"
    if not destination.exists():
        return f"no file {name(destination) if ROOT in destination.parents else destination}"
    if anchor and destination.suffix == ".md" and unquote(anchor) not in parse(destination).anchors:
        return f"no heading with the anchor #{anchor} in {name(destination)}"
    return None


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_relative_link_reaches_a_file_and_a_heading_of_it(page):
    problems = [f"{name(page)}:{link.line}: {link.target}: {why}" for link in parse(page).links
                if (why := broken(page, link.target))]
    assert problems == []


def test_the_pages_link_to_each_other_and_to_anchors():
    """The check sees the links: the README's to docs/ pages and their anchors."""
    targets = {link.target for link in parse(ROOT / "README.md").links}
    assert {"docs/merge.md#direct-commits", "docs/configuration.md#which-engine-runs-my-merge",
            "docs/README.md", "docs/ui-screenshot.png"} <= targets


def linked_from(page: Path) -> set[Path]:
    """The files a page's relative links reach."""
    return {(page.parent / unquote(link.target.partition("#")[0])).resolve() for link in parse(page).links
            if link.target and not _SCHEME.match(link.target) and not link.target.startswith("#")}


INDEX = ROOT / "docs" / "README.md"


def test_the_readme_links_the_manual_and_the_contributor_guide():
    assert {INDEX, ROOT / "CONTRIBUTING.md", ROOT / "docs" / "glossary.md"} <= linked_from(ROOT / "README.md")


def test_every_docs_page_is_linked_from_the_table_of_contents():
    """docs/README.md lists every page under docs/, how-to guides included."""
    linked = linked_from(INDEX)
    assert [name(p) for p in manual() if ROOT / "docs" in p.parents and p != INDEX and p not in linked] == []


def test_the_table_of_contents_has_the_four_parts():
    headings = [line[3:].strip() for line in INDEX.read_text().splitlines() if line.startswith("## ")]
    assert headings == ["How-to guides", "Reference", "Explanation", "Glossary"]


@pytest.mark.parametrize("heading, anchor", [
    ("Running on a Spark cluster / Iceberg catalog", "running-on-a-spark-cluster--iceberg-catalog"),
    ("Where an initial load's time goes", "where-an-initial-loads-time-goes"),
    ("Configuration: the [binlog] section", "configuration-the-binlog-section"),
    ("make_cdc_dags", "make_cdc_dags"),
    ("Local stack: MySQL, Airflow, Spark and PostgreSQL in containers",
     "local-stack-mysql-airflow-spark-and-postgresql-in-containers"),
])
def test_a_headings_anchor_is_githubs(heading, anchor):
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n## Notes\n\n## `Notes`\n")
    assert parse(page).anchors == {"notes", "notes-1", "notes-2"}


_DOCS_REFERENCE = re.compile(r"\b((?:docs/)[\w.-]+\.md|README\.md|CHANGELOG\.md)(?:#([\w-]+))?")


def test_every_docs_page_the_package_names_exists_with_its_anchor():
    """Error hints and docstrings send readers to docs/*.md pages (and their anchors)."""
    named, problems = 0, []
    for source in sorted((ROOT / "airflow_provider_binlog").rglob("*.py")):
        for number, line in enumerate(source.read_text().splitlines(), 1):
            for match in _DOCS_REFERENCE.finditer(line):
                named += 1
                why = broken(ROOT / "README.md", match.group(0))
                if why:
                    problems.append(f"{name(source)}:{number}: {match.group(0)}: {why}")
    assert problems == [] and named > 10
