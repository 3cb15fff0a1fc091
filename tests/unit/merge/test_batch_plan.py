"""Whether a batch needs Spark (merge/lake/batch_plan.py): the tables folded ahead from several
threads are those the walk over the tables folds one by one, and the reason is the same."""
from __future__ import annotations

import dataclasses
import random
from typing import Optional

import pytest

from airflow_provider_binlog.merge.lake import batch_plan


@dataclasses.dataclass(eq=False)
class Work:
    name: str
    staged_bytes: int
    allows: bool               # its plan allows a direct commit
    fold: Optional[bool]       # what folding its changes tells (True: simple, False: Spark's MERGE)
    candidate: bool            # a direct candidate by its staged facts
    statements: list = dataclasses.field(default_factory=list)
    status: str = "ready"
    plan: None = None
    creation: None = None
    primary_key: tuple = ()
    files: tuple = ()


def _reference(work: list[Work], max_bytes: int) -> tuple[Optional[str], list[str]]:
    """The walk as it folds one table after another: its reason, and the tables it folded."""
    folded, ahead = [], max_bytes
    for w in work:
        if w.status != "ready":
            continue
        if w.statements:
            return f"{w.name}: {w.statements[0]}", folded
        if w.staged_bytes <= ahead and w.allows and w.staged_bytes <= max_bytes:
            folded.append(w.name)
            if w.fold is False:
                return f"{w.name}: its changes need Spark's MERGE", folded
            ahead -= w.staged_bytes
            continue
        if not w.candidate:
            return f"{w.name}: its changes need Spark's MERGE", folded
    return None, folded


@pytest.fixture
def folds(monkeypatch):
    calls: list[str] = []

    def fold_ahead(w: Work, max_bytes: int) -> Optional[bool]:
        if not w.allows or w.staged_bytes > max_bytes:
            return None
        calls.append(w.name)
        return w.fold

    monkeypatch.setattr(batch_plan, "fold_ahead", fold_ahead)
    monkeypatch.setattr(batch_plan, "plan_allows_direct", lambda w: w.allows)
    monkeypatch.setattr(batch_plan, "direct_candidate", lambda w: w.candidate)
    return calls


@pytest.mark.parametrize("seed", range(200))
@pytest.mark.parametrize("threads", [1, 4])
def test_the_folds_ahead_and_the_reason_are_those_of_the_walk_table_by_table(folds, seed, threads):
    rng = random.Random(seed)
    max_bytes = 1000
    work = [Work(f"t{i}", rng.choice([10, 100, 400, 1200]), rng.random() < 0.9,
                 rng.choice([True] * 12 + [False]), rng.random() < 0.95,
                 ["ALTER TABLE"] if rng.random() < 0.02 else [], rng.choice(["ready"] * 9 + ["no-change"]))
            for i in range(rng.randint(0, 30))]
    reason, folded = _reference(work, max_bytes)
    assert batch_plan.spark_reason(work, False, None, max_bytes, threads) == reason  # type: ignore[arg-type]
    if reason is None:  # every table's fold is needed: exactly the walk's
        assert sorted(folds) == sorted(folded)
    else:  # the walk's, and perhaps some after the table that needs Spark
        assert set(folded) <= set(folds)
    by_name = {w.name: w for w in work}
    assert sum(by_name[n].staged_bytes for n in folds) <= max_bytes
