"""Part files: the Parquet files a stager writes per table and layout generation, a row group
at a time on a background thread. Used by the staging writer in the dump's own process and by
its worker processes (:mod:`.parallel`)."""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, cast
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from ..codec.events import ABSENT, TableMap
from .background import BackgroundWriter
from .contract import schema_fingerprint, staging_schema
from .convert import ColumnStager, Counters
from .manifest import file_sha256
from .masking import EXCLUDE, HASH, Masking, MaskingError, masked_image_type
from .row_files import ROWS_KEY, flat_schema, footer_value, segment

if TYPE_CHECKING:
    from ..codec.rows import DeferredRows

_Absent = type(ABSENT)

#: (schema, table)
_Key = tuple[str, str]
#: the envelope of one rows event: (file, seq, pos, gtid, commit_ts, txn)
_Envelope = tuple[str, int, int, Optional[str], dt.datetime, str]
#: the description of one part file, as the manifest lists it
_FileDesc = dict[str, Any]
#: the absent column names of each row (None: none absent)
_Absents = list[Optional[list[str]]]


def safe_name(name: str) -> str:
    return quote(name, safe="")


_EVENT_COLUMNS = ("_op", "_binlog_file", "_binlog_seq", "_binlog_pos", "_gtid", "_commit_ts", "_txn")
_ENVELOPE_DICTIONARY = ["_op", "_binlog_file", "_gtid", "_txn"]
_ENVELOPE_STATISTICS = ["_op", "_binlog_file", "_binlog_seq", "_binlog_pos", "_row", "_gtid",
                        "_commit_ts", "_txn"]


