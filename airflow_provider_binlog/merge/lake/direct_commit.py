"""Direct commits: a table's collapsed changes (:mod:`..direct_changes`) written as a Parquet data
file and a delete file by pyarrow and committed through Iceberg's Java API, with no Spark job
and no query planning; the ledger row appended the same way.

The delete file drops the rows the touched keys had: by default as position deletes, the rows
located by reading the key columns of the data files whose bounds overlap the batch's keys
(:mod:`..position_deletes`, :mod:`.row_locator`), which every Iceberg reader applies; or, when
asked, as equality deletes on the primary key, which need no read but which PyIceberg, Polars
and Daft refuse and every scan must apply. Both reach only the data files of earlier commits,
so one row delta holding the deletes and the new rows replaces those rows atomically, as the
MERGE would. The commit carries the batch's summary properties like every other commit of
a batch (:func:`.commits.commit_update`), and is validated
from the snapshot the table was planned on: a commit of another writer in between fails it
instead of being overwritten. Tables this cannot write (partitioned, format v1, a column type
without an exact Arrow form, a catalog that does not give an Iceberg table) return None and go
through Spark.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import tempfile
import threading
import time
import uuid
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

from ..batches import Batch
from ..byte_budget import ByteBudget
from ..direct_changes import DELETES_EQUALITY, DELETES_POSITION, MAX_DIRECT_PARTS, DirectChanges, key_ranges
from ..iceberg_arrow import arrow_schema, conform
from ..key_range_split import split_by_key_range
from ..iceberg_contract import MODE_MERGE
from ..position_deletes import KeyColumnsMissing, locate
from ..staged_fold import collapse_staged
from ...staging.storage import total_size
from . import row_locator
from .base import Lake, java_array
from . import commits
from .commits import commit_properties
from .table_work import TableWork, float_key

_WRITE_CHUNK = 4 * 1024 * 1024
log = logging.getLogger(__name__)


class IcebergJava:
    """The Iceberg Java classes a direct commit uses (here and in :mod:`.direct_snapshot`),
    looked up once per JVM (each lookup through py4j is a round trip)."""

    _last: Optional[tuple[Any, "IcebergJava"]] = None  # (the JVM view, its classes)

    def __init__(self, jvm: Any) -> None:
        iceberg = jvm.org.apache.iceberg
        self.data_files = iceberg.DataFiles
        self.file_metadata = iceberg.FileMetadata
        self.parquet = iceberg.FileFormat.PARQUET
        self.metrics_config = iceberg.MetricsConfig
        self.position_delete_metrics = iceberg.MetricsConfig.forPositionDelete
        self.file_metrics = iceberg.parquet.ParquetUtil.fileMetrics
        self.always_true = iceberg.expressions.Expressions.alwaysTrue()
        self.equal = iceberg.expressions.Expressions.equal
        self.schema_json = iceberg.SchemaParser.toJson
        self._jvm = jvm
        self._footers: Any = None  # what reads a local file's footer (None: not looked up yet)
        self._footers_lock = threading.Lock()

    def _footer_reader(self) -> Any:  # a tuple, or False
        """``(read options builder, Parquet configuration, LocalInputFile, open, footerMetrics,
        java.io.File, Stream.empty)`` of the Parquet that Iceberg's runtime shades, the
        configuration made once; False when the runtime has no such classes."""
        with self._footers_lock:
            if self._footers is None:
                from py4j.java_gateway import JavaClass

                jvm = self._jvm
                parquet = jvm.org.apache.iceberg.shaded.org.apache.parquet
                classes = (parquet.ParquetReadOptions, parquet.conf.HadoopParquetConfiguration,
                           parquet.io.LocalInputFile, parquet.hadoop.ParquetFileReader)
                if all(isinstance(c, JavaClass) for c in classes):  # (a missing class is a package)
                    options, configuration, local_input, reader = classes
                    self._footers = (options.builder, configuration(), local_input, reader.open,
                                     jvm.org.apache.iceberg.parquet.ParquetUtil.footerMetrics, jvm.java.io.File,
                                     jvm.java.util.stream.Stream.empty)
                else:  # an Iceberg runtime without shaded Parquet
                    self._footers = False
            return self._footers

    def metrics(self, table: Any, location: str, config: Any) -> Any:
        """Iceberg's metrics of the Parquet file at ``location`` of ``table`` under ``config``, as
        ``ParquetUtil.fileMetrics`` gives them: from the file's footer. A local file's footer is
        read with read options made from one Parquet configuration kept for the JVM, where
        ``fileMetrics`` makes a new one (a Hadoop configuration parsed from its XML resources,
        searched for on the whole class path) for every file; the same read options otherwise,
        the same footer, the same metrics."""
        local = local_path(location, table)
        footers = self._footer_reader() if local is not None else None
        if footers:
            builder, parquet_conf, local_input, open_reader, footer_metrics, java_file, no_fields = footers
            reader = open_reader(local_input(java_file(local).toPath()), builder(parquet_conf).build())
            try:
                footer = reader.getFooter()
            finally:
                reader.close()
            return footer_metrics(footer, no_fields(), config, None)
        return self.file_metrics(table.io().newInputFile(location), config)

    @classmethod
    def of(cls, lake: Lake) -> "IcebergJava":
        jvm = lake.jvm
        last = cls._last
        if last is None or last[0] is not jvm:  # a new session's JVM
            last = cls._last = (jvm, cls(jvm))
        return last[1]


def _schema_fields(lake: Lake, table: Any) -> list[dict]:
    """The fields of ``table``'s current schema (its JSON form, read in one call)."""
    return json.loads(IcebergJava.of(lake).schema_json(table.schema()))["fields"]


