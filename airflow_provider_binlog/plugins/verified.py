"""The Binlog CDC view's part of a source's last verification (``docs/verify.md``): per table
"verified equal as of …" with the source's binlog position and Iceberg's checkpoint, or what
differs, read from the report the verify task keeps in the source's staging directory."""
from __future__ import annotations

from html import escape as esc
from typing import Any, Iterable, Mapping, Optional

from ..utils.verify_signals import read_report


def read_verified(staging_dirs: Iterable[str], key: str) -> Optional[dict]:
    """The source's last verification report (the first staging directory holding one)."""
    for staging_dir in staging_dirs:
        report = read_report(str(staging_dir), key)
        if report is not None:
            return report
    return None


def table_line(name: str, table: Mapping[str, Any], finished_at: Optional[str]) -> str:
    """One table's state as the view words it."""
    status = table.get("status")
    at = f"source at {table.get('position')}, Iceberg at {table.get('checkpoint')}"
    if status == "equal":
        return f"{name}: verified equal as of {finished_at} ({at})"
    if status == "differs":
        ranges = "; ".join(_range_text(r) for r in table.get("differing") or [])
        return f"{name}: differs as of {finished_at} ({at}): {ranges}"
    reason = table.get("error") or f"{len(table.get('not_verifiable') or [])} key range(s) not verifiable"
    return f"{name}: not verifiable as of {finished_at}: {reason}"


def _range_text(r: Mapping[str, Any]) -> str:
    first, last = r.get("first"), r.get("last")
    keys = f"key {first}" if first == last else f"keys {first} .. {last}"
    return f"{keys} {r.get('how')}"


def verified_card(source: Mapping[str, Any]) -> str:
    """The HTML of the source's last verification (nothing before one)."""
    report = source.get("verified")
    if not report:
        return ""
    when = report.get("finished_at")
    items = "".join(f'<li class="verify-{esc(str(t.get("status")))}">{esc(table_line(name, t, when))}</li>'
                    for name, t in sorted((report.get("tables") or {}).items()))
    return f'<div class="verified"><h3>Verification</h3><ul class="small">{items}</ul></div>'


__all__ = ["read_verified", "table_line", "verified_card"]
