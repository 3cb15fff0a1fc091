"""The incremental and the backfill DAG of a source take turns on its checkpoint: a task of
the incremental DAG gives way (is skipped) while a run of the backfill DAG is running."""
from __future__ import annotations

from typing import Any, Optional

from airflow.sdk.exceptions import AirflowSkipException


def yield_to_running_runs(context: Any, dag_id: Optional[str], task: str) -> None:
    """Raise ``AirflowSkipException`` when ``dag_id`` has a running run. This task is running
    before it asks, and a run of the other DAG is running before that DAG's guard asks about
    this one: of two that start together at least one sees the other."""
    if not dag_id:
        return
    running = context["ti"].get_dr_count(dag_id=dag_id, states=["running"])
    if running:
        raise AirflowSkipException(
            f"{running} run(s) of {dag_id} are loading the same checkpoint: this {task} yields to "
            "them (the next run continues from the checkpoint they leave)")
