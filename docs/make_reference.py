"""Writes docs/reference.md from the code: every argument of the DAG factory and of the
operators, sensors, triggers and hooks the provider registers (their signatures and the
``:param`` lines of their docstrings), the extras of its connection types and the options of
its ``[binlog]`` configuration section.

    python docs/make_reference.py          # writes docs/reference.md
    python docs/make_reference.py --check  # exits 1 when docs/reference.md is not what it writes

Run it from the repository's root with the package importable (an editable install, or the
root on ``sys.path``, which the script adds). The tests compare the committed page with what
this script makes (``tests/unit/docs/test_reference.py``).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import os
import re
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference.md"
COMMAND = "python docs/make_reference.py"

#: The DAG factory's public faces; the operators, sensors, triggers and hooks come from the
#: modules the provider info registers.
FACTORY = ("airflow_provider_binlog.dags:make_cdc_dags", "airflow_provider_binlog.dags:OnNewBinlogData",
           "airflow_provider_binlog.staging.ref:StagingRef", "airflow_provider_binlog.operators.settings:LakeSettings",
           "airflow_provider_binlog.operators.settings:SparkSettings",
           "airflow_provider_binlog.operators.settings:MergeSettings",
           "airflow_provider_binlog.operators.settings:SnapshotSettings",
           "airflow_provider_binlog.operators.settings:BatchLimits",
           "airflow_provider_binlog.operators.settings:WaitSettings")
#: provider info key -> (section title, the Airflow base class its public classes derive from)
REGISTERED = (
    ("operators", "Operators", "airflow.sdk:BaseOperator"),
    ("sensors", "Sensors", "airflow.sdk:BaseSensorOperator"),
    ("triggers", "Triggers", "airflow.triggers.base:BaseTrigger"),
    ("hooks", "Hooks", "airflow.sdk:BaseHook"),
)
#: What a class's ``**kwargs`` go to, by the base class it derives from (first match).
KWARGS_BASES = (("airflow.sdk:BaseSensorOperator", "Airflow's `BaseSensorOperator` (`timeout`, `mode`, "
                 "`poke_interval`, `soft_fail`, ...) and `BaseOperator`"),
                ("airflow.sdk:BaseOperator", "Airflow's `BaseOperator` (`task_id`, `retries`, `pool`, "
                 "`outlets`, ...)"),
                ("airflow.sdk:BaseHook", "Airflow's `BaseHook`"))


def load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True)
class Argument:
    name: str
    kind: str          # "positional or keyword", "keyword-only"
    type: str          # the annotation as written, "" without one
    default: str       # as Markdown: "required", or the default in backticks
    meaning: str       # as Markdown; "" when the docstring says nothing of it
    described_by: str  # "param" (its own :param line), "param:<other>" (named in another's), "text", ""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A documented callable: the factory, a class's constructor."""
    name: str
    module: str
    text: str                      # the docstring's description, as Markdown
    arguments: tuple[Argument, ...]
    kwargs_to: str                 # where ``**kwargs`` go, "" without them
    params: tuple[str, ...]        # the names the docstring's :param lines give


# --------------------------------------------------------------------------- docstrings

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def markdown(text: str) -> str:
    """reStructuredText inline markup as Markdown: ``x`` and :role:`x` as code."""
    def role(match: re.Match) -> str:
        target = match.group(2).lstrip(".")
        if match.group(1):
            target = target.rsplit(".", 1)[-1]
        return f"`{target}`"
    return re.sub(r"``(.+?)``", r"`\1`", _ROLE.sub(role, text))


def split_docstring(doc: str) -> tuple[list[str], dict[str, str]]:
    """A docstring's description (paragraphs, each on one line) and its ``:param name:`` texts."""
    description: list[str] = []
    params: dict[str, str] = {}
    current: Optional[str] = None
    paragraph: list[str] = []
    for line in doc.splitlines():
        match = re.match(r":param\s+(?:[^:]*\s)?(\w+):\s*(.*)", line)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
            continue
        if current is not None and line.startswith((" ", "\t")) and line.strip():
            params[current] += " " + line.strip()
            continue
        current = None
        if line.startswith(":"):  # another field (:returns:, :raises:)
            continue
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            description.append(" ".join(paragraph))
            paragraph = []
    if paragraph:
        description.append(" ".join(paragraph))
    return description, params


