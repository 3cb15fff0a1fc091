"""The layer rule: a module imports only its own layer and the layers below it, and the merge
job's planning modules never import pyspark. Checked on the import statements of every module
of the package (also those inside functions), without importing anything."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_binlog"

#: Bottom to top. A module belongs to the layer of the longest prefix its dotted name starts with.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("errors", "common", "codec", "checkpoints")),
    ("replica", ("replica",)),
    ("staging", ("staging", "schema_history")),
    ("capture", ("capture",)),
    ("merge planning", ("merge",)),
    ("iceberg java", ("merge.lake",)),
    ("spark", ("spark", "merge.spark", "merge.submit")),
    ("airflow", ("utils", "hooks", "operators", "sensors", "triggers", "plugins", "cli", "local", "")),
]

#: The modules at the package root: the one error root (foundation), and the public faces of
#: the Airflow layer (the DAG factory, the provider info, ``python -m``). Everything else lives
#: in the package of its layer.
ROOT_MODULES = {"", "errors", "dags", "provider_info", "__main__"}


def layer_of(module: str) -> int:
    matches = [(len(prefix), rank) for rank, (_name, prefixes) in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".") or prefix == ""]
    return max(matches)[1]


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(module: str, path: Path, *, top_level: bool = False) -> set[str]:
    """The package-internal modules ``module`` imports (dotted, without the package name), and
    the external top-level names under a ``!`` prefix; with ``top_level``, only the imports run
    when the module is imported (not those inside functions)."""
    tree = ast.parse(path.read_text())
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in (tree.body if top_level else ast.walk(tree)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                if name.startswith("airflow_provider_binlog."):
                    found.add(name[len("airflow_provider_binlog."):])
                elif name != "airflow_provider_binlog":
                    found.add("!" + name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("airflow_provider_binlog"):
                target = node.module[len("airflow_provider_binlog"):].lstrip(".")
            else:
                found.add("!" + (node.module or "").split(".")[0])
                continue
            known = modules()
            for alias in node.names:  # "from . import x" names a module when x is one
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in known else target)
    return found


def test_every_module_imports_only_its_layer_and_the_layers_below():
    known = modules()
    upward = []
    for module, path in known.items():
        own = layer_of(module)
        for target in imports_of(module, path):
            if target.startswith("!") or target not in known and target != "":
                continue
            if layer_of(target) > own:
                upward.append(f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[layer_of(target)][0]})")
    assert upward == []


def _without_spark() -> list[str]:
    """The merge's planning and folding modules and the Java engine's, whole: every module of
    ``merge`` but the Spark engine's and its entry point."""
    return sorted(m for m in modules() if (m == "merge" or m.startswith("merge."))
                  and not m.startswith(("merge.spark", "merge.submit")))


@pytest.mark.parametrize("module", _without_spark())
def test_the_merge_planning_folding_and_java_engine_modules_import_no_pyspark(module):
    known = modules()
    seen, todo, externals = set(), [module], set()
    while todo:  # the module and every package module it reaches
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for target in imports_of(current, known[current]):
            if target.startswith("!"):
                externals.add(target[1:])
            elif target in known:
                todo.append(target)
    assert "pyspark" not in externals and "airflow" not in externals, sorted(seen)


def test_the_package_root_holds_only_the_error_root_and_the_public_faces():
    assert {module for module in modules() if "." not in module and (PACKAGE / f"{module}.py").exists()
            or module == ""} == ROOT_MODULES


def test_the_layer_table_names_every_module_and_the_check_sees_upward_imports():
    known = modules()
    assert {"codec.decoder", "merge.lake.batch", "merge.spark.engine", "merge.batches", "plugins.status"} <= set(known)
    assert layer_of("merge.spark.engine") > layer_of("merge.lake.batch") > layer_of("merge.batches") \
        > layer_of("capture.dump") > layer_of("codec.rows")
    assert {"merge.lake.java", "merge.lake.direct_commit", "merge.staged_fold", "merge.schema_plan"} <= \
        set(_without_spark())
    # the check reads relative imports as the interpreter does
    assert "merge.spark.collapse" in imports_of("merge.spark.apply", known["merge.spark.apply"])
    assert "spark" in {t.split(".")[0] for t in imports_of("merge.spark.apply", known["merge.spark.apply"])}


def test_every_error_class_of_the_package_derives_from_the_one_root():
    """Every exception class defined in the package derives from ProviderError (checked on the
    imported classes, so a base named in another module counts)."""
    import importlib
    import inspect

    from airflow_provider_binlog.errors import ProviderError

    skip_prefixes = ("local.quickstart_dag", "local.watchdog")  # a DAG file and a program
    outside = []
    seen = 0
    for module in modules():
        if not module or module.startswith(skip_prefixes) or module == "__main__":
            continue
        mod = importlib.import_module(f"airflow_provider_binlog.{module}")
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == mod.__name__ \
                    and not name.startswith("_"):  # private signals between functions are not errors
                seen += 1
                if not issubclass(obj, ProviderError):
                    outside.append(f"{module}.{name}")
    assert seen > 30 and outside == []



def test_no_two_modules_import_each_other_at_import_time():
    """No cycle among the imports run when modules are imported. A package importing its own
    modules and a module importing its enclosing package do not count: that is how packages
    re-export."""
    known = modules()
    graph = {module: {t for t in imports_of(module, path, top_level=True)
                      if t in known and t != module and not module.startswith(t + ".")
                      and not t.startswith(module + ".")}
             for module, path in known.items()}
    cycles: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []
