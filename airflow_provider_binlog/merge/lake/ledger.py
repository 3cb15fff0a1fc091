"""The ledger ``<namespace>._binlog_batches``: one row per applied batch and stream."""

from __future__ import annotations

from typing import Any

from ..iceberg_contract import LEDGER_TABLE
from .base import Lake
from .conflicts import is_conflict

#: The ledger's columns, in order.
LEDGER_COLUMNS = ("batch_id", "stream", "start_checkpoint", "end_checkpoint", "tables", "staged_rows", "applied_at")


def ledger_columns() -> list[tuple[str, Any]]:
    """The ledger's columns with their Arrow types."""
    import pyarrow as pa

    types = [pa.string(), pa.string(), pa.string(), pa.string(), pa.list_(pa.string()), pa.int64(),
             pa.timestamp("us", tz="UTC")]
    return list(zip(LEDGER_COLUMNS, types))


def ledger_name(catalog: str, namespace: str) -> str:
    return f"{catalog}.{namespace}.{LEDGER_TABLE}"


def ledger_rows(values: tuple) -> Any:
    """The ledger row ``values`` (in :data:`LEDGER_COLUMNS`' order) as a pyarrow table."""
    import pyarrow as pa

    return pa.table({n: pa.array([v], t) for (n, t), v in zip(ledger_columns(), values)})


def ensure_ledger(lake: Lake, name: str) -> None:
    """Create the ledger ``name`` when it does not exist (also when another run creates it at
    the same time)."""
    if lake.table_exists(name):
        return
    try:
        lake.create_table(name, ledger_columns(), {"format-version": "2"})
    except Exception as exc:
        if not (is_conflict(exc) and lake.table_exists(name)):
            raise


__all__ = ["LEDGER_COLUMNS", "ensure_ledger", "ledger_columns", "ledger_name", "ledger_rows"]
