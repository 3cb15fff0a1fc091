"""What a verification reports besides its XCom: metrics through Airflow's ``Stats`` (as
:mod:`.metrics` sends the loads'), an OpenLineage data-quality facet on each verified Iceberg
table, and the report file the Binlog CDC view shows ("verified equal as of ...").

=====================================  ==========  =================================================
name                                   kind        what
=====================================  ==========  =================================================
``binlog.verify.chunks``               gauge       key ranges checked, per table
``binlog.verify.equal``                gauge       of them equal
``binlog.verify.differing``            gauge       differing key ranges (after narrowing)
``binlog.verify.not_verifiable``       gauge       key ranges not verifiable (changed in every check)
``binlog.verify.rows_per_second``      gauge       source rows compared per second
``binlog.verify.duration``             timer       seconds of the table's verification
=====================================  ==========  =================================================
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping, Optional

from .metrics import _send

#: the report file of a source under its (local) staging directory
REPORT_DIR = "_verify"


def record_verify(source: str, table: Mapping[str, Any]) -> None:
    """One table's report (:meth:`~..merge.verify.report.TableReport.to_json`)."""
    tags = {"source": source, "table": table["table"]}
    _send("gauge", "verify.chunks", table.get("chunks") or 0, tags)
    _send("gauge", "verify.equal", table.get("equal") or 0, tags)
    _send("gauge", "verify.differing", len(table.get("differing") or ()), tags)
    _send("gauge", "verify.not_verifiable", len(table.get("not_verifiable") or ()), tags)
    _send("gauge", "verify.rows_per_second", table.get("rows_per_second") or 0, tags)
    _send("timing", "verify.duration", table.get("seconds") or 0, tags)


def report_path(staging_dir: str, key: str) -> Optional[str]:
    """Where a source's last verification report is kept (None: staging is not a local directory)."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", staging_dir):
        return None
    return os.path.join(staging_dir, REPORT_DIR, re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".json")


def write_report(staging_dir: str, key: str, report: Mapping[str, Any]) -> Optional[str]:
    """Keep ``report`` as the source's last verification (the tables verified before and not
    now keep their last report); the file's path, or None."""
    path = report_path(staging_dir, key)
    if path is None:
        return None
    from ..common.atomic_file import write_atomically

    os.makedirs(os.path.dirname(path), exist_ok=True)
    last = read_report(staging_dir, key) or {}
    tables = {**(last.get("tables") or {}), **(report.get("tables") or {})}
    write_atomically(path, json.dumps({**report, "tables": tables}, default=str, indent=1))
    return path


def read_report(staging_dir: str, key: str) -> Optional[dict]:
    path = report_path(staging_dir, key)
    if path is None or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def quality_facets(table: Mapping[str, Any]) -> dict:
    """OpenLineage facets of a verified Iceberg table: one assertion per check (equal to the
    source; no key range differing; none left not verifiable) and its row count."""
    from openlineage.client.facet_v2 import data_quality_assertions_dataset as dqa
    from openlineage.client.facet_v2 import data_quality_metrics_input_dataset as dqm

    differing = table.get("differing") or []
    unknown = table.get("not_verifiable") or []
    checked = f"at source position {table.get('position')}, Iceberg checkpoint {table.get('checkpoint')}"
    assertions = [
        dqa.Assertion(assertion="equal_to_source", success=table.get("status") == "equal",
                      description=f"every key range's row count and checksum equal the source's, {checked}"),
        dqa.Assertion(assertion="no_differing_key_ranges", success=not differing and not table.get("error"),
                      actual=str(len(differing))),
        dqa.Assertion(assertion="all_key_ranges_verifiable", success=not unknown and not table.get("error"),
                      actual=str(len(unknown))),
    ]
    return {"dataQualityAssertions": dqa.DataQualityAssertionsDatasetFacet(assertions=assertions),
            "dataQualityMetrics": dqm.DataQualityMetricsInputDatasetFacet(columnMetrics={},
                                                                           rowCount=table.get("rows"))}


__all__ = ["REPORT_DIR", "quality_facets", "read_report", "record_verify", "report_path", "write_report"]
