"""Initial snapshots of many tables: one backfill run (mode snapshot: the snapshot task, then
the merge through ``spark-submit``) of the first N tables of 1,000 rows, for N = 1 and 50; prints
N=50 against N=1 (target at most 2x).

Run from the repository root::

    .venv/bin/python benchmarks/snapshot_bench.py [--snapshots 1,50] [--rows 1000] [--keep DIR]

The setup and the measurement are those of ``benchmarks/many_tables_bench.py --snapshots``.
"""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import many_tables_bench  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a.startswith("--snapshots") for a in argv):
        argv = ["--snapshots", "1,50", *argv]
    sys.exit(many_tables_bench.main(argv))