class WrittenFiles(list):
    """Paths of the files a direct commit writes (here and in :mod:`.direct_snapshot`), as a
    context: when the commit fails they are deleted again (unless Iceberg cannot tell whether
    the commit went through)."""

    def __init__(self, table: Any) -> None:
        super().__init__()
        self.table = table

    def __enter__(self) -> "WrittenFiles":
        return self

    def __exit__(self, kind: Any, exc: Optional[BaseException], tb: Any) -> None:
        if exc is None or _unknown_state(exc):
            return
        for path in self:
            try:
                self.table.io().deleteFile(path)
            except Exception:  # noqa: BLE001 - an orphan file is harmless; the error that matters is raised
                pass


def _unknown_state(exc: BaseException) -> bool:
    return "CommitStateUnknownException" in str(exc)


def local_path(location: str, table: Any) -> Optional[str]:
    """The local path of a data file location of ``table``, None when it is elsewhere (an
    object store, or HDFS: a path without a scheme is on the default file system of the
    table's Hadoop configuration, which may not be the local one)."""
    if location.startswith("file://"):
        return location[len("file://"):]
    if location.startswith("file:"):
        return location[len("file:"):]
    if not location.startswith("/"):
        return None
    try:
        default = str(table.io().conf().get("fs.defaultFS") or "file:///")
    except Exception:  # noqa: BLE001 - a FileIO without a Hadoop configuration: not a local path
        return None
    return location if default.startswith("file:") else None


def _write(lake: Lake, table: Any, data: Any, kind: str, written: list,
           metrics_config: Any = None, store_schema: bool = True) -> tuple[str, int, Any]:
    """Write ``data`` as a Parquet file in ``table``'s data location: straight to the file for a
    local warehouse, else through the table's FileIO (any storage the catalog reaches, the bytes
    crossing into the JVM); its path, size and Iceberg metrics (of the table's metrics
    configuration unless ``metrics_config`` is given); ``store_schema``: whether the file also
    stores the Arrow schema (its dictionary columns are read back as such)."""
    import pyarrow.parquet as pq

    java = IcebergJava.of(lake)
    path = table.locationProvider().newDataLocation(f"binlog-{kind}-{uuid.uuid4().hex}.parquet")
    written.append(path)
    local = local_path(path, table)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        pq.write_table(data, local, compression="zstd", store_schema=store_schema)
        size = os.path.getsize(local)
    else:
        buffer = io.BytesIO()
        pq.write_table(data, buffer, compression="zstd", store_schema=store_schema)
        payload = buffer.getvalue()
        size = len(payload)
        out = table.io().newOutputFile(path).create()
        try:
            for at in range(0, len(payload), _WRITE_CHUNK):
                out.write(payload[at:at + _WRITE_CHUNK])
        finally:
            out.close()
    config = java.metrics_config.forTable(table) if metrics_config is None else metrics_config
    metrics = java.metrics(table, path, config)
    return path, size, metrics


