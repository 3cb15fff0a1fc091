"""The ``[binlog]`` configuration options and the connection extras the pages name exist, and
every one is documented: the options in the table of docs/operations.md with their defaults,
the ``mysql_binlog`` extras in the table of docs/airflow.md."""
from __future__ import annotations

import re

import pytest

from airflow_provider_binlog.provider_info import get_provider_info
from airflow_provider_binlog.utils.settings import OPTIONS
from tests.unit.docs.pages import ROOT, manual, name, parse, table

_NAMED = re.compile(r"\[binlog\]\s+([a-z0-9_]+)|AIRFLOW__BINLOG__([A-Z0-9_]+)")


def options_table() -> dict[str, str]:
    """Option -> default cell of the ``[binlog]`` table in docs/operations.md."""
    rows = table((ROOT / "docs" / "operations.md").read_text(), "option")
    return {row[0].strip("`"): row[1] for row in rows}


@pytest.mark.parametrize("page", manual(), ids=name)
def test_every_binlog_option_the_page_names_exists(page):
    text = parse(page).text
    unknown = []
    for match in _NAMED.finditer(text):
        option = match.group(1) or match.group(2).lower()
        if option not in OPTIONS:
            unknown.append(f"{name(page)}:{text.count(chr(10), 0, match.start()) + 1}: [binlog] {option}")
    assert unknown == []


def test_the_check_finds_the_options_the_pages_name():
    found = {m.group(1) or m.group(2).lower() for page in manual() for m in _NAMED.finditer(parse(page).text)}
    assert {"merge_engine", "dump_workers", "ui_sources", "spark_history_url"} <= found


def test_the_operations_page_lists_every_binlog_option_with_its_default():
    listed = options_table()
    assert sorted(listed) == sorted(OPTIONS)
    for option, (default, _text) in OPTIONS.items():
        assert listed[option].startswith(default if default else "(empty"), (option, listed[option])


def test_the_airflow_page_lists_every_extra_of_the_binlog_connection():
    rows = table((ROOT / "docs" / "airflow.md").read_text(), "extra")
    listed = [n for row in rows for n in re.findall(r"`(\w+)`", row[0])]
    binlog = next(c for c in get_provider_info()["connection-types"] if c["connection-type"] == "mysql_binlog")
    assert sorted(listed) == sorted(binlog["conn-fields"])
