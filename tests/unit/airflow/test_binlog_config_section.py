"""The provider's ``[binlog]`` configuration section: declared in the provider info, read with
Airflow's conf (``AIRFLOW__BINLOG__*``), used by the UI view and the dumps; the factory's
sensor follows ``[operators] default_deferrable`` unless told."""
from __future__ import annotations

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.utils import settings  # noqa: E402
from airflow_provider_binlog.provider_info import get_provider_info  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings


def test_the_provider_info_declares_every_option_with_its_default():
    section = get_provider_info()["config"]["binlog"]
    assert set(section["options"]) == {"ui_cache_seconds", "ui_refresh_seconds", "ui_sources", "ui_stall_seconds",
                                       "ui_task_runs", "ui_probe_sources", "dump_workers", "spark_history_url",
                                       "spark_class_archive", "merge_engine"}
    assert section["options"]["merge_engine"]["default"] == "auto"
    assert section["options"]["ui_stall_seconds"]["default"] == "3600"
    assert section["options"]["ui_probe_sources"]["default"] == "True"
    assert all(o["description"] and o["version_added"] == "0.2.0" for o in section["options"].values())


def test_options_come_from_airflows_environment_variables_and_fall_back_to_their_defaults(monkeypatch):
    from airflow_provider_binlog.plugins.sources import default_stall_seconds

    monkeypatch.delenv("AIRFLOW__BINLOG__UI_STALL_SECONDS", raising=False)
    assert default_stall_seconds() == 3600
    monkeypatch.setenv("AIRFLOW__BINLOG__UI_STALL_SECONDS", "600")
    assert default_stall_seconds() == 600 and settings.setting("ui_stall_seconds") == "600"
    for bad in ("soon", "-5", "0"):
        monkeypatch.setenv("AIRFLOW__BINLOG__UI_STALL_SECONDS", bad)
        assert default_stall_seconds() == 3600
    monkeypatch.setenv("BINLOG_UI_STALL_SECONDS", "5")            # the old name is not read
    monkeypatch.delenv("AIRFLOW__BINLOG__UI_STALL_SECONDS")
    assert default_stall_seconds() == 3600
    monkeypatch.setenv("AIRFLOW__BINLOG__UI_TASK_RUNS", "false")
    assert settings.bool_setting("ui_task_runs") is False
    monkeypatch.setenv("AIRFLOW__BINLOG__UI_TASK_RUNS", "True")
    assert settings.bool_setting("ui_task_runs") is True


def test_dump_workers_come_from_the_section_and_a_bad_value_is_refused_naming_it(monkeypatch):
    from airflow_provider_binlog.capture.dump import default_workers
    from airflow_provider_binlog.errors import ProviderError

    monkeypatch.delenv("AIRFLOW__BINLOG__DUMP_WORKERS", raising=False)
    assert settings.dump_workers() is None
    monkeypatch.setenv("AIRFLOW__BINLOG__DUMP_WORKERS", "0")
    assert settings.dump_workers() == 0 and default_workers() == 0
    monkeypatch.setenv("AIRFLOW__BINLOG__DUMP_WORKERS", "two")
    with pytest.raises(ProviderError, match=r"\[binlog\] dump_workers = 'two' is not a whole number"):
        settings.dump_workers()


@pytest.mark.parametrize("default, given, expected", [("True", None, True), ("False", None, False),
                                                      ("True", False, False), ("False", True, True)])
def test_the_factorys_sensor_follows_default_deferrable_unless_told(monkeypatch, tmp_path, default, given, expected):
    from airflow_provider_binlog.dags import make_cdc_dags

    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", default)
    kwargs = {} if given is None else {"deferrable": given}
    dags = make_cdc_dags(
        "shop",
        binlog_conn_id="shop_db",
        tables=["shop.*"],
        staging=str(tmp_path / "s"),
        lake=LakeSettings(warehouse=str(tmp_path / "w"), namespace="shop_cdc"),
        **kwargs,
    )
    incremental = next(d for d in dags if not d.dag_id.startswith("binlog_backfill"))
    assert incremental.get_task("wait_for_changes").deferrable is expected