def _data_file(lake: Lake, table: Any, spec: Any, data: Any, written: list) -> Any:
    java = IcebergJava.of(lake)
    path, size, metrics = _write(lake, table, data, "data", written)
    return (java.data_files.builder(spec).withPath(path).withFormat(java.parquet)
            .withFileSizeInBytes(size).withMetrics(metrics).build())


def _equality_delete_file(lake: Lake, table: Any, spec: Any, keys: Any, field_ids: Sequence[int],
                          written: list) -> Any:
    java = IcebergJava.of(lake)
    path, size, metrics = _write(lake, table, keys, "eq-deletes", written)
    ids = java_array(lake.gateway, lake.jvm.int, field_ids)
    return (java.file_metadata.deleteFileBuilder(spec).ofEqualityDeletes(ids).withPath(path)
            .withFormat(java.parquet).withFileSizeInBytes(size).withMetrics(metrics).build())


def position_delete_file(lake: Lake, table: Any, spec: Any, deletes: Any, written: list) -> Any:
    """A position delete file of ``deletes`` (``position_delete_schema()`` rows, sorted by path
    and position) written into ``table``."""
    java = IcebergJava.of(lake)
    # full bounds of file_path: readers match a delete file to the data files it names by them
    path, size, metrics = _write(lake, table, deletes, "pos-deletes", written,
                                 java.position_delete_metrics(table), store_schema=False)
    return (java.file_metadata.deleteFileBuilder(spec).ofPositionDeletes().withPath(path)
            .withFormat(java.parquet).withFileSizeInBytes(size).withMetrics(metrics).build())


def _located_deletes(lake: Lake, table: Any, planned_head: int, keys: Any,
                     key_fields: Sequence[Mapping[str, Any]]) -> Optional[Any]:
    """The position deletes of the rows ``keys`` have in ``table`` at ``planned_head``; None
    when a data file there has a delete this module does not read (equality deletes, deletion
    vectors)."""
    if int(table.operations().current().formatVersion()) >= 3:
        return None  # format 3 takes deletion vectors, not position delete files: Spark writes them
    began = time.monotonic()
    files = row_locator.files_to_search(lake, table, planned_head, keys, int(key_fields[0]["id"]))
    if files is None:
        return None
    planned = time.monotonic()
    try:
        found = locate(files, keys, [int(f["id"]) for f in key_fields], row_locator.opener(lake, table))
    except (row_locator.Unreadable, KeyColumnsMissing) as exc:
        log.info("%s: the rows to replace are located by the MERGE (%s)", table.name(), exc)
        return None
    log.info("%s: %d rows of %d keys located in %d data files (%d rows) in %.2f s (planning %.2f s)",
             table.name(), found.num_rows, keys.num_rows, len(files), sum(f.record_count for f in files),
             time.monotonic() - began, planned - began)
    return found


def _writable(table: Any, spec: Any, deletes: bool = False) -> bool:
    """Whether this module writes ``table``: unpartitioned, and for ``deletes`` (a row delta)
    of format 2 and merged on read (a table set to copy-on-write gets no delete files)."""
    try:
        if not spec.isUnpartitioned():
            return False
        return not deletes or (int(table.operations().current().formatVersion()) >= 2
                               and table.properties().get("write.merge.mode") == "merge-on-read")
    except Exception:  # noqa: BLE001 - not a BaseTable: Spark writes it
        return False


def takes_position_deletes(table: Any, spec: Any) -> bool:
    """Whether ``table`` takes position delete files in a row delta: unpartitioned, merged on
    read, of format 2 (format 3 takes deletion vectors instead)."""
    try:
        return _writable(table, spec, deletes=True) and int(table.operations().current().formatVersion()) == 2
    except Exception:  # noqa: BLE001 - not a BaseTable
        return False


