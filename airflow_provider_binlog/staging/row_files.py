"""Row files: the chunks a snapshot reads straight into Arrow, staged as the table's columns
alone, so that a merge can commit a file as an Iceberg data file as it is, without reading and
writing its rows again.

A row file (``rows-<generation>.parquet`` beside a table's part files) holds only inserts, all
of them rows read by a snapshot. Its columns are the table's columns as staged (masking applied,
excluded columns left out), at the top level, each with a Parquet field id: 1, 2, ... in the
staged order, the ids Iceberg gives the columns of a table it creates from them. The envelope
every staged row has (``staging/contract.py``) is the same for all the rows of one chunk, so it
is kept once per chunk in the footer (key :data:`ROWS_KEY`): the chunk's first row in the file,
its row count, binlog file, sequence, position, GTID, commit time, transaction and first row
index, and the envelope's Arrow schema.

Readers see a row file as the part file it stands for: :func:`staged_view` gives every column
of the contract (``_op`` ``insert``, the chunk's envelope, the row indexes, ``_after`` built
from the columns, null ``_before`` and absent lists), with the same methods as
``pyarrow.parquet.ParquetFile`` that the merge uses.
"""
from __future__ import annotations

import base64
import datetime as dt
import functools
import itertools
import json
from typing import Any, Iterator, Optional, Sequence

import pyarrow as pa

#: footer key of a row file's envelope (JSON)
ROWS_KEY = b"airflow-provider-binlog.rows"
ROWS_VERSION = 1
FIELD_ID = b"PARQUET:field_id"
#: one chunk's envelope: (first row in the file, rows, binlog file, seq, pos, gtid, commit
#: time in microseconds since the epoch UTC, txn, first row index)
_SEGMENT = ("start", "rows", "file", "seq", "pos", "gtid", "commit_us", "txn", "first_index")


def flat_schema(image: pa.StructType) -> pa.Schema:
    """The schema of a row file whose rows have the staged image type ``image``: its fields at
    the top level, with field ids 1, 2, ... in order."""
    return pa.schema([pa.field(f.name, f.type, True, metadata={FIELD_ID: str(i).encode()})
                      for i, f in enumerate(image, start=1)])


def footer_value(envelope_schema: pa.Schema, segments: Sequence[Sequence[Any]]) -> bytes:
    """The footer value of a row file: the envelope's schema and each chunk's envelope."""
    return json.dumps({"version": ROWS_VERSION,
                       "schema": base64.b64encode(envelope_schema.serialize().to_pybytes()).decode(),
                       "segments": [list(s) for s in segments]}).encode()


def segment(start: int, rows: int, file: str, seq: int, pos: int, gtid: Optional[str],
            commit_ts: dt.datetime, txn: str, first_index: int) -> list[Any]:
    """One chunk's envelope, as the footer keeps it."""
    if commit_ts.tzinfo is None:
        commit_ts = commit_ts.replace(tzinfo=dt.timezone.utc)
    micros = (commit_ts - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)
    return [start, rows, file, seq, pos, gtid, micros, txn, first_index]


class RowsLayout:
    """A row file's envelope, read from its footer: builds the contract's columns for a range of
    the file's rows."""

    def __init__(self, value: bytes, where: str) -> None:
        try:
            data = json.loads(value)
            if data.get("version") != ROWS_VERSION:
                raise ValueError(f"version {data.get('version')!r}")
            self.schema: pa.Schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(data["schema"])))
            self.segments = [dict(zip(_SEGMENT, s)) for s in data["segments"]]
        except (ValueError, KeyError, TypeError, pa.ArrowInvalid) as exc:
            raise ValueError(f"{where}: the row file's envelope cannot be read ({exc}); "
                             f"stage the batch again with this release") from None
        self.image: pa.StructType = self.schema.field("_after").type

    def columns_needed(self, columns: Optional[Sequence[str]]) -> Optional[list[str]]:
        """The file's columns to read for the contract's ``columns`` (None: all)."""
        if columns is None:
            return None
        needed: list[str] = []
        for name in columns:
            top, _, child = name.partition(".")
            if top == "_after":
                wanted = [child] if child else [f.name for f in self.image]
                needed += [c for c in wanted if c not in needed]
        if not needed:  # the rows' count only: the first column gives it
            needed = [self.image.field(0).name]
        return needed

    def envelope(self, flat: Any, start: int, columns: Optional[Sequence[str]]) -> Any:
        """The contract's ``columns`` (None: all) for the file's rows ``start``... given as
        ``flat`` (a record batch or table of the file's columns), as a record batch."""
        import numpy as np

        n = flat.num_rows
        wanted: dict[str, Optional[list[str]]] = {}
        for name in (columns if columns is not None else self.schema.names):
            top, _, child = name.partition(".")
            if child:
                if wanted.get(top, []) is not None:
                    wanted.setdefault(top, []).append(child)  # type: ignore[union-attr]
            else:
                wanted[top] = None
        # the chunks the rows are of, and how many rows of each
        end = start + n
        parts = [s for s in self.segments if s["start"] < end and s["start"] + s["rows"] > start]
        counts = [min(end, s["start"] + s["rows"]) - max(start, s["start"]) for s in parts]
        if sum(counts) != n:
            raise ValueError(f"rows {start}..{end - 1} of a row file are not all in its chunks' envelopes")
        repeats = np.asarray(counts, dtype=np.int64)
        arrays, fields = [], []
        for name, children in wanted.items():  # in the order asked for, as pyarrow reads them
            field = self.schema.field(name)
            ftype = field.type
            if children is not None and pa.types.is_struct(ftype):
                ftype = pa.struct([f for f in ftype if f.name in children])
            if field.name == "_after":
                values = [_column(flat, f.name) for f in ftype]
                array = pa.StructArray.from_arrays(values, fields=list(ftype)) if values else pa.nulls(n, ftype)
            elif field.name == "_op":
                array = pa.repeat(pa.scalar("insert", ftype), n)
            elif field.name == "_row":
                base = np.repeat(np.asarray([s["first_index"] - s["start"] for s in parts], dtype=np.int64), repeats)
                array = pa.array(base + np.arange(start, start + n, dtype=np.int64)).cast(ftype)
            elif field.name in _ENVELOPE_VALUE:
                key = _ENVELOPE_VALUE[field.name]
                values = pa.array([s[key] for s in parts], _VALUE_TYPE.get(key, ftype))
                array = values.take(pa.array(np.repeat(np.arange(len(parts)), repeats)))
                array = array.cast(ftype) if array.type != ftype else array
            else:  # the before image, the absent lists: none
                array = pa.nulls(n, ftype)
            arrays.append(array)
            fields.append(pa.field(field.name, ftype, field.nullable))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


