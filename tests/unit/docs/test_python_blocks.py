"""The Python of the README and docs/ (```python blocks) compiles, imports only what exists,
calls the package with arguments it takes, and, when it is a whole DAG file or snippet, runs
against the package: a block that calls ``make_cdc_dags`` builds the DAGs.

A block may leave things out: ``...`` for arguments given elsewhere, or a first-line comment
``# partial: <what it takes from elsewhere>`` when it uses a name (a task of another example)
that it does not define. Such blocks are compiled and checked, not run."""
from __future__ import annotations

import ast
import builtins
import importlib
import re

import pytest

from tests.unit.docs.arguments import callables, calls, unknown_keywords
from tests.unit.docs.pages import ROOT, Block, manual, name, parse

PARTIAL = re.compile(r"^\s*#\s*partial:", re.M)
BLOCKS = [(page, block) for page in manual() for block in parse(page).blocks if block.language == "python"]
IDS = [f"{name(page)}:{block.line}" for page, block in BLOCKS]


def tree_of(page, block: Block) -> ast.Module:
    return ast.parse(block.code, f"{name(page)}:{block.line}")


def undefined(tree: ast.AST) -> set[str]:
    """The names the code reads but neither imports nor assigns (builtins aside)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return used - bound - set(dir(builtins))


def elided(tree: ast.AST) -> bool:
    """Whether the code leaves arguments out with ``...``."""
    return any(isinstance(node, ast.Constant) and node.value is Ellipsis for node in ast.walk(tree))


def uses_the_package(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.ImportFrom) and (node.module or "").startswith("airflow_provider_binlog")
               or isinstance(node, ast.Import) and any(a.name.startswith("airflow_provider_binlog")
                                                       for a in node.names)
               for node in ast.walk(tree))


def test_the_pages_hold_python_blocks():
    assert {"docs/airflow.md", "docs/configuration.md", "docs/merge.md", "docs/snapshots.md",
            "docs/data-contract.md"} <= {i.rsplit(":", 1)[0] for i in IDS}


@pytest.mark.parametrize("page, block", BLOCKS, ids=IDS)
def test_every_python_block_compiles(page, block):
    compile(block.code, f"{name(page)}:{block.line}", "exec")


@pytest.mark.parametrize("page, block", BLOCKS, ids=IDS)
def test_every_python_block_imports_only_what_exists(page, block):
    missing = []
    for node in ast.walk(tree_of(page, block)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                try:
                    importlib.import_module(alias.name)
                except ImportError as exc:
                    missing.append(f"import {alias.name}: {exc}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            try:
                module = importlib.import_module(node.module)
            except ImportError as exc:
                missing.append(f"from {node.module}: {exc}")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    missing.append(f"from {node.module} import {alias.name}")
    assert missing == []


@pytest.mark.parametrize("page, block", BLOCKS, ids=IDS)
def test_every_python_block_calls_the_package_with_arguments_it_takes(page, block):
    assert unknown_keywords(tree_of(page, block)) == []


@pytest.mark.parametrize("page, block", BLOCKS, ids=IDS)
def test_a_block_that_uses_a_name_it_does_not_define_says_it_is_partial(page, block):
    tree = tree_of(page, block)
    marked = bool(PARTIAL.search(block.code))
    missing = undefined(tree)
    if marked:
        assert missing or elided(tree), "nothing is left out: drop the '# partial:' comment"
    else:
        assert missing == set() or elided(tree), \
            "import what the block uses, or say what it takes from elsewhere in a first '# partial: ...' line"


RUNNABLE = [(page, block) for page, block in BLOCKS
            if uses_the_package(tree_of(page, block)) and not elided(tree_of(page, block))
            and not PARTIAL.search(block.code)]


def test_the_whole_dag_snippets_are_run():
    """The README's production DAG, the factory's example in airflow.md and its sensor and dump
    tasks, and the how-to's DAG file are among them."""
    called = {(name(page), c) for page, block in RUNNABLE for c, _ in calls(tree_of(page, block))}
    assert {("README.md", "make_cdc_dags"), ("docs/airflow.md", "make_cdc_dags"),
            ("docs/airflow.md", "BinlogDumpOperator"), ("docs/airflow.md", "BinlogPositionSensor"),
            ("docs/configuration.md", "make_cdc_dags"), ("docs/how-to/deploy.md", "make_cdc_dags")} <= called


def test_the_readmes_production_dag_is_a_whole_dag_file_that_builds_both_dags(tmp_path, monkeypatch):
    """The README's one Python block is a DAG file as it stands: run as the DAG processor runs
    it (no server, no connection looked up), it makes the source's two DAGs, at most 20 lines."""
    from airflow.sdk import DAG

    readme = ROOT / "README.md"
    (block,) = [b for b in parse(readme).blocks if b.language == "python"]
    assert (readme, block) in RUNNABLE
    assert len(block.code.splitlines()) <= 20
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme_dag"}
    exec(compile(block.code, f"README.md:{block.line}", "exec"), namespace)
    dags = sorted(v.dag_id for v in namespace.values() if isinstance(v, DAG))
    assert dags == ["binlog_backfill__shop", "binlog_cdc__shop"]
    # the commands after it name those DAGs
    for dag_id in dags:
        assert f"airflow dags trigger {dag_id}" in readme.read_text() or f"airflow dags unpause {dag_id}" \
            in readme.read_text()


@pytest.mark.parametrize("page, block", RUNNABLE, ids=[f"{name(p)}:{b.line}" for p, b in RUNNABLE])
def test_every_whole_python_block_that_uses_the_package_runs(page, block, tmp_path, monkeypatch):
    """Run as a DAG file is parsed; tasks outside a DAG of their own go into one."""
    from airflow.sdk import DAG

    monkeypatch.chdir(tmp_path)
    code = compile(block.code, f"{name(page)}:{block.line}", "exec")
    namespace: dict = {"__name__": "docs_example"}
    makes_dags = any(called == "make_cdc_dags" for called, _ in calls(tree_of(page, block)))
    if makes_dags:
        exec(code, namespace)
        dags = [v for v in namespace.values() if isinstance(v, DAG)]
        dags += [d for v in namespace.values() if isinstance(v, tuple) for d in v if isinstance(d, DAG)]
        assert dags or "make_cdc_dags(" in block.code
    else:
        with DAG(dag_id="docs_example", schedule=None):
            exec(code, namespace)
    assert set(callables()) & set(namespace), "the block names none of the package's callables"


def test_python_in_other_blocks_is_fenced_as_python():
    """Code that uses the package sits in ```python blocks, where the tests above see it."""
    unfenced = []
    for page in manual():
        for block in parse(page).blocks:
            if block.language == "python":
                continue
            try:
                tree = ast.parse(block.code)
            except SyntaxError:
                continue
            if uses_the_package(tree) or any(True for _ in calls(tree)):
                unfenced.append(f"{name(page)}:{block.line}")
    assert unfenced == []