_NOT_WRITTEN = -1


def writable_table(lake: Lake, name: str, deletes: bool) -> Optional[tuple[Any, Any, list[dict]]]:
    """Iceberg table ``name`` as last committed, its partition spec and its schema's fields,
    when a direct commit (here or in :mod:`.direct_snapshot`) can write it (see
    :func:`_writable`); else None, and Spark writes it."""
    table = lake.load_table(name)
    if table is None:
        return None
    spec = table.spec()
    if not _writable(table, spec, deletes=deletes):
        return None
    return table, spec, _schema_fields(lake, table)


class _NotDirect(Exception):
    """A part of the changes this module does not write: the files written are deleted and
    Spark commits the table."""


def commit_changes(lake: Lake, name: str, changes: Union[DirectChanges, Iterable[Optional[DirectChanges]]],
                   primary_key: Sequence[str], props: Mapping[str, str], *, planned_head: Optional[int],
                   replace: bool, deletes: str = DELETES_POSITION) -> Optional[int]:
    """Commit ``changes`` to Iceberg table ``name``, planned on snapshot ``planned_head``:
    ``replace`` (after a TRUNCATE) makes the new rows the table's whole content, otherwise
    the touched keys' rows are replaced, dropped by ``deletes`` (position or equality deletes).
    ``changes`` may be parts (disjoint key ranges, made one at a time as they are iterated:
    each part's files are written before the next is made), committed together in one commit;
    a part that is None is one this module does not write.
    Returns the table's snapshot id after it (the planned one when there was nothing to
    change), or ``_NOT_WRITTEN`` (nothing written) when the table is not one this module
    writes; then Spark does."""
    import pyarrow.compute as pc

    found = writable_table(lake, name, deletes=not replace)
    if found is None:
        return _NOT_WRITTEN
    table, spec, fields = found
    by_name = {f["name"]: f for f in fields}
    schema = arrow_schema(fields)
    key_schema = arrow_schema([by_name[k] for k in primary_key]) if set(primary_key) <= set(by_name) else None
    if schema is None or key_schema is None:
        return _NOT_WRITTEN
    parts = [changes] if isinstance(changes, DirectChanges) else changes
    data_files, delete_files, searched = [], [], set()
    try:
        with WrittenFiles(table) as written:
            for part in parts:
                if part is None or sorted(f["name"] for f in fields) != sorted(part.rows.column_names):
                    raise _NotDirect()
                rows, keys = conform(part.rows, schema), conform(part.keys, key_schema)
                if rows is None or keys is None:
                    raise _NotDirect()
                if rows.num_rows:
                    data_files.append(_data_file(lake, table, spec, rows, written))
                if replace or not keys.num_rows or planned_head is None:
                    continue  # an empty table has no rows to replace
                if deletes == DELETES_POSITION:
                    located = _located_deletes(lake, table, planned_head, keys, [by_name[k] for k in primary_key])
                    if located is None:
                        raise _NotDirect()
                    if located.num_rows:
                        delete_files.append(position_delete_file(lake, table, spec, located, written))
                        searched.update(pc.unique(located.column("file_path")).to_pylist())
                elif deletes == DELETES_EQUALITY:
                    delete_files.append(_equality_delete_file(
                        lake, table, spec, keys, [by_name[k]["id"] for k in primary_key], written))
            if not replace and not data_files and not delete_files:
                return planned_head  # nothing to change (or deletes of keys the table does not hold)
            commits.commit_update(_update(lake, table, data_files, delete_files, sorted(searched),
                                          planned_head=planned_head, replace=replace), props)
    except _NotDirect:
        return _NOT_WRITTEN
    snapshot = table.currentSnapshot()  # the table object the commit went through is current
    return None if snapshot is None else int(snapshot.snapshotId())


