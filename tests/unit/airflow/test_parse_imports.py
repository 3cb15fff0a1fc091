"""A DAG file calling the factory imports the operators, not the dump's capture and staging
stack: the DAG processor imports a DAG file again on every parse, in a new process."""
from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pyarrow", "numpy", "sqlglot", "airflow_provider_binlog.capture.dump",
         "airflow_provider_binlog.staging.writer", "airflow_provider_binlog.schema_history")


def test_importing_the_dag_factory_imports_neither_pyarrow_nor_sqlglot_nor_the_dump():
    code = ("import json, sys\n"
            "import airflow_provider_binlog.dags\n"
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_staging_package_gives_its_names_when_asked_for():
    import airflow_provider_binlog.staging as staging
    from airflow_provider_binlog.staging import StagingWriter, load_manifest
    from airflow_provider_binlog.staging.manifest import load_manifest as defined
    from airflow_provider_binlog.staging.masking import HASHED_TYPE, hashed_type
    from airflow_provider_binlog.staging.writer import StagingWriter as writer

    assert StagingWriter is writer and load_manifest is defined and staging.MANIFEST_VERSION >= 1
    assert HASHED_TYPE == hashed_type() and str(HASHED_TYPE) == "string"
    try:
        staging.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("an unknown name of the package is an AttributeError")
