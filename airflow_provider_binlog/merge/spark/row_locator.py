"""The data files of an Iceberg table that may hold a batch's keys, from Iceberg's own scan
planning (manifest column bounds prune the rest), and a way for pyarrow to read them from the
table's storage; the rows themselves are found by :mod:`..position_deletes`."""
from __future__ import annotations

import io
import json
import logging
from typing import Any, Callable, Optional, Sequence

from pyspark.sql import SparkSession

from ..position_deletes import DataFileScan

log = logging.getLogger(__name__)


def _bounds_filter(expressions: Any, name: str, keys: Any) -> Any:
    """Iceberg's filter on the first key column's range of ``keys`` (integers and text); all
    rows for other types."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = keys.column(name)
    if pa.types.is_integer(column.type) or pa.types.is_string(column.type):
        bounds = pc.min_max(column).as_py()
        both = getattr(expressions, "and")  # a Python keyword: py4j reaches the Java method by name
        return both(expressions.greaterThanOrEqual(name, bounds["min"]),
                    expressions.lessThanOrEqual(name, bounds["max"]))
    return expressions.alwaysTrue()


def files_to_search(spark: SparkSession, table: Any, snapshot_id: int, key_names: Sequence[str],
                    keys: Any) -> Optional[list[DataFileScan]]:
    """The data files of ``table`` at ``snapshot_id`` whose bounds of the first key column
    overlap ``keys``, each with its position delete files; None when one of them has an
    equality delete or a deletion vector applied to it (Spark's MERGE reads those).

    Each task crosses py4j as Iceberg's own JSON form (``ScanTaskParser``): three calls a
    file instead of some seventy for its fields one by one."""
    jvm = spark.sparkContext._jvm
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    to_json = jvm.org.apache.iceberg.ScanTaskParser.toJson
    scan = table.newScan().useSnapshot(snapshot_id).filter(_bounds_filter(expressions, key_names[0], keys))
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
            found.append(DataFileScan(data["file-path"], int(data["record-count"]), tuple(sorted(deletes))))
    finally:
        tasks.close()
    return found


def opener(spark: SparkSession, table: Any) -> Callable[[str], Any]:
    """What pyarrow reads a file of ``table`` from: a local path as it is, a path pyarrow has a
    filesystem for, else the bytes read through the table's FileIO."""
    import pyarrow.fs as pafs

    filesystems: dict[str, Any] = {}

    def open_file(path: str) -> Any:
        if path.startswith("/"):
            return path
        if path.startswith("file:"):
            return "/" + path[len("file:"):].lstrip("/")
        scheme = path.split(":", 1)[0]
        if scheme not in filesystems:
            try:
                filesystems[scheme] = pafs.FileSystem.from_uri(path)[0]
            except Exception as exc:  # noqa: BLE001 - no pyarrow filesystem: read through Iceberg's FileIO
                log.info("reading %s files through the table's FileIO (%s)", scheme, exc)
                filesystems[scheme] = None
        filesystem = filesystems[scheme]
        if filesystem is not None:
            return filesystem.open_input_file(path.split("://", 1)[-1])
        stream = table.io().newInputFile(path).newStream()
        try:
            return io.BytesIO(bytes(spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)))
        finally:
            stream.close()

    return open_file
