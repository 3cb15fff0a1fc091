"""The operators and the sensor document every keyword argument of their constructor with a
``:param <name>:`` line in the class docstring, as the official Airflow providers do."""
from __future__ import annotations

import inspect
import re

import pytest

from airflow_provider_binlog.operators.dump import BinlogDumpOperator
from airflow_provider_binlog.operators.merge import BinlogMergeOperator
from airflow_provider_binlog.operators.snapshot import BinlogSnapshotOperator
from airflow_provider_binlog.sensors.position import BinlogPositionSensor


def undocumented_params(cls: type) -> list[str]:
    """The keyword arguments of ``cls.__init__`` (but ``*args``/``**kwargs``) whose name has no
    ``:param <name>:`` line in the class docstring."""
    documented = set(re.findall(r"^\s*:param (\w+):", cls.__doc__ or "", flags=re.MULTILINE))
    params = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in params
            if p.name not in ("self", "args", "kwargs")
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in documented]


@pytest.mark.parametrize("cls", [BinlogDumpOperator, BinlogSnapshotOperator, BinlogMergeOperator,
                                 BinlogPositionSensor], ids=lambda cls: cls.__name__)
def test_every_keyword_argument_has_a_param_line_in_the_class_docstring(cls):
    assert undocumented_params(cls) == []