class PartFile:
    """One Parquet file of one table with one column layout.

    Rows are buffered column by column (envelope columns, and one list per table column and
    image) and written as a row group when :meth:`flush` is called."""

    def __init__(self, path: Path, relpath: str, table_map: TableMap, counters: Counters,
                 row_group_rows: int, background: BackgroundWriter,
                 masking: Optional[Masking] = None) -> None:
        self.path = path
        self.key = (table_map.schema, table_map.table)
        self.generation = 0
        self.background = background
        self.relpath = relpath
        self.columns = table_map.columns
        self.names = [c.name for c in self.columns]
        self.schema = staging_schema(self.columns)
        # column exclusion and masking (see .masking): applied as the arrays are built
        self.masking = masking
        self.rules = masking.for_table(*self.key, self.names) if masking else {}
        self.excluded = {n for n, r in self.rules.items() if r.action == EXCLUDE}
        keys = sorted(c.name for c in self.columns if c.primary_key and c.name in self.rules
                      and self.rules[c.name].action != HASH)
        if keys:
            raise MaskingError(f"masking: {'.'.join(self.key)}: primary key column(s) {', '.join(keys)} "
                               f"cannot be excluded or truncated (rows would lose or share their identity); "
                               f"hash them instead")
        if self.rules:
            image = masked_image_type(self.schema.field("_before").type, self.rules, ".".join(self.key))
            for name in ("_before", "_after"):
                index = self.schema.get_field_index(name)
                self.schema = self.schema.set(index, pa.field(name, image))
        self.image_fields = list(self.schema.field("_before").type)
        self.stagers = [ColumnStager(c, counters) for c in self.columns]
        self.fingerprint = schema_fingerprint(self.columns)
        self.row_group_rows = row_group_rows
        self.rows = 0
        # bytes in the file and Arrow bytes written (set by the background thread after each row
        # group), Arrow bytes handed to it (by this one): each counter has one writer
        self.file_bytes = self.done_bytes = self.handed_bytes = 0
        self.arrow_pending: list[pa.Table] = []  # rows given as Arrow arrays, not written yet
        self.arrow_rows = 0
        self._absent_names: dict[int, tuple[int, ...]] = {}
        # dictionaries and statistics for the envelope (few distinct values; positions are
        # what readers filter on), not for the row images, where they cost more than they give
        self.writer = self._open_writer()
        os.chmod(path, 0o600)
        self._reset()

    def _open_writer(self) -> pq.ParquetWriter:
        return pq.ParquetWriter(str(self.path), self.schema, compression="zstd",
                                use_dictionary=_ENVELOPE_DICTIONARY, write_statistics=_ENVELOPE_STATISTICS)

    def _reset(self) -> None:
        self.buffered_bytes = 0  # binlog bytes of the rows buffered (see StagingWriter)
        self.count = 0
        # envelope columns, then per image: a list per table column, a null flag per row
        # (True: no such image for the row's op) and the absent column names per row
        # the envelope is the same for every row of an event: one entry per event in
        # ``events``, the event of each row in ``event_of_row``, the row index in ``indexes``
        self.events: list[tuple[Any, ...]] = []
        self.event_of_row: list[int] = []
        self.indexes: list[int] = []
        width = len(self.columns)
        self.before: list[list[Any]] = [[] for _ in range(width)]
        self.after: list[list[Any]] = [[] for _ in range(width)]
        self.before_null: list[bool] = []
        self.after_null: list[bool] = []
        self.before_absent: _Absents = []
        self.after_absent: _Absents = []

    def _envelope(self, op: str, file: str, seq: int, pos: int, gtid: Optional[str],
                  commit_ts: dt.datetime, txn: str,
                  n: int, first_index: int) -> None:
        self.event_of_row += [len(self.events)] * n
        self.events.append((op, file, seq, pos, gtid, commit_ts, txn))
        self.indexes += range(first_index, first_index + n)
        self.count += n
        self.rows += n

    def _pad(self, image: list[list[Any]], nulls: list[bool], absent: _Absents, present: Optional[int],
             n: int) -> None:
        """Complete an image after ``n`` rows were decoded into the columns in ``present``
        (None: the op has no such image)."""
        if present is None:
            padding = [None] * n
            for values in image:
                values += padding
            nulls += [True] * n
            absent += padding
            return
        nulls += [False] * n
        names = self._absent_names.get(present)
        if names is None:
            names = self._absent_names[present] = tuple(
                i for i in range(len(image)) if not (present >> i) & 1)
        if names:
            padding = [None] * n
            for i in names:
                image[i] += padding
            absent += [[self.names[i] for i in names]] * n
        else:
            absent += [None] * n

    def append_event(self, op: str, file: str, seq: int, pos: int, gtid: Optional[str],
                     commit_ts: dt.datetime, txn: str, deferred: DeferredRows) -> int:
        """Decode the rows of one event (:class:`~..codec.events.DeferredRows`) into the
        buffers; returns the number of rows."""
        n: int
        try:
            if op == "update":
                n = deferred.decode_into(self.before, self.after)
                self._pad(self.before, self.before_null, self.before_absent, deferred.present, n)
                self._pad(self.after, self.after_null, self.after_absent, deferred.present_after, n)
            elif op == "insert":
                n = deferred.decode_into(self.after)
                self._pad(self.before, self.before_null, self.before_absent, None, n)
                self._pad(self.after, self.after_null, self.after_absent, deferred.present, n)
            else:
                n = deferred.decode_into(self.before)
                self._pad(self.before, self.before_null, self.before_absent, deferred.present, n)
                self._pad(self.after, self.after_null, self.after_absent, None, n)
        except BaseException:
            self._truncate()  # the event's rows are not staged: leave the buffers as they were
            raise
        self._envelope(op, file, seq, pos, gtid, commit_ts, txn, n, 0)
        if self.count >= self.row_group_rows:
            self.flush()
        return n

    def _truncate(self) -> None:
        for image in (self.before, self.after):
            for values in image:
                del values[self.count:]
        for flags in (self.before_null, self.after_null, self.before_absent, self.after_absent):
            del flags[self.count:]

    def append_rows(self, op: str, file: str, seq: int, pos: int, gtid: Optional[str],
                    commit_ts: dt.datetime, txn: str, befores: Optional[Sequence[Sequence[Any]]],
                    afters: Optional[Sequence[Sequence[Any]]], first_index: int = 0) -> None:
        """Stage decoded rows: ``befores``/``afters`` are sequences of row images (tuples in
        table order, ``ABSENT`` for columns not in the image), or None when that image does
        not exist for ``op`` (inserts have no before image)."""
        n = len(cast("Sequence[Sequence[Any]]", befores if befores is not None else afters))
        if not n:
            return
        try:
            self._add_images(self.before, self.before_null, self.before_absent, befores, n)
            self._add_images(self.after, self.after_null, self.after_absent, afters, n)
        except BaseException:
            self._truncate()
            raise
        self._envelope(op, file, seq, pos, gtid, commit_ts, txn, n, first_index)
        if self.count >= self.row_group_rows:
            self.flush()

    def append_arrow_inserts(self, file: str, seq: int, pos: int, gtid: Optional[str], commit_ts: dt.datetime,
                             txn: str, columns: Sequence[pa.Array], first_index: int) -> int:
        """Stage rows given as Arrow arrays, one per table column in its staging type (rows read
        straight into Arrow), as inserts with the row indexes ``first_index``...: no Python
        value per row. They are written with the rows given so far this way once they reach
        ``row_group_rows`` (or at :meth:`flush`)."""
        n = len(columns[0]) if columns else 0
        if not n:
            return 0
        children = self._staged_arrays(columns)
        envelope = dict(zip(_EVENT_COLUMNS, ("insert", file, seq, pos, gtid, commit_ts, txn)))
        arrays = []
        for field in self.schema:
            name = field.name
            if name == "_after":
                arrays.append(pa.StructArray.from_arrays(children, fields=self.image_fields))
            elif name == "_row":
                arrays.append(pa.array(range(first_index, first_index + n), type=field.type))
            elif name in envelope:
                arrays.append(pa.repeat(pa.scalar(envelope[name], type=field.type), n))
            else:  # the before image and the absent columns: none
                arrays.append(pa.nulls(n, type=field.type))
        self.arrow_pending.append(pa.Table.from_arrays(arrays, schema=self.schema))
        self.arrow_rows += n
        self.rows += n
        if self.arrow_rows >= self.row_group_rows:
            self._flush_arrow()
        return n

    def _staged_arrays(self, columns: Sequence[pa.Array]) -> list[pa.Array]:
        """Arrow arrays given for the table's columns, as staged: masked, excluded ones left out."""
        if len(columns) != len(self.columns):
            raise ValueError(f"{self.relpath}: {len(columns)} arrays for the {len(self.columns)} columns "
                             f"of the table map")
        staged = []
        for name, array in zip(self.names, columns):
            rule = self.rules.get(name)
            if rule is None:
                staged.append(array)
            elif rule.action != EXCLUDE:
                staged.append(cast(Masking, self.masking).mask_array(rule, array))
        return staged

    def _flush_arrow(self) -> None:
        if self.arrow_pending:
            table = pa.concat_tables(self.arrow_pending).combine_chunks()
            self.arrow_pending, self.arrow_rows = [], 0
            self._write(table)

    def _add_images(self, image: list[list[Any]], nulls: list[bool], absent: _Absents,
                    rows: Optional[Sequence[Sequence[Any]]], n: int) -> None:
        if rows is None:
            self._pad(image, nulls, absent, None, n)
            return
        columns = list(zip(*rows))
        if len(columns) < len(image):
            raise ValueError(f"{self.relpath}: a row image does not have the "
                             f"{len(image)} columns of the table map")
        names: _Absents = [None] * n
        values: Sequence[Any]
        for i, values in enumerate(columns):
            if _Absent in set(map(type, values)):  # not in the image (MINIMAL or NOBLOB)
                for r, value in enumerate(values):
                    if value is ABSENT:
                        row_names = names[r]
                        if row_names is None:
                            row_names = names[r] = []
                        row_names.append(self.names[i])
                values = [None if v is ABSENT else v for v in values]
            image[i] += values
        nulls += [False] * n
        absent += names

    def _image(self, image: list[list[Any]], nulls: list[bool]) -> pa.StructArray:
        """The struct array of one image column."""
        n = len(nulls)
        if True not in nulls:
            mask = None
        else:
            mask = pa.array(nulls, type=pa.bool_())
        if False not in nulls:  # the before images of inserts, the after images of deletes
            children = [pa.nulls(n, type=f.type) for f in self.image_fields]
        elif self.rules:
            children = []
            for name, stager, values in zip(self.names, self.stagers, image):
                rule = self.rules.get(name)
                if rule is None:
                    children.append(stager.array(values))
                elif rule.action != EXCLUDE:
                    children.append(cast(Masking, self.masking).mask_array(rule, stager.array(values)))
        else:
            children = [stager.array(values) for stager, values in zip(self.stagers, image)]
        return pa.StructArray.from_arrays(children, fields=self.image_fields, mask=mask)

    def flush(self) -> None:
        self._flush_arrow()
        if not self.count:
            return
        per_event = dict(zip(_EVENT_COLUMNS, zip(*self.events)))
        rows_event = pa.array(self.event_of_row, type=pa.int32())
        arrays = []
        for field in self.schema:
            name = field.name
            if name == "_before":
                arrays.append(self._image(self.before, self.before_null))
            elif name == "_after":
                arrays.append(self._image(self.after, self.after_null))
            elif name == "_row":
                arrays.append(pa.array(self.indexes, type=field.type))
            elif name in per_event:
                arrays.append(pa.array(per_event[name], type=field.type).take(rows_event))
            else:  # the absent columns of each row: mostly none at all
                absent = self.before_absent if name == "_before_absent" else self.after_absent
                if self.excluded and any(absent):  # an excluded column is not a column here
                    absent = [None if names is None else [n for n in names if n not in self.excluded] or None
                              for names in absent]
                arrays.append(pa.array(absent, type=field.type) if any(absent)
                              else pa.nulls(self.count, type=field.type))
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self._reset()
        self._write(table)

    def _write(self, table: pa.Table, **kwargs: Any) -> None:
        """Write ``table`` as a row group, on the background thread."""
        size = table.nbytes
        self.handed_bytes += size

        def write() -> None:
            self.writer.write_table(table, **kwargs)
            self.file_bytes = self.path.stat().st_size
            self.done_bytes += size

        self.background.submit(write)

    def full(self, limit: int) -> bool:
        """Whether the file holds ``limit`` bytes, counting the row groups on their way to it at
        their Arrow size (more than they take encoded: the file may end a little early)."""
        return self.file_bytes + self.handed_bytes - self.done_bytes >= limit

    def close(self) -> _FileDesc:
        self.flush()
        self.background.drain()
        self.writer.close()
        return {"path": self.relpath, "rows": self.rows, "bytes": self.path.stat().st_size,
                "fingerprint": self.fingerprint, "sha256": file_sha256(self.path)}


