"""Direct commits of snapshot batches: an initial load (or a reload) written as Iceberg data
files by pyarrow and committed as one overwrite through Iceberg's Java API, with no Spark job,
no shuffle and no per-key collapse.

The staged rows stream through :class:`..snapshot_fold.SnapshotFold` (each key once: the
changes a watermark snapshot staged are folded in on the driver, the rest goes out as read),
are converted to the table's Arrow schema with Iceberg's field ids
(:func:`..iceberg_arrow.conform`) and written in row groups into data files of the table's
target size, at the table's data location: straight to the file for a local warehouse,
through the table's FileIO otherwise. The files' metrics come from their footers
(``ParquetUtil.fileMetrics``). One ``OverwriteFiles`` replaces the table's whole content with
them and carries the batch's summary properties, validated from the snapshot the table was
planned on, as every commit of a batch does. A failed write or commit deletes the files it
wrote (unless Iceberg cannot tell whether the commit went through).

Row files (``staging/row_files.py``) in the table's layout (:func:`adoptable`) are not read nor
written again: each is copied as it is into the table's data location and added with its
footer's metrics. The rows of keys a staged change touches are folded with the changes; into
a table without a snapshot, their row file is taken all the same, those rows dropped by a
position delete file, in one row delta instead of the overwrite (a reload rewrites such a
file).

Tables this does not write go through Spark: partitioned layouts, a sort order other than the
primary key's, a type without an exact Arrow form, a value that does not convert exactly,
data-contract columns, columns renamed or added inside the batch, a TRUNCATE inside it,
changes with MINIMAL or NOBLOB images, more changes than the driver holds, and a snapshot
that gave a key twice.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable, Optional

from ..batches import Batch
from ..iceberg_arrow import arrow_schema, conform
from ..iceberg_contract import MODE_MERGE
from ..snapshot_fold import SnapshotFold
from .base import Lake
from . import commits
from .commits import commit_properties
from .direct_commit import (
    IcebergJava,
    WrittenFiles,
    local_path,
    overwrite_update,
    position_delete_file,
    row_delta_update,
    takes_position_deletes,
    writable_table,
)
from .conflicts import concurrent_commit
from .table_work import TableWork, float_key, run_statements

log = logging.getLogger(__name__)

#: Rows per row group of the data files written (Iceberg's default is 128 MiB per row group).
ROW_GROUP_ROWS = 1 << 20
_DEFAULT_TARGET_BYTES = 512 * 1024 * 1024
_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "uncompressed": "none"}
_COPY_CHUNK = 4 * 1024 * 1024
_COPY_THREADS = 4


def snapshot_candidate(work: TableWork) -> bool:
    """Whether a table's share of a snapshot batch may be committed directly: merged by key,
    rows staged, no rename, default backfill, data-contract column or column added inside the
    batch, and only the snapshot's own reset (no TRUNCATE inside it). Column defaults are no
    bar: the snapshot's rows are whole, and a change whose image lacks a column is refused by
    the fold (:func:`..direct_changes.fold_changes`), leaving the table to Spark."""
    plan = work.plan
    return (work.mode == MODE_MERGE and bool(work.files) and work.since is None and len(work.resets) == 1
            and not work.defaults and not any(work.fields)
            and not work.contract_columns and plan is not None and not float_key(work)
            and not any(v > 0 for v in plan.valid_from.values()))


class _DataFiles:
    """Data files of one table written from Arrow chunks: row groups of :data:`ROW_GROUP_ROWS`,
    a new file when one reaches the table's target size. The row groups are encoded and
    compressed by a thread of their own while the next ones are read and folded (one in
    flight at a time, so at most two row groups are held)."""

    def __init__(self, lake: Lake, table: Any, spec: Any, schema: Any, written: list) -> None:
        props = table.properties()
        self.lake, self.table, self.spec, self.schema, self.written = lake, table, spec, schema, written
        self.target = int(props.get("write.target-file-size-bytes") or _DEFAULT_TARGET_BYTES)
        codec = str(props.get("write.parquet.compression-codec") or "zstd").lower()
        if codec not in _CODECS:
            raise _Unwritable(f"compression codec {codec!r}")
        self.codec = _CODECS[codec]
        level = props.get("write.parquet.compression-level")
        self.level = int(level) if level else None
        self.files: list[Any] = []
        self._pending: list[Any] = []
        self._pending_rows = 0
        self._open: Optional[tuple[str, Optional[str], Any, Any]] = None  # location, temp path, sink, writer
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="binlog-snapshot-write")
        self._in_flight: Optional[Future] = None

    def add(self, chunk: Any) -> None:
        self._pending.append(chunk)
        self._pending_rows += chunk.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if not self._pending_rows:
            return
        rows = pa.concat_tables(self._pending)
        self._pending, self._pending_rows = [], 0
        self._wait()
        self._in_flight = self._thread.submit(self._write_groups, rows)

    def _wait(self) -> None:
        """Wait for the row groups in flight; their error is raised here."""
        if self._in_flight is not None:
            done, self._in_flight = self._in_flight, None
            done.result()

    def _write_groups(self, rows: Any) -> None:
        for at in range(0, rows.num_rows, ROW_GROUP_ROWS):
            group = rows.slice(at, ROW_GROUP_ROWS)
            self._writer().write_table(group, row_group_size=group.num_rows)
            if self._open is not None and self._open[2].tell() >= self.target:
                self._close_file()

    def _writer(self) -> Any:
        """The Parquet writer of the data file being written, a new file when none is."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._open is None:
            location = self.table.locationProvider().newDataLocation(f"binlog-snapshot-{uuid.uuid4().hex}.parquet")
            self.written.append(location)
            local = local_path(location, self.table)
            temp = None
            if local is None:
                fd, temp = tempfile.mkstemp(suffix=".parquet")
                os.close(fd)
            else:
                os.makedirs(os.path.dirname(local), exist_ok=True)
            sink = pa.OSFile(local or temp, "wb")
            writer = pq.ParquetWriter(sink, self.schema, compression=self.codec, compression_level=self.level,
                                      write_statistics=True)
            self._open = (location, temp, sink, writer)
        return self._open[3]

    def _close_file(self) -> None:
        if self._open is None:
            return
        location, temp, sink, writer = self._open
        self._open = None
        writer.close()
        size = sink.tell()
        sink.close()
        if temp is not None:
            try:
                self._upload(temp, location)
            finally:
                os.unlink(temp)
        self._add_data_file(location, size)

    def _add_data_file(self, location: str, size: int) -> None:
        self.files.append(self._data_file(location, size))

    def _data_file(self, location: str, size: int) -> Any:
        """The data file at ``location``, with the metrics of its footer."""
        java = IcebergJava.of(self.lake)
        metrics = java.metrics(self.table, location, java.metrics_config.forTable(self.table))
        return (java.data_files.builder(self.spec).withPath(location).withFormat(java.parquet)
                .withFileSizeInBytes(size).withMetrics(metrics).build())

    def _upload(self, temp: str, location: str) -> None:
        with open(temp, "rb") as fh:
            self._stream_to(fh, location)

    def _stream_to(self, source: Any, location: str) -> None:
        out = self.table.io().newOutputFile(location).create()
        try:
            while True:
                block = source.read(_COPY_CHUNK)
                if not block:
                    break
                out.write(bytes(block))
        finally:
            out.close()

    def copy_all(self, staged: list[str]) -> dict[str, str]:
        """:meth:`copy` of each of ``staged``, on a few threads (the cost is per file, the
        footer's metrics read by Iceberg above all), in order; the table location of each."""
        def one(location: str) -> tuple[str, Any]:
            copied, size = self.copy(location)
            return copied, self._data_file(copied, size)

        with ThreadPoolExecutor(min(_COPY_THREADS, max(1, len(staged))),
                                thread_name_prefix="binlog-snapshot-copy") as pool:
            done = list(pool.map(one, staged))
        self.files += [data_file for _, data_file in done]
        return {location: copied for location, (copied, _) in zip(staged, done)}

    def copy(self, staged: str) -> tuple[str, int]:
        """A staged row file (``staging/row_files.py``) copied as it is into the table's data
        location, and its location there and size: its rows are not read nor written again,
        and the staging's retention cannot delete a file the table refers to."""
        from ...staging.location import is_object_store
        from ...staging.storage import filesystem
        from ...staging.storage import local_path as staged_path

        location = self.table.locationProvider().newDataLocation(f"binlog-snapshot-{uuid.uuid4().hex}.parquet")
        self.written.append(location)
        local = local_path(location, self.table)
        if local is not None and not is_object_store(staged):
            os.makedirs(os.path.dirname(local), exist_ok=True)
            shutil.copyfile(staged_path(staged), local)
            return location, os.path.getsize(local)
        fs, path = filesystem(staged)
        with fs.open_input_stream(path) as source:
            if local is None:
                self._stream_to(source, location)
                return location, int(self.table.io().newInputFile(location).getLength())
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "wb") as out:
                shutil.copyfileobj(source, out, _COPY_CHUNK)
        return location, os.path.getsize(local)

    def close(self) -> list[Any]:
        try:
            self._flush()
            self._wait()
            self._close_file()
        finally:
            self._thread.shutdown()
        return self.files

    def abort(self) -> None:
        try:
            self._wait()
        except BaseException:  # noqa: BLE001 - the error that aborts is raised by the caller
            pass
        self._thread.shutdown()
        if self._open is not None:
            location, temp, sink, writer = self._open
            self._open = None
            for closing in (writer.close, sink.close):
                try:
                    closing()
                except Exception:  # noqa: BLE001 - the file is deleted next
                    pass
            if temp is not None:
                os.unlink(temp)


