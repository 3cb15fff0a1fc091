"""The provider's ``[binlog]`` section of Airflow's configuration (declared in the provider
info, so ``airflow config list`` shows it): read with Airflow's ``conf``, which takes
``airflow.cfg``, the environment variables ``AIRFLOW__BINLOG__<OPTION>`` and their ``_CMD`` and
``_SECRET`` forms."""
from __future__ import annotations

from typing import Mapping, Optional

SECTION = "binlog"

#: option -> (default, description); the provider info and the readers share it.
OPTIONS: dict[str, tuple[str, str]] = {
    "ui_cache_seconds": ("10", "How long the Binlog CDC view keeps the status it gathered, shared by all users."),
    "ui_refresh_seconds": ("60", "How often the Binlog CDC view's page reloads itself."),
    "ui_sources": ("", "The view's sources as JSON (a list of objects with conn_id and optionally staging_dir, "
                       "checkpoint_key, checkpoint_store_uri, stall_seconds...); empty: the Variable "
                       "binlog_ui_sources, then the sources the DAG factory registered."),
    "ui_stall_seconds": ("3600", "After how many seconds without an advanced checkpoint the view shows a "
                                 "source as stalled, unless the source sets its own."),
    "ui_task_runs": ("True", "Whether the view reads the dump and merge task instances of the factory's DAGs."),
    "ui_probe_sources": ("True", "Whether the view queries each source server (a short read-only session) for its "
                                 "position, retention and the lag of the checkpoint; False: the view shows only "
                                 "the checkpoint store, the staged batches and the task runs."),
    "spark_history_url": ("", "The Spark history server's URL (e.g. http://spark-history:18080): the merge "
                              "tasks' 'Spark application' link goes there; empty: to a standalone master's "
                              "web UI, and none with a local master."),
    "spark_class_archive": ("True", "Whether a merge task's Spark driver, when it runs on the worker, keeps a "
                                    "class-data-sharing archive of its JVM in the provider's cache directory "
                                    "(written by the first run, mapped by the next: the driver starts in about "
                                    "half the time)."),
    "merge_engine": ("auto", "The merge operators' default merge_engine. auto: with a local master (Spark "
                             "would run on the worker anyway) a merge first runs on Iceberg's Java API in a "
                             "bare JVM, for batches whose tables all take direct commits, and through "
                             "spark-submit only for a batch that needs Spark; with any cluster master every "
                             "merge goes through spark-submit. spark: every merge through spark-submit. "
                             "iceberg-java: the Java API first wherever it can run, also with a cluster "
                             "master (warned once)."),
    "dump_workers": ("", "Staging processes of each dump; empty: 2 where there are two cores or more, else 0 "
                         "(the dump stages in its own process)."),
}


def env_name(option: str) -> str:
    """The environment variable Airflow reads ``option`` of the section from."""
    return f"AIRFLOW__{SECTION.upper()}__{option.upper()}"


def setting(option: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """The option's value: with ``environ``, its variable there (else the default); otherwise
    Airflow's configuration (else the default)."""
    default = OPTIONS[option][0]
    if environ is not None:
        return environ.get(env_name(option)) or default
    try:
        from airflow.configuration import conf
    except ImportError:  # pragma: no cover - outside Airflow: the environment alone
        import os
        return os.environ.get(env_name(option)) or default
    value = conf.get(SECTION, option, fallback=None)
    return default if value is None or value == "" else str(value)


def float_setting(option: str, environ: Optional[Mapping[str, str]] = None, *, zero: bool = False) -> float:
    """A number option; its default when the value is not a positive number (or zero, with
    ``zero``)."""
    try:
        value = float(setting(option, environ))
    except ValueError:
        return float(OPTIONS[option][0])
    return value if value > 0 or (zero and value == 0) else float(OPTIONS[option][0])


def bool_setting(option: str, environ: Optional[Mapping[str, str]] = None) -> bool:
    return setting(option, environ).strip().lower() not in ("false", "0", "no", "off", "")


def dump_workers() -> Optional[int]:
    """``[binlog] dump_workers`` as a number; None when unset (the dump's own default)."""
    configured = setting("dump_workers").strip()
    if not configured:
        return None
    try:
        return int(configured)
    except ValueError:
        from ..errors import ProviderError

        raise ProviderError(f"[binlog] dump_workers = {configured!r} is not a whole number",
                            hint="set it to 0 (stage in the dump's process), 2, ... or leave it empty") from None


def provider_config() -> dict:
    """The ``config`` entry of the provider info."""
    return {SECTION: {"description": "Settings of airflow-provider-binlog: the Binlog CDC view and the dumps.",
                      "options": {name: {"description": text, "version_added": "0.2.0", "type": "string",
                                         "example": None, "default": default}
                                  for name, (default, text) in OPTIONS.items()}}}


__all__ = ["OPTIONS", "SECTION", "bool_setting", "dump_workers", "env_name", "float_setting", "provider_config",
           "setting"]