#: rows of a row file: the next chunk starts another file (the unit a merge commits as it is,
#: or rewrites when a change of the binlog touches one of its keys)
ROWS_FILE_ROWS = 1 << 20
#: bytes of a part or row file: once it holds that many (a row group or two more at most), the
#: next rows start another, so that no staged object nears a store's limit for one upload
#: (S3 takes 5 GiB in one PUT) and a failed upload is retried for one file, not a whole table
PART_FILE_BYTES = 1 << 30
#: a row file's row groups: this many rows, or fewer when their Arrow data reaches
#: ROWS_GROUP_BYTES (the table's data file it becomes is read by row group)
ROWS_GROUP_ROWS, ROWS_GROUP_BYTES = 1 << 20, 32 << 20


class RowsPartFile(PartFile):
    """A row file (:mod:`.row_files`): the rows a snapshot read into Arrow, as the table's
    columns alone; each chunk's envelope is kept in the footer, written when the file closes."""

    def _open_writer(self) -> pq.ParquetWriter:
        self.flat = flat_schema(self.schema.field("_after").type)
        self.segments: list[list[Any]] = []
        return pq.ParquetWriter(str(self.path), self.flat, compression="zstd", write_statistics=True)

    def append_rows(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{self.relpath}: a row file holds rows read by a snapshot only")

    append_event = append_rows

    def append_arrow_inserts(self, file: str, seq: int, pos: int, gtid: Optional[str], commit_ts: dt.datetime,
                             txn: str, columns: Sequence[pa.Array], first_index: int) -> int:
        n = len(columns[0]) if columns else 0
        if not n:
            return 0
        children = self._staged_arrays(columns)
        self.segments.append(segment(self.rows, n, file, seq, pos, gtid, commit_ts, txn, first_index))
        self.arrow_pending.append(pa.Table.from_arrays(children, schema=self.flat))
        self.arrow_rows += n
        self.rows += n
        if self.arrow_rows >= ROWS_GROUP_ROWS or sum(t.nbytes for t in self.arrow_pending) >= ROWS_GROUP_BYTES:
            self._flush_arrow()
        return n

    def _flush_arrow(self) -> None:
        """The chunks given so far as one row group, written as they are (no copy into one
        chunk: the writer reads them in turn)."""
        if self.arrow_pending:
            table = pa.concat_tables(self.arrow_pending)
            self.arrow_pending, self.arrow_rows = [], 0
            self._write(table, row_group_size=table.num_rows)

    def close(self) -> _FileDesc:
        self._flush_arrow()
        self.background.drain()
        self.writer.add_key_value_metadata({ROWS_KEY: footer_value(self.schema, self.segments)})
        self.writer.close()
        return {"path": self.relpath, "rows": self.rows, "bytes": self.path.stat().st_size,
                "fingerprint": self.fingerprint, "sha256": file_sha256(self.path)}


class Stager:
    """The part files of the tables one process stages, and its memory budget.

    Each table has one open part file per layout generation (decided by the caller: a new
    generation when the table's column layout changes), named ``part-<generation><suffix>``.
    Rows are buffered until a part has ``row_group_rows`` of them, or the rows events
    buffered for all tables reach ``row_group_bytes`` (binlog size): memory stays bounded by
    that plus the largest single event, whatever the transaction size. A file that reaches
    ``part_file_bytes`` (or a row file ``ROWS_FILE_ROWS`` rows) ends, and the table's next rows
    go to another (``...-r<n>.parquet``)."""

    def __init__(self, work_dir: Path, counters: Counters, *, row_group_rows: int,
                 row_group_bytes: int, suffix: str = "", masking: Optional[Masking] = None,
                 part_file_bytes: int = PART_FILE_BYTES) -> None:
        self.work_dir = work_dir
        self.part_file_bytes = part_file_bytes
        self.masking = masking
        self.counters = counters
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.suffix = suffix
        self.background = BackgroundWriter()
        self.open: dict[_Key, PartFile] = {}
        self.open_rows: dict[_Key, PartFile] = {}  # row files (RowsPartFile)
        self.rolled: dict[tuple[str, _Key], int] = {}  # (kind, table) -> files it filled since the last seal
        self.closed: dict[_Key, list[tuple[int, _FileDesc]]] = {}  # (generation, file) per table
        self.counts: dict[_Key, dict[str, int]] = {}
        self.buffered_bytes = 0
        self.sealed = 0  # part files closed by seal(): later ones of a generation get another name

    def part(self, table_map: TableMap, generation: int) -> PartFile:
        """The table's part file of ``generation`` (a new one when its generation changes)."""
        return self._part(self.open, PartFile, "part", table_map, generation)

    def rows_part(self, table_map: TableMap, generation: int) -> PartFile:
        """The table's row file of ``generation`` (:mod:`.row_files`), for rows a snapshot read
        into Arrow."""
        return self._part(self.open_rows, RowsPartFile, "rows", table_map, generation)

    def _part(self, opened: dict[_Key, PartFile], kind: type[PartFile], prefix: str, table_map: TableMap,
              generation: int) -> PartFile:
        key = (table_map.schema, table_map.table)
        part = opened.get(key)
        if part is not None and part.generation == generation:
            if not (part.full(self.part_file_bytes) or (kind is RowsPartFile and part.rows >= ROWS_FILE_ROWS)):
                part.columns = table_map.columns  # same layout (maybe a new table id or flags)
                return part
            self._close(key, part)
            del opened[key]  # a full file: the next rows start another
            self.rolled[(prefix, key)] = self.rolled.get((prefix, key), 0) + 1
        for files in (self.open, self.open_rows):  # a new generation: the table's files of the old one end
            old = files.get(key)
            if old is not None and old.generation != generation:
                self._close(key, old)
                del files[key]
        folder = self.work_dir / "tables" / f"{safe_name(table_map.schema)}.{safe_name(table_map.table)}"
        folder.parent.mkdir(exist_ok=True, mode=0o700)
        folder.mkdir(exist_ok=True, mode=0o700)
        rolled = self.rolled.get((prefix, key), 0)
        name = (f"{prefix}-{generation:05d}{self.suffix}" + (f"-s{self.sealed:05d}" if self.sealed else "")
                + (f"-r{rolled:05d}" if rolled else "") + ".parquet")
        part = kind(folder / name, f"tables/{folder.name}/{name}", table_map, self.counters,
                    self.row_group_rows, self.background, self.masking)
        part.generation = generation
        opened[key] = part
        return part

    def add(self, table_map: TableMap, generation: int, kind: str, size: int, envelope: _Envelope,
            deferred: Optional[DeferredRows] = None, rows: Any = None) -> int:
        """Stage the rows of one event (``deferred``, or decoded ``rows`` tuples) of
        ``size`` binlog bytes; ``envelope`` is (file, seq, pos, gtid, commit_ts, txn)."""
        part = self.part(table_map, generation)
        part.buffered_bytes += size
        self.buffered_bytes += size
        if deferred is not None:
            n = part.append_event(kind, *envelope, deferred)
        else:
            if kind == "insert":
                part.append_rows(kind, *envelope, None, rows)
            elif kind == "delete":
                part.append_rows(kind, *envelope, rows, None)
            else:
                part.append_rows(kind, *envelope, [r[0] for r in rows], [r[1] for r in rows])
            n = len(rows)
        counts = self.counts.get(part.key)
        if counts is None:
            counts = self.counts[part.key] = {"insert": 0, "update": 0, "delete": 0}
        counts[kind] += n
        if self.buffered_bytes >= self.row_group_bytes:
            self._flush_buffers()
        return n

    def _flush_buffers(self) -> None:
        """Write the largest buffers as row groups until half the budget is left (multi-MB
        rows: a few rows per group rather than all of them in memory)."""
        parts = list(self.open.values())
        total = sum(p.buffered_bytes for p in parts)
        for part in sorted(parts, key=lambda p: p.buffered_bytes, reverse=True):
            if total < self.row_group_bytes // 2:
                break
            total -= part.buffered_bytes
            part.flush()
        self.buffered_bytes = total

    def seal(self) -> dict[_Key, list[tuple[int, _FileDesc]]]:
        """Close every open part file, so that all rows staged so far are in complete files
        (the next rows of a table go to a new file); returns the closed files of each table."""
        self._close_open()
        self.buffered_bytes = 0
        self.sealed += 1
        self.rolled = {}
        return self.closed

    def close(self) -> dict[_Key, list[tuple[int, _FileDesc]]]:
        """Close every part file; returns the (generation, file) of each table."""
        try:
            self._close_open()
        finally:
            self.background.stop()
        return self.closed

    def abort(self) -> None:
        self.background.stop(discard=True)
        for part in [*self.open.values(), *self.open_rows.values()]:
            try:
                part.writer.close()
            except Exception:
                pass
        self.open, self.open_rows = {}, {}

    def _close(self, key: _Key, part: PartFile) -> None:
        self.closed.setdefault(key, []).append((part.generation, part.close()))

    def _close_open(self) -> None:
        for files in (self.open_rows, self.open):
            for key, part in files.items():
                self._close(key, part)
        self.open, self.open_rows = {}, {}


__all__ = ["BackgroundWriter", "PartFile", "RowsPartFile", "Stager", "safe_name"]
