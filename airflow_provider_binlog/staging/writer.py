"""Write row changes to Parquet, per table, and publish them with a manifest, atomically.

Rows are streamed into Parquet row groups (memory stays bounded whatever the transaction size).
Everything is written under a hidden ``.incomplete-*`` directory; :meth:`StagingWriter.publish`
writes the manifest last and renames the directory into place, so a dump killed at any moment
publishes nothing.
"""
from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid
from pathlib import Path
from typing import Optional
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from ..codec.events import ABSENT, RowsEvent, TableMap
from .contract import (MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION, column_descriptions,
                       schema_fingerprint, staging_schema)
from .convert import Counters, converter_for
from .manifest import Manifest, load_manifest, write_json_atomically

UTC = dt.timezone.utc


def _safe(name: str) -> str:
    return quote(name, safe="")


def binlog_sequence(file: str) -> int:
    """Numeric suffix of a binlog file name (mysql-bin.000042 -> 42)."""
    suffix = file.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else 0


class _PartFile:
    """One Parquet file of one table with one column layout."""

    def __init__(self, path: Path, relpath: str, table_map: TableMap, counters: Counters,
                 row_group_rows: int) -> None:
        self.path = path
        self.relpath = relpath
        self.columns = table_map.columns
        self.names = [c.name for c in self.columns]
        self.schema = staging_schema(self.columns)
        self.image_type = self.schema.field("_before").type
        self.converters = [converter_for(c, counters) for c in self.columns]
        self.fingerprint = schema_fingerprint(self.columns)
        self.row_group_rows = row_group_rows
        self.rows = 0
        self.writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")
        os.chmod(path, 0o600)
        self._reset()

    def _reset(self) -> None:
        self.env = {k: [] for k in ("_op", "_binlog_file", "_binlog_seq", "_binlog_pos", "_row",
                                    "_gtid", "_commit_ts", "_txn", "_before_absent", "_after_absent")}
        n = len(self.columns)
        self.before = [[] for _ in range(n)]
        self.after = [[] for _ in range(n)]
        self.before_null: list = []
        self.after_null: list = []

    def _image(self, values, target: list, nulls: list):
        if values is None:
            nulls.append(True)
            for col in target:
                col.append(None)
            return None
        nulls.append(False)
        absent = None
        for i, (value, convert) in enumerate(zip(values, self.converters)):
            if value is ABSENT:
                if absent is None:
                    absent = []
                absent.append(self.names[i])
                target[i].append(None)
            else:
                target[i].append(None if value is None else convert(value))
        return absent

    def append(self, op, file, seq, pos, row_index, gtid, commit_ts, txn, before, after) -> None:
        env = self.env
        env["_op"].append(op)
        env["_binlog_file"].append(file)
        env["_binlog_seq"].append(seq)
        env["_binlog_pos"].append(pos)
        env["_row"].append(row_index)
        env["_gtid"].append(gtid)
        env["_commit_ts"].append(commit_ts)
        env["_txn"].append(txn)
        env["_before_absent"].append(self._image(before, self.before, self.before_null))
        env["_after_absent"].append(self._image(after, self.after, self.after_null))
        self.rows += 1
        if len(env["_op"]) >= self.row_group_rows:
            self.flush()

    def _struct(self, lists, nulls):
        children = [pa.array(values, type=field.type) for values, field in zip(lists, self.image_type)]
        return pa.StructArray.from_arrays(children, fields=list(self.image_type),
                                          mask=pa.array(nulls, type=pa.bool_()))

    def flush(self) -> None:
        if not self.env["_op"]:
            return
        arrays = []
        for field in self.schema:
            name = field.name
            if name == "_before":
                arrays.append(self._struct(self.before, self.before_null))
            elif name == "_after":
                arrays.append(self._struct(self.after, self.after_null))
            else:
                arrays.append(pa.array(self.env[name], type=field.type))
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self._reset()

    def close(self) -> dict:
        self.flush()
        self.writer.close()
        return {"path": self.relpath, "rows": self.rows, "bytes": self.path.stat().st_size,
                "fingerprint": self.fingerprint}


class _TableStage:
    def __init__(self, schema: str, table: str) -> None:
        self.schema, self.table = schema, table
        self.parts: list[_PartFile] = []
        self.closed_parts: list[dict] = []
        self.counts = {"insert": 0, "update": 0, "delete": 0}
        self.table_map: Optional[TableMap] = None


