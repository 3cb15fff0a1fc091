"""The reliability suite: every test here gets the ``reliability`` marker; those marked
``reliability_full`` run only in the full randomized set (``BINLOG_RELIABILITY_TRIALS=N``).

With ``BINLOG_RELIABILITY_REPORT=path``, the trials run per fault are written there as JSON
at the end of the session (the numbers of ``docs/reliability.md``)."""
from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest

from tests.reliability.support import FULL, TRIALS

_HERE = Path(__file__).resolve().parent
_trials: dict = collections.defaultdict(int)
_facts: dict = collections.defaultdict(dict)


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="full reliability set: set BINLOG_RELIABILITY_TRIALS=N to run it")
    for item in items:
        if _HERE not in Path(str(item.fspath)).resolve().parents:
            continue
        item.add_marker(pytest.mark.reliability)
        if not FULL and item.get_closest_marker("reliability_full"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def record_trials():
    """``record_trials(fault, n, **facts)``: count ``n`` trials of ``fault`` that held every
    invariant (and note measurements, e.g. a peak RSS)."""
    def record(fault: str, n: int = 1, **facts) -> None:
        _trials[fault] += n
        for key, value in facts.items():
            previous = _facts[fault].get(key)
            _facts[fault][key] = value if previous is None else max(previous, value)
    return record


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("BINLOG_RELIABILITY_REPORT")
    if path and _trials:
        Path(path).write_text(json.dumps({"trials_setting": TRIALS, "exitstatus": int(exitstatus),
                                          "faults": dict(sorted(_trials.items())),
                                          "facts": dict(sorted(_facts.items()))}, indent=1) + "\n")
