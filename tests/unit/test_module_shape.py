"""The package's shape: small modules with one job, and a long function only with its reason
written beside it (a ``# long: ...`` comment right above its ``def`` or decorators)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_binlog"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_no_module_is_longer_than_600_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_every_function_over_80_lines_says_why_beside_its_def():
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES:  # type: ignore[operator]
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            above = first - 1
            while above >= 0 and lines[above].strip().startswith("#") and "# long:" not in lines[above]:
                above -= 1  # the reason may wrap over several comment lines
            if above < 0 or "# long:" not in lines[above]:
                unexplained.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert unexplained == []
