"""Every argument the README and docs/ name exists: in inline calls (`MergeSettings(maintenance=True)`)
and where the prose ties an argument to its owner (`jars` of `SparkSettings`, the factory's
`staging`, `direct_deletes="equality"` on `MergeSettings`)."""
from __future__ import annotations

import ast
import re
from typing import Iterator

import pytest

from tests.unit.docs.arguments import accepted, callables, unknown_keywords
from tests.unit.docs.pages import manual, name, parse

#: How the prose names the owner of an argument.
OWNERS = {
    "the factory": "make_cdc_dags", "the DAG factory": "make_cdc_dags", "the `make_cdc_dags` factory": "make_cdc_dags",
    "the merge operator": "BinlogMergeOperator", "the dump operator": "BinlogDumpOperator",
    "the snapshot operator": "BinlogSnapshotOperator", "the sensor": "BinlogPositionSensor",
}
_OWNER = r"(" + "|".join(re.escape(o).replace(r"\ ", r"\s+") for o in sorted(OWNERS, key=len, reverse=True)) \
    + r"|`\w+`)"
_NAMES = r"((?:`[^`\n]+`(?:\s+and\s+|\s+or\s+|/))*`[^`\n]+`)"
#: "`a` / `a=...` (and `b`) of|on|for <owner>" and "<owner>'s `a`"
_BEFORE = re.compile(_NAMES + r"\s+(?:of|on|for)\s+" + _OWNER)
_AFTER = re.compile(_OWNER + r"'s\s+" + _NAMES)


def owner_of(text: str) -> str:
    return OWNERS.get(" ".join(text.split())) or text.strip("`")


def identifiers(names: str) -> list[str]:
    """The argument names in "`a`", "`a=...`", "`a` and `b`" ("`x.y`", "`\"k\": v`" name none)."""
    out = []
    for span in re.findall(r"`([^`\n]+)`", names):
        match = re.fullmatch(r"([a-z_][a-z0-9_]*)(?:\s*=.*)?", span, re.S)
        if match:
            out.append(match.group(1))
    return out


def named_arguments(page) -> Iterator[tuple[int, str, str]]:
    """``(line, callable, argument)`` for each argument the page ties to one of the package's
    callables in its prose."""
    known = callables()
    text = parse(page).text
    for pattern, owner_group, names_group in ((_BEFORE, 2, 1), (_AFTER, 1, 2)):
        for match in pattern.finditer(text):
            owner = owner_of(match.group(owner_group))
            if owner in known:
                line = text.count("\n", 0, match.start()) + 1
                for argument in identifiers(match.group(names_group)):
                    yield line, owner, argument


def inline_calls(page) -> Iterator[tuple[int, ast.AST]]:
    """The page's inline code that parses as a call of one of the package's callables."""
    known = callables()
    for item in parse(page).inline:
        if "(" not in item.code or item.code.split("(")[0].split(".")[-1] not in known:
            continue
        try:
            yield item.line, ast.parse(item.code, mode="eval")
        except SyntaxError:
            continue


@pytest.mark.parametrize("page", manual(), ids=name)
def test_every_argument_the_page_names_exists(page):
    unknown = [f"{name(page)}:{line}: {owner} takes no argument {argument!r}"
               for line, owner, argument in named_arguments(page) if argument not in accepted(owner)]
    unknown += [f"{name(page)}:{line}: {call}" for line, tree in inline_calls(page)
                for call in unknown_keywords(tree)]
    assert unknown == []


def test_the_check_reads_the_arguments_the_prose_and_the_inline_calls_name():
    named = {(name(page), owner, argument) for page in manual() for _, owner, argument in named_arguments(page)}
    assert {("docs/configuration.md", "SparkSettings", "jars"),
            ("docs/merge.md", "MergeSettings", "direct_deletes"),
            ("docs/merge.md", "MergeSettings", "direct_max_bytes"),
            ("docs/snapshots.md", "SnapshotSettings", "read_connections")} <= named
    inline = {(name(page), ast.unparse(tree)) for page in manual() for _, tree in inline_calls(page)}
    assert ("docs/airflow.md", "BinlogPositionSensor(skip_on_timeout=True)") in inline
    assert ("docs/merge.md", "MergeSettings(maintenance=True)") in inline
