"""The quickstart's packaged DAG file (``airflow_provider_binlog/local/quickstart_dag.py``, used
where the source checkout's ``dags/binlog_cdc.py`` is not there): the same DAGs as that example
under the quickstart's environment."""
from __future__ import annotations

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.local import quickstart as qs  # noqa: E402


def _shape(dags: dict) -> dict:
    return {dag_id: sorted(dag.task_dict) for dag_id, dag in dags.items()}


def test_packaged_dag_file_defines_the_example_dags(monkeypatch, tmp_path):
    monkeypatch.setenv("BINLOG_SOURCE_ID", qs.SOURCE_ID)
    monkeypatch.setenv("BINLOG_CONN_ID", qs.CONN_ID)
    monkeypatch.setenv("BINLOG_TABLES", ",".join(qs.TABLES))
    monkeypatch.setenv("BINLOG_STAGING_DIR", str(tmp_path / "staging"))
    monkeypatch.setenv("BINLOG_WAREHOUSE", str(tmp_path / "warehouse"))
    assert qs.PACKAGED_DAG_FILE.is_file()
    packaged = qs.load_dags(qs.PACKAGED_DAG_FILE)
    assert sorted(packaged) == ["binlog_backfill__shop", "binlog_cdc__shop"]
    example = qs.example_dag_file()
    assert example is not None and example == qs.dag_file_source()
    assert _shape(packaged) == _shape(qs.load_dags(example))