class _Unwritable(Exception):
    """The table or a value is not one this module writes (Spark does)."""


def _sorted_otherwise(table: Any, fields: list[dict], primary_key: list[str]) -> bool:
    """Whether ``table`` has a sort order other than its primary key's, ascending (the one
    the merge job gives the tables it creates): the snapshot's rows come in key order as
    read, not sorted by another column."""
    try:
        order = table.sortOrder()
        if order.isUnsorted():
            return False
        ids = {f["name"]: int(f["id"]) for f in fields}
        wanted = [ids.get(k) for k in primary_key]
        got = [(int(f.sourceId()), str(f.direction()), f.transform().isIdentity()) for f in order.fields()]
        return got != [(i, "ASC", True) for i in wanted]
    except Exception:  # noqa: BLE001 - not a BaseTable
        return True


def adoptable(flat: Any, schema: Any) -> bool:
    """Whether a row file's own schema ``flat`` is the table's Arrow ``schema`` as Iceberg reads
    it: the same columns, each of the same primitive type and field id (the ids Iceberg gave
    the columns of a table it created from them), none required by the table."""
    import pyarrow as pa

    from ..iceberg_arrow import FIELD_ID

    if sorted(flat.names) != sorted(schema.names) or len(set(flat.names)) != len(flat.names):
        return False
    for field in schema:
        staged = flat.field(field.name)
        if (not field.nullable or staged.type != field.type or pa.types.is_nested(field.type)
                or (staged.metadata or {}).get(FIELD_ID) != (field.metadata or {}).get(FIELD_ID)):
            return False
    return True


