"""What the pages call: the keyword arguments the factory, the operators, sensors, triggers and
hooks take (their own and, through ``**kwargs``, their Airflow base classes'), and the calls of
them in a piece of Python code."""
from __future__ import annotations

import ast
import inspect
from functools import lru_cache
from typing import Iterator

from tests.unit.docs.pages import generator


@lru_cache(maxsize=None)
def callables() -> dict[str, object]:
    """The reference's callables by name."""
    make = generator()
    return {entry.name: make.load(f"{entry.module}:{entry.name}") for entry in make.entries()}


@lru_cache(maxsize=None)
def accepted(callable_name: str) -> frozenset[str]:
    """The keyword arguments a call of it takes."""
    obj = callables()[callable_name]
    if not inspect.isclass(obj):
        return frozenset(inspect.signature(obj).parameters)
    names: set[str] = set()
    for cls in obj.__mro__:
        if "__init__" not in vars(cls) or cls is object:
            continue
        parameters = inspect.signature(vars(cls)["__init__"]).parameters
        names |= {n for n, p in parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            break
    return frozenset(names - {"self"})


def calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """The calls of the reference's callables in ``tree``, by the name they are called by."""
    known = callables()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in known:
                yield called, node


def unknown_keywords(tree: ast.AST) -> list[str]:
    """``Callable(name=...)`` for every keyword the callable does not take."""
    return [f"{called}({keyword.arg}=...)" for called, node in calls(tree) for keyword in node.keywords
            if keyword.arg is not None and keyword.arg not in accepted(called)]