_VALUE_TYPE = {"commit_us": pa.int64(), "seq": pa.int64(), "pos": pa.int64(), "file": pa.string(),
               "gtid": pa.string(), "txn": pa.string()}
_ENVELOPE_VALUE = {"_binlog_file": "file", "_binlog_seq": "seq", "_binlog_pos": "pos", "_gtid": "gtid",
                   "_commit_ts": "commit_us", "_txn": "txn"}


def _column(flat: Any, name: str) -> Any:
    column = flat.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def rows_layout(parquet: Any, where: str = "staged file") -> Optional[RowsLayout]:
    """The envelope of a row file (a ``pyarrow.parquet.ParquetFile``); None for another file."""
    metadata = parquet.metadata.metadata or {}
    value = metadata.get(ROWS_KEY)
    return None if value is None else RowsLayout(value, where)


class StagedRowsFile:
    """A row file read as the part file it stands for (see the module's docstring): the methods
    of ``pyarrow.parquet.ParquetFile`` the merge uses, giving the contract's columns."""

    def __init__(self, parquet: Any, layout: RowsLayout) -> None:
        self.file, self.layout = parquet, layout
        self.metadata = parquet.metadata
        self.num_row_groups = parquet.num_row_groups
        self.schema_arrow = layout.schema
        #: the file's own schema: the table's columns, with their field ids
        self.flat_schema = parquet.schema_arrow

    @functools.cached_property
    def group_starts(self) -> list[int]:
        """The first row of each row group in the file, and the file's row count last."""
        return list(itertools.accumulate((self.metadata.row_group(g).num_rows for g in range(self.num_row_groups)),
                                         initial=0))

    def read(self, columns: Optional[Sequence[str]] = None, **_: Any) -> pa.Table:
        flat = self.file.read(columns=self.layout.columns_needed(columns))
        return pa.Table.from_batches([self.layout.envelope(flat, 0, columns)])

    def read_row_group(self, group: int, columns: Optional[Sequence[str]] = None, **_: Any) -> pa.Table:
        flat = self.file.read_row_group(group, columns=self.layout.columns_needed(columns))
        return pa.Table.from_batches([self.layout.envelope(flat, self.group_starts[group], columns)])

    def read_row_groups(self, groups: Sequence[int], columns: Optional[Sequence[str]] = None) -> pa.Table:
        return pa.concat_tables([self.read_row_group(g, columns) for g in groups])

    def iter_batches(self, batch_size: int = 65_536, row_groups: Optional[Sequence[int]] = None,
                     columns: Optional[Sequence[str]] = None, **_: Any) -> Iterator[pa.RecordBatch]:
        at = 0 if row_groups is None else None
        groups = row_groups if row_groups is not None else range(self.num_row_groups)
        if at is None:  # row groups chosen: each read on its own, to know where it starts
            for group in groups:
                start = self.group_starts[group]
                for batch in self.file.iter_batches(batch_size=batch_size, row_groups=[group],
                                                    columns=self.layout.columns_needed(columns)):
                    yield self.layout.envelope(batch, start, columns)
                    start += batch.num_rows
            return
        for batch in self.file.iter_batches(batch_size=batch_size, columns=self.layout.columns_needed(columns)):
            yield self.layout.envelope(batch, at, columns)
            at += batch.num_rows


def staged_view(parquet: Any, where: str = "staged file") -> Any:
    """A staged file (a ``pyarrow.parquet.ParquetFile``) as the contract's columns: a row file
    through :class:`StagedRowsFile`, any other as it is."""
    layout = rows_layout(parquet, where)
    return parquet if layout is None else StagedRowsFile(parquet, layout)


__all__ = ["FIELD_ID", "ROWS_KEY", "RowsLayout", "StagedRowsFile", "flat_schema", "footer_value", "rows_layout",
           "segment", "staged_view"]