class StagingWriter:
    """Collects the row changes of one dump and publishes them as a staged batch."""

    def __init__(self, staging_dir, *, row_group_rows: int = 50_000) -> None:
        self.staging_dir = Path(staging_dir)
        self.staging_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.work_dir = self.staging_dir / f".incomplete-{uuid.uuid4().hex}"
        self.work_dir.mkdir(mode=0o700)
        self.row_group_rows = row_group_rows
        self.counters = Counters()
        self.tables: dict[tuple, _TableStage] = {}
        self.ddl: list[dict] = []
        self.published: Optional[Manifest] = None

    def _part_for(self, tm: TableMap) -> tuple[_TableStage, _PartFile]:
        key = (tm.schema, tm.table)
        stage = self.tables.get(key)
        if stage is None:
            stage = self.tables[key] = _TableStage(tm.schema, tm.table)
        part = stage.parts[-1] if stage.parts else None
        if part is None or part.columns != tm.columns:
            if part is not None and schema_fingerprint(part.columns) == schema_fingerprint(tm.columns):
                part.columns = tm.columns  # same layout, a new table id or flags only
            else:
                if part is not None:
                    stage.closed_parts.append(part.close())
                folder = self.work_dir / "tables" / f"{_safe(tm.schema)}.{_safe(tm.table)}"
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                name = f"part-{len(stage.closed_parts):05d}.parquet"
                rel = f"tables/{folder.name}/{name}"
                part = _PartFile(folder / name, rel, tm, self.counters, self.row_group_rows)
                stage.parts.append(part)
        stage.table_map = tm
        return stage, part

    def add_rows(self, event: RowsEvent, *, binlog_file: str, gtid: Optional[str], txn: str,
                 commit_ts: Optional[dt.datetime] = None) -> int:
        """Stage every row of a decoded rows event; returns the number of rows staged."""
        if event.skipped or event.table_map is None or not event.rows:
            return 0
        stage, part = self._part_for(event.table_map)
        seq = binlog_sequence(binlog_file)
        ts = commit_ts or dt.datetime.fromtimestamp(event.header.timestamp, UTC)
        kind = event.kind
        pos = event.pos
        for i, row in enumerate(event.rows):
            if kind == "insert":
                part.append(kind, binlog_file, seq, pos, i, gtid, ts, txn, None, row)
            elif kind == "delete":
                part.append(kind, binlog_file, seq, pos, i, gtid, ts, txn, row, None)
            else:
                part.append(kind, binlog_file, seq, pos, i, gtid, ts, txn, row[0], row[1])
        stage.counts[kind] += len(event.rows)
        return len(event.rows)

    def add_ddl(self, record: dict) -> None:
        self.ddl.append(record)

    def publish(self, *, dump_id: str, start: dict, end: dict, server: dict,
                extra: Optional[dict] = None) -> Manifest:
        """Close the files, write the manifest, and move the batch to ``<staging_dir>/<dump_id>``."""
        tables = []
        for (schema, table), stage in sorted(self.tables.items()):
            files = list(stage.closed_parts)
            for part in stage.parts[len(files):]:
                files.append(part.close())
            cols = column_descriptions(stage.table_map.columns)
            tables.append({
                "schema": schema, "table": table, "rows": dict(stage.counts),
                "columns": cols, "primary_key": [c["name"] for c in cols if c["primary_key"]],
                "fingerprint": schema_fingerprint(stage.table_map.columns), "files": files,
            })
        manifest = {
            "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "dump_id": dump_id,
            "created_at": dt.datetime.now(UTC).isoformat(), "server": server,
            "start": start, "end": end, "tables": tables, "ddl": self.ddl,
            "invalid_temporals": self.counters.invalid_temporals,
            "replaced_text": self.counters.replaced_text, **(extra or {}),
        }
        write_json_atomically(self.work_dir / MANIFEST_NAME, manifest)
        final = self.staging_dir / _safe(dump_id)
        if final.exists():  # a rerun of the same range replaces the earlier copy
            trash = self.staging_dir / f".replaced-{uuid.uuid4().hex}"
            os.replace(final, trash)
            os.replace(self.work_dir, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(self.work_dir, final)
        self.published = load_manifest(final)
        return self.published

    def abort(self) -> None:
        for stage in self.tables.values():
            for part in stage.parts:
                try:
                    part.writer.close()
                except Exception:
                    pass
        shutil.rmtree(self.work_dir, ignore_errors=True)