def names_in(text: str) -> set[str]:
    """The identifiers a docstring text names in code: ``name`` and ``name=...``."""
    return set(re.findall(r"``(\w+)(?:=[^`]*)?``", text))


# --------------------------------------------------------------------------- signatures


def _default_nodes(func: Callable) -> dict[str, ast.expr]:
    """The default expressions of ``func``'s parameters as written in its source (for a
    dataclass: its fields')."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return {}
    try:
        tree = ast.parse(source).body[0]
    except SyntaxError:  # a lambda's or a decorator's line
        return {}
    out: dict[str, ast.expr] = {}
    if isinstance(tree, ast.ClassDef):
        for node in tree.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                out[node.target.id] = node.value
        return out
    if not isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return out
    args = tree.args
    positional = args.posonlyargs + args.args
    for arg, node in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        out[arg.arg] = node
    for arg, node in zip(args.kwonlyargs, args.kw_defaults):
        if node is not None:
            out[arg.arg] = node
    return out


def render_default(parameter: inspect.Parameter, node: Optional[ast.expr]) -> str:
    """``required``, the default's value when it is a plain one (even when written as a
    name), else its expression as written (a call, evaluated at import)."""
    if parameter.default is inspect.Parameter.empty:
        return "required"
    value = parameter.default
    plain = value is None or isinstance(value, (bool, int, float, str))
    if plain and not isinstance(node, ast.Call):
        return f"`{value!r}`"
    if node is not None:
        return f"`{ast.unparse(node)}`"
    return f"`{value!r}`"


def entry(path: str) -> Entry:
    obj = load(path)
    func = obj.__init__ if inspect.isclass(obj) else obj
    signature = inspect.signature(func, eval_str=False)
    # a dataclass's generated __init__ has no source: its fields' defaults then
    nodes = _default_nodes(inspect.unwrap(func)) or (_default_nodes(obj) if inspect.isclass(obj) else {})
    description, params = split_docstring(inspect.getdoc(obj) or "")
    whole_text = " ".join(description)
    arguments = []
    kwargs_to = ""
    for name, parameter in signature.parameters.items():
        if name == "self":
            continue
        if parameter.kind is parameter.VAR_KEYWORD:
            kwargs_to = next((text for base, text in KWARGS_BASES if inspect.isclass(obj)
                              and issubclass(obj, load(base))), "the base class")
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            continue
        if name in params:
            meaning, by = markdown(params[name]), "param"
        else:
            other = next((o for o, text in params.items() if name in names_in(text)), None)
            if other is not None:
                meaning, by = f"see `{other}`", f"param:{other}"
            elif name in names_in(whole_text):
                meaning, by = "see the description above", "text"
            else:
                meaning, by = "", ""
        annotation = parameter.annotation
        type_text = "" if annotation is inspect.Parameter.empty else (
            annotation if isinstance(annotation, str) else inspect.formatannotation(annotation))
        kind = "keyword-only" if parameter.kind is parameter.KEYWORD_ONLY else "positional or keyword"
        arguments.append(Argument(name, kind, type_text, render_default(parameter, nodes.get(name)),
                                  meaning, by))
    module, _, name = path.partition(":")
    return Entry(name, module, "\n\n".join(markdown(p) for p in description), tuple(arguments), kwargs_to,
                 tuple(params))


def registered_classes(kind: str, base_path: str) -> list[str]:
    """The public classes of the modules the provider info registers under ``kind`` that
    derive from ``base_path``, in the provider info's order, as ``module:Name``."""
    from airflow_provider_binlog.provider_info import get_provider_info

    base = load(base_path)
    out = []
    for group in get_provider_info()[kind]:
        for module_name in group["python-modules"]:
            module = importlib.import_module(module_name)
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and obj.__module__ == module_name and issubclass(obj, base) \
                        and not name.startswith("_"):
                    out.append(f"{module_name}:{name}")
    return out