def overwrite_update(lake: Lake, table: Any, data_files: list, planned_head: Optional[int]) -> Any:
    """An overwrite making ``data_files`` the whole content of ``table`` (here after a TRUNCATE,
    and for :mod:`.direct_snapshot`), validated from ``planned_head`` (None: the table had no
    snapshot when the batch was planned): it fails when another writer committed data or
    deletes since."""
    always = IcebergJava.of(lake).always_true
    update = table.newOverwrite().overwriteByRowFilter(always)
    for data_file in data_files:
        update = update.addFile(data_file)
    if planned_head is not None:
        update = update.validateFromSnapshot(planned_head)
    # without a planned head, from the table's first snapshot: a table planned empty that
    # another merge wrote to since is a conflict too
    return update.conflictDetectionFilter(always).validateNoConflictingData().validateNoConflictingDeletes()


def row_delta_update(lake: Lake, table: Any, data_files: list, delete_files: list) -> Any:
    """A row delta adding ``data_files`` and ``delete_files`` to ``table``, which had no
    snapshot when the batch was planned (validated from its first one)."""
    return _update(lake, table, data_files, delete_files, [], planned_head=None, replace=False)


def _update(lake: Lake, table: Any, data_files: list, delete_files: list, searched: list[str], *,
            planned_head: Optional[int], replace: bool) -> Any:
    """The one commit of a direct commit's files: an overwrite of the whole table (``replace``)
    or a row delta, validated from ``planned_head`` (None: from the table's first snapshot)."""
    if replace:
        return overwrite_update(lake, table, data_files, planned_head)
    always = IcebergJava.of(lake).always_true
    update = table.newRowDelta()
    for data_file in data_files:
        update = update.addRows(data_file)
    for delete_file in delete_files:
        update = update.addDeletes(delete_file)
    if searched:
        # the files the positions name must still be there (a compaction would move the rows)
        update = update.validateDataFilesExist(searched).validateDeletedFiles()
    if planned_head is not None:
        update = update.validateFromSnapshot(planned_head)
    return update.conflictDetectionFilter(always).validateNoConflictingDataFiles().validateNoConflictingDeleteFiles()


def append_rows(lake: Lake, name: str, rows: Any, props: Mapping[str, str], *,
                planned_head: Optional[int], conflicts: Optional[tuple[str, str]] = None) -> bool:
    """Append ``rows`` (a pyarrow table with the table's column names) to Iceberg table
    ``name`` in one commit, validated from ``planned_head`` (None: from the table's first
    snapshot): rows appended since by another writer whose column ``conflicts[0]`` may hold
    ``conflicts[1]`` (any rows, without ``conflicts``) fail it. False (nothing written) when
    this module does not write the table."""
    found = writable_table(lake, name, deletes=False)
    if found is None:
        return False
    table, spec, fields = found
    schema = arrow_schema(fields)
    if schema is None or sorted(schema.names) != sorted(rows.column_names):
        return False
    data = conform(rows, schema)
    if data is None:
        return False
    java = IcebergJava.of(lake)
    where = java.always_true if conflicts is None else java.equal(conflicts[0], conflicts[1])
    with WrittenFiles(table) as written:
        update = table.newRowDelta().addRows(_data_file(lake, table, spec, data, written))
        if planned_head is not None:
            update = update.validateFromSnapshot(planned_head)
        commits.commit_update(update.conflictDetectionFilter(where).validateNoConflictingDataFiles(), props)
    return True


def plan_allows_direct(work: TableWork) -> bool:
    """What the table's plan says of a direct commit: merged by key into a table that exists, no
    schema statement, default backfill, renamed column or data-contract column. Columns with a
    default do not keep a table from it: only an image that leaves such a column out needs the
    default (``work.insert_defaults``), and the direct folds refuse every image lacking a column."""
    return (work.mode == MODE_MERGE and work.exists and bool(work.files) and not work.statements
            and not work.defaults and not any(work.fields)
            and not work.contract_columns and not float_key(work))


def direct_candidate(work: TableWork) -> bool:
    """Whether the table's batch is simple enough for a direct commit: its plan allows one (see
    :func:`plan_allows_direct`), and its staged changes are known (read without Spark) to
    change no key and to hold whole images."""
    facts = work.facts
    return (plan_allows_direct(work) and facts is not None and not facts.key_changes
            and not facts.partial_updates and not facts.partial_inserts)