def _adopt(fold: SnapshotFold, files: Iterable[str], schema: Any, with_deletes: bool) -> list[str]:
    """The row files of ``files`` committed as they are: those in the table's layout
    (:func:`adoptable`) whose keys no staged change touches, or ``with_deletes`` whatever the
    changes touch (see :meth:`SnapshotFold.adopt`)."""
    from ...staging.row_files import StagedRowsFile
    from ...staging.storage import open_parquet

    taken = []
    for location in files:
        source = open_parquet(location)
        if isinstance(source, StagedRowsFile) and adoptable(source.flat_schema, schema) \
                and fold.adopt(location, source, with_deletes=with_deletes):
            taken.append(location)
    return taken


def _position_deletes(lake: Lake, table: Any, spec: Any, deleted: dict[str, Any],
                      copied: dict[str, str], written: list) -> list[Any]:
    """The position delete file of the rows of adopted row files that the changes replace (each
    named by the path its file was copied to); none when there are none."""
    import pyarrow as pa

    from ..position_deletes import position_delete_schema

    parts = [(copied[staged], positions) for staged, positions in deleted.items() if len(positions)]
    if not parts:
        return []
    parts.sort(key=lambda p: p[0])  # sorted by path, then position, as Iceberg requires
    paths = pa.array([path for path, _ in parts], pa.string())
    indices = pa.array([i for i, (_, positions) in enumerate(parts) for _ in range(len(positions))], pa.int32())
    schema = position_delete_schema()
    deletes = pa.table([pa.DictionaryArray.from_arrays(indices, paths),
                        pa.concat_arrays([positions.cast(pa.int64()) for _, positions in parts])], schema=schema)
    return [position_delete_file(lake, table, spec, deletes, written)]


