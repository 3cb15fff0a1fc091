"""The data files of an Iceberg table that may hold a batch's keys, from Iceberg's own scan
planning (manifest column bounds prune the rest), and a way for pyarrow to read them from the
table's storage; the rows themselves are found by :mod:`..position_deletes`."""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Optional

from ..errors import MergeJobError
from ..position_deletes import DataFileScan, key_range
from .base import Lake

log = logging.getLogger(__name__)


def _bounds_filter(expressions: Any, name: str, column: Any) -> Any:
    """Iceberg's filter on column ``name`` holding a value of the range of ``column`` (the
    batch's first key column; integers and text); all rows for other types."""
    bounds = key_range(column)
    if bounds is None:
        return expressions.alwaysTrue()
    both = getattr(expressions, "and")  # a Python keyword: py4j reaches the Java method by name
    return both(expressions.greaterThanOrEqual(name, bounds[0]), expressions.lessThanOrEqual(name, bounds[1]))


def files_to_search(lake: Lake, table: Any, snapshot_id: int, keys: Any,
                    first_key_id: int) -> Optional[list[DataFileScan]]:
    """The data files of ``table`` at ``snapshot_id`` whose bounds of the first key column
    overlap ``keys``, each with its position delete files; None when one of them is not
    Parquet, or has an equality delete or a deletion vector applied to it (Spark's MERGE reads
    those). The scan binds its filter to the snapshot's own schema: the first key column is
    named there as it was then (``first_key_id``, its field id, and ``keys``' first column;
    a column renamed since keeps its id).

    Each task crosses py4j as Iceberg's own JSON form (``ScanTaskParser``): three calls a
    file instead of some seventy for its fields one by one."""
    expressions = lake.java_class("org.apache.iceberg.expressions.Expressions")
    to_json = lake.java_class("org.apache.iceberg.ScanTaskParser").toJson
    schema = table.schemas().get(table.snapshot(snapshot_id).schemaId())
    then = schema.findColumnName(first_key_id) if schema is not None else None
    condition = expressions.alwaysTrue() if then is None else _bounds_filter(expressions, then, keys.column(0))
    scan = table.newScan().useSnapshot(snapshot_id).filter(condition)
    found = []
    tasks = scan.planFiles()
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            task = json.loads(to_json(iterator.next()))
            deletes = []
            for delete in task.get("delete-files", ()):
                if delete.get("content") != "POSITION_DELETES" or delete.get("file-format") != "PARQUET":
                    return None
                deletes.append(delete["file-path"])
            data = task["data-file"]
            if data.get("file-format") != "PARQUET":
                return None
            found.append(DataFileScan(data["file-path"], int(data["record-count"]), tuple(sorted(deletes))))
    finally:
        tasks.close()
    return found


class Unreadable(MergeJobError):
    """A data file pyarrow cannot read here: the table goes through the Spark MERGE."""


def opener(lake: Lake, table: Any) -> Callable[[str], Any]:
    """What pyarrow reads a file of ``table`` from: a local path as it is, else a file of the
    filesystem pyarrow has for its scheme and authority (``s3://bucket``, ``gs://bucket``...);
    :class:`Unreadable` when there is none or the file does not open (Spark, through the
    table's FileIO, reads those)."""
    import pyarrow.fs as pafs

    filesystems: dict[str, Any] = {}

    def open_file(path: str) -> Any:
        if path.startswith("/"):
            return path
        if path.startswith("file:"):
            return "/" + path[len("file:"):].lstrip("/")
        scheme, _, rest = path.partition("://")
        try:
            if scheme in ("s3", "gs", "gcs"):  # pyarrow's path there is bucket/key: one filesystem a bucket
                where = f"{scheme}://{rest.split('/', 1)[0]}"
                if where not in filesystems:
                    filesystems[where] = pafs.FileSystem.from_uri(path)[0]
                return filesystems[where].open_input_file(rest)
            filesystem, inner = pafs.FileSystem.from_uri(path)
            return filesystem.open_input_file(inner)
        except Exception as exc:  # noqa: BLE001 - pyarrow cannot read it here
            raise Unreadable(f"{path}: {exc}") from None

    return open_file