def _fold(work: TableWork, max_bytes: Optional[int], files: Optional[Sequence[str]] = None,
          size: Optional[int] = None) -> Optional[DirectChanges]:
    """The table's staged changes (or ``files`` of them) folded (see :mod:`..staged_fold`)."""
    return collapse_staged(work.files if files is None else files, work.primary_key,
                           [n for n, _ in work.plan.columns], since=work.since,
                           reset=work.resets[-1]["_position"] if work.resets else None,
                           max_bytes=max_bytes, staged_bytes=size)


def fold_ahead(work: TableWork, max_bytes: int) -> Optional[bool]:
    """Before anything of the batch is committed: fold the table's changes now when its plan
    allows a direct commit and its staged files hold at most ``max_bytes``, kept for
    :func:`apply_direct` (one read of the staged files tells whether the changes are simple
    and what to commit). True when folded, False when the changes are not simple (Spark must
    merge them), None when not folded here (then the staged facts decide)."""
    if max_bytes <= 0 or not plan_allows_direct(work):
        return None
    size = total_size(work.files, work.staged_bytes)
    if size > max_bytes:
        return None
    work.folded = _fold(work, max_bytes, size=size)
    return work.folded is not None


def apply_direct(lake: Lake, work: TableWork, batch: Batch, stream: str, max_bytes: int,
                 deletes: str = DELETES_POSITION, budget: Optional[ByteBudget] = None) -> Optional[dict]:
    """The table's batch committed directly (see the module's docstring), with the table's
    snapshot id after it; None when it is not a candidate, and nothing was written.

    Staged files of more than ``max_bytes`` are folded in parts, key range by key range (at
    most :data:`MAX_DIRECT_PARTS`), each part's files written before the next part is read,
    and committed together in one commit; a range that would hold more than twice
    ``max_bytes`` (a key with very many changes) sends the table to Spark. ``budget``: the
    bytes the tables committed at once may fold in memory together; a part holds its staged
    bytes from it while it is folded and written."""
    if max_bytes <= 0 or not work.files or (work.folded is None and not direct_candidate(work)):
        return None  # (folded ahead: its changes are simple)
    size = total_size(work.files, work.staged_bytes)
    parts = -(-size // max_bytes)
    if parts > MAX_DIRECT_PARTS:
        return None
    props = commit_properties(batch, stream, work.source)

    def held(staged: int) -> Any:
        return budget.hold(staged) if budget is not None else contextlib.nullcontext()

    if parts == 1:
        with held(size):
            changes, work.folded = work.folded or _fold(work, max_bytes, size=size), None
            if changes is None:
                return None
            snapshot_id = commit_changes(lake, work.name, changes, work.primary_key, props,
                                         planned_head=work.state.head, replace=bool(work.resets), deletes=deletes)
    else:
        if writable_table(lake, work.name, deletes=not work.resets) is None:
            return None  # before reading the batch: Spark writes this table
        ranges = key_ranges(work.files, work.primary_key[0], parts)
        if ranges is None:
            return None
        with tempfile.TemporaryDirectory(prefix="binlog-direct-") as spill:
            split = split_by_key_range(work.files, work.primary_key[0], ranges, spill)
            if split is None:
                return None
            total = sum(rows for _, rows in split) or 1
            largest = max(rows for _, rows in split) * size // total
            if largest > 2 * max_bytes:
                log.info("%s: one key range would fold %d MiB of staged changes: the MERGE takes the table",
                         work.name, largest >> 20)
                return None
            log.info("%s: %d MiB of staged changes folded in %d key ranges", work.name, size >> 20, len(ranges))

            def folded() -> Iterator[Optional[DirectChanges]]:
                for files, rows in split:
                    if files:
                        with held(rows * size // total):  # while the part is folded and written
                            yield _fold(work, None, files)

            pending = folded()
            try:
                snapshot_id = commit_changes(lake, work.name, pending, work.primary_key, props,
                                             planned_head=work.state.head, replace=bool(work.resets),
                                             deletes=deletes)
            finally:
                pending.close()  # the part's bytes go back to the budget now, also after an error
    if snapshot_id == _NOT_WRITTEN:
        return None
    return {"truncated": bool(work.resets), "key_change_chains": False, "direct": True,
            "snapshot_id": snapshot_id}