def _write(data_files: _DataFiles, chunks: Iterable[Any], schema: Any) -> None:
    for chunk in chunks:
        data = conform(chunk, schema)
        if data is None:
            raise _Unwritable("a value does not convert exactly to the table's type")
        data_files.add(data)


def _through_spark(work: TableWork, why: str) -> None:
    log.info("%s: the snapshot goes through Spark (%s)", work.name, why)
    return None


def apply_snapshot_direct(lake: Lake, work: TableWork, batch: Batch, stream: str, max_change_bytes: int,
                          sql: Optional[Callable[[str], Any]] = None) -> Optional[dict]:
    """The table's share of snapshot ``batch`` committed directly (see the module's docstring),
    with the table's snapshot id after it; None when Spark must write it (nothing committed;
    the table's schema statements may have run, and are then taken off ``work.statements``)."""
    if max_change_bytes <= 0:
        return None
    if not snapshot_candidate(work):
        return _through_spark(work, "a change log, data-contract columns, a FLOAT or DOUBLE key, or a rename, "
                                    "column or TRUNCATE inside the snapshot")
    columns = [n for n, _ in work.plan.columns]
    fold = SnapshotFold.plan(work.files, work.primary_key, columns, max_change_bytes=max_change_bytes)
    if fold is None:
        return _through_spark(work, f"MINIMAL or NOBLOB images among its changes, or more than "
                                    f"{max_change_bytes} bytes of changes")
    ran = run_statements(lake, work, sql)  # the create or schema change comes first, as in the Spark path
    found = writable_table(lake, work.name, deletes=False)
    if found is None:
        return _through_spark(work, "partitioned, or not an Iceberg table this writes")
    table, spec, fields = found
    if _sorted_otherwise(table, fields, work.primary_key):
        return _through_spark(work, "sorted by other than its primary key")
    schema = arrow_schema(fields)
    if schema is None or sorted(f["name"] for f in fields) != sorted(columns):
        return _through_spark(work, "a column type without an exact Arrow form")
    began = time.monotonic()
    head = table.currentSnapshot()
    planned_head = work.state.head
    if (None if head is None else int(head.snapshotId())) != planned_head:
        raise concurrent_commit(work.name, batch.batch_id)
    try:
        with WrittenFiles(table) as written:
            data_files = _DataFiles(lake, table, spec, schema, written)
            try:
                copied: dict[str, str] = {}
                if data_files.codec == "zstd" and data_files.level is None:  # as row files are compressed
                    # into a new table, a row file a change touches is taken too, with position deletes
                    with_deletes = planned_head is None and takes_position_deletes(table, spec)
                    copied = data_files.copy_all(_adopt(fold, work.files, schema, with_deletes))
                _write(data_files, fold.rows(), schema)
                if not fold.unique:
                    work.reads_distinct = False
                    raise _Unwritable("the snapshot gave a key more than once")
                files = data_files.close()
            except BaseException:
                data_files.abort()
                raise
            deletes = _position_deletes(lake, table, spec, fold.deleted, copied, written)
            update = row_delta_update(lake, table, files, deletes) if deletes else \
                overwrite_update(lake, table, files, planned_head)
            commits.commit_update(update, commit_properties(batch, stream, work.source))
    except _Unwritable as why:
        return _through_spark(work, str(why))
    snapshot = table.currentSnapshot()
    adopted = sum(fold.adopted.values())
    log.info("%s: snapshot committed directly: %d rows in %d staged files taken as they are (%d of their rows "
             "replaced by position deletes), %d rows as read, %d folded with the binlog's changes, %d data files, "
             "%.2f s", work.name, adopted, len(fold.adopted), sum(len(p) for p in fold.deleted.values()),
             fold.streamed, fold.folded, len(files), time.monotonic() - began)
    return {"truncated": True, "key_change_chains": False, "direct": True, "schema_changes": ran,
            "snapshot_id": None if snapshot is None else int(snapshot.snapshotId()),
            "rows_written": fold.streamed + fold.folded + adopted, "rows_adopted": adopted}

