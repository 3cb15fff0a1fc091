"""How long Airflow's DAG processor takes over one DAG file: the file parsed into a
``BundleDagBag`` (the time the bag records for the file, what the processor reports as its
parse duration) and its DAGs serialized, as the processor's parsing process does, each in a
fresh interpreter that has imported Airflow's DAG processing, and made and serialized a DAG of
one task, before the clock starts.

Used by ``benchmarks/thousand_tables_bench.py``; :func:`floor_file` writes the floor: a file of
DAGs of the same number of ``EmptyOperator`` tasks, chained, and nothing else.
"""
from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
from typing import Mapping

CHILD = r'''
import json, pathlib, sys, time

import structlog
from airflow.dag_processing.dagbag import BundleDagBag
from airflow.dag_processing.processor import _serialize_dags

# warmed as the DAG processor is when it parses a file: a DAG of one task made and serialized
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("warm_up", schedule=None) as warm:
    EmptyOperator(task_id="t")
from airflow.serialization.serialized_objects import DagSerialization

DagSerialization.to_dict(warm)

path = pathlib.Path(sys.argv[1])
t0 = time.perf_counter()
bag = BundleDagBag(dag_folder=str(path), bundle_path=path.parent, bundle_name="bench", load_op_links=False)
t1 = time.perf_counter()
serialized, errors = _serialize_dags(bag, structlog.get_logger())
t2 = time.perf_counter()
stats = bag.dagbag_stats
print("PARSE-RESULT " + json.dumps({
    "file_seconds": stats[0].duration.total_seconds() if stats else None,
    "bag_seconds": t1 - t0, "serialize_seconds": t2 - t1,
    "tasks": {d.dag_id: len(d.tasks) for d in bag.dags.values()},
    "errors": {**{str(k): str(v)[-400:] for k, v in bag.import_errors.items()}, **errors}}))
'''

FLOOR = '''"""The floor of the DAG parsing benchmark: DAGs of EmptyOperator tasks, chained."""
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, chain

for _dag_id, _count in {shape!r}.items():
    with DAG(_dag_id, schedule=None) as _dag:
        chain(*[EmptyOperator(task_id=f"t{{i}}") for i in range(_count)])
    globals()[_dag_id] = _dag
'''


class ParseError(RuntimeError):
    """The file did not parse into DAGs."""


def parse_once(path: pathlib.Path, env: Mapping[str, str]) -> dict:
    """One parse of ``path`` in a new interpreter: ``file_seconds`` (the bag's figure for the
    file), ``bag_seconds``, ``serialize_seconds`` and ``tasks`` (per DAG id)."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=dict(env), capture_output=True,
                          text=True, timeout=600, cwd=os.fspath(path.parent))
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("PARSE-RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise ParseError(f"{path.name}: exit {done.returncode}: {done.stderr[-1500:]}")
    result = json.loads(line[len("PARSE-RESULT "):])
    if result["errors"] or not result["tasks"]:
        raise ParseError(f"{path.name}: {result['errors'] or 'no DAG'}")
    return result


def floor_file(path: pathlib.Path, shape: Mapping[str, int]) -> pathlib.Path:
    """Write the floor's DAG file: a DAG per entry of ``shape`` (DAG id -> tasks)."""
    path.write_text(FLOOR.format(shape={f"floor_{k}": v for k, v in shape.items()}))
    return path


def median_parses(paths: Mapping[str, pathlib.Path], env: Mapping[str, str], repeats: int) -> dict[str, dict]:
    """The files parsed ``repeats`` times each, interleaved (so that other work on the machine
    weighs on all alike): per name, the median of each figure and the DAGs' task counts."""
    runs: dict[str, list[dict]] = {name: [] for name in paths}
    for _ in range(repeats):
        for name, path in paths.items():
            runs[name].append(parse_once(path, env))
    out = {}
    for name, results in runs.items():
        out[name] = {key: statistics.median(r[key] for r in results)
                     for key in ("file_seconds", "bag_seconds", "serialize_seconds")}
        out[name]["tasks"] = results[0]["tasks"]
    return out


__all__ = ["ParseError", "floor_file", "median_parses", "parse_once"]