def sections() -> list[tuple[str, list[Entry]]]:
    out = [("The DAG factory", [entry(p) for p in FACTORY])]
    for kind, title, base in REGISTERED:
        out.append((title, [entry(p) for p in registered_classes(kind, base)]))
    return out


def entries() -> Iterator[Entry]:
    for _title, items in sections():
        yield from items


# --------------------------------------------------------------------------- the page


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_entry(item: Entry) -> list[str]:
    lines = [f"### `{item.name}`", "", f"`from {item.module} import {item.name}`", ""]
    if item.text:
        lines += [item.text, ""]
    positional = [a.name for a in item.arguments if a.kind != "keyword-only"]
    if positional:
        names = ", ".join(f"`{n}`" for n in positional)
        others = "; the others keyword-only" if len(positional) < len(item.arguments) else ""
        lines += [f"Positional or keyword: {names}{others}.", ""]
    lines += ["| argument | type | default | meaning |", "|---|---|---|---|"]
    for a in item.arguments:
        lines.append(f"| `{a.name}` | {cell(f'`{a.type}`' if a.type else '')} | {cell(a.default)} "
                     f"| {cell(a.meaning)} |")
    if item.kwargs_to:
        lines += ["", f"Other keyword arguments go to {item.kwargs_to}."]
    return lines + [""]


def render_connections() -> list[str]:
    from airflow_provider_binlog.provider_info import get_provider_info

    lines = ["## Connection types", "",
             "The extras of the connection types the provider registers (in the connection's `extra` JSON, or "
             "the fields of Airflow's connection form).", ""]
    for conn in get_provider_info()["connection-types"]:
        hook = conn["hook-class-name"].rsplit(".", 1)[-1]
        lines += [f"### `{conn['connection-type']}`", "",
                  f"{conn['hook-name']}, read by `{hook}`.", "",
                  "| extra | label | default | meaning |", "|---|---|---|---|"]
        for name, field in conn["conn-fields"].items():
            schema = field.get("schema", {})
            default = f"`{schema['default']!r}`" if "default" in schema else ""
            lines.append(f"| `{name}` | {cell(field.get('label', ''))} | {cell(default)} "
                         f"| {cell(markdown(field.get('description', '')))} |")
        lines.append("")
    return lines


def render_configuration() -> list[str]:
    from airflow_provider_binlog.utils.settings import OPTIONS, SECTION, env_name

    lines = [f"## Configuration: the `[{SECTION}]` section", "",
             "Options of Airflow's configuration, set in `airflow.cfg` or as environment variables (and "
             "their `_CMD` and `_SECRET` forms); `airflow config list --section binlog` shows them.", "",
             "| option | default | environment variable | meaning |", "|---|---|---|---|"]
    for name, (default, text) in OPTIONS.items():
        lines.append(f"| `{name}` | {f'`{default}`' if default else '(empty)'} | `{env_name(name)}` "
                     f"| {cell(text)} |")
    return lines + [""]


def render() -> str:
    lines = ["# Reference", "",
             f"Generated from the code by `{COMMAND}`: the arguments of the DAG factory, the operators, "
             "sensors, triggers and hooks, the extras of the connection types and the `[binlog]` "
             "configuration options. What the DAGs do: [airflow.md](airflow.md#dags).", ""]
    for title, items in sections():
        lines += [f"## {title}", ""]
        for item in items:
            lines += render_entry(item)
    lines += render_connections()
    lines += render_configuration()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is not what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="airflow-home-") as home:
        os.environ.setdefault("AIRFLOW_HOME", home)  # no airflow.cfg left behind
        sys.exit(main())
