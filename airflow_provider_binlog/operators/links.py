"""Extra links of the operators, shown on their task instances in the Airflow UI: the source's
section of the Binlog CDC view (dump, snapshot and merge tasks) and the merge's Spark
application (merge tasks).

Airflow 3 computes a link when the task ends, on the worker (``get_link``), and keeps it as an
XCom of the task instance; the API server shows that. So a link names what the task did: the
Spark application the merge ran, found in the merge job's result."""
from __future__ import annotations

from typing import Any, Mapping, Optional
from urllib.parse import quote, urlsplit

from airflow.sdk import BaseOperatorLink

#: where the Binlog CDC view's page is served (``plugins/cdc_view.py``'s ``URL_PREFIX``)
VIEW_PREFIX = "/binlog-cdc"
#: the web UI port of a Spark standalone master (Spark's default)
STANDALONE_UI_PORT = 8080


def _base_url() -> str:
    """``[api] base_url`` without its end slash ("" when unset: links relative to the UI)."""
    try:
        from airflow.configuration import conf

        return (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:  # noqa: BLE001 - no configuration: a relative link
        return ""


def view_url(source_key: Optional[str]) -> str:
    """The Binlog CDC view, at the section of the source with checkpoint key (or connection id)
    ``source_key``."""
    anchor = f"#checkpoint-{quote(source_key, safe='')}" if source_key else ""
    return f"{_base_url()}{VIEW_PREFIX}/{anchor}"


def spark_application_url(result: Mapping[str, Any], master: str, history_url: str = "") -> str:
    """Where the Spark application of a merge job can be seen after it ended: on the history
    server ``history_url`` when one is configured (``[binlog] spark_history_url``), else on the
    standalone master's web UI; "" when neither is known (a local master: its UI ended with
    the job)."""
    app_id = result.get("spark_application_id")
    if not app_id:
        return ""
    if history_url:
        return f"{history_url.rstrip('/')}/history/{quote(str(app_id), safe='')}/"
    if master.startswith("spark://"):
        host = urlsplit(master.split(",")[0]).hostname or "localhost"
        return f"http://{host}:{STANDALONE_UI_PORT}/app/?appId={quote(str(app_id), safe='')}"
    return ""


def _source_key(operator: Any) -> Optional[str]:
    for attribute in ("checkpoint_key", "binlog_conn_id", "stream"):
        value = getattr(operator, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


class BinlogCdcViewLink(BaseOperatorLink):
    """The task's source in the Binlog CDC view."""

    name = "Binlog CDC"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return view_url(_source_key(operator))


class SparkApplicationLink(BaseOperatorLink):
    """The Spark application the merge task ran ("" before it ran, or with a local master)."""

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return str(getattr(operator, "spark_application_url", "") or "")
